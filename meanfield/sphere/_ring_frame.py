"""Ring coefficients of the frame components of a low-degree vector field on a Gauss–Legendre grid.

A vector field F = (F_x, F_y, F_z) of degree M (the common noise of a step: three real
harmonic expansions) enters the S^2 schemes through its components in the frame of each grid
node, F_θ, F_φ and F_r. On the ring at colatitude θ the φ-Fourier coefficients of
F_x, F_y, F_z are X_m, Y_m, Z_m = Σ_l λ_lm(θ) a_lm (m = 0..M, the normalised associated
Legendre functions λ_lm of ducc0), and with A_m = X_m + i Y_m, B_m = X_m - i Y_m
(B_{-1} = conj(A_1), terms beyond M zero) the frame components have, for k = 0..M+1,

    F_θ,k = (cos θ / 2)(A_{k+1} + B_{k-1}) - sin θ Z_k,
    F_φ,k = (-i / 2)(A_{k+1} - B_{k-1}),
    F_r,k = (sin θ / 2)(A_{k+1} + B_{k-1}) + cos θ Z_k,

because F_θ = cos θ Re U - sin θ F_z, F_φ = Im U, F_r = sin θ Re U + cos θ F_z with
U = e^{-iφ}(F_x + i F_y). Everything but the coefficients is fixed by the grid and M, so
:class:`RingFrameTable` keeps it as one real table per output order and component: a step
then gathers the 3 (M+1) coefficients each order needs (every input is at most two of the
real coefficients) and makes one stacked matrix product. At M = 6 on the grids of lmax 64-256
that took 12-28 us against 52-129 us for three ducc0 Legendre transforms and the frame
algebra on their output (2 shared cores); the two agree to round-off (1.5e-16 to 4.4e-16 of the
largest coefficient at degrees 0-9).
"""

from __future__ import annotations

import functools

import ducc0
import numpy as np

from ._s2 import _real_alm_maps, _real_to_alm, legendre_table

__all__ = ["RingFrameTable", "FRAME_TABLE_MAX_BYTES", "gl_ring_frame_table"]

#: Largest table kept: beyond it (a high noise degree on a fine grid) ducc0's Legendre
#: transforms, which form λ_lm by recurrence instead of reading them, are used.
FRAME_TABLE_MAX_BYTES = 2 * 2**20


def table_bytes(nlat: int, lmax: int, radial: bool) -> int:
    """Bytes of the :class:`RingFrameTable` of ``nlat`` rings for fields of degree ``lmax``."""
    return 8 * (lmax + 2) * (3 if radial else 2) * nlat * 3 * (lmax + 1)


@functools.lru_cache(maxsize=8)
def gl_ring_frame_table(nlat: int, lmax: int, radial: bool) -> "RingFrameTable":
    """The :class:`RingFrameTable` of ducc0's ``nlat`` Gauss–Legendre rings, kept per process (a
    solver makes a new grid per run, and the table is the same)."""
    return RingFrameTable(ducc0.misc.GL_thetas(nlat), lmax, radial)


@functools.cache
def _gather(lmax: int, nq: int) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of the stacked inputs (real view, ``(M+2) nq 3(M+1) 2`` entries) the two real
    coefficients (flat index into (3, (M+1)²)) and weights whose sum it is.

    Found by applying the complex construction to every real coefficient alone (the map is
    linear), which keeps the indexing in one readable place.
    """
    M = lmax
    nb = 3 * (M + 1) ** 2
    ell, m_of = _real_alm_maps(M)[:2]
    a = _real_to_alm(np.eye(nb).reshape(nb, 3, (M + 1) ** 2), M)  # (nb, 3, n_alm)
    dense = np.zeros((nb, 3, M + 2, M + 1), dtype=np.complex128)  # [probe, component, m, l]; m = M + 1 zero
    dense[:, :, m_of, ell] = a
    A = dense[:, 0] + 1j * dense[:, 1]
    B = dense[:, 0] - 1j * dense[:, 1]
    k = np.arange(M + 2)
    Bk = B[:, np.maximum(k - 1, 0)]
    Bk[:, 0] = np.conj(A[:, 1])  # B_{-1} = conj(A_1): the field is real
    v = np.concatenate([A[:, np.minimum(k + 1, M + 1)], Bk, dense[:, 2, k]], axis=2)  # [probe, k, 3(M+1)]
    inp = np.stack([v, -1j * v, v][:nq], axis=2)  # [probe, k, q, j]: F_φ's rows take -i v
    G = inp.view(np.float64).reshape(nb, -1).T  # (entries, nb), real and imaginary parts interleaved
    nnz = np.count_nonzero(G, axis=1)
    if nnz.max() > 2:  # pragma: no cover - a property of the construction above
        raise AssertionError("a frame input needs more than two real coefficients")
    idx = np.argsort(G == 0, axis=1, kind="stable")[:, :2]
    w = np.take_along_axis(G, idx, axis=1)
    idx[w == 0] = 0  # an unused second term reads entry 0 with weight 0
    idx, w = np.ascontiguousarray(idx.T), np.ascontiguousarray(w.T)
    idx.flags.writeable = w.flags.writeable = False  # shared by every table of this degree
    return idx, w


class RingFrameTable:
    """Ring coefficients of (F_θ, F_φ[, F_r]) of a degree-``lmax`` field, shape (2 or 3, n_θ, lmax + 2).

    See the module docstring for the formulas. Built once per ring set and degree (1-4 ms;
    :func:`gl_ring_frame_table` keeps them).

    Parameters
    ----------
    theta : ndarray (n_θ,)
        Colatitudes of the rings.
    lmax : int, >= 0
        Degree M of the field.
    radial : bool
        Also F_r.

    Examples
    --------
    >>> import numpy as np
    >>> t = RingFrameTable(np.array([0.5 * np.pi]), 1, radial=True)   # one ring: the equator
    >>> c = np.zeros((3, 4)); c[2, 0] = np.sqrt(4 * np.pi)            # F = (0, 0, 1) = e_z
    >>> legs = t(c)                                                   # (F_θ, F_φ, F_r) by order k = 0, 1, 2
    >>> bool(np.allclose(legs[:, 0, 0], [-1.0, 0.0, 0.0]) and np.allclose(legs[:, 0, 1:], 0.0))
    True
    """

    def __init__(self, theta: np.ndarray, lmax: int, radial: bool):
        M = self.lmax = int(lmax)
        theta = np.asarray(theta, dtype=np.float64)
        nq = 3 if radial else 2
        nlat = theta.size
        # λ_lm(θ_r) as [m, ring, l] (m = M + 1 zero), by the recursion of legendre_table rather than
        # ducc0's spin-0 transform of each unit coefficient, whose last bits can change between
        # calls (meanfield.sphere._legendre): the table is kept for the whole process
        ell, m_of = _real_alm_maps(M)[:2]
        lam = np.zeros((M + 2, nlat, M + 1))
        lam[m_of, :, ell] = legendre_table(M, theta)
        c, s = np.cos(theta)[:, None], np.sin(theta)[:, None]
        k = np.arange(M + 2)
        up, down, same = lam[np.minimum(k + 1, M + 1)], lam[np.abs(k - 1)], lam[k]  # [k, ring, l]
        rows = [np.concatenate([0.5 * c * up, 0.5 * c * down, -s * same], axis=2),
                np.concatenate([0.5 * up, -0.5 * down, 0.0 * same], axis=2),
                np.concatenate([0.5 * s * up, 0.5 * s * down, c * same], axis=2)][:nq]
        self._table = np.ascontiguousarray(np.stack(rows, axis=1))  # [k, q, ring, 3(M+1)], real
        self._table.flags.writeable = False  # kept and shared per process (gl_ring_frame_table)
        self._idx, self._w = _gather(M, nq)
        self._shape = (M + 2, nq, 3 * (M + 1), 2)

    def __call__(self, coeffs: np.ndarray) -> np.ndarray:
        """Ring coefficients (nq, n_θ, lmax + 2) complex (a transposed view) of real ``coeffs`` (3, (lmax+1)²)."""
        f = np.ascontiguousarray(coeffs, dtype=np.float64)
        if f.shape != (3, (self.lmax + 1) ** 2):
            raise ValueError(f"coeffs must have shape (3, (lmax + 1)^2) = (3, {(self.lmax + 1) ** 2}) for "
                             f"lmax = {self.lmax}, got {f.shape}")
        f = f.reshape(-1)
        x = f[self._idx[0]]
        x *= self._w[0]
        x += f[self._idx[1]] * self._w[1]
        out = np.matmul(self._table, x.reshape(self._shape))  # [k, q, ring, (re, im)]
        return out.view(np.complex128)[..., 0].transpose(1, 2, 0)

"""Hyperspherical harmonics on S^{d-1} for every d >= 4: the Gegenbauer-product basis and its product grid.

Basis. In the coordinates x_d = t_d, x_j = r_j t_j, r_j² = x_1² + ... + x_j², the classical
(Vilenkin) orthonormal basis of harmonics of degree l is labelled by a chain
l = k_d >= k_{d-1} >= ... >= k_3 >= k_2 = |m| and is the homogeneous harmonic polynomial

    Y(x) = Φ_m(x_1, x_2) · Π_{j=3}^{d} G_{n_j}^{λ_j}(x_j, r_j²),   n_j = k_j - k_{j-1},  λ_j = k_{j-1} + (j-2)/2,

with Φ_0 = 1/sqrt(2π), Φ_{±k} = Re / Im (x_1 + i x_2)^k / sqrt(π) (the Fourier basis of S^1) and
G_n^λ(u, s) = s^{n/2} p_n^λ(u / sqrt(s)), p_n^λ the Gegenbauer polynomials orthonormal for the
weight (1 - t²)^{λ-1/2} on [-1, 1]. G satisfies the division-free recurrence

    G_0 = h_0^{-1/2},  G_1 = u G_0 / α_1,  G_{n+1} = (u G_n - α_n s G_{n-1}) / α_{n+1},
    α_n = ½ sqrt(n (n + 2λ - 1) / ((n + λ)(n + λ - 1))),  h_0 = sqrt(π) Γ(λ + ½) / Γ(λ + 1),

so values and the partial derivatives in (u, s) are polynomial recurrences, with no angle and
no division by r_j (the basis is smooth at the coordinate singularities r_j = 0). Because
dσ_{S^{d-1}} = (1 - t_d²)^{(d-3)/2} dt_d dσ_{S^{d-2}} and (1 - t²)^{k/2} = (r_{d-1} / r_d)^k,
the functions are orthonormal on S^{d-1} level by level. Gradients and Hessians are exact:
the ambient derivatives of the homogeneous polynomial by the product rule (∂ G / ∂ x_i =
δ_ij ∂_u G + 2 x_i ∂_s G for i <= j), projected on the tangent space (covariant Hessian
P ∇²Y P - (x·∇Y) P).

Point transforms are direct (the basis matrix is formed block by block, never whole), in
O(N n_real) time; grids are the product Gauss rule of :func:`~meanfield.sphere.product_quadrature`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _validate
from .._validate import check_cost
from ._geometry import row_norms, sphere_area
from ._quadrature import product_nodes
from ._gegenbauer import _Factors, _dot, _tables, chain_labels, n_functions
from .basis import Basis, Grid, deliver, register_basis

__all__ = ["HypersphereBasis", "HypersphereGrid", "householder_frame", "chain_labels"]

#: Elements (points × basis functions) of one block of the basis tables formed at once, and the
#: fewest points of a block (below it the per-degree loops cost more than the arithmetic).
_BLOCK_ELEMENTS = 2**20
_MIN_BLOCK = 32
#: Largest number of basis functions accepted (beyond it one coefficient table of a modest point
#: cloud no longer fits in memory and time); sets ``max_lmax`` of each dimension.
MAX_FUNCTIONS = 2**21
#: Measured seconds per (point × basis function) of one evaluation of the d components of a field
#: (values only): 0.9–5e-8 at d = 4..8, lmax 4..16, 10^3–10^4 points on a loaded 2-core machine, rounded up.
EVAL_SECONDS_PER_ENTRY = 5e-8


def householder_frame(x: np.ndarray) -> list[np.ndarray]:
    """Orthonormal tangent frame at unit vectors x (N, d): d - 1 arrays (N, d), from one Householder reflection.

    With v = x + s e_d (s = sign x_d, +1 at 0) the reflection H = I - 2 v v^T / ``|v|²`` maps e_d to
    -s x, so its other columns H e_k (k < d) are orthonormal and orthogonal to x; smooth except
    across x_d = 0, where the sign flips (every frame of S^{d-1}, d - 1 even, must have one).

    Examples
    --------
    >>> x = np.array([[0.0, 0.6, 0.8]])
    >>> M = np.stack(householder_frame(x) + [x], axis=2)[0]      # columns e_1, e_2, x
    >>> bool(np.allclose(M.T @ M, np.eye(3)))
    True
    """
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[1]
    s = np.where(x[:, -1] >= 0, 1.0, -1.0)
    v = x.copy()
    v[:, -1] += s
    scale = 2.0 / np.einsum("ij,ij->i", v, v)
    out = []
    for k in range(d - 1):
        e = -(scale * v[:, k])[:, None] * v
        e[:, k] += 1.0
        out.append(e)
    return out



class HypersphereBasis(Basis):
    """Orthonormal hyperspherical harmonics of degree <= lmax on S^{d-1}, d >= 4 (Gegenbauer products).

    The state is the real coefficient vector in the order of :func:`chain_labels`
    (degree-major), so ``to_real``/``from_real`` are copies and resizing is truncation or
    zero-padding. Point transforms (synthesis, adjoint, gradient, Hessian) are direct and
    exact to round-off, O(N n_real); the grid is the product Gauss rule (:class:`HypersphereGrid`).
    ``labels()`` gives the whole chain (l, k_{d-1}, ..., k_2 = ``|m|``, m), shape (n_real, d).
    One class per dimension, made by :func:`~meanfield.sphere.basis`; its largest degree
    ``max_lmax`` keeps ``n_real <= MAX_FUNCTIONS``.

    Examples
    --------
    >>> from meanfield.sphere import basis
    >>> b = basis(4, 2)
    >>> b.n_real, b.ell.tolist()[:6], float(b.laplacian[-1])
    (14, [0, 1, 1, 1, 1, 2], 8.0)
    >>> x = np.array([[0.0, 0.0, 0.6, 0.8]])
    >>> bool(np.isclose(b.real_basis(x)[0, 0] ** 2, 1 / (2 * np.pi ** 2)))   # Y_0 = |S^3|^{-1/2}
    True
    """

    #: Direct evaluation: 4.6e-6 – 1.6e-5 s per coefficient and field at 1000 points measured
    #: (d = 4..16, lmax 3..64, 285–93665 coefficients, two cores at load 8.6), rounded up.
    eval_seconds_per_coeff = 2e-5
    # the polynomial form against these tables, values and gradients of d fields at 4608 points:
    # 0.60 against 29.5 ms (d = 4, degree 4), 1.34 against 60.7 ms (d = 4, degree 6), 1.55
    # against 62.8 ms (d = 5, degree 4); its conversion has condition about 800 at degree 10
    polynomial_max_lmax = 10

    @classmethod
    def for_dimension(cls, d: int) -> type:
        """The basis class of S^{d-1} (``d`` and ``max_lmax`` set); :func:`~meanfield.sphere.basis` uses it."""
        return _dimension_class(cls, int(d))

    @property
    def n_state(self) -> int:
        return self.n_real

    @property
    def n_real(self) -> int:
        return n_functions(self.d, self.lmax)

    def __repr__(self) -> str:
        return f"HypersphereBasis(d={self.d}, lmax={self.lmax})"

    @functools.cached_property
    def _labels(self) -> np.ndarray:
        lab = chain_labels(self.d, self.lmax)
        lab.flags.writeable = False
        return lab

    @functools.cached_property
    def _columns(self) -> list[np.ndarray]:
        """Per level the table column of every basis function: Φ (S^1 order), then level j = 3..d."""
        lab, d, L = self._labels, self.d, self.lmax + 1
        m = lab[:, -1]
        cols = [np.where(m == 0, 0, np.where(m > 0, 2 * m - 1, -2 * m))]
        k_prev = np.abs(m)
        for j in range(3, d + 1):
            k_j = lab[:, d - j]
            cols.append(k_prev * L + (k_j - k_prev))
            k_prev = k_j
        return cols

    def _layout(self):
        ell = self._labels[:, 0].copy()
        return ell, np.ones(ell.size)

    def real_degrees(self) -> np.ndarray:
        return self._labels[:, 0].copy()

    def labels(self) -> np.ndarray:
        return self._labels.copy()

    def resize(self, c: np.ndarray, lmax: int) -> np.ndarray:
        out = np.zeros(n_functions(self.d, lmax))
        n = min(c.size, out.size)
        out[:n] = c[:n]
        return out

    @classmethod
    def lmax_from_size(cls, size: int, dtype) -> int | None:
        lo, hi = 0, cls.max_lmax  # n_functions is increasing in lmax
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if n_functions(cls.d, mid) < size else (lo, mid)
        return lo if n_functions(cls.d, lo) == size else None

    def to_real(self, c: np.ndarray) -> np.ndarray:
        return np.array(c, dtype=np.float64, copy=True)

    def from_real(self, b: np.ndarray) -> np.ndarray:
        return np.array(b, dtype=np.float64, copy=True)

    # -- point transforms ------------------------------------------------------------------
    def _blocks(self, n: int):
        block = max(_MIN_BLOCK, _BLOCK_ELEMENTS // max(self.n_real, (self.lmax + 1) ** 2))
        return range(0, n, block), block

    @staticmethod
    def _unit(x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x / row_norms(x)[:, None]

    def real_basis(self, x: np.ndarray) -> np.ndarray:
        x = self._unit(x)
        out = np.empty((x.shape[0], self.n_real))
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            out[s : s + block] = _tables(self.d, self.lmax, x[s : s + block], False)[0]
        return out

    def dirac(self, x: np.ndarray) -> np.ndarray:
        return self.real_basis(x)

    def synth_rows(self, coeffs, x, *, grad: bool = True, epsilon=None):
        """Values (K, N) and, with ``grad``, ambient surface gradients (K, N, d) of K fields (K, n_real)."""
        if self.uses_polynomial(np.shape(x)[0], grad, epsilon):
            return self.polynomial.synth_rows(coeffs, x, grad=grad)
        x = self._unit(x)
        C = np.ascontiguousarray(np.atleast_2d(np.asarray(coeffs, dtype=np.float64)))
        n, K, d = x.shape[0], C.shape[0], self.d
        vals = np.empty((K, n))
        grads = np.empty((K, n, d)) if grad else None
        starts, block = self._blocks(n)
        for s in starts:
            xb = x[s : s + block]
            V, G = _tables(d, self.lmax, xb, grad)
            vals[:, s : s + block] = _dot(C, V)
            if grad:
                g = np.stack([_dot(C, Ga) for Ga in G], axis=2)  # (K, Nb, d) ambient
                g -= np.einsum("knd,nd->kn", g, xb)[:, :, None] * xb[None]
                grads[:, s : s + block] = g
        return vals, grads

    def adjoint_rows(self, values, x, *, epsilon=None) -> np.ndarray:
        """Σ_q values_kq Y(x_q) for each row k of ``values`` (K, N): shape (K, n_real); degree 0 by the exact sum."""
        x = self._unit(x)
        V = np.atleast_2d(np.asarray(values, dtype=np.float64))
        out = np.zeros((V.shape[0], self.n_real))
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            out += np.einsum("kb,bn->kn", V[:, s : s + block], _tables(self.d, self.lmax, x[s : s + block], False)[0])
        out[:, 0] = V.sum(axis=1) / math.sqrt(sphere_area(self.d))
        return out

    def evaluate(self, c, x, *, epsilon=None):
        return self.synth_rows(np.asarray(c)[None], x, grad=False)[0][0]

    def adjoint(self, values, x, *, epsilon=None):
        return self.adjoint_rows(np.asarray(values)[None], x)[0]

    def gradient_at(self, c, x, *, epsilon=None):
        return self.synth_rows(np.asarray(c)[None], x)[1][0]

    def gradient_adjoint(self, F: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Σ_q F_q · ∇_S Y(x_q) for tangent vectors F (N, d) at unit vectors x (N, d): shape (n_real,).

        The transpose of :meth:`gradient_at`; ``-gradient_adjoint(w F, x)`` is the weak
        divergence of a tangent field F sampled with quadrature weights w.
        """
        x = self._unit(x)
        F = np.asarray(F, dtype=np.float64)
        F = F - np.einsum("ij,ij->i", F, x)[:, None] * x
        out = np.zeros(self.n_real)
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            _, G = _tables(self.d, self.lmax, x[s : s + block], True)
            for a, Ga in enumerate(G):
                out += np.einsum("b,bn->n", F[s : s + block, a], Ga)
        return out

    def hessian_at(self, c, x, *, epsilon=None):
        x = self._unit(x)
        c = np.asarray(c, dtype=np.float64)
        n, d = x.shape
        val, grad, H = np.empty(n), np.empty((n, d)), np.empty((n, d, d))
        # order-2 factors: 6 tables per level, so smaller blocks
        block = max(1, _BLOCK_ELEMENTS // (4 * max(self.n_real, (self.lmax + 1) ** 2)))
        eye = np.eye(d)
        for s in range(0, n, block):
            xb = x[s : s + block]
            fac = _Factors(self, xb, 2)
            val[s : s + block] = np.einsum("bn,n->b", fac.value, c)
            g = fac.gradient(c[:, None])[:, 0, :]
            radial = np.einsum("ij,ij->i", g, xb)
            P = eye[None] - xb[:, :, None] * xb[:, None, :]
            Hb = P @ fac.hessian(c) @ P - radial[:, None, None] * P
            H[s : s + block] = Hb
            grad[s : s + block] = g - radial[:, None] * xb
        return val, grad, H

    # -- grids -------------------------------------------------------------------------
    def grid(self, n: int | None = None) -> "HypersphereGrid":
        return HypersphereGrid(self, n)

    def plot_values(self, c, nlat=None, nlon=None):
        """Values on the great 2-sphere {x_4 = ... = x_d = 0}: (colatitude from e_3, longitude, values (nlat, nlon))."""
        nlat = nlat or max(65, 2 * self.lmax + 3)
        nlon = nlon or 2 * nlat
        th = np.pi * np.arange(nlat) / (nlat - 1)
        ph = 2 * np.pi * np.arange(nlon) / nlon
        T, P = np.meshgrid(th, ph, indexing="ij")
        x = np.zeros((T.size, self.d))
        x[:, 0] = (np.sin(T) * np.cos(P)).ravel()
        x[:, 1] = (np.sin(T) * np.sin(P)).ravel()
        x[:, 2] = np.cos(T).ravel()
        return th, ph, self.evaluate(c, x).reshape(nlat, nlon)


@functools.lru_cache(maxsize=None)
def _dimension_class(base: type, d: int) -> type:
    lo, hi = 0, 1
    while n_functions(d, hi) <= MAX_FUNCTIONS:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if n_functions(d, mid) <= MAX_FUNCTIONS else (lo, mid)
    lm = lo
    return type(base.__name__, (base,), {"d": d, "max_lmax": lm, "__module__": base.__module__,
                                         "__doc__": base.__doc__})


register_basis(4, and_above=True)(HypersphereBasis)


def grid_cost(d: int, lmax: int, n: int) -> tuple[float, float]:
    """(seconds of one synthesis + analysis pair, bytes of the nodes) of a :class:`HypersphereGrid`."""
    q = 2.0 * n * float(n) ** (d - 2)
    return 2 * EVAL_SECONDS_PER_ENTRY * q * n_functions(d, lmax), 8.0 * q * (3 * d + 2)


class HypersphereGrid(Grid):
    """Product Gauss grid of :class:`HypersphereBasis`: n Gauss–Gegenbauer nodes per level t_j and 2n angles.

    Exact for polynomials of degree <= 2n - 1 (:func:`~meanfield.sphere.product_nodes`); the
    default n = 3 lmax / 2 + 2 obeys the 3/2 rule. Transforms are the basis' direct point
    transforms at the Q = 2n · n^{d-2} nodes (synthesis, quadrature analysis, gradient, weak
    divergence -Σ_q w_q F_q · ∇Y(x_q)); the tangent frame is :func:`householder_frame`.
    """

    def __init__(self, basis: HypersphereBasis, n: int | None = None):
        self.basis, self.lmax, self.d = basis, basis.lmax, basis.d
        self.n = (3 * self.lmax) // 2 + 2 if n is None else int(n)
        secs, mem = grid_cost(self.d, self.lmax, self.n)
        if secs > _validate.COST_LIMIT_SECONDS or mem > _validate.COST_LIMIT_BYTES:
            lo = 1
            while True:
                s2, m2 = grid_cost(self.d, self.lmax, lo + 1)
                if s2 > _validate.COST_LIMIT_SECONDS or m2 > _validate.COST_LIMIT_BYTES:
                    break
                lo += 1
            check_cost(f"HypersphereGrid (d = {self.d}, lmax = {self.lmax})", seconds=secs, memory=mem,
                       parameter="nodes per level n", value=self.n, largest=lo)
        self.points, self.weights = product_nodes(self.d, self.n, 2 * self.n, 0.0)

    @functools.cached_property
    def _frame(self) -> list[np.ndarray]:
        return householder_frame(self.points)

    def describe(self) -> dict:
        return {"nlat": self.n, "nphi": 2 * self.n, "M": None, "Q": self.Q}

    def synth(self, c, *, out=None):
        return deliver(self.basis.evaluate(c, self.points), out, self.Q)

    def analysis(self, f):
        return self.basis.adjoint_rows((self.weights * f)[None], self.points)[0]

    def frame(self):
        return self._frame

    def gradient(self, c):
        return self.components(self.basis.gradient_at(c, self.points))

    def divergence(self, comps, *, weighted=False):
        F = self.ambient(comps)
        if not weighted:
            F *= self.weights[:, None]
        return -self.basis.gradient_adjoint(F, self.points)

    def synth_real(self, coeffs, lmax):
        b = self.basis if lmax == self.lmax else type(self.basis)(lmax)
        return b.synth_rows(np.atleast_2d(coeffs), self.points, grad=False)[0].T

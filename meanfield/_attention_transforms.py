"""Non-uniform transforms behind the spectral attention evaluator (theory §7).

The adjoint transforms that give the empirical harmonic coefficients of a weighted token
cloud (S^2: ``ducc0.sht.experimental.adjoint_synthesis_general``; S^1: a type-1 NUFFT), the
FFT-free S^1 power sum, and the S^2 angle and tangent-frame helpers shared with the
characteristics solver. The public names are re-exported from
:mod:`meanfield.attention_spectral`.
"""

from __future__ import annotations

import math

import ducc0
import numpy as np

from ._threads import one_blas_thread, point_threads
from .sphere._circle import circle_powers
from .sphere._s2 import adjoint_at
from . import _validate
from ._validate import as_float, as_int, as_points, as_real_array, check_cost

__all__ = ["empirical_coefficients", "DUCC_EPS_MIN"]

#: Smallest accuracy ducc0 accepts for double-precision non-uniform transforms.
DUCC_EPS_MIN = 2e-13


def _normalised_weights(weights, n: int) -> np.ndarray | None:
    if weights is None:
        return None
    w = as_real_array(weights, "weights", finite=False)
    if w.shape != (n,):
        raise ValueError(f"weights must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be finite, non-negative and not all zero")
    return w / w.sum()


def _s2_loc(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(loc, r): ducc0 locations [colatitude, longitude in [0, 2π)] and r = sqrt(x² + y²).

    Same formulas as :func:`meanfield.harmonics.cart_to_angles` (longitude 0 at the poles),
    without its hypot/mod passes (about 3x faster at N = 10^6).
    """
    x0, x1, x2 = x[:, 0], x[:, 1], x[:, 2]
    r = np.sqrt(x0 * x0 + x1 * x1)
    loc = np.empty((x.shape[0], 2))
    np.arctan2(r, x2, out=loc[:, 0])
    lon = loc[:, 1]
    np.arctan2(x1, x0, out=lon)
    lon[lon < 0] += 2 * math.pi
    lon[lon >= 2 * math.pi] = 0.0
    return loc, r


def _s2_tangent(x: np.ndarray, r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cartesian vector a e_θ + b e_φ at x, with the frame of :func:`meanfield.harmonics.tangent_frame`.

    e_θ = (z x/r, z y/r, -r), e_φ = (-y/r, x/r, 0); at the poles (r = 0, longitude 0)
    e_θ = (z, 0, 0)·sign and e_φ = (0, 1, 0), i.e. (cos φ, sin φ) = (1, 0). No trigonometric calls.
    """
    x0, x1, x2 = x[:, 0], x[:, 1], x[:, 2]
    pole = r == 0
    inv = 1.0 / np.where(pole, 1.0, r)
    ar = a * inv
    br = b * inv
    out = np.empty_like(x)
    ar_z = ar * x2
    np.multiply(ar_z, x0, out=out[:, 0])
    out[:, 0] -= br * x1
    np.multiply(ar_z, x1, out=out[:, 1])
    out[:, 1] += br * x0
    np.multiply(a, r, out=out[:, 2])
    np.negative(out[:, 2], out=out[:, 2])
    if pole.any():
        out[pole, 0] = a[pole] * x2[pole]
        out[pole, 1] = b[pole]
        out[pole, 2] = 0.0
    return out


def empirical_coefficients(x, lmax: int, weights=None, *, epsilon: float = 1e-12, nthreads: int | None = None) -> np.ndarray:
    """Harmonic coefficients of μ = Σ_j w_j δ_{x_j} by one adjoint non-uniform transform (theory §7).

    μ_lm = Σ_j w_j conj(Y_lm(x_j)), with w_j = 1/N by default (weights are normalised to sum 1).

    Parameters
    ----------
    x : ndarray, shape (N, d), d in {2, 3}
        Unit vectors.
    lmax : int
        Degree of the expansion.
    weights : ndarray, shape (N,), optional
        Non-negative weights, not all zero.
    epsilon : float
        Accuracy of the transform (ducc0), >= 2e-13.
    nthreads : int, optional
        Threads for ducc0 (default: :func:`meanfield.point_threads` of the number of points and lmax).

    Returns
    -------
    ndarray
        S^2: complex alm in ducc0/healpy packing, shape ((lmax+1)(lmax+2)/2,), such that
        μ "=" Σ a_l0 Y_l0 + 2 Re Σ_{m>0} a_lm Y_lm; this is exactly the adjoint of ducc0's
        ``synthesis_general`` (no factor 2 for m > 0, checked against
        :func:`meanfield.harmonics.real_basis` in the tests). S^1: real Fourier coefficients
        in the order of :func:`meanfield.harmonics.real_basis`, shape (2 lmax + 1,).

    Examples
    --------
    >>> import numpy as np
    >>> a = empirical_coefficients(np.array([[0.0, 0.0, 1.0]]), 1)
    >>> bool(abs(a[1].real - np.sqrt(3 / (4 * np.pi))) < 1e-10)   # Y_10 at the north pole
    True
    """
    x = as_points(x, "x")
    d = x.shape[1]
    if d not in (2, 3):
        raise ValueError(f"empirical_coefficients needs d = 2 or 3, got d = {d}")
    lmax = as_int(lmax, "lmax", min_value=0)
    # S^2: the alm (16 bytes each) and ducc0's work grid of about 8 (lmax + 1)^2 doubles
    per = 32.0 * (lmax + 1) ** 2 if d == 3 else 64.0 * (lmax + 1)
    check_cost("empirical_coefficients", seconds=0.0, memory=per, parameter="lmax", value=lmax,
               largest=int(math.isqrt(int(_validate.COST_LIMIT_BYTES // 32))) - 1 if d == 3 else int(_validate.COST_LIMIT_BYTES // 64) - 1)
    epsilon = as_float(epsilon, "epsilon", min_value=DUCC_EPS_MIN)
    w = _normalised_weights(weights, x.shape[0])
    if w is None:
        w = np.full(x.shape[0], 1.0 / x.shape[0])
    nthreads = point_threads(x.shape[0], lmax) if nthreads is None else as_int(nthreads, "nthreads", min_value=1)
    if d == 3:
        loc, _ = _s2_loc(x)
        return adjoint_at(w, lmax, loc, epsilon=epsilon, nthreads=nthreads)
    theta = np.arctan2(x[:, 1], x[:, 0])
    c = _s1_adjoint(w, theta, lmax, epsilon, nthreads)  # c_k, k = -lmax..lmax
    out = np.empty(2 * lmax + 1)
    out[0] = c[lmax].real / math.sqrt(2 * math.pi)
    pos = c[lmax + 1 :]
    out[1::2] = pos.real / math.sqrt(math.pi)
    out[2::2] = -pos.imag / math.sqrt(math.pi)
    return out


def _s1_adjoint(w, theta, lmax, epsilon, nthreads):
    """c_k = Σ_j w_j e^{-i k θ_j}, k = -lmax..lmax (type-1 NUFFT)."""
    out = np.empty(2 * lmax + 1, dtype=np.complex128)
    ducc0.nufft.nu2u(
        points=w.astype(np.complex128), coord=theta[:, None], forward=True,
        epsilon=epsilon, nthreads=nthreads, out=out,
    )
    return out


def _s1_direct(w, z, lam, block):
    """Exact S^1 path without FFTs: g + i g' at the tokens from powers of z_j = e^{iθ_j}, O(N·L).

    Returns the complex array g(θ_i) + i g'(θ_i), with g = Σ_k lam_|k| c_k e^{ikθ} and
    c_k = Σ_j w_j conj(z_j)^k. The powers z^1..z^L of a block of ``block`` tokens are rows of one
    (L, block) array, one vectorised product per degree, and both sums are products with it
    (BLAS on one thread: a woken OpenBLAS pool costs more than these products, and its threads
    would spin on the cores of the next transform). With a single block the powers of the
    adjoint are reused by the synthesis.
    """
    n = z.shape[0]
    L = lam.size - 1
    c0 = float(w.sum())
    if L == 0:
        return np.full(n, lam[0] * c0, dtype=np.complex128)
    P = np.empty((L, min(block, n)), dtype=np.complex128)
    S = np.zeros(L, dtype=np.complex128)  # Σ_j w_j z_j^k, k = 1..L: c_k = conj(S_k)
    out = np.empty(n, dtype=np.complex128)
    with one_blas_thread():
        for s in range(0, n, block):
            e = min(n, s + block)
            S += circle_powers(z[s:e], L, P) @ w[s:e].astype(np.complex128)
        a = lam[1:] * np.conj(S)
        # g = lam_0 c_0 + Re Σ_{k>0} 2 a_k z^k,  g' = Re Σ_{k>0} 2 i k a_k z^k
        coef = np.stack([2 * a, 2j * np.arange(1, L + 1) * a])
        for s in range(0, n, block):
            e = min(n, s + block)
            G = coef @ (P[:, : e - s] if n <= block else circle_powers(z[s:e], L, P))
            out.real[s:e] = G[0].real + lam[0] * c0
            out.imag[s:e] = G[1].real
    return out

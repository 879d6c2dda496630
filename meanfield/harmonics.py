"""Harmonic analysis on the sphere S^{d-1}: bases, zonal harmonics, coordinates.

Conventions (SPEC §2, §10)
--------------------------
* S^1 (d = 2): the real orthonormal Fourier basis in the angle θ = atan2(x_2, x_1),
  ordered ``[1/sqrt(2π), cos θ/sqrt(π), sin θ/sqrt(π), cos 2θ/sqrt(π), sin 2θ/sqrt(π), ...]``;
  degree k occupies indices ``2k-1, 2k`` (k >= 1). ``n_coeffs(2, lmax) = 2 lmax + 1``.
* S^2 (d = 3): real orthonormal spherical harmonics built from the complex ones
  Y_l^m of ducc0/scipy (Condon–Shortley phase included):
  ``R_{l,0} = Y_l^0``, ``R_{l,m} = sqrt(2) Re Y_l^m`` and ``R_{l,-m} = sqrt(2) Im Y_l^m``
  for m > 0. Index of (l, m) is ``l**2 + l + m``; ``n_coeffs(3, lmax) = (lmax+1)**2``.
  A real expansion f = Σ b_lm R_lm equals ducc0's packing f = Σ a_l0 Y_l0 +
  2 Re Σ_{m>0} a_lm Y_lm with a_lm = (b_{l,m} - i b_{l,-m})/sqrt(2): see
  :func:`real_to_alm` and :func:`alm_to_real`.
* General d: the zonal harmonic of degree l is
  Z_l(t) = dim H_l / ``|S^{d-1}|`` · P_l^{(d)}(t), with P_l^{(d)} the Gegenbauer
  polynomial of index (d-2)/2 normalised to P_l^{(d)}(1) = 1, so that
  Σ_m Y_lm(x) Y_lm(y) = Z_l(<x, y>) for every orthonormal basis of H_l.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

__all__ = [
    "sphere_area",
    "harmonic_dimension",
    "n_coeffs",
    "degrees",
    "legendre_d",
    "zonal",
    "zonal_derivative",
    "cart_to_angles",
    "angles_to_cart",
    "tangent_frame",
    "real_basis",
    "real_to_alm",
    "alm_to_real",
    "alm_index",
    "n_alm",
]


def sphere_area(d: int) -> float:
    """Surface area ``|S^{d-1}|`` = 2 π^{d/2} / Γ(d/2) of the unit sphere in R^d."""
    return 2.0 * math.pi ** (d / 2) / math.gamma(d / 2)


def harmonic_dimension(d: int, lmax: int) -> np.ndarray:
    """Dimension of the space H_l of degree-l spherical harmonics on S^{d-1}, l = 0..lmax.

    dim H_l = C(l+d-1, d-1) - C(l+d-3, d-1); on S^1 it is 1, 2, 2, ...; on S^2, 2l+1.
    """
    ls = np.arange(lmax + 1)
    out = special.comb(ls + d - 1, d - 1, exact=False) - np.where(
        ls >= 2, special.comb(np.maximum(ls + d - 3, 0), d - 1, exact=False), 0.0
    )
    return np.rint(out)


def n_coeffs(d: int, lmax: int) -> int:
    """Number of real basis functions of degree <= lmax (S^1: 2 lmax + 1, S^2: (lmax+1)^2)."""
    if d == 2:
        return 2 * lmax + 1
    if d == 3:
        return (lmax + 1) ** 2
    return int(harmonic_dimension(d, lmax).sum())


def degrees(d: int, lmax: int) -> np.ndarray:
    """Degree l of every real basis function, in the order of :func:`real_basis`."""
    if d == 2:
        return np.concatenate([[0], np.repeat(np.arange(1, lmax + 1), 2)])
    if d == 3:
        return np.repeat(np.arange(lmax + 1), 2 * np.arange(lmax + 1) + 1)
    raise ValueError(f"d must be 2 or 3 for an explicit real basis, got {d}")


def legendre_d(d: int, lmax: int, t) -> np.ndarray:
    """Legendre polynomials of dimension d, P_l^{(d)}(t) with P_l^{(d)}(1) = 1.

    d = 2: Chebyshev T_l; d = 3: Legendre P_l; d >= 4: C_l^{(d-2)/2}(t) / C_l^{(d-2)/2}(1).
    Returns an array of shape ``(lmax + 1,) + shape(t)``.
    """
    t = np.asarray(t, dtype=np.float64)
    ls = np.arange(lmax + 1).reshape((-1,) + (1,) * t.ndim)
    if d == 2:
        return special.eval_chebyt(ls, t)
    if d == 3:
        return special.eval_legendre(ls, t)
    alpha = (d - 2) / 2
    return special.eval_gegenbauer(ls, alpha, t) / special.eval_gegenbauer(ls, alpha, 1.0)


def zonal(d: int, lmax: int, t) -> np.ndarray:
    """Zonal harmonics Z_l(t) = dim H_l / ``|S^{d-1}|`` · P_l^{(d)}(t), shape ``(lmax+1,) + shape(t)``."""
    t = np.asarray(t, dtype=np.float64)
    scale = harmonic_dimension(d, lmax) / sphere_area(d)
    return scale.reshape((-1,) + (1,) * t.ndim) * legendre_d(d, lmax, t)


def zonal_derivative(d: int, lmax: int, t) -> np.ndarray:
    """Derivative Z_l'(t), from d/dt C_l^{a}(t) = 2a C_{l-1}^{a+1}(t) (a = (d-2)/2 > 0) or T_l' = l U_{l-1}."""
    t = np.asarray(t, dtype=np.float64)
    ls = np.arange(lmax + 1).reshape((-1,) + (1,) * t.ndim)
    scale = (harmonic_dimension(d, lmax) / sphere_area(d)).reshape(ls.shape)
    lm1 = np.maximum(ls - 1, 0)
    if d == 2:
        deriv = np.where(ls >= 1, ls * special.eval_chebyu(lm1, t), 0.0)
    else:
        a = (d - 2) / 2
        deriv = np.where(ls >= 1, 2 * a * special.eval_gegenbauer(lm1, a + 1, t), 0.0)
        deriv = deriv / special.eval_gegenbauer(ls, a, 1.0)
    return scale * deriv


def cart_to_angles(x: np.ndarray) -> np.ndarray:
    """Angles of points on S^1 or S^2.

    S^1: returns θ in [0, 2π), shape (N,). S^2: returns ``loc`` of shape (N, 2) with
    colatitude in [0, π] and longitude in [0, 2π), the layout ducc0 expects.
    """
    x = np.asarray(x, dtype=np.float64)
    lon = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    if x.shape[1] == 2:
        return lon
    colat = np.arctan2(np.hypot(x[:, 0], x[:, 1]), x[:, 2])
    return np.stack([colat, lon], axis=1)


def angles_to_cart(angles: np.ndarray) -> np.ndarray:
    """Inverse of :func:`cart_to_angles`: θ (N,) -> (N, 2) or (colat, lon) (N, 2) -> (N, 3)."""
    a = np.asarray(angles, dtype=np.float64)
    if a.ndim == 1:
        return np.stack([np.cos(a), np.sin(a)], axis=1)
    st = np.sin(a[:, 0])
    return np.stack([st * np.cos(a[:, 1]), st * np.sin(a[:, 1]), np.cos(a[:, 0])], axis=1)


def tangent_frame(loc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors (e_θ, e_φ), each (N, 3), at points given by (colatitude, longitude).

    ducc0's spin-1 maps hold the [θ, φ] components of a tangent field in this frame.
    """
    ct, st = np.cos(loc[:, 0]), np.sin(loc[:, 0])
    cp, sp = np.cos(loc[:, 1]), np.sin(loc[:, 1])
    e_theta = np.stack([ct * cp, ct * sp, -st], axis=1)
    e_phi = np.stack([-sp, cp, np.zeros_like(cp)], axis=1)
    return e_theta, e_phi


def _complex_sh_cartesian(lmax: int, x: np.ndarray) -> np.ndarray:
    """Y_l^m(x) for 0 <= m <= l <= lmax at unit vectors x (N, 3); shape (lmax+1, lmax+1, N), [l, m].

    Uses sin^m θ e^{imφ} = (x_1 + i x_2)^m and the standard three-term recursion in l,
    vectorised over m and the points, so there are no trigonometric calls and no loop over points.
    """
    n = x.shape[0]
    z = x[:, 2]
    w = x[:, 0] + 1j * x[:, 1]
    out = np.zeros((lmax + 1, lmax + 1, n), dtype=np.complex128)
    # Sectoral terms Y_m^m = c_m (x + i y)^m with c_0 = 1/sqrt(4π), c_m = -c_{m-1} sqrt((2m+1)/(2m)).
    c = 1.0 / math.sqrt(4 * math.pi)
    wm = np.ones(n, dtype=np.complex128)
    for m in range(lmax + 1):
        if m > 0:
            c *= -math.sqrt((2 * m + 1) / (2 * m))
            wm = wm * w
        out[m, m] = c * wm
    if lmax >= 1:
        ms = np.arange(lmax)
        out[ms + 1, ms] = np.sqrt(2 * ms + 3)[:, None] * z * out[ms, ms]
    for ell in range(2, lmax + 1):
        ms = np.arange(ell - 1)
        a = np.sqrt((4.0 * ell**2 - 1) / (ell**2 - ms**2))[:, None]
        b = np.sqrt(((ell - 1.0) ** 2 - ms**2) / (4.0 * (ell - 1) ** 2 - 1))[:, None]
        out[ell, ms] = a * (z * out[ell - 1, ms] - b * out[ell - 2, ms])
    return out


def real_basis(d: int, lmax: int, x: np.ndarray) -> np.ndarray:
    """Real orthonormal basis functions of degree <= lmax at points x, shape (N, n_coeffs).

    Direct evaluation, O(N · n_coeffs) memory: use it for small N or as a reference; the
    solvers use ducc0's non-uniform transforms for large N.

    Parameters
    ----------
    d : {2, 3}
    lmax : int
    x : ndarray, shape (N, d), unit vectors.

    Examples
    --------
    >>> import numpy as np
    >>> B = real_basis(3, 2, np.array([[0.0, 0.0, 1.0]]))
    >>> round(float(B[0, 0]) ** 2 * 4 * np.pi, 12)
    1.0
    """
    x = np.asarray(x, dtype=np.float64)
    if d == 2:
        theta = np.arctan2(x[:, 1], x[:, 0])
        k = np.arange(1, lmax + 1)
        out = np.empty((x.shape[0], 2 * lmax + 1))
        out[:, 0] = 1.0 / math.sqrt(2 * math.pi)
        out[:, 1::2] = np.cos(np.outer(theta, k)) / math.sqrt(math.pi)
        out[:, 2::2] = np.sin(np.outer(theta, k)) / math.sqrt(math.pi)
        return out
    if d != 3:
        raise ValueError(f"d must be 2 or 3, got {d}")
    y = _complex_sh_cartesian(lmax, x)
    out = np.empty((x.shape[0], (lmax + 1) ** 2))
    for ell in range(lmax + 1):
        base = ell * ell + ell
        out[:, base] = y[ell, 0].real
        if ell:
            out[:, base + 1 : base + ell + 1] = math.sqrt(2) * y[ell, 1 : ell + 1].real.T
            out[:, base - ell : base][:, ::-1] = math.sqrt(2) * y[ell, 1 : ell + 1].imag.T
    return out


def n_alm(lmax: int) -> int:
    """Number of complex coefficients in ducc0/healpy packing, (lmax+1)(lmax+2)/2."""
    return (lmax + 1) * (lmax + 2) // 2


def alm_index(lmax: int, ell, m) -> np.ndarray:
    """Index of (l, m), m >= 0, in ducc0/healpy packing: m (2 lmax + 1 - m) / 2 + l."""
    m = np.asarray(m)
    return m * (2 * lmax + 1 - m) // 2 + np.asarray(ell)


def _real_alm_maps(lmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ell = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
    m = np.concatenate([np.full(lmax + 1 - mm, mm) for mm in range(lmax + 1)])
    pos = ell * ell + ell + m
    neg = ell * ell + ell - m
    return ell, m, pos, neg


def real_to_alm(b: np.ndarray, lmax: int) -> np.ndarray:
    """Real S^2 coefficients (..., (lmax+1)^2) -> ducc0 complex alm (..., n_alm(lmax)).

    a_l0 = b_l0 and a_lm = (b_{l,m} - i b_{l,-m}) / sqrt(2) for m > 0.
    """
    b = np.asarray(b)
    _, m, pos, neg = _real_alm_maps(lmax)
    s = np.where(m > 0, 1 / math.sqrt(2), 1.0)
    return s * (b[..., pos] - 1j * np.where(m > 0, b[..., neg], 0.0))


def alm_to_real(a: np.ndarray, lmax: int) -> np.ndarray:
    """Inverse of :func:`real_to_alm`."""
    a = np.asarray(a)
    _, m, pos, neg = _real_alm_maps(lmax)
    out = np.empty(a.shape[:-1] + ((lmax + 1) ** 2,), dtype=np.float64)
    s = np.where(m > 0, math.sqrt(2), 1.0)
    out[..., pos] = s * a.real
    sel = m > 0
    out[..., neg[sel]] = -math.sqrt(2) * a[..., sel].imag
    return out

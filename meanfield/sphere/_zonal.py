"""Zonal harmonics and harmonic dimensions on S^{d-1} for every d.

The zonal harmonic of degree l is Z_l(t) = dim H_l / ``|S^{d-1}|`` · P_l^{(d)}(t), with
P_l^{(d)} the Gegenbauer polynomial of index (d-2)/2 normalised to P_l^{(d)}(1) = 1, so
that Σ_m Y_lm(x) Y_lm(y) = Z_l(<x, y>) for every orthonormal basis of H_l.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from .. import _validate
from .._validate import as_int, as_real_array, check_cost
from ._geometry import sphere_area

__all__ = ["harmonic_dimension", "legendre_d", "legendre_recurrence", "zonal", "zonal_derivative"]


def harmonic_dimension(d: int, lmax: int) -> np.ndarray:
    """Dimension of the space H_l of degree-l spherical harmonics on S^{d-1}, l = 0..lmax.

    dim H_l = C(l+d-1, d-1) - C(l+d-3, d-1); on S^1 it is 1, 2, 2, ...; on S^2, 2l+1.

    Examples
    --------
    >>> harmonic_dimension(3, 3).tolist()
    [1.0, 3.0, 5.0, 7.0]
    """
    d, lmax = _check_dimension_degree(d, lmax)
    check_cost("harmonic_dimension", seconds=0.0, memory=32.0 * (lmax + 1), parameter="lmax", value=lmax,
               largest=int(_validate.COST_LIMIT_BYTES // 32) - 1)
    ls = np.arange(lmax + 1)
    out = special.comb(ls + d - 1, d - 1, exact=False) - np.where(
        ls >= 2, special.comb(np.maximum(ls + d - 3, 0), d - 1, exact=False), 0.0
    )
    return np.rint(out)


def _check_dimension_degree(d, lmax) -> tuple[int, int]:
    return as_int(d, "d", min_value=2), as_int(lmax, "lmax", min_value=0)


def _check_t(t, what: str, lmax: int) -> np.ndarray:
    """t as a float array in [-1, 1] (rounding slack 1e-12), with the memory of ``(lmax + 1) x size(t)``
    results checked."""
    t = as_real_array(t, "t")
    if t.size and np.max(np.abs(t)) > 1.0 + 1e-12:
        raise ValueError(f"{what}: t must lie in [-1, 1] (a cosine), got a value {float(np.max(np.abs(t))):.6g} in "
                         "absolute value")
    per_degree = 16.0 * max(t.size, 1)
    check_cost(what, seconds=0.0, memory=per_degree * (lmax + 1), parameter="lmax", value=lmax,
               largest=max(0, int(_validate.COST_LIMIT_BYTES // per_degree) - 1))
    return t


def legendre_recurrence(d: int, lmax: int, t):
    """Yield P_l^{(d)}(t) for l = 0..lmax by the three-term recurrence, one degree at a time.

    P_0 = 1, P_1 = t and, with a = d - 2,
    ``P_{l+1} = ((2l + a) t P_l - l P_{l-1}) / (l + a)`` (Chebyshev for d = 2, Legendre for
    d = 3, normalised Gegenbauer for d >= 4). The recurrence is stable on [-1, 1]; memory is
    O(size of t) whatever lmax, and a consumer can stop or be interrupted between degrees.

    Examples
    --------
    >>> [round(float(p), 12) for p in legendre_recurrence(3, 2, 0.5)]
    [1.0, 0.5, -0.125]
    """
    t = np.asarray(t, dtype=np.float64)
    a = d - 2.0
    prev = np.ones_like(t)
    yield prev
    if lmax < 1:
        return
    cur = t.copy()
    yield cur
    for l in range(1, lmax):
        nxt = ((2.0 * l + a) * t * cur - l * prev) / (l + a)
        prev, cur = cur, nxt
        yield cur


def legendre_d(d: int, lmax: int, t) -> np.ndarray:
    """Legendre polynomials of dimension d, P_l^{(d)}(t) with P_l^{(d)}(1) = 1.

    d = 2: Chebyshev T_l; d = 3: Legendre P_l; d >= 4: C_l^{(d-2)/2}(t) / C_l^{(d-2)/2}(1).
    Returns an array of shape ``(lmax + 1,) + shape(t)``, computed by the three-term
    recurrence of :func:`legendre_recurrence` in O(lmax · size(t)) time.

    Examples
    --------
    >>> legendre_d(2, 3, 0.5).round(12).tolist()   # cos(k π/3)
    [1.0, 0.5, -0.5, -1.0]
    """
    d, lmax = _check_dimension_degree(d, lmax)
    t = _check_t(t, "legendre_d", lmax)
    out = np.empty((lmax + 1,) + t.shape)
    for l, p in enumerate(legendre_recurrence(d, lmax, t)):
        out[l] = p
    return out


def zonal(d: int, lmax: int, t) -> np.ndarray:
    """Zonal harmonics Z_l(t) = dim H_l / ``|S^{d-1}|`` · P_l^{(d)}(t), shape ``(lmax+1,) + shape(t)``."""
    d, lmax = _check_dimension_degree(d, lmax)
    t = _check_t(t, "zonal", lmax)
    scale = harmonic_dimension(d, lmax) / sphere_area(d)
    return scale.reshape((-1,) + (1,) * t.ndim) * legendre_d(d, lmax, t)


def zonal_derivative(d: int, lmax: int, t) -> np.ndarray:
    """Derivative Z_l'(t), from d/dt C_l^{a}(t) = 2a C_{l-1}^{a+1}(t) (a = (d-2)/2 > 0) or T_l' = l U_{l-1}."""
    d, lmax = _check_dimension_degree(d, lmax)
    t = _check_t(t, "zonal_derivative", lmax)
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

"""Zonal harmonics and harmonic dimensions on S^{d-1} for every d.

The zonal harmonic of degree l is Z_l(t) = dim H_l / ``|S^{d-1}|`` · P_l^{(d)}(t), with
P_l^{(d)} the Gegenbauer polynomial of index (d-2)/2 normalised to P_l^{(d)}(1) = 1, so
that Σ_m Y_lm(x) Y_lm(y) = Z_l(<x, y>) for every orthonormal basis of H_l.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ._geometry import sphere_area

__all__ = ["harmonic_dimension", "legendre_d", "zonal", "zonal_derivative"]


def harmonic_dimension(d: int, lmax: int) -> np.ndarray:
    """Dimension of the space H_l of degree-l spherical harmonics on S^{d-1}, l = 0..lmax.

    dim H_l = C(l+d-1, d-1) - C(l+d-3, d-1); on S^1 it is 1, 2, 2, ...; on S^2, 2l+1.
    """
    ls = np.arange(lmax + 1)
    out = special.comb(ls + d - 1, d - 1, exact=False) - np.where(
        ls >= 2, special.comb(np.maximum(ls + d - 3, 0), d - 1, exact=False), 0.0
    )
    return np.rint(out)


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

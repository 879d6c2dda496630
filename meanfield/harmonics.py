"""Harmonic analysis on the sphere S^{d-1}: bases, zonal harmonics, coordinates.

The implementations live in the sphere layer :mod:`meanfield.sphere`; this module keeps
the functional interface.

Conventions
-----------
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

import numpy as np

from . import _validate
from ._validate import as_points, check_cost
from .sphere import (
    alm_index,
    alm_to_real,
    angles_to_cart,
    basis,
    cart_to_angles,
    harmonic_dimension,
    legendre_d,
    n_alm,
    real_to_alm,
    sphere_area,
    tangent_frame,
    zonal,
    zonal_derivative,
)
from .sphere._s2 import _complex_sh_cartesian  # noqa: F401  (used by tests)

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


def n_coeffs(d: int, lmax: int) -> int:
    """Number of real basis functions of degree <= lmax (S^1: 2 lmax + 1, S^2: (lmax+1)^2, any d: Σ dim H_l).

    Examples
    --------
    >>> n_coeffs(3, 2), n_coeffs(4, 1)
    (9, 5)
    """
    return int(harmonic_dimension(d, lmax).sum())


def degrees(d: int, lmax: int) -> np.ndarray:
    """Degree l of every real basis function, in the order of :func:`real_basis`."""
    return basis(d, lmax).real_degrees()


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
    b = basis(d, lmax)
    x = as_points(x, "x", b.d)
    per_point = 8.0 * b.n_real
    check_cost("real_basis", seconds=0.0, memory=per_point * x.shape[0], parameter="N (rows of x)",
               value=x.shape[0], largest=int(_validate.COST_LIMIT_BYTES // per_point))
    return b.real_basis(x)

"""Geometry of the sphere S^{d-1}: the one layer every solver asks.

Projection and tangent frames (:mod:`._geometry`), quadrature rules (:mod:`._quadrature`),
zonal harmonics for every d (:mod:`._zonal`) and, per sphere, a harmonic :class:`Basis`
that owns the degree, the coefficient layout, the transforms and the quadrature grid
(:func:`basis` picks it from the dimension).
"""

from ._geometry import angles_to_cart, cart_to_angles, project, sample_uniform, sphere_area, tangent_frame, tangent_project
from ._quadrature import circle_quadrature, gauss_legendre, sphere_quadrature

__all__ = [
    "sphere_area",
    "project",
    "tangent_project",
    "cart_to_angles",
    "angles_to_cart",
    "tangent_frame",
    "sample_uniform",
    "gauss_legendre",
    "sphere_quadrature",
    "circle_quadrature",
]

"""Geometry of the sphere S^{d-1}: the one layer every solver asks.

Projection and tangent frames (any d), quadrature rules (product Gauss rules on every S^{d-1}
and cell charts in hyperspherical coordinates), zonal harmonics for every d and, per
sphere, a harmonic :class:`Basis` that owns the degree, the coefficient layout, the
transforms and the quadrature :class:`Grid` (:func:`basis` picks it from the dimension).
Low-degree fields are evaluated at points exactly as homogeneous polynomials
(:class:`HomogeneousForm`, :attr:`Basis.polynomial`) wherever that is cheaper than the
basis' transforms; on S^2, :class:`LowDegreeS2` gives the exact adjoint and synthesis (with
gradients or Hessians) of low-degree fields in ducc0's coefficient packing.
"""

from ._geometry import (angles_to_cart, cart_to_angles, project, row_norms, row_sums, sample_uniform, sphere_area,
                        tangent_frame, tangent_project)
from ._quadrature import circle_quadrature, gauss_gegenbauer, gauss_legendre, product_nodes, product_quadrature, sphere_quadrature
from ._hyper import (
    cart_to_hyperspherical,
    polar_rule,
    gegenbauer_mass,
    gegenbauer_mass_inverse,
    hypersphere_quadrature,
    hyperspherical_frame,
    hyperspherical_to_cart,
    monomial_exponents,
    monomials,
    oriented_frame,
    polar_exponents,
    tangent_volume,
)
from ._charts import CellChart, CircleChart, HypersphericalChart, cell_chart
from ._s2 import alm_index, alm_to_real, n_alm, real_to_alm
from ._polynomial import HomogeneousForm, homogeneous_exponents
from ._s2_exact import LowDegreeS2, low_degree_s2
from ._zonal import harmonic_dimension, legendre_d, zonal, zonal_derivative
from .basis import Basis, Grid, basis, check_dimension, has_basis, register_basis, supported_dimensions
from ._circle import CircleBasis, CircleGrid
from ._sphere2 import NUFFT_EPS, S2Basis, S2Grid
from ._hypersphere import HypersphereBasis, HypersphereGrid, chain_labels, householder_frame, n_functions

__all__ = [
    "sphere_area",
    "project",
    "tangent_project",
    "row_norms",
    "row_sums",
    "cart_to_angles",
    "angles_to_cart",
    "tangent_frame",
    "sample_uniform",
    "gauss_legendre",
    "gauss_gegenbauer",
    "product_quadrature",
    "product_nodes",
    "sphere_quadrature",
    "circle_quadrature",
    "polar_rule",
    "gegenbauer_mass",
    "gegenbauer_mass_inverse",
    "polar_exponents",
    "hypersphere_quadrature",
    "hyperspherical_to_cart",
    "cart_to_hyperspherical",
    "hyperspherical_frame",
    "oriented_frame",
    "tangent_volume",
    "monomial_exponents",
    "monomials",
    "homogeneous_exponents",
    "HomogeneousForm",
    "LowDegreeS2",
    "low_degree_s2",
    "CellChart",
    "CircleChart",
    "HypersphericalChart",
    "cell_chart",
    "harmonic_dimension",
    "legendre_d",
    "zonal",
    "zonal_derivative",
    "n_alm",
    "alm_index",
    "real_to_alm",
    "alm_to_real",
    "Basis",
    "Grid",
    "basis",
    "check_dimension",
    "register_basis",
    "supported_dimensions",
    "has_basis",
    "CircleBasis",
    "CircleGrid",
    "S2Basis",
    "S2Grid",
    "NUFFT_EPS",
    "HypersphereBasis",
    "HypersphereGrid",
    "chain_labels",
    "householder_frame",
    "n_functions",
]

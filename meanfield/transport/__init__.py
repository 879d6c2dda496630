"""Wasserstein distances and observable errors for point clouds on S^{d-1}.

Plain functions on arrays, in the style of POT, used by the validation
protocol: W_p between the empirical measure of N tokens and another cloud or
a density given at quadrature nodes, and errors of low-degree harmonic
moments.

Layout (every name below is imported from here; the private modules are an
implementation detail):

* exact W_p and cost matrices (``_exact``): :func:`cost_matrix`,
  :func:`wasserstein`, :class:`TransportInfo`;
* the exact circle solver (``_circle``): :func:`wasserstein_circle`;
* the sliced estimate, a different metric (``_sliced``):
  :func:`sliced_wasserstein_sphere`;
* densities at quadrature nodes (``_density``): :class:`DensityCloud`,
  :func:`density_to_cloud`, :func:`wasserstein_to_density`;
* harmonic moments (``_moments``): :func:`harmonic_labels`,
  :func:`real_harmonics`, :func:`empirical_moments`, :func:`density_moments`,
  :func:`observable_errors`;
* quadrature rules, owned by :mod:`meanfield.sphere` and re-exported here:
  :func:`sphere_quadrature`, :func:`circle_quadrature`.

Conventions
-----------
* Points are rows of an ``(n, d)`` float array of unit vectors (``|x| = 1`` to
  1e-8, checked); weights are non-negative, length n, summing to 1 within
  ``WEIGHT_SUM_TOL = 1e-9`` (checked, then renormalised exactly).  ``None``
  means uniform weights 1/n.
* Distances are in radians of geodesic arc length (``cost="geodesic"``,
  d(x, y) = arccos <x, y>) or in ambient units (``cost="chordal"``,
  ``d(x, y) = |x - y|`` = 2 sin(d_geo/2)).  Every function returns W_p, never
  W_p^p.
* Exact W_p between clouds uses POT's network simplex ``ot.emd2`` with
  ``numItermax >= 1e7`` and a check of ``log["result_code"] == 1`` (POT
  otherwise returns unconverged values with only a warning), on all pairs or,
  for large clouds, on candidate edges certified optimal by a reduced-cost
  check of every pair (``_candidates``).  On S^1 the
  geodesic W_p is computed exactly by a circle solver instead (no size limit).
"""

from __future__ import annotations

import ot  # noqa: F401  (``meanfield.transport.ot`` is the POT module the exact path calls)

from meanfield.sphere import circle_quadrature, sphere_quadrature

from ._checks import WEIGHT_SUM_TOL
from ._circle import wasserstein_circle
from ._density import DensityCloud, density_to_cloud, wasserstein_to_density
from ._exact import (
    DEFAULT_MAX_EXACT,
    NEGLIGIBLE_WEIGHT,
    SPARSE_MIN_PAIRS,
    SPARSE_MIN_SIDE,
    SlicedFallbackWarning,
    TransportInfo,
    cost_matrix,
    wasserstein,
)
from ._moments import density_moments, empirical_moments, harmonic_labels, observable_errors, real_harmonics
from ._sliced import DEFAULT_N_PROJECTIONS, sliced_wasserstein_sphere

__all__ = [
    "WEIGHT_SUM_TOL",
    "DEFAULT_MAX_EXACT",
    "NEGLIGIBLE_WEIGHT",
    "SPARSE_MIN_PAIRS",
    "SPARSE_MIN_SIDE",
    "SlicedFallbackWarning",
    "TransportInfo",
    "DensityCloud",
    "cost_matrix",
    "wasserstein",
    "wasserstein_circle",
    "sliced_wasserstein_sphere",
    "density_to_cloud",
    "wasserstein_to_density",
    "sphere_quadrature",
    "circle_quadrature",
    "harmonic_labels",
    "real_harmonics",
    "empirical_moments",
    "density_moments",
    "observable_errors",
]

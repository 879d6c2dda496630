"""Densities given at quadrature nodes as weighted clouds, and W_p from particles to them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import _as_cloud, _as_quadrature
from ._exact import TransportInfo, wasserstein

__all__ = ["DensityCloud", "density_to_cloud", "wasserstein_to_density"]


@dataclass(frozen=True)
class DensityCloud:
    """A density at quadrature nodes turned into a weighted point cloud.

    Attributes
    ----------
    points : ndarray, shape (q, d)
        The quadrature nodes (unit vectors).
    weights : ndarray, shape (q,)
        Probability weights ``w_q max(ρ_q, 0) / mass`` (or ``w_q ρ_q / mass`` when
        nothing was negative); sum to 1.
    mass : float
        ``Σ w_q ρ_q⁺``, the mass before renormalising (after clipping, if any).
    signed_mass : float
        ``Σ w_q ρ_q``, the quadrature integral of the density as given.
    negative_mass : float
        ``Σ w_q ρ_q⁻ >= 0``, the mass of the negative part.
    negative_fraction : float
        ``negative_mass / Σ w_q |ρ_q|``, the relative amount of negative mass.
    min_value : float
        ``min_q ρ_q``.
    clipped : bool
        True if negative values were set to zero (only with ``clip_negative=True``).

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import circle_quadrature, density_to_cloud
    >>> nodes, w = circle_quadrature(4)
    >>> c = density_to_cloud(np.array([0.3, -0.1, 0.2, 0.0]), nodes, w, clip_negative=True)
    >>> round(c.negative_fraction, 12), c.weights.round(12).tolist()
    (0.166666666667, [0.6, 0.0, 0.4, 0.0])
    """

    points: np.ndarray
    weights: np.ndarray
    mass: float
    signed_mass: float
    negative_mass: float
    negative_fraction: float
    min_value: float
    clipped: bool


def density_to_cloud(values, nodes, weights, *, clip_negative: bool = False) -> DensityCloud:
    """Turn a density sampled at quadrature nodes into a weighted point cloud.

    .. math::
        ρ ≈ \\sum_q \\frac{w_q ρ(x_q)}{\\sum_r w_r ρ(x_r)}\\, δ_{x_q}.

    A spectral density can be negative where it is under-resolved (theory §6).
    Negative values are never dropped silently: with ``clip_negative=False``
    (default) any ``ρ_q < 0`` raises a ``ValueError`` quoting the negative mass;
    with ``clip_negative=True`` they are set to 0 and the returned
    :class:`DensityCloud` reports the negative mass ``Σ w_q ρ_q⁻``, its fraction
    ``Σ w_q ρ_q⁻ / Σ w_q |ρ_q|``, the signed mass ``Σ w_q ρ_q`` and the mass
    after clipping before renormalising to 1.

    Parameters
    ----------
    values : array_like, shape (q,)
        Density values ρ(x_q) with respect to the surface measure.
    nodes : array_like, shape (q, d)
        Quadrature nodes, unit vectors.
    weights : array_like, shape (q,)
        Positive quadrature weights (``Σ w_q = |S^{d-1}|`` for an exact rule).
    clip_negative : bool
        Set negative values to zero (reported) instead of raising.

    Returns
    -------
    DensityCloud

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import circle_quadrature, density_to_cloud
    >>> nodes, w = circle_quadrature(8)
    >>> cloud = density_to_cloud(np.full(8, 1 / (2 * np.pi)), nodes, w)
    >>> round(cloud.mass, 12), cloud.weights.sum()
    (1.0, np.float64(1.0))
    """
    nodes, weights, values = _as_quadrature(nodes, weights, values)
    mass_q = weights * values
    negative = np.minimum(mass_q, 0.0)
    negative_mass = float(-negative.sum())
    absolute = float(np.abs(mass_q).sum())
    negative_fraction = negative_mass / absolute if absolute > 0 else 0.0
    if negative_mass > 0 and not clip_negative:
        raise ValueError(
            f"values has negative entries (min {values.min():.3g}); negative mass {negative_mass:.3g} "
            f"= {negative_fraction:.3g} of the total variation. Refine the density, or pass "
            "clip_negative=True to clip them (the amount is reported in the result)"
        )
    clipped = np.maximum(mass_q, 0.0)
    mass = float(clipped.sum())
    if not mass > 0:
        raise ValueError("values must have positive mass Σ w_q max(ρ_q, 0) > 0, got 0")
    return DensityCloud(
        points=nodes,
        weights=clipped / mass,
        mass=mass,
        signed_mass=float(mass_q.sum()),
        negative_mass=negative_mass,
        negative_fraction=negative_fraction,
        min_value=float(values.min()),
        clipped=bool(negative_mass > 0),
    )


def wasserstein_to_density(
    x,
    a,
    nodes,
    weights,
    values,
    p: int = 2,
    cost: str = "geodesic",
    *,
    clip_negative: bool = False,
    return_info: bool = False,
    **kwargs,
):
    """W_p between a weighted cloud and a density given at quadrature nodes.

    The density is converted by :func:`density_to_cloud` (mass renormalised to
    1; negative values raise unless ``clip_negative=True``) and compared with
    :func:`wasserstein`.  theory §9(b): "density as weighted quadrature nodes".
    Nodes where the density carries no mass (``w_q ρ_q⁺`` at most
    :data:`NEGLIGIBLE_WEIGHT` times the mass, e.g. the far tail of a
    concentrated density) are left out of the exact solve, so only the
    support counts against ``max_exact`` (``info.m_support``).  The result
    includes the quadrature error of the density itself, of the
    order of the node spacing for W_1 and W_2 (e.g. about π / (2 n_lat) for a
    Gauss–Legendre product grid).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Particles, unit vectors.
    a : array_like, shape (n,) or None
        Particle weights summing to 1 (to 1e-9); uniform if None.
    nodes : array_like, shape (q, d)
        Quadrature nodes, unit vectors.
    weights : array_like, shape (q,)
        Positive quadrature weights.
    values : array_like, shape (q,)
        Density values at the nodes.
    p : {1, 2}
        Order.
    cost : {"geodesic", "chordal"}
        Ground distance.
    clip_negative : bool
        See :func:`density_to_cloud`.
    return_info : bool
        Also return a :class:`TransportInfo` whose ``density`` field holds the
        :class:`DensityCloud` with the mass and negative-part report.
    **kwargs
        ``method``, ``max_exact``, ``num_iter_max``, ``fallback``,
        ``n_projections``, ``seed`` of :func:`wasserstein`.  Above
        ``max_exact`` the default raises a ``ValueError`` (no silent switch to
        the sliced distance).

    Returns
    -------
    float
        W_p (radians for geodesic).
    TransportInfo
        Only with ``return_info=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import circle_quadrature, wasserstein_to_density
    >>> nodes, w = circle_quadrature(64)
    >>> rho = np.full(64, 1 / (2 * np.pi))
    >>> round(wasserstein_to_density(nodes, None, nodes, w, rho), 6)
    0.0
    """
    x, a = _as_cloud(x, a, "x", "a")
    cloud = density_to_cloud(values, nodes, weights, clip_negative=clip_negative)
    if cloud.points.shape[1] != x.shape[1]:
        raise ValueError(
            f"x and nodes must have the same dimension d, got x {x.shape} and nodes {cloud.points.shape}"
        )
    value, info = wasserstein(x, cloud.points, a, cloud.weights, p, cost, return_info=True, **kwargs)
    info = TransportInfo(**{**info.__dict__, "density": cloud})
    return (value, info) if return_info else value

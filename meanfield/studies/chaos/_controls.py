"""Controls of the W_2 error of the chaos study: exact sampling of ρ_T, the grid check of W_2, the SPDE W_2 error.

* :func:`cell_density_sampler`: iid samples of the density ρ_T given at the nodes of a
  quadrature rule, drawn *exactly* from the piecewise-constant density that equals ρ_q⁺ on
  the cell of node q — on S^1 by inverting its (piecewise-linear) CDF, on S^2 by inverting
  the CDF of the cell index and drawing uniformly (in cos θ and φ) inside the cell. The
  cells tile the sphere and the area of cell q is exactly the quadrature weight w_q (S^1:
  arcs of length 2π/n around the equispaced nodes; S^2: latitude bands whose lengths in
  cos θ are the Gauss–Legendre weights — they contain their nodes — times longitude sectors
  around the nodes), so the cell masses are the quadrature masses w_q ρ_q⁺ / Σ w ρ⁺.
* :func:`difference_w2_bound`: an upper bound of W_2 between two densities given at the
  same nodes, by leaving the common mass in place and transporting only the difference
  (exact network simplex between its positive and negative parts).
"""

from __future__ import annotations

import math

import numpy as np

from meanfield._validate import as_int
from meanfield.sphere import gauss_legendre
from meanfield.transport import circle_quadrature, density_to_cloud, sphere_quadrature, wasserstein


def _cells(d: int, n: int):
    """Quadrature nodes, weights and cell geometry of the rule with ``n`` nodes (S^1) or latitudes (S^2)."""
    if d == 2:
        nodes, weights = circle_quadrature(n)
        return nodes, weights, None
    nodes, weights = sphere_quadrature(n)
    t, w = gauss_legendre(n)
    edges = np.concatenate([[-1.0], -1.0 + np.cumsum(w)])
    edges[-1] = 1.0
    return nodes, weights, (t, edges)


def cell_density_sampler(d: int, n: int, values):
    """An exact sampler of the piecewise-constant density with value ρ_q⁺ on the cell of node q.

    Parameters
    ----------
    d : {2, 3}
        Ambient dimension (S^1 or S^2).
    n : int
        Nodes of the equispaced rule (S^1) or latitudes of the Gauss–Legendre product rule
        with ``2 n`` longitudes (S^2), as :func:`meanfield.transport.circle_quadrature` /
        :func:`meanfield.transport.sphere_quadrature`.
    values : array_like, shape (q,)
        Density at the nodes, in the node order of that rule; negative values count as 0.

    Returns
    -------
    callable
        ``sample(N, rng) -> (N, d)`` unit vectors, iid from the piecewise-constant density.

    Examples
    --------
    >>> import numpy as np
    >>> sample = cell_density_sampler(2, 4, np.array([1.0, 0.0, 0.0, 0.0]))
    >>> x = sample(1000, np.random.default_rng(0))
    >>> phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    >>> bool(phi.min() >= 0.0 and phi.max() <= np.pi / 2)
    True
    """
    n = as_int(n, "n", min_value=1)
    nodes, weights, geometry = _cells(d, n)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (nodes.shape[0],):
        raise ValueError(f"values must have shape ({nodes.shape[0]},), got {values.shape}")
    mass = weights * np.maximum(values, 0.0)
    if not mass.sum() > 0:
        raise ValueError("the density has no positive mass")
    cdf = np.cumsum(mass / mass.sum())
    cdf[-1] = 1.0

    def sample(N: int, rng) -> np.ndarray:
        N = as_int(N, "N", min_value=1)
        rng = np.random.default_rng(rng)
        u = rng.random(N)
        q = np.minimum(np.searchsorted(cdf, u, side="right"), cdf.size - 1)
        if d == 2:
            # inverse CDF: inside cell q the CDF is linear, so the position is linear in u
            lo = np.where(q > 0, cdf[np.maximum(q - 1, 0)], 0.0)
            frac = np.clip((u - lo) / np.maximum(cdf[q] - lo, np.finfo(float).tiny), 0.0, 1.0)
            phi = 2.0 * np.pi * (q + frac) / n
            return np.stack([np.cos(phi), np.sin(phi)], axis=1)
        _, edges = geometry
        n_lon = 2 * n
        i, j = np.divmod(q, n_lon)
        v = rng.random((N, 2))
        t = edges[i] + v[:, 0] * (edges[i + 1] - edges[i])
        phi = 2.0 * np.pi * (j + v[:, 1]) / n_lon  # the node sits at (j + 1/2) of its sector
        s = np.sqrt(np.maximum(1.0 - t * t, 0.0))
        x = np.stack([s * np.cos(phi), s * np.sin(phi), t], axis=1)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    return sample


def difference_w2_bound(nodes, weights, values, values_ref) -> float:
    """Upper bound of W_2 between two densities at the same nodes: move only their difference.

    With m_q = w_q ρ_q⁺ / Σ w ρ⁺ and m'_q likewise, any coupling that leaves min(m_q, m'_q)
    at node q and transports the positive part of m - m' onto its negative part is
    admissible, so W_2²(m, m') <= TV · W_2²(P, Q), TV = ½ Σ_q abs(m_q - m'_q), P and Q the
    normalised positive and negative parts (exact network simplex, geodesic cost).
    """
    a = density_to_cloud(values, nodes, weights, clip_negative=True).weights
    b = density_to_cloud(values_ref, nodes, weights, clip_negative=True).weights
    diff = a - b
    tv = 0.5 * float(np.abs(diff).sum())
    if tv == 0.0:
        return 0.0
    pos, neg = diff > 0, diff < 0
    w2 = wasserstein(nodes[pos], nodes[neg], diff[pos] / diff[pos].sum(), -diff[neg] / (-diff[neg]).sum(),
                     p=2, max_exact=max(int(pos.sum()), int(neg.sum()), 1))
    return math.sqrt(tv) * float(w2)

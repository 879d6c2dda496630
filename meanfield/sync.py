"""Synchronisation diagnostics: clusters of tokens, order parameters, time to synchronise (theory §9).

Tokens synchronise when the common noise (and attention) collapses the cloud onto a few
points. These functions measure it on token clouds (N, d) or trajectories (n_t, N, d); they
run no simulation. The simulation estimate of the top Lyapunov exponent is
:func:`meanfield.studies.synchronisation.lyapunov_estimate` (also importable from here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import as_float, as_points, as_times
from .clusters import cluster_labels as _single_linkage

__all__ = [
    "cluster_labels",
    "ClusterSummary",
    "cluster_summary",
    "order_parameter",
    "time_to_synchronisation",
]


def _weights(w, n: int) -> np.ndarray:
    if w is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be finite, non-negative, not all zero, with shape ({n},)")
    return w / w.sum()


def cluster_labels(x, tol: float) -> tuple[np.ndarray, int]:
    """Single-linkage clusters of tokens at geodesic distance ``tol``: :func:`meanfield.clusters.cluster_labels`.

    Two tokens are in the same cluster when a chain of tokens joins them with every
    link of geodesic length <= ``tol``. Computed exactly from the minimum spanning tree of
    the cloud (see :mod:`meanfield.clusters`); this entry point accepts unit vectors to 1e-6.

    Parameters
    ----------
    x : ndarray, shape (N, d)
        Unit vectors.
    tol : float, in (0, π]
        Linking distance (radians).

    Returns
    -------
    labels : ndarray of int, shape (N,)
        Cluster index of each token, clusters numbered by decreasing size.
    n_clusters : int

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]])
    >>> cluster_labels(x, 0.1)
    (array([0, 0, 1]), 2)
    """
    x = as_points(x, "x", unit_tol=1e-6)
    tol = as_float(tol, "tol", min_value=0.0, strict_min=True, max_value=np.pi)
    return _single_linkage(x / np.linalg.norm(x, axis=1, keepdims=True), tol)


@dataclass(frozen=True)
class ClusterSummary:
    """Cluster statistics of a token cloud.

    Attributes
    ----------
    n_clusters : int
    largest_fraction : float
        Mass of the largest cluster.
    fractions : ndarray
        Masses of all clusters, decreasing.
    tol : float
    """

    n_clusters: int
    largest_fraction: float
    fractions: np.ndarray
    tol: float


def cluster_summary(x, tol: float, weights=None) -> ClusterSummary:
    """Number of clusters at ``tol`` and their masses (see :func:`cluster_labels`).

    Examples
    --------
    >>> import numpy as np
    >>> s = cluster_summary(np.array([[1.0, 0], [1.0, 0], [0, 1.0]]), 0.1)
    >>> s.n_clusters, round(s.largest_fraction, 3)
    (2, 0.667)
    """
    labels, n = cluster_labels(x, tol)
    w = _weights(weights, labels.size)
    fr = np.bincount(labels, weights=w, minlength=n)
    fr = np.sort(fr)[::-1]
    return ClusterSummary(n_clusters=n, largest_fraction=float(fr[0]), fractions=fr, tol=float(tol))


def order_parameter(x, weights=None) -> np.ndarray:
    """Variance ``1 - |∫ x dμ|²`` of the token cloud (zero iff μ is a Dirac).

    Accepts one cloud (N, d) -> float, or a trajectory (n_t, N, d) -> (n_t,).
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 2:
        arr = as_points(arr, "x", unit_tol=1e-6)
        w = _weights(weights, arr.shape[0])
        m = w @ arr
        return float(1.0 - m @ m)
    if arr.ndim != 3:
        raise ValueError(f"x must have shape (N, d) or (n_t, N, d), got {arr.shape}")
    w = _weights(weights, arr.shape[1])
    m = np.einsum("j,tjd->td", w, arr)
    return 1.0 - np.einsum("td,td->t", m, m)


def time_to_synchronisation(t, trajectory, tol: float, fraction: float = 1.0) -> float:
    """First saved time at which a single cluster at ``tol`` holds at least ``fraction`` of the mass.

    Parameters
    ----------
    t : ndarray, shape (n_t,)
    trajectory : ndarray, shape (n_t, N, d)
    tol : float
        Linking distance (radians) of :func:`cluster_labels`.
    fraction : float in (0, 1]

    Returns
    -------
    float
        The time, or ``numpy.inf`` if it never happens within the trajectory.
    """
    t = as_times(t, "t", min_value=-np.inf)
    traj = np.asarray(trajectory, dtype=np.float64)
    if traj.ndim != 3 or traj.shape[0] != t.size:
        raise ValueError(f"trajectory must have shape ({t.size}, N, d), got {traj.shape}")
    fraction = as_float(fraction, "fraction", min_value=0.0, strict_min=True, max_value=1.0)
    for ti, xi in zip(t, traj):
        if cluster_summary(xi, tol).largest_fraction >= fraction - 1e-12:
            return float(ti)
    return float("inf")


def __getattr__(name: str):
    # the Lyapunov estimator runs simulations and lives with the synchronisation study;
    # it stays importable from here under its former path
    if name in ("LyapunovEstimate", "lyapunov_estimate"):
        # lazy: import cycle with meanfield.studies.synchronisation (its tasks use this module)
        from .studies.synchronisation import _lyapunov

        return getattr(_lyapunov, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

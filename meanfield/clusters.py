"""Cluster diagnostics of token clouds on S^{d-1}: counts, sizes, time to one cluster, plateaus.

Two counts, with different questions behind them:

* **Single linkage at an angular threshold θ** (:func:`cluster_count`, :func:`cluster_labels`):
  two tokens are in the same cluster iff a chain of tokens joins them with every step at
  geodesic distance <= θ. The count at every θ follows from the *merge heights* — the
  geodesic lengths of the edges of a Euclidean minimum spanning tree (MST) of the cloud —
  as ``1 + #{heights > θ}`` (:func:`merge_heights`). The MST is computed on the edges of
  the convex hull of the points, which for points on a sphere is the spherical Delaunay
  graph and contains the MST (an MST edge has an empty diametral cap, so it is a Delaunay
  edge); on S^1 the hull edges are the neighbours in angular order. Cost O(N log N) in
  d = 2, 3; in d >= 4 all pairs are used (O(N²) memory, refused above the memory limit).
* **Spectral count** (:func:`spectral_cluster_count`), no angular threshold: the eigengap
  rule of spectral clustering (U. von Luxburg, "A tutorial on spectral clustering", 2007)
  applied to the attention kernel K_ij = exp(β(<x_i, x_j> - 1)) itself. With D the row sums,
  the normalised matrix S = D^{-1/2} K D^{-1/2} has the eigenvalues 1 = ν_1 >= ν_2 >= ... of
  the random walk D^{-1} K. k clusters that the kernel separates (mutual coupling
  c = exp(-β(1 - cos φ)) << 1 at the smallest separation φ) and that are tight at its scale
  (angular radius r with βr² << 1) give k eigenvalues within O(N c) of 1 and the rest O(βr²),
  so the eigengap ν_k - ν_{k+1} is close to 1; two groups the kernel does not separate give
  ν = (1 - c)/(1 + c) for their difference mode (two point masses), which is small.
  Rule: k = argmax_{j <= J} (ν_j - ν_{j+1}), reported if that gap is >= ``min_gap``
  (default 1/2: more than half of [0, 1] lies between the cluster eigenvalues and the rest);
  otherwise the count is 0, "no cluster structure resolved". Limits: groups closer than
  about 1.5 β^{-1/2} rad (c > 1/3) count as one; a cloud without gaps and wider than
  β^{-1/2} has slowly decaying ν (uniform on S^{d-1}: ν_l = λ_l(β)/λ_0(β), gaps << 1/2),
  hence 0; at small β the kernel is wider than any cloud and everything is one cluster; a
  cloud with more than J = ``max_clusters`` separated groups (e.g. N isolated tokens at huge
  β) has no gap among the first J + 1 eigenvalues, hence 0.

Time series: :func:`cluster_count_series` applies a count to saved positions,
:func:`plateaus` finds the maximal intervals of constant count (with durations and
censoring flags), :func:`time_to_one_cluster` the first time the count reaches 1 and stays.

The metastable multi-cluster states of the deterministic attention dynamics at large β,
and whether a common noise breaks them, are the subject of Agazzi, Bruno, Mosig García,
Saviozzi, Romito, "Stochastic Scaling Limits and Synchronization by Noise in Deep
Transformer Models", arXiv 2604.26898; the study :mod:`meanfield.studies.meta` uses these
tools.

Examples
--------
>>> import numpy as np
>>> th = np.concatenate([np.full(5, 0.0), np.full(3, 2.0), np.full(4, 4.0)]) + 1e-3 * np.arange(12)
>>> x = np.stack([np.cos(th), np.sin(th)], axis=1)
>>> cluster_count(x, 0.1), cluster_sizes(x, 0.1).tolist()
(3, [5, 4, 3])
>>> spectral_cluster_count(x, beta=50.0).count
3
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import linalg
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
from scipy.spatial import ConvexHull, QhullError, cKDTree

from . import _validate
from ._validate import as_beta, as_float, as_int, as_points, as_real_array, check_cost

__all__ = [
    "merge_heights",
    "cluster_labels",
    "cluster_count",
    "cluster_sizes",
    "SpectralCount",
    "spectral_cluster_count",
    "cluster_count_series",
    "plateaus",
    "time_to_one_cluster",
]

#: Largest dimension d in which the MST is taken from the convex hull (Qhull's facet count
#: grows like N^{floor(d/2)}; above, all pairs are used).
HULL_MAX_D = 3
#: Largest N for the dense eigenvalue problem of the spectral count (8 N² bytes).
SPECTRAL_MAX_N = 4096
# Stands in for a zero length: sparse graphs drop explicit zeros (exactly coincident tokens).
_TINY = 1e-300


def _angle(chord: np.ndarray) -> np.ndarray:
    """Geodesic distance 2 arcsin(c/2) from the chord length c (accurate for small c)."""
    return 2.0 * np.arcsin(np.minimum(chord, 2.0) / 2.0)


def _hull_edges(x: np.ndarray) -> np.ndarray | None:
    """Edges (E, 2) of the convex hull of the points (the spherical Delaunay graph), or None."""
    n = x.shape[0]
    for options in (None, "QJ"):  # QJ: joggled input, for near-coincident or cocircular tokens
        try:
            hull = ConvexHull(x, qhull_options=options)
        except (QhullError, ValueError):
            continue
        s = hull.simplices
        k = s.shape[1]
        e = np.concatenate([s[:, [a, b]] for a in range(k) for b in range(a + 1, k)])
        e = np.unique(np.sort(e, axis=1), axis=0)
        missing = np.setdiff1d(np.arange(n), hull.vertices)
        if missing.size:  # tokens Qhull merged into a vertex: join each to its nearest vertex
            tree = cKDTree(x[hull.vertices])
            _, j = tree.query(x[missing])
            e = np.concatenate([e, np.stack([missing, hull.vertices[j]], axis=1)])
        return e
    return None


def _all_edges(n: int) -> np.ndarray:
    check_cost("merge_heights", seconds=0.0, memory=3 * 8.0 * n * n, parameter="N (tokens, d >= 4)", value=n,
               largest=int(math.sqrt(_validate.COST_LIMIT_BYTES / 24.0)))
    i, j = np.triu_indices(n, 1)
    return np.stack([i, j], axis=1)


def _mst(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MST edges (N - 1, 2) and their geodesic lengths (N - 1,), for unit vectors x (N, d).

    Exactly coincident tokens (a collapsed cluster) are joined to their first copy by
    zero-length edges and the tree is built on the distinct tokens only.
    """
    uniq, first, inv = np.unique(x, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if uniq.shape[0] < x.shape[0]:
        dup = np.flatnonzero(first[inv] != np.arange(x.shape[0]))
        edges = np.stack([first[inv[dup]], dup], axis=1)
        if uniq.shape[0] == 1:
            return edges, np.zeros(dup.size)
        e, h = _mst_distinct(uniq)
        return np.concatenate([first[e], edges]), np.concatenate([h, np.zeros(dup.size)])
    return _mst_distinct(x)


def _mst_distinct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, d = x.shape
    edges = _hull_edges(x) if d <= HULL_MAX_D and n > d else None
    for attempt in range(2):
        if edges is None:
            edges = _all_edges(n)
        chord = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
        g = coo_matrix((np.maximum(chord, _TINY), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
        t = minimum_spanning_tree(g).tocoo()
        if t.nnz == n - 1:
            break
        edges = None  # the candidate graph was not connected (degenerate hull): use all pairs
    lengths = _angle(np.where(t.data <= _TINY, 0.0, t.data))
    return np.stack([t.row, t.col], axis=1), lengths


def merge_heights(x) -> np.ndarray:
    """Single-linkage merge heights of a token cloud: the geodesic MST edge lengths, sorted descending.

    The number of single-linkage clusters at angular threshold θ is ``1 + #{h > θ}``.

    Parameters
    ----------
    x : ndarray, shape (N, d)
        Unit vectors.

    Returns
    -------
    ndarray, shape (N - 1,)
        Angles in radians, descending.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> np.round(merge_heights(x), 12).tolist()     # three points a quarter turn apart
    [1.570796326795, 1.570796326795]
    """
    x = as_points(x, "x")
    if x.shape[0] == 1:
        return np.zeros(0)
    return np.sort(_mst(x)[1])[::-1]


def _threshold(threshold) -> float:
    return as_float(threshold, "threshold", min_value=0.0, max_value=math.pi)


def cluster_count(x, threshold: float) -> int:
    """Number of single-linkage clusters at angular threshold ``threshold`` (radians).

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> cluster_count(x, 1.0), cluster_count(x, 2.0)
    (3, 1)
    """
    threshold = _threshold(threshold)
    return int(1 + np.count_nonzero(merge_heights(x) > threshold))


def cluster_labels(x, threshold: float) -> tuple[np.ndarray, int]:
    """Single-linkage cluster labels at angular threshold ``threshold`` (radians).

    Returns
    -------
    labels : ndarray of int, shape (N,)
        Cluster index of each token, 0 for the largest cluster, 1 for the next, ... (ties by
        the smallest token index).
    n : int
        Number of clusters.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [0.999, 0.0447], [-1.0, 0.0]])
    >>> x /= np.linalg.norm(x, axis=1, keepdims=True)
    >>> cluster_labels(x, 0.1)
    (array([0, 0, 1]), 2)
    """
    x = as_points(x, "x")
    threshold = _threshold(threshold)
    n = x.shape[0]
    if n == 1:
        return np.zeros(1, dtype=np.int64), 1
    e, h = _mst(x)
    keep = h <= threshold
    g = coo_matrix((np.ones(int(keep.sum())), (e[keep, 0], e[keep, 1])), shape=(n, n))
    k, raw = connected_components(g, directed=False)
    sizes = np.bincount(raw, minlength=k)
    first = np.full(k, n)
    np.minimum.at(first, raw, np.arange(n))
    order = np.lexsort((first, -sizes))  # largest first, ties by first token
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return rank[raw], int(k)


def cluster_sizes(x, threshold: float) -> np.ndarray:
    """Sizes of the single-linkage clusters at ``threshold`` (radians), descending, shape (n_clusters,)."""
    labels, k = cluster_labels(x, threshold)
    return np.bincount(labels, minlength=k)


@dataclass(frozen=True)
class SpectralCount:
    """Result of :func:`spectral_cluster_count`.

    Attributes
    ----------
    count : int
        Number of clusters, or 0 when no eigengap reaches ``min_gap``.
    gap : float
        The largest eigengap ν_k - ν_{k+1} among the leading eigenvalues.
    eigenvalues : ndarray
        The leading eigenvalues 1 = ν_1 >= ν_2 >= ... of D^{-1/2} K D^{-1/2}.
    """

    count: int
    gap: float
    eigenvalues: np.ndarray


def spectral_cluster_count(x, beta: float, *, max_clusters: int = 64, min_gap: float = 0.5) -> SpectralCount:
    """Threshold-free cluster count: the eigengap of the normalised attention kernel.

    K_ij = exp(β(<x_i, x_j> - 1)), S = D^{-1/2} K D^{-1/2} (D the row sums), eigenvalues
    ν_1 = 1 >= ν_2 >= ...; k = argmax_{j <= J} (ν_j - ν_{j+1}), J = min(max_clusters, N - 1),
    reported if the gap is >= ``min_gap`` and 0 otherwise (the rule and its limits are in the
    module docstring). Dense eigenvalues: N <= 4096.

    Parameters
    ----------
    x : ndarray, shape (N, d)
        Unit vectors.
    beta : float, > 0
        Kernel inverse temperature; groups closer than about 1.5 β^{-1/2} rad are one cluster.
    max_clusters : int, >= 1
    min_gap : float in (0, 1)

    Returns
    -------
    SpectralCount

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> u = rng.normal(size=(400, 3)); u /= np.linalg.norm(u, axis=1, keepdims=True)
    >>> spectral_cluster_count(u, 20.0).count          # uniform: no cluster structure
    0
    """
    x = as_points(x, "x")
    beta = as_beta(beta)
    if beta <= 0:
        raise ValueError(f"beta must be > 0 for the spectral cluster count (the kernel must favour nearby tokens), "
                         f"got {beta}")
    max_clusters = as_int(max_clusters, "max_clusters", min_value=1)
    min_gap = as_float(min_gap, "min_gap", min_value=0.0, strict_min=True, max_value=1.0)
    n = x.shape[0]
    if n > SPECTRAL_MAX_N:
        raise ValueError(f"spectral_cluster_count: N = {n} tokens is above the dense limit {SPECTRAL_MAX_N}; "
                         "subsample the cloud or use cluster_count (single linkage, O(N log N))")
    if n == 1:
        return SpectralCount(1, 1.0, np.ones(1))
    J = min(max_clusters, n - 1)
    k_mat = np.exp(beta * (x @ x.T - 1.0))
    r = 1.0 / np.sqrt(k_mat.sum(axis=1))
    k_mat *= r[:, None]
    k_mat *= r[None, :]
    nu = linalg.eigh(k_mat, eigvals_only=True, subset_by_index=[n - J - 1, n - 1])[::-1]
    gaps = nu[:-1] - nu[1:]
    k = int(np.argmax(gaps)) + 1
    gap = float(gaps[k - 1])
    return SpectralCount(k if gap >= min_gap else 0, gap, nu)


def cluster_count_series(xs, threshold: float) -> np.ndarray:
    """Single-linkage counts of a sequence of clouds (e.g. saved positions), shape (T,).

    Parameters
    ----------
    xs : ndarray, shape (T, N, d)
    threshold : float
        Angular threshold (radians).

    Examples
    --------
    >>> xs = np.array([[[1.0, 0.0], [-1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]])
    >>> cluster_count_series(xs, 0.1).tolist()
    [2, 1]
    """
    xs = as_real_array(xs, "xs")
    if xs.ndim != 3:
        raise ValueError(f"xs must have shape (T, N, d), got {xs.shape}")
    threshold = _threshold(threshold)
    return np.array([cluster_count(x, threshold) for x in xs], dtype=np.int64)


def _series(times, counts) -> tuple[np.ndarray, np.ndarray]:
    t = _validate.as_times(times, "times")
    c = np.asarray(counts)
    if c.shape != t.shape:
        raise ValueError(f"counts must have the shape of times {t.shape}, got {c.shape}")
    if c.dtype.kind not in "iu":
        c = as_real_array(c, "counts")
        if np.any(c != np.rint(c)):
            raise ValueError("counts must be whole numbers")
        c = c.astype(np.int64)
    return t, c


def plateaus(times, counts, *, min_duration: float = 0.0) -> pd.DataFrame:
    """Maximal time intervals with a constant cluster count.

    A plateau starts at the first saved time with its count and ends at the first saved
    time with a different count (so consecutive plateaus share their boundary time, and
    the durations add up to the recorded span); the last one ends at the last saved time
    and is right-censored (its true end is unobserved), the first one is left-censored
    (it may have started before the record).

    Parameters
    ----------
    times : array_like, shape (T,)
        Non-decreasing save times.
    counts : array_like of int, shape (T,)
    min_duration : float, >= 0
        Drop plateaus shorter than this (they stay out of the table; neighbours are not merged).

    Returns
    -------
    pandas.DataFrame
        Columns ``count, t_start, t_end, duration, left_censored, right_censored``, one row
        per plateau in time order.

    Examples
    --------
    >>> plateaus([0, 1, 2, 3, 4, 5], [4, 4, 3, 3, 3, 1])[["count", "t_start", "duration", "right_censored"]]
       count  t_start  duration  right_censored
    0      4      0.0       2.0           False
    1      3      2.0       3.0           False
    2      1      5.0       0.0            True
    """
    t, c = _series(times, counts)
    min_duration = as_float(min_duration, "min_duration", min_value=0.0)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(c)) + 1])
    ends = np.concatenate([starts[1:], [t.size - 1]])
    frame = pd.DataFrame({
        "count": c[starts],
        "t_start": t[starts],
        "t_end": t[ends],
        "duration": t[ends] - t[starts],
        "left_censored": starts == 0,
        "right_censored": np.arange(starts.size) == starts.size - 1,
    })
    return frame[frame["duration"] >= min_duration].reset_index(drop=True)


def time_to_one_cluster(times, counts) -> float:
    """First saved time from which the count is 1 until the end of the record; ``inf`` if never.

    ``inf`` is a right-censored observation at the horizon ``times[-1]`` (for survival
    estimates, :func:`meanfield.studies.meta.kaplan_meier`). A count that reaches 1 and leaves
    it again does not count until it returns for good.

    Examples
    --------
    >>> time_to_one_cluster([0, 1, 2, 3], [3, 1, 2, 1]), time_to_one_cluster([0, 1], [2, 2])
    (3.0, inf)
    """
    t, c = _series(times, counts)
    not_one = np.flatnonzero(c != 1)
    if not_one.size == 0:
        return float(t[0])
    last = int(not_one[-1])
    return math.inf if last == t.size - 1 else float(t[last + 1])

"""Cluster diagnostics on constructed configurations, against scipy's single linkage and exact laws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage

from meanfield.clusters import (
    cluster_count,
    cluster_count_series,
    cluster_labels,
    cluster_sizes,
    merge_heights,
    plateaus,
    spectral_cluster_count,
    time_to_one_cluster,
)


def _unit(v):
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _centres(k, d, rng):
    """k centres with pairwise angles >= 0.9 rad (S^1: equally spaced with a random phase)."""
    if d == 2:
        th = rng.uniform(0, 2 * np.pi) + 2 * np.pi * np.arange(k) / k
        return np.stack([np.cos(th), np.sin(th)], axis=1)
    while True:
        c = _unit(rng.normal(size=(k, d)))
        g = c @ c.T - 2 * np.eye(k)
        if k == 1 or np.arccos(np.clip(g.max(), -1, 1)) >= 0.9:
            return c


def _clusters(k, d, n, radius, rng):
    """k clusters of unequal sizes (>= 3 each) and angular radius ~radius; returns points, true labels."""
    sizes = 3 + rng.multinomial(n - 3 * k, rng.dirichlet(np.ones(k)))
    labels = np.repeat(np.arange(k), sizes)
    c = _centres(k, d, rng)
    x = _unit(c[labels] + radius * rng.normal(size=(n, d)) / math.sqrt(d))
    return x, labels


def _same_partition(a, b):
    pairs = {(int(i), int(j)) for i, j in zip(a, b)}
    return len(pairs) == len(set(a)) == len(set(b))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_well_separated_clusters_recovered_by_both_counts(d, k):
    rng = np.random.default_rng(10 * k + d)
    x, truth = _clusters(k, d, 240, 0.01, rng)
    assert cluster_count(x, 0.2) == k
    labels, n = cluster_labels(x, 0.2)
    assert n == k and _same_partition(labels, truth)
    assert sorted(cluster_sizes(x, 0.2).tolist()) == sorted(np.bincount(truth).tolist())
    sc = spectral_cluster_count(x, beta=50.0)
    assert sc.count == k, (sc.gap, sc.eigenvalues[: k + 2])
    assert sc.gap > 0.5


@pytest.mark.parametrize("d", [2, 3, 4])
def test_merge_heights_equal_scipy_single_linkage(d):
    """Independent method: scipy's single linkage (all pairs) gives the same heights and clusters."""
    rng = np.random.default_rng(d)
    for x in (_unit(rng.normal(size=(300, d))), _clusters(4, d, 300, 0.05, rng)[0]):
        z = linkage(x, method="single")
        ref = np.sort(2 * np.arcsin(z[:, 2] / 2))[::-1]
        np.testing.assert_allclose(merge_heights(x), ref, rtol=0, atol=1e-14)
        for theta in (0.05, 0.2, 0.6):
            f = fcluster(z, 2 * math.sin(theta / 2), criterion="distance")
            assert cluster_count(x, theta) == f.max()
            assert _same_partition(cluster_labels(x, theta)[0], f)


@pytest.mark.parametrize("d", [2, 3])
def test_one_cluster_and_coincident_tokens(d):
    rng = np.random.default_rng(3)
    x = _unit(np.ones((500, d)) + 1e-3 * rng.normal(size=(500, d)))
    assert cluster_count(x, 0.05) == 1
    assert spectral_cluster_count(x, 50.0).count == 1
    same = np.tile(x[:1], (50, 1))  # exactly coincident: every merge height is 0
    assert np.all(merge_heights(same) == 0.0) and cluster_count(same, 0.0) == 1
    tiny = _unit(np.ones((2000, d)) + 1e-13 * rng.normal(size=(2000, d)))  # below Qhull's precision
    assert cluster_count(tiny, 1e-9) == 1 and merge_heights(tiny).max() < 1e-11


def test_uniform_circle_count_matches_the_exact_mean():
    """N iid uniform points on S^1: E[#gaps > θ] = N (1 - θ/2π)^{N-1} (spacings of the circle)."""
    n, theta, reps = 200, 0.03, 400
    rng = np.random.default_rng(7)
    counts = np.empty(reps)
    for r in range(reps):
        th = rng.uniform(0, 2 * np.pi, n)
        counts[r] = cluster_count(np.stack([np.cos(th), np.sin(th)], axis=1), theta)
    exact = n * (1 - theta / (2 * np.pi)) ** (n - 1)  # P(no gap > θ) ~ 0: count = #gaps
    se = counts.std(ddof=1) / math.sqrt(reps)
    assert abs(counts.mean() - exact) <= 4 * se, (counts.mean(), exact, se)


@pytest.mark.parametrize("d", [2, 3])
def test_uniform_cloud_has_no_spectral_structure(d):
    rng = np.random.default_rng(5)
    x = _unit(rng.normal(size=(600, d)))
    sc = spectral_cluster_count(x, 30.0)
    assert sc.count == 0 and sc.gap < 0.5
    # single linkage below the nearest-neighbour scale: almost every token is its own cluster
    assert cluster_count(x, 1e-5) > 0.95 * 600


def test_spectral_count_resolution_limit():
    """Two clusters 0.05 rad apart: one cluster at β = 20 (resolution β^{-1/2} = 0.22), two at β = 1e4."""
    th = np.concatenate([np.zeros(20), np.full(20, 0.05)])
    x = np.stack([np.cos(th), np.sin(th)], axis=1)
    assert spectral_cluster_count(x, 20.0).count == 1
    assert spectral_cluster_count(x, 1e4).count == 2


def test_plateaus_of_a_synthetic_series():
    t = np.linspace(0.0, 10.0, 101)
    c = np.select([t < 2.0, t < 5.5, t < 5.6, t < 9.0], [6, 4, 3, 2], 1)
    p = plateaus(t, c)
    assert p["count"].tolist() == [6, 4, 3, 2, 1]
    np.testing.assert_allclose(p["duration"], [2.0, 3.5, 0.1, 3.4, 1.0], atol=1e-12)
    assert p["left_censored"].tolist() == [True, False, False, False, False]
    assert p["right_censored"].tolist() == [False, False, False, False, True]
    assert abs(p["duration"].sum() - 10.0) < 1e-12
    assert plateaus(t, c, min_duration=0.5)["count"].tolist() == [6, 4, 2, 1]
    assert time_to_one_cluster(t, c) == pytest.approx(9.0)
    flicker = c.copy()
    flicker[95] = 2  # leaves 1 once: one cluster only from the last return
    assert time_to_one_cluster(t, flicker) == pytest.approx(9.6)
    assert time_to_one_cluster(t, np.maximum(c, 2)) == math.inf


def test_count_series_and_bad_input():
    x = np.array([[[1.0, 0.0], [-1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]])
    assert cluster_count_series(x, 0.1).tolist() == [2, 1]
    with pytest.raises(ValueError, match="threshold"):
        cluster_count(x[0], -0.1)
    with pytest.raises(ValueError, match="beta"):
        spectral_cluster_count(x[0], -1.0)
    with pytest.raises(ValueError, match="counts"):
        plateaus([0, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="times"):
        plateaus([1, 0], [1, 2])

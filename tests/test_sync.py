"""Cluster diagnostics on constructed clouds with known clusters."""

import numpy as np
import pytest

from meanfield.sync import cluster_labels, cluster_summary, order_parameter, time_to_synchronisation


def _cluster_cloud(rng, centres, sizes, spread, d):
    pts = []
    for c, n in zip(centres, sizes):
        p = c + spread * rng.standard_normal((n, d))
        pts.append(p / np.linalg.norm(p, axis=1, keepdims=True))
    return np.concatenate(pts)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_known_clusters_are_found(d):
    rng = np.random.default_rng(0)
    centres = np.eye(d)[: min(d, 4)]  # pairwise 90 degrees apart
    sizes = [500, 300, 150, 50][: len(centres)]
    x = _cluster_cloud(rng, centres, sizes, 1e-3, d)
    labels, n = cluster_labels(x, 0.05)
    assert n == len(centres)
    # clusters are numbered by decreasing size, and each constructed cluster is one label
    start = 0
    for k, s in enumerate(sizes):
        assert np.all(labels[start : start + s] == k)
        start += s
    summ = cluster_summary(x, 0.05)
    assert summ.largest_fraction == pytest.approx(sizes[0] / sum(sizes))
    # at a linking distance above the separation, everything is one cluster
    assert cluster_labels(x, 1.7)[1] == 1


def test_chain_links_but_gap_separates():
    # points along a great circle spaced 0.01 rad: single linkage joins them at 0.012, not at 0.008
    th = np.arange(100) * 0.01
    x = np.stack([np.cos(th), np.sin(th), np.zeros_like(th)], axis=1)
    assert cluster_labels(x, 0.012)[1] == 1
    assert cluster_labels(x, 0.008)[1] == 100
    x2 = np.concatenate([x, x @ np.diag([-1, -1, 1])])  # a second chain far away
    assert cluster_labels(x2, 0.012)[1] == 2


def test_collapsed_cluster_of_many_tokens_is_cheap_and_single():
    x = np.tile([[0.0, 0.6, 0.8]], (200000, 1))
    assert cluster_labels(x, 1e-3)[1] == 1


def test_order_parameter_and_time_to_synchronisation():
    rng = np.random.default_rng(1)
    spread = _cluster_cloud(rng, [np.array([0, 0, 1.0])], [200], 0.5, 3)
    dirac = np.tile([[0, 0, 1.0]], (200, 1))
    assert order_parameter(dirac) == pytest.approx(0.0, abs=1e-14)  # N=200 sums of unit rows
    assert order_parameter(spread) > 0.05
    traj = np.stack([spread, 0.5 * (spread + dirac), dirac])
    traj /= np.linalg.norm(traj, axis=2, keepdims=True)
    assert np.allclose(order_parameter(traj), [order_parameter(s) for s in traj])
    assert time_to_synchronisation([0.0, 1.0, 2.0], traj, 1e-6) == 2.0
    assert time_to_synchronisation([0.0, 1.0], traj[:2], 1e-6) == np.inf


def test_bad_cluster_input():
    with pytest.raises(ValueError, match="tol"):
        cluster_labels(np.eye(3), 0.0)
    with pytest.raises(ValueError, match="unit"):
        cluster_labels(2 * np.eye(3), 0.1)
    with pytest.raises(ValueError, match="weights"):
        cluster_summary(np.eye(3), 0.1, weights=[1, -1, 1])

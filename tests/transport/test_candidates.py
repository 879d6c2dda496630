"""The candidate-edge network simplex against the dense one, and its optimality certificate."""

import numpy as np
import ot
import pytest
import scipy.sparse as sp
from scipy.stats import vonmises_fisher

from meanfield.harmonics import degrees, real_basis
from meanfield.sphere import sample_uniform as uniform_sphere
from meanfield.sphere import sphere_quadrature
from meanfield.transport import cost_matrix, wasserstein
from meanfield.transport import _candidates as cand


def particles_and_density(n, rng):
    """n particles of a vMF mixture against the mixture at Gauss–Legendre nodes (the chaos-study shape)."""
    nodes, w = sphere_quadrature(16)
    mus = uniform_sphere(3, 3, rng)
    dens = sum(vonmises_fisher(mu, 8.0).pdf(nodes) for mu in mus)
    b = w * dens / np.sum(w * dens)
    x = nodes[rng.choice(b.size, n, p=b)] + 0.05 * rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True), nodes, b


@pytest.mark.parametrize("case", ["uniform", "density", "chordal-p1", "d5"])
def test_sparse_solver_equals_dense_simplex(case):
    # Both return the optimum of one LP; each value is within its certified gap of it, so the two
    # differ by at most the sum of the gaps (measured: identical to 3e-17, gaps ~1e-12).
    rng = np.random.default_rng(21)
    kw, a = {}, None
    if case == "density":
        x, y, b = particles_and_density(700, rng)
    else:
        d = 5 if case == "d5" else 3
        x, y, b = uniform_sphere(600, d, rng), uniform_sphere(900, d, rng), None
        if case == "chordal-p1":
            kw = {"p": 1, "cost": "chordal"}
    dense, di = wasserstein(x, y, a, b, solver="dense", return_info=True, **kw)
    sparse, si = wasserstein(x, y, a, b, solver="sparse", return_info=True, **kw)
    assert (di.solver, si.solver) == ("dense", "sparse")
    assert si.edges < 0.1 * si.n_support * si.m_support
    assert 0 <= si.gap_bound < 1e-10 and 0 <= di.gap_bound < 1e-10
    p = kw.get("p", 2)
    assert abs(sparse**p - dense**p) <= si.gap_bound + di.gap_bound


def test_the_loop_adds_the_edges_the_certificate_finds():
    # With ten candidates per point the first restricted optimum is not the full one: the loop
    # must run more rounds, and still end at the dense optimum.
    rng = np.random.default_rng(3)
    x, y = uniform_sphere(300, 3, rng), uniform_sphere(400, 3, rng)
    a, b = np.full(400, 1 / 400), np.full(300, 1 / 300)
    M = cost_matrix(y, x, p=2)
    res = cand.sparse_emd(M, y, a, x, b, 10**7, k=10)  # measured: 3 rounds
    dense = ot.emd2(a, b, M, numItermax=10**7)
    assert res is not None and res.rounds > 1
    assert abs(res.value - dense) <= res.gap


def test_certificate_bounds_the_gap_of_a_suboptimal_restricted_plan():
    # The certificate must hold for any potentials: on a candidate set that misses the optimal
    # plan, the restricted optimum exceeds the full one, and the bound must cover the excess.
    rng = np.random.default_rng(4)
    n, m = 200, 150
    x, y = uniform_sphere(n, 3, rng), uniform_sphere(m, 3, rng)
    a, b = np.full(n, 1 / n), np.full(m, 1 / m)
    M = cost_matrix(x, y, p=2)
    i, j = cand.candidate_edges(x, a, y, b, 1)
    key = np.unique(i.astype(np.int64) * m + j)
    i, j = key // m, key % m
    value, log = ot.emd2(a, b, sp.coo_array((M[i, j], (i, j)), shape=(n, m)), numItermax=10**7, log=True)
    delta = cand._reduced_min(M, log["u"], log["v"], None)[0]
    gap = cand.certified_gap(a, b, value, log["u"], log["v"], delta)
    excess = value - ot.emd2(a, b, M, numItermax=10**7)
    assert excess > 1e-4  # the restricted plan is far from optimal here
    assert excess <= gap


@pytest.mark.parametrize("m, k", [(600, 0), (600, 5), (300, 5), (2000, 32)])
def test_nearest_neighbours_by_tree_and_by_products_are_the_nearest(m, k):
    # m >= 512: a k-d tree; below, blocks of inner products. Either way the k + 1 nearest by
    # geodesic distance (continuous random points: no ties).
    assert 300 < cand._KDTREE_MIN_POINTS <= 600  # the cases below take both paths
    rng = np.random.default_rng(12)
    p, q = uniform_sphere(700, 3, rng), uniform_sphere(m, 3, rng)
    got = cand._nearest(p, q, k)
    assert got.shape == (700, k + 1)
    want = np.argsort(cost_matrix(p, q), axis=1, kind="stable")[:, : k + 1]
    assert all(set(g) == set(w) for g, w in zip(got, want))


def test_monotone_support_is_a_feasible_plan():
    rng = np.random.default_rng(5)
    x, y = uniform_sphere(37, 3, rng), uniform_sphere(53, 3, rng)
    a, b = rng.random(37), rng.random(53)
    a, b = a / a.sum(), b / b.sum()
    i, j = cand._monotone_support(x, a, y, b)
    assert i.size <= 37 + 53 - 1
    M = sp.coo_array((np.ones(i.size), (i, j)), shape=(37, 53))
    value, log = ot.emd2(a, b, M, numItermax=10**7, log=True)
    assert log["result_code"] == 1


def test_measures_far_apart_go_to_the_dense_simplex(monkeypatch):
    # A concentrated cloud against a uniform one: the first round finds more than n + m violating
    # pairs, and the dense simplex takes over (measured: 5700 > 1024), started from the first
    # round's potentials.
    rng = np.random.default_rng(6)
    x = vonmises_fisher([0, 0, 1.0], 50.0).rvs(512, random_state=rng)
    y = uniform_sphere(512, 3, rng)
    warm = []
    emd2 = ot.emd2
    monkeypatch.setattr(ot, "emd2", lambda *a, **k: warm.append(k.get("potentials_init")) or emd2(*a, **k))
    value, info = wasserstein(x, y, solver="sparse", return_info=True)
    assert info.solver == "dense" and info.edges == 512 * 512 and info.rounds == 2  # one candidate solve first
    assert len(warm) == 1 and warm[0] is not None and warm[0][0].shape == (512,)
    cold, ci = wasserstein(x, y, solver="dense", return_info=True)
    assert ci.rounds == 1 and warm[1] is None  # no candidate solve, no warm start
    assert abs(value**2 - cold**2) <= info.gap_bound + ci.gap_bound


def test_the_hand_over_after_the_last_round_reaches_the_optimum(monkeypatch):
    # The problem of the loop test needs 3 rounds; with one allowed the dense simplex takes over
    # from the first round's potentials, and its certified value is the dense optimum.
    monkeypatch.setattr(cand, "MAX_ROUNDS", 1)
    rng = np.random.default_rng(3)
    x, y = uniform_sphere(300, 3, rng), uniform_sphere(400, 3, rng)
    a, b = np.full(400, 1 / 400), np.full(300, 1 / 300)
    M = cost_matrix(y, x, p=2)
    res = cand.sparse_emd(M, y, a, x, b, 10**7, k=10)
    assert (res.solver, res.rounds, res.edges) == ("dense", 2, M.size)
    assert 0 <= res.gap < 1e-10
    assert abs(res.value - ot.emd2(a, b, M, numItermax=10**7)) <= res.gap


def test_a_difference_of_two_densities_stays_on_candidate_edges():
    # The positive against the negative part of a signed density on a grid (the shape of the chaos
    # study's SPDE-error bound): degrees 20-24 plus a small degree 1-2 part, so that some mass
    # crosses further than the candidates reach.  The first round finds more violating pairs than
    # n + m but fewer than n m / 128: the loop must go on rather than hand over (measured on the
    # study's 4100 x 4100 problems: 3-4 rounds, 0.08-0.41x the dense time) and end at the dense
    # optimum within the certified gaps.
    nodes, w = sphere_quadrature(32)
    deg = degrees(3, 24)
    coeffs = np.random.default_rng(6).standard_normal(deg.size)
    diff = w * (real_basis(3, 24, nodes) @ (coeffs * ((deg >= 20) + 0.85 * ((deg >= 1) & (deg <= 2)))))
    pos, neg = diff > 0, diff < 0
    x, a, y, b = nodes[pos], diff[pos] / diff[pos].sum(), nodes[neg], diff[neg] / diff[neg].sum()
    n, m = x.shape[0], y.shape[0]
    assert n > m  # the solver's source side, as below
    M = cost_matrix(x, y, p=2)
    i, j = cand.candidate_edges(x, a, y, b, cand.DEFAULT_CANDIDATES)
    key = np.unique(i.astype(np.int64) * m + j)
    i, j = key // m, key % m
    _, log = ot.emd(a, b, sp.coo_array((M[i, j], (i, j)), shape=(n, m)), numItermax=10**7, log=True)
    violators = cand._reduced_min(M, log["u"], log["v"], 1e-10 * M.max())[1].size
    assert n + m < violators < n * m / 128  # measured: 3531 against 2048 and 8166
    sparse, si = wasserstein(x, y, a, b, p=2, solver="sparse", return_info=True)
    dense, di = wasserstein(x, y, a, b, p=2, solver="dense", return_info=True)
    assert si.solver == "sparse" and si.rounds > 1
    assert abs(sparse**2 - dense**2) <= si.gap_bound + di.gap_bound


def test_few_targets_keep_the_candidate_set_small():
    # 4096 uniform points against 128: 33 targets per source would be a quarter of all pairs and
    # the loop would give up at once; m // 16 + 1 = 9 per source keeps the set small, and the loop
    # ends at the dense optimum (measured: 1-2 rounds on five seeds).
    rng = np.random.default_rng(11)
    x, y = uniform_sphere(4096, 3, rng), uniform_sphere(128, 3, rng)
    i, j = cand.candidate_edges(x, np.full(4096, 1 / 4096), y, np.full(128, 1 / 128), cand.DEFAULT_CANDIDATES)
    assert np.unique(i.astype(np.int64) * 128 + j).size < 0.1 * 4096 * 128
    sparse, si = wasserstein(x, y, solver="sparse", return_info=True)
    dense, di = wasserstein(x, y, solver="dense", return_info=True)
    assert si.solver == "sparse"
    assert abs(sparse**2 - dense**2) <= si.gap_bound + di.gap_bound


def test_auto_solver_thresholds():
    rng = np.random.default_rng(7)
    small = wasserstein(uniform_sphere(300, 3, rng), uniform_sphere(300, 3, rng), return_info=True)[1]
    large = wasserstein(uniform_sphere(1024, 3, rng), uniform_sphere(1024, 3, rng), return_info=True)[1]
    assert small.solver == "dense" and large.solver == "sparse"
    # 2^18 pairs ...
    at = wasserstein(uniform_sphere(512, 3, rng), uniform_sphere(512, 3, rng), return_info=True)[1]
    below = wasserstein(uniform_sphere(511, 3, rng), uniform_sphere(512, 3, rng), return_info=True)[1]
    assert at.solver == "sparse" and below.solver == "dense"
    # ... and 32 points a side: the chaos study's particles against 8192 nodes from N = 32
    thin = wasserstein(uniform_sphere(8192, 3, rng), uniform_sphere(32, 3, rng), return_info=True)[1]
    thinner = wasserstein(uniform_sphere(8192, 3, rng), uniform_sphere(31, 3, rng), return_info=True)[1]
    assert thin.solver == "sparse" and thinner.solver == "dense"


def test_solver_name_is_checked():
    with pytest.raises(ValueError, match="solver must be one of"):
        wasserstein(np.eye(3)[:1], np.eye(3)[1:], solver="lazy")


def test_a_synchronised_cloud_stops_at_the_simplex_own_precision():
    # Two samples of a cloud of angular radius 1e-3 (max C ~ 1e-6): the potentials' round-off is
    # not proportional to max C, and a tolerance of 1e-10 max C alone would chase it round after
    # round.  The loop must stop in a few rounds, at the dense optimum within the certified gaps.
    rng = np.random.default_rng(8)
    x = vonmises_fisher([0, 0, 1.0], 1e6).rvs(600, random_state=rng)
    y = vonmises_fisher([0, 0, 1.0], 1e6).rvs(900, random_state=rng)
    sparse, si = wasserstein(x, y, solver="sparse", return_info=True)
    dense, di = wasserstein(x, y, solver="dense", return_info=True)
    assert si.solver == "sparse" and si.rounds <= 5
    assert abs(sparse**2 - dense**2) <= si.gap_bound + di.gap_bound


@pytest.mark.parametrize("kappa, sep", [(1e4, 0.05), (1e6, 0.005)])
def test_clouds_apart_by_a_few_widths_stay_on_candidate_edges(kappa, sep):
    # Two tight clusters (angular width ~ kappa^-1/2) a few widths apart, the long-horizon chaos
    # shape: the nearest targets of every source are the near edge of the other cluster, and
    # without removing the mean displacement the first round had more than n + m violators and
    # the dense simplex took over.  After it: one round, the dense optimum within the gaps.
    rng = np.random.default_rng(9)
    x = vonmises_fisher([0, 0, 1.0], kappa).rvs(900, random_state=rng)
    y = vonmises_fisher([np.sin(sep), 0, np.cos(sep)], kappa).rvs(600, random_state=rng)
    sparse, si = wasserstein(x, y, solver="sparse", return_info=True)
    dense, di = wasserstein(x, y, solver="dense", return_info=True)
    assert si.solver == "sparse" and si.rounds <= 2
    assert abs(sparse**2 - dense**2) <= si.gap_bound + di.gap_bound


def test_aligned_sources_remove_the_mean_displacement():
    rng = np.random.default_rng(10)
    x = vonmises_fisher([0, 0, 1.0], 1e4).rvs(50, random_state=rng)
    y = x @ np.array([[np.cos(0.1), 0, -np.sin(0.1)], [0, 1, 0], [np.sin(0.1), 0, np.cos(0.1)]])
    a = np.full(50, 1 / 50)
    s = cand._aligned(x, a, y, a)
    assert np.allclose(np.linalg.norm(s, axis=1), 1.0)
    # A rigid rotation by θ = 0.1 of a cluster of width w = kappa^-1/2 = 0.01 leaves a residual of
    # order w θ = 1e-3 (measured: 1.3e-4), against 0.1 before the shift.
    assert np.max(np.linalg.norm(x - y, axis=1)) > 0.09
    assert np.max(np.linalg.norm(s - y, axis=1)) < 0.01 * 0.1

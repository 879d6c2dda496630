"""Tests of meanfield.transport: exact W_p, circle solver, sliced estimate,
particles against densities, harmonic moments, input validation (theory §9(b), (c))."""

import warnings

import numpy as np
import ot
import pytest
from scipy.spatial.transform import Rotation
from scipy.stats import vonmises_fisher

from meanfield import transport as tr
from meanfield.transport import (
    SlicedFallbackWarning,
    circle_quadrature,
    cost_matrix,
    density_moments,
    density_to_cloud,
    empirical_moments,
    harmonic_labels,
    observable_errors,
    real_harmonics,
    sliced_wasserstein_sphere,
    sphere_quadrature,
    wasserstein,
    wasserstein_circle,
    wasserstein_to_density,
)


def uniform_sphere(n, d, rng):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def random_weights(n, rng):
    w = rng.random(n) + 0.1
    return w / w.sum()


def equator(theta):
    return np.stack([np.cos(theta), np.sin(theta), np.zeros_like(theta)], axis=1)


def unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ----------------------------------------------------------------------------
# exact W_p
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("cost", ["geodesic", "chordal"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("d", [3, 6])
def test_distance_of_cloud_to_itself_is_zero(cost, p, d):
    rng = np.random.default_rng(1)
    x = uniform_sphere(200, d, rng)
    a = random_weights(200, rng)
    # The cost diagonal is exactly 0 (2 atan2(0, 2) = 0), so the optimum is exactly 0.
    assert wasserstein(x, x, a, a, p=p, cost=cost) == 0.0


@pytest.mark.parametrize("p", [1, 2])
def test_circle_distance_of_cloud_to_itself_is_round_off(p):
    rng = np.random.default_rng(2)
    theta = rng.uniform(0, 2 * np.pi, 300)
    a = random_weights(300, rng)
    # W_2 is the square root of W_2^2, whose round-off is ~1e-19 turns^2 -> ~1e-9 rad.
    assert wasserstein_circle(theta, theta, a, a, p=p) < 1e-8
    assert wasserstein(equator(theta)[:, :2], equator(theta)[:, :2], a, a, p=p) < 1e-8


@pytest.mark.parametrize("theta", [1e-3, 0.3, 1.0, 2.5, 3.1])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_dirac_moved_along_great_circle(theta, p, d):
    rng = np.random.default_rng(3)
    x = uniform_sphere(1, d, rng)
    e = rng.standard_normal((1, d))
    e -= (e @ x.T) * x
    e /= np.linalg.norm(e)
    y = np.cos(theta) * x + np.sin(theta) * e
    # Round-off only: the geodesic cost 2 atan2(|x-y|, |x+y|) is accurate to a few ulp.
    assert wasserstein(x, y, p=p) == pytest.approx(theta, rel=1e-12, abs=1e-14)
    assert wasserstein(x, y, p=p, cost="chordal") == pytest.approx(2 * np.sin(theta / 2), rel=1e-12)


def test_two_diracs_each_moved_by_the_same_angle():
    # Half the mass at e1, half at -e1; rotation about e3 by 0.4 moves each by 0.4.
    x = np.array([[1.0, 0, 0], [-1.0, 0, 0]])
    y = Rotation.from_rotvec([0, 0, 0.4]).apply(x)
    assert wasserstein(x, y) == pytest.approx(0.4, rel=1e-12)
    assert wasserstein(x, y, p=1) == pytest.approx(0.4, rel=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sphere_emd_matches_circle_solvers_on_the_equator(p, seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(20, 300, size=2)
    t1 = rng.vonmises(0.3, 2.0, n)
    t2 = rng.uniform(-np.pi, np.pi, m)
    a, b = random_weights(n, rng), random_weights(m, rng)
    exact = wasserstein(equator(t1), equator(t2), a, b, p=p)  # d = 3: network simplex
    # Both are exact solvers; the differences are round-off (and POT's eps = 1e-12 on the cut).
    assert wasserstein_circle(t1, t2, a, b, p=p) == pytest.approx(exact, abs=1e-9)
    assert wasserstein_circle(t1, t2, a, b, p=p, solver="pot") == pytest.approx(exact, abs=1e-9)
    assert wasserstein(equator(t1)[:, :2], equator(t2)[:, :2], a, b, p=p) == pytest.approx(exact, abs=1e-9)


def test_circle_solver_handles_ties_and_grids():
    # Equispaced grids with equal weights create many coincident kinks of the cut cost.
    t1 = np.linspace(0, 2 * np.pi, 60, endpoint=False)
    t2 = np.round(np.linspace(0.05, 2 * np.pi + 0.05, 45, endpoint=False), 1)
    for p in (1, 2):
        exact = wasserstein(equator(t1), equator(t2), p=p)
        assert wasserstein_circle(t1, t2, p=p) == pytest.approx(exact, abs=1e-9)


def test_circle_accepts_angles_or_points_and_takes_the_short_way():
    assert wasserstein_circle([0.1], [6.2]) == pytest.approx(2 * np.pi - 6.1, rel=1e-12)
    t = np.array([0.1, 2.0, 4.0])
    s = np.array([0.5, 2.2, 5.0])
    pts = np.stack([np.cos(t), np.sin(t)], axis=1)
    spts = np.stack([np.cos(s), np.sin(s)], axis=1)
    assert wasserstein_circle(pts, spts) == pytest.approx(wasserstein_circle(t, s), abs=1e-12)
    assert wasserstein_circle(t + 2 * np.pi, s - 4 * np.pi) == pytest.approx(wasserstein_circle(t, s), abs=1e-12)


def test_return_info_of_exact_path():
    rng = np.random.default_rng(4)
    x, y = uniform_sphere(30, 3, rng), uniform_sphere(20, 3, rng)
    value, info = wasserstein(x, y, return_info=True)
    assert info.method == "emd" and info.exact and info.result_code == 1
    assert info.value == value and (info.n, info.m) == (30, 20)
    assert info.cost_matrix_bytes == 8 * 30 * 20


@pytest.mark.parametrize("cost,p", [("geodesic", 2), ("chordal", 1)])
def test_small_cloud_against_large_weighted_cloud_matches_pot_in_the_given_orientation(cost, p, monkeypatch):
    # The simplex gets the larger cloud as its source side; W_p is symmetric, so the value must be
    # POT's on the (n, m) problem as given, and the same with the arguments swapped. Both are the
    # optimum of one LP, a sum of at most n + m - 1 plan entries: they may differ by its round-off,
    # (n + m) machine epsilons relative (measured: 3e-16).
    rng = np.random.default_rng(12)
    n, m = 40, 300
    x, y = uniform_sphere(n, 3, rng), uniform_sphere(m, 3, rng)
    b = rng.gamma(0.5, size=m)
    b /= b.sum()
    a = np.full(n, 1 / n)
    direct = ot.emd2(a, b, cost_matrix(x, y, cost, p), numItermax=10**7) ** (1 / p)
    shapes = []
    emd2 = tr.ot.emd2

    def spy(a_, b_, M, **kw):
        shapes.append(M.shape)
        return emd2(a_, b_, M, **kw)

    monkeypatch.setattr(tr.ot, "emd2", spy)
    value, info = wasserstein(x, y, None, b, p=p, cost=cost, return_info=True)
    swapped = wasserstein(y, x, b, None, p=p, cost=cost)
    assert shapes == [(m, n), (m, n)]  # the larger cloud is the source side both times
    assert info.result_code == 1 and (info.n, info.m) == (n, m)
    assert info.cost_matrix_bytes == 8 * n * m
    rel = (n + m) * np.finfo(float).eps
    assert value == pytest.approx(direct, rel=rel)
    assert swapped == pytest.approx(value, rel=rel)


def test_unconverged_network_simplex_raises(monkeypatch):
    rng = np.random.default_rng(5)
    x, y = uniform_sphere(10, 3, rng), uniform_sphere(10, 3, rng)

    def fake_emd2(a, b, M, numItermax, log):
        return 1.0, {"result_code": 0, "warning": "numItermax reached before optimality"}

    monkeypatch.setattr(tr.ot, "emd2", fake_emd2)
    with pytest.raises(RuntimeError, match="result_code=0"):
        wasserstein(x, y)


def test_size_limit_raises_by_default_and_names_the_remedies():
    rng = np.random.default_rng(6)
    x, y = uniform_sphere(40, 3, rng), uniform_sphere(30, 3, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning, no silent switch: an error
        with pytest.raises(ValueError, match="max_exact") as err:
            wasserstein(x, y, max_exact=20)
    for remedy in ("Subsample", "coarser quadrature", "raise max_exact", "method='sliced'"):
        assert remedy in str(err.value)
    with pytest.raises(ValueError, match="max_exact"):
        wasserstein(x, y, max_exact=20, fallback="raise")
    # n m = 1200 <= 35^2: exact.
    assert wasserstein(x, y, max_exact=35, return_info=True)[1].method == "emd"


def test_sliced_only_when_asked_and_named_as_such():
    rng = np.random.default_rng(6)
    x, y = uniform_sphere(40, 3, rng), uniform_sphere(30, 3, rng)
    sliced = sliced_wasserstein_sphere(x, y, n_projections=64, seed=0)
    # explicit method: always the sliced distance, no warning, honest name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, info = wasserstein(x, y, method="sliced", n_projections=64, return_info=True)
    assert value == sliced
    assert info.method == "sliced" and info.distance == "sliced_wasserstein" and not info.exact
    # opted-in fallback above the limit: warned and named
    with pytest.warns(SlicedFallbackWarning, match="max_exact"):
        value, info = wasserstein(x, y, max_exact=20, fallback="sliced", n_projections=64, return_info=True)
    assert info.method == "sliced" and not info.exact and "max_exact" in info.message
    assert info.distance == "sliced_wasserstein"
    assert value == sliced
    # the exact path is named W_p
    info = wasserstein(x, y, return_info=True)[1]
    assert info.distance == "wasserstein" and info.exact
    # the sliced distance is geodesic only
    with pytest.raises(ValueError, match="geodesic sliced distance only"):
        wasserstein(x, y, cost="chordal", method="sliced")
    with pytest.raises(ValueError, match="geodesic sliced distance only"):
        wasserstein(x, y, cost="chordal", max_exact=20, fallback="sliced")


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("cost", ["geodesic", "chordal"])
def test_negligible_weights_are_dropped_before_the_simplex(p, cost):
    rng = np.random.default_rng(7)
    x, y = uniform_sphere(30, 3, rng), uniform_sphere(25, 3, rng)
    a, b = random_weights(30, rng), random_weights(25, rng)
    exact = wasserstein(x, y, a, b, p=p, cost=cost)
    # pad y with 40 extra points: 25 of zero weight, 15 of negligible weight (1e-17 of the total)
    yp = np.concatenate([y, uniform_sphere(40, 3, rng)])
    bp = np.concatenate([b, np.zeros(25), np.full(15, 1e-17)])
    # 30 * 65 = 1950 > 40^2 = 1600 >= 30 * 25: exact only because the padding is dropped
    value, info = wasserstein(x, yp, a, bp, p=p, cost=cost, max_exact=40, return_info=True)
    assert info.method == "emd" and (info.n, info.m) == (30, 65)
    assert (info.n_support, info.m_support) == (30, 25)
    assert info.cost_matrix_bytes == 8 * 30 * 25
    assert value == pytest.approx(exact, rel=1e-12, abs=1e-14)
    # zero weights on the other side too
    xp = np.concatenate([x, uniform_sphere(5, 3, rng)])
    ap = np.concatenate([a, np.zeros(5)])
    value, info = wasserstein(xp, yp, ap, bp, p=p, cost=cost, return_info=True)
    assert (info.n_support, info.m_support) == (30, 25)
    assert value == pytest.approx(exact, rel=1e-12, abs=1e-14)
    # weights twice the threshold are kept
    bk = np.concatenate([b * (1 - 50e-15), np.full(25, 2e-15)])
    assert wasserstein(x, yp[:50], a, bk, p=p, cost=cost, return_info=True)[1].m_support == 50


# Known-answer case: vMF(κ = 400) on S^2 and the same law rotated by 0.2 rad about
# an axis orthogonal to its mean.  W_2 is the rotation angle to O(1/κ): the rotation
# moves every point of the cap by 0.2 sin(angle to the axis) ≈ 0.2, and for such a
# concentrated law (σ ≈ 0.05 rad) the plan is close to a translation in the tangent plane.
KAPPA, ANGLE = 400.0, 0.2


def _vmf_pair(n, seed):
    rng = np.random.default_rng(seed)
    mu = np.array([0.0, 0.0, 1.0])
    rot = Rotation.from_rotvec([ANGLE, 0.0, 0.0])
    x = unit(vonmises_fisher(mu, KAPPA).rvs(n, random_state=rng))
    y = unit(vonmises_fisher(rot.apply(mu), KAPPA).rvs(n, random_state=rng))
    return x, y, rot


def test_known_answer_two_concentrated_vmf_rotated_by_0_2():
    x, y, rot = _vmf_pair(800, 20)
    value, info = wasserstein(x, y, return_info=True)
    # the rotation itself is a transport plan of cost <= 0.2, so W_2(x, R x) <= 0.2 exactly
    assert wasserstein(x, rot.apply(x)) <= ANGLE
    assert info.method == "emd" and info.distance == "wasserstein"
    assert value == pytest.approx(ANGLE, abs=0.01), value
    sliced = sliced_wasserstein_sphere(x, y)
    # the sliced distance is ~28 % larger here: it must never be returned as W_2
    assert sliced / value > 1.15, (sliced, value)
    with pytest.raises(ValueError, match="max_exact"):
        wasserstein(x, y, max_exact=500)


def test_known_answer_particles_vs_concentrated_density_uses_its_support_only():
    x, _, rot = _vmf_pair(600, 21)
    nodes, w = sphere_quadrature(64)  # 8192 nodes, spacing ~0.05 rad ~ the width of the cap
    mean = rot.apply([0.0, 0.0, 1.0])
    rho = KAPPA / (2 * np.pi * (1 - np.exp(-2 * KAPPA))) * np.exp(KAPPA * (nodes @ mean - 1.0))
    assert np.sum(w * rho == 0.0) > 0  # the far tail underflows to exact zeros
    # 600 * 8192 > 1500^2: only the support (|w ρ| > 1e-15 of the mass) is handed to the simplex
    value, info = wasserstein_to_density(x, None, nodes, w, rho, max_exact=1500, return_info=True)
    assert info.method == "emd" and info.distance == "wasserstein"
    assert info.m == 8192 and info.m_support < 1500**2 / 600
    support = np.sum(w * rho > 1e-15 * np.sum(w * rho))
    assert info.m_support == support
    assert value == pytest.approx(ANGLE, abs=0.02), value
    # too large even after dropping: an error naming the limit, never the sliced value
    with pytest.raises(ValueError, match=r"max_exact.*negligible weight"):
        wasserstein_to_density(x, None, nodes, w, rho, max_exact=300)


def test_cost_matrix_geodesic_is_accurate_near_zero_and_pi():
    eps = 1e-10
    x = np.array([[1.0, 0.0, 0.0]])
    y = np.array([[np.cos(eps), np.sin(eps), 0.0], [-np.cos(eps), np.sin(eps), 0.0]])
    m = cost_matrix(x, y)
    # arccos(<x, y>) would give 0 and pi exactly here (errors 1e-10 relative to eps).
    assert m[0, 0] == pytest.approx(eps, rel=1e-6)
    assert np.pi - m[0, 1] == pytest.approx(eps, rel=1e-6)


# ----------------------------------------------------------------------------
# sliced
# ----------------------------------------------------------------------------


def sliced_families(seed):
    rng = np.random.default_rng(seed)
    mu = np.array([0.0, 0.0, 1.0])
    x = uniform_sphere(300, 3, rng)
    caps = np.concatenate(
        [vonmises_fisher(mu, 20).rvs(150, random_state=rng), vonmises_fisher(-mu, 20).rvs(150, random_state=rng)]
    )
    fam = {
        "iid uniform": (uniform_sphere(300, 3, rng), uniform_sphere(300, 3, rng)),
        "rotated cloud": (x, Rotation.from_rotvec([0, 0, 0.3]).apply(x)),
        "vMF shift": (
            vonmises_fisher(mu, 10).rvs(300, random_state=rng),
            Rotation.from_rotvec([0.5, 0, 0]).apply(vonmises_fisher(mu, 10).rvs(300, random_state=rng)),
        ),
        "two caps vs one": (caps, vonmises_fisher(np.array([1.0, 0, 0]), 20).rvs(300, random_state=rng)),
    }
    for theta in (0.3, 1.0, 2.5):
        fam[f"Dirac {theta}"] = (np.array([[1.0, 0, 0]]), np.array([[np.cos(theta), np.sin(theta), 0.0]]))
    return {k: (unit(np.atleast_2d(u)), unit(np.atleast_2d(v))) for k, (u, v) in fam.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_sliced_within_documented_band(seed):
    # Documented: 0.3 <= SSW_2 / W_2 <= 2.0 on these families (measured 0.39 ... 1.88).
    for name, (x, y) in sliced_families(seed).items():
        ratio = sliced_wasserstein_sphere(x, y, seed=seed) / wasserstein(x, y)
        assert 0.3 <= ratio <= 2.0, (name, ratio)


def test_sliced_is_not_an_upper_bound_for_close_diracs():
    # The projection onto a great circle is not Lipschitz: SSW_2 > W_2 for close Diracs.
    theta = 0.05
    x, y = np.array([[1.0, 0, 0]]), np.array([[np.cos(theta), np.sin(theta), 0.0]])
    value, se = sliced_wasserstein_sphere(x, y, n_projections=4096, seed=3, return_se=True)
    assert value - 3 * se > theta


def test_sliced_matches_pot_slice_by_slice_in_radians():
    rng = np.random.default_rng(7)
    x, y = uniform_sphere(300, 4, rng), uniform_sphere(200, 4, rng)
    b = random_weights(200, rng)
    q, _ = np.linalg.qr(rng.standard_normal((40, 4, 2)))
    ours = sliced_wasserstein_sphere(x, y, b=b, projections=q)
    pot = ot.sliced_wasserstein_sphere(x, y, b=b, projections=q, n_projections=40)
    # POT works in turns (arc length / 2π) with its own cut tolerance eps = 1e-6.
    assert ours == pytest.approx(2 * np.pi * pot, rel=1e-6)


def test_sliced_equals_exact_on_the_circle():
    # On S^1 each slice is a rotation or reflection, an isometry.
    rng = np.random.default_rng(8)
    x, y = uniform_sphere(50, 2, rng), uniform_sphere(70, 2, rng)
    assert sliced_wasserstein_sphere(x, y, n_projections=8) == pytest.approx(wasserstein(x, y), rel=1e-7)


def test_sliced_standard_error_matches_seed_to_seed_spread():
    rng = np.random.default_rng(9)
    x, y = uniform_sphere(200, 3, rng), uniform_sphere(200, 3, rng)
    runs = [sliced_wasserstein_sphere(x, y, n_projections=64, seed=s, return_se=True) for s in range(20)]
    values, ses = np.array(runs).T
    # The sample sd of 20 values has relative sd ~ 1/sqrt(38) = 0.16; allow a factor 2.
    assert 0.5 < values.std(ddof=1) / ses.mean() < 2.0


# ----------------------------------------------------------------------------
# particles against a density
# ----------------------------------------------------------------------------


def fitted_slope(ns, samples):
    """Slope of log(mean) on log N and its standard error from the replica spread."""
    mean = samples.mean(axis=1)
    se_log = samples.std(axis=1, ddof=1) / np.sqrt(samples.shape[1]) / mean
    lx = np.log(ns)
    xc = lx - lx.mean()
    slope = np.polyfit(lx, np.log(mean), 1)[0]
    return slope, np.sqrt(np.sum(xc**2 * se_log**2)) / np.sum(xc**2), mean


def test_particles_vs_uniform_density_on_the_circle_rate():
    nodes, w = circle_quadrature(4096)
    rho = np.full(4096, 1 / (2 * np.pi))
    ns = np.array([16, 64, 256, 1024, 4096])
    rng = np.random.default_rng(10)
    samples = np.array(
        [[wasserstein_to_density(uniform_sphere(n, 2, rng), None, nodes, w, rho) for _ in range(16)] for n in ns]
    )
    slope, se, mean = fitted_slope(ns, samples)
    assert np.all(np.diff(mean) < 0)
    # Theory on S^1: E W_2 ~ N^{-1/2}; the grid error (~π/4096) is 1 % of W_2 at N = 4096.
    assert abs(slope + 0.5) < 3 * se + 0.02, (slope, se)


def test_particles_vs_uniform_density_on_the_sphere_rate():
    nodes, w = sphere_quadrature(16)  # 512 nodes; W_2(grid, uniform) ~ 0.015 << W_2 at N = 512
    rho = np.full(len(w), 1 / (4 * np.pi))
    ns = np.array([32, 64, 128, 256, 512])
    rng = np.random.default_rng(11)
    samples = np.array(
        [[wasserstein_to_density(uniform_sphere(n, 3, rng), None, nodes, w, rho) for _ in range(6)] for n in ns]
    )
    slope, se, mean = fitted_slope(ns, samples)
    assert np.all(np.diff(mean) < 0)
    # Theory on S^2: E W_2 ~ sqrt(log N / N), local slope -1/2 + 1/(2 ln N), so the
    # fitted slope lies in [-1/2, -1/2 + 1/(2 ln 32)] = [-0.5, -0.356] up to noise.
    assert -0.5 - 3 * se <= slope <= -0.5 + 1 / (2 * np.log(ns[0])) + 3 * se, (slope, se)


def test_particles_vs_vmf_density_decreases():
    kappa = 5.0
    nodes, w = sphere_quadrature(16)
    rho = kappa / (4 * np.pi * np.sinh(kappa)) * np.exp(kappa * nodes[:, 2])
    rng = np.random.default_rng(12)
    dist = vonmises_fisher(np.array([0.0, 0.0, 1.0]), kappa)
    means = [
        np.mean([wasserstein_to_density(unit(dist.rvs(n, random_state=rng)), None, nodes, w, rho) for _ in range(4)])
        for n in (32, 128, 512)
    ]
    assert means[0] > means[1] > means[2]


def test_density_to_cloud_reports_and_clips_negative_mass():
    nodes, w = circle_quadrature(4)
    values = np.array([0.3, -0.1, 0.2, 0.0])
    with pytest.raises(ValueError, match="negative mass"):
        density_to_cloud(values, nodes, w)
    cloud = density_to_cloud(values, nodes, w, clip_negative=True)
    h = np.pi / 2
    assert cloud.clipped
    assert cloud.negative_mass == pytest.approx(0.1 * h)
    assert cloud.negative_fraction == pytest.approx(0.1 / 0.6)
    assert cloud.signed_mass == pytest.approx(0.4 * h)
    assert cloud.mass == pytest.approx(0.5 * h)
    assert cloud.min_value == -0.1
    np.testing.assert_allclose(cloud.weights, [0.6, 0.0, 0.4, 0.0])


def test_density_to_cloud_renormalises_and_reports_mass():
    nodes, w = sphere_quadrature(8)
    cloud = density_to_cloud(np.full(len(w), 0.5 / (4 * np.pi)), nodes, w)
    assert cloud.mass == pytest.approx(0.5, rel=1e-13)
    assert not cloud.clipped and cloud.negative_mass == 0.0
    assert cloud.weights.sum() == pytest.approx(1.0, rel=1e-14)


def test_wasserstein_to_density_reports_the_density():
    nodes, w = circle_quadrature(16)
    values = np.cos(np.arctan2(nodes[:, 1], nodes[:, 0])) + 0.2
    value, info = wasserstein_to_density(nodes[:3], None, nodes, w, values, clip_negative=True, return_info=True)
    assert info.density.clipped and info.density.negative_mass > 0
    assert info.value == value


# ----------------------------------------------------------------------------
# harmonic moments
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("d, lmax", [(2, 5), (3, 4)])
def test_real_harmonics_are_orthonormal(d, lmax):
    nodes, w = circle_quadrature(32) if d == 2 else sphere_quadrature(12)
    y = real_harmonics(nodes, lmax)
    # The rules are exact for the degree-2 lmax products: error is round-off.
    np.testing.assert_allclose(y.T @ (w[:, None] * y), np.eye(y.shape[1]), atol=1e-12)
    assert y.shape[1] == harmonic_labels(d, lmax).shape[0]


def test_degree_one_harmonics_are_the_coordinates():
    rng = np.random.default_rng(13)
    x = uniform_sphere(50, 3, rng)
    y = real_harmonics(x, 1)
    # Package convention (no (-1)^m): sqrt(2) Re/Im of the Condon–Shortley Y_1^1 = -c (x + i y).
    np.testing.assert_allclose(y[:, 1:], np.sqrt(3 / (4 * np.pi)) * x[:, [1, 2, 0]] * [-1, 1, -1], atol=1e-13)
    assert harmonic_labels(3, 2)[[0, 1, 2, 3, 8]].tolist() == [[0, 0], [1, -1], [1, 0], [1, 1], [2, 2]]
    assert harmonic_labels(2, 2).tolist() == [[0, 0], [1, 1], [1, -1], [2, 2], [2, -2]]
    phi = np.array([0.3, 1.9])
    circle = real_harmonics(np.stack([np.cos(phi), np.sin(phi)], axis=1), 2)
    expected = np.stack([np.full(2, 0.5), np.cos(phi), np.sin(phi), np.cos(2 * phi), np.sin(2 * phi)], axis=1)
    np.testing.assert_allclose(circle * np.sqrt(np.pi), expected * [np.sqrt(2), 1, 1, 1, 1], atol=1e-14)


def test_degree_two_real_harmonics_match_closed_forms():
    rng = np.random.default_rng(16)
    x, y, z = uniform_sphere(40, 3, rng).T
    c = np.sqrt(15 / (4 * np.pi))
    # Condon–Shortley: Y_2^1 = -sqrt(15/8π) z (x + i y), Y_2^2 = sqrt(15/32π) (x + i y)^2.
    expected = np.stack(
        [c * x * y, -c * y * z, np.sqrt(5 / (16 * np.pi)) * (3 * z**2 - 1), -c * x * z, c / 2 * (x**2 - y**2)], axis=1
    )
    np.testing.assert_allclose(real_harmonics(np.stack([x, y, z], axis=1), 2)[:, 4:], expected, atol=1e-13)


def test_moments_of_a_quadrature_cloud_equal_the_density_moments():
    nodes, w = sphere_quadrature(10)
    rho = np.exp(2 * nodes[:, 0]) / 10
    cloud = density_to_cloud(rho, nodes, w)
    np.testing.assert_allclose(
        empirical_moments(cloud.points, cloud.weights, lmax=3),
        density_moments(nodes, w, rho, lmax=3) / cloud.mass,
        atol=1e-14,
    )


def test_observable_errors_at_monte_carlo_scale():
    rng = np.random.default_rng(14)
    nodes, w = sphere_quadrature(8)
    rho = np.full(len(w), 1 / (4 * np.pi))
    n = 4000
    err = observable_errors(uniform_sphere(n, 3, rng), None, nodes, w, rho, lmax=2)
    # Under the uniform law Y_lm(X) has sd 1/sqrt(4π) for l >= 1 (and 0 for l = 0).
    assert err[0] < 1e-12
    assert np.all(err[1:] < 4 / np.sqrt(4 * np.pi * n))
    err_f = observable_errors(uniform_sphere(n, 3, rng), None, nodes, w, rho, f=lambda p: p[:, 2] ** 2)
    assert err_f.shape == (1,) and err_f[0] < 4 * np.sqrt(4 / 45 / n)  # Var(z^2) = 1/5 - 1/9


# ----------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------


@pytest.fixture
def pair():
    rng = np.random.default_rng(15)
    return uniform_sphere(5, 3, rng), uniform_sphere(4, 3, rng)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"y": np.eye(4)[:2]}, ValueError, "same dimension"),
        ({"a": [-0.1, 0.3, 0.3, 0.3, 0.2]}, ValueError, "non-negative"),
        ({"a": [0.2, 0.2, 0.2, 0.2, 0.3]}, ValueError, "sum to 1 within 1e-09"),
        ({"a": [0.25] * 4}, ValueError, r"shape \(5,\)"),
        ({"a": [np.nan, 0.25, 0.25, 0.25, 0.25]}, ValueError, "NaN"),
        ({"x": np.zeros((0, 3))}, ValueError, "at least one point"),
        ({"x": 2 * np.eye(3)}, ValueError, "unit vectors"),
        ({"x": np.array([[np.nan, 0, 1.0]])}, ValueError, "NaN"),
        ({"x": "abc"}, TypeError, "array of shape"),
        ({"p": 3}, ValueError, "p must be 1 or 2"),
        ({"cost": "euclid"}, ValueError, "cost must be one of"),
        ({"fallback": "none"}, ValueError, "fallback must be one of"),
        ({"method": "approx"}, ValueError, "method must be one of"),
        ({"num_iter_max": 1000}, ValueError, "num_iter_max must be >="),
        ({"max_exact": 0}, ValueError, "max_exact must be >="),
    ],
)
def test_wasserstein_rejects_bad_input(pair, kwargs, error, match):
    args = {"x": pair[0], "y": pair[1], **kwargs}
    with pytest.raises(error, match=match):
        wasserstein(**args)


def test_weights_within_tolerance_are_accepted(pair):
    a = np.full(5, 0.2)
    a[0] += 5e-10
    assert wasserstein(pair[0], pair[1], a) >= 0


@pytest.mark.parametrize(
    "x, match",
    [([], "at least one angle"), ([0.1, np.inf], "NaN or infinite"), (np.eye(3), "d = 2 columns")],
)
def test_circle_rejects_bad_input(x, match):
    with pytest.raises(ValueError, match=match):
        wasserstein_circle(x, [0.0])


def test_circle_rejects_unknown_solver():
    with pytest.raises(ValueError, match="solver must be one of"):
        wasserstein_circle([0.0], [1.0], solver="fast")


def test_sliced_rejects_bad_input(pair):
    with pytest.raises(ValueError, match="n_projections must be >= 1"):
        sliced_wasserstein_sphere(*pair, n_projections=0)
    with pytest.raises(ValueError, match="orthonormal"):
        sliced_wasserstein_sphere(*pair, projections=np.ones((2, 3, 2)))
    with pytest.raises(ValueError, match=r"shape \(K, 3, 2\)"):
        sliced_wasserstein_sphere(*pair, projections=np.ones((2, 4, 2)))
    with pytest.raises(TypeError, match="seed"):
        sliced_wasserstein_sphere(*pair, seed="a")


@pytest.mark.parametrize(
    "change, match",
    [
        ({"weights": np.zeros(8)}, "positive quadrature weights"),
        ({"values": np.ones(7)}, r"shape \(8,\)"),
        ({"values": np.full(8, np.nan)}, "NaN"),
        ({"values": np.zeros(8)}, "positive mass"),
        ({"nodes": np.ones((8, 2))}, "unit vectors"),
    ],
)
def test_density_inputs_are_checked(change, match):
    nodes, w = circle_quadrature(8)
    args = {"values": np.ones(8), "nodes": nodes, "weights": w, **change}
    with pytest.raises(ValueError, match=match):
        density_to_cloud(**args)


def test_density_and_particles_must_share_dimension():
    nodes, w = circle_quadrature(8)
    with pytest.raises(ValueError, match="same dimension"):
        wasserstein_to_density(np.eye(3), None, nodes, w, np.ones(8))
    with pytest.raises(ValueError, match="same dimension"):
        observable_errors(np.eye(3), None, nodes, w, np.ones(8))


def test_moments_reject_bad_input():
    with pytest.raises(ValueError, match="d = 2 or 3"):
        empirical_moments(np.eye(4))
    with pytest.raises(ValueError, match="lmax must be >= 0"):
        real_harmonics(np.eye(3), -1)
    with pytest.raises(TypeError, match="callable"):
        nodes, w = circle_quadrature(8)
        observable_errors(nodes, None, nodes, w, np.ones(8), f=3)
    nodes, w = circle_quadrature(8)
    with pytest.raises(ValueError, match="f\\(x\\) contains NaN"):
        observable_errors(nodes, None, nodes, w, np.ones(8), f=lambda p: np.full(len(p), np.nan))

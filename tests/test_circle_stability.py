"""Equilibria and linear stability of clustered states on the circle (meanfield.circle_stability).

Checks: the analytic Jacobian against central differences of the velocity (both normalisations,
weights, both signs of β); the closed-form k-cluster spectrum against the eigenvalues of the full
N × N Jacobian (independent of n); the three-cluster threshold -2/3 by root finding of the
eigenvalues and by perturbation runs of the particle solver; eigenvalue against measured growth
rate; the half-circle certificate along a particle run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield.attention import attention_velocity
from meanfield.circle_stability import (
    angular_velocity,
    circle_angles,
    circle_jacobian,
    circle_points,
    cluster_mode,
    cluster_spectrum,
    clustered_state,
    in_open_half_circle,
    largest_gap,
    perturbation_growth,
    perturbation_threshold,
    scheme_rate,
    stability_thresholds,
    top_nontrivial_eigenvalue,
)
from meanfield.particles import solve_particles

BETAS = [-3.0, -0.6, 0.7, 2.0]


@pytest.mark.parametrize("normalisation", ["softmax", "mean"])
@pytest.mark.parametrize("beta", [-2.5, -0.3, 1.7])
def test_jacobian_matches_central_differences(normalisation, beta):
    rng = np.random.default_rng(1)
    th = rng.uniform(0, 2 * np.pi, 9)
    w = rng.uniform(0.2, 1.0, 9)
    J = circle_jacobian(th, beta, weights=w, normalisation=normalisation)
    eps = 1e-5
    fd = np.column_stack([(angular_velocity(th + eps * e, beta, weights=w, normalisation=normalisation)
                           - angular_velocity(th - eps * e, beta, weights=w, normalisation=normalisation)) / (2 * eps)
                          for e in np.eye(9)])
    # central differences err by eps² |v'''| / 6 <= eps² e^{2|β|} (each derivative of e^{β cos} sin brings <= 1 + |β|)
    assert np.abs(J - fd).max() < eps**2 * (1 + abs(beta)) ** 3 * math.exp(2 * abs(beta))
    assert np.abs(J.sum(axis=1)).max() < 1e-13 * (1 + np.abs(J).max())


def test_angular_velocity_is_the_package_attention():
    th = np.random.default_rng(2).uniform(0, 2 * np.pi, 40)
    for beta in (-3.0, 0.0, 2.5):
        v = attention_velocity(circle_points(th), beta)
        tangent = np.column_stack([-np.sin(th), np.cos(th)])
        assert np.abs(angular_velocity(th, beta) - (v * tangent).sum(axis=1)).max() < 1e-14


@pytest.mark.parametrize("normalisation", ["softmax", "mean"])
@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_closed_form_spectrum_is_the_jacobian_spectrum(k, normalisation):
    for n in (1, 2, 4):
        for beta in BETAS:
            th = clustered_state(k, n, 0.37)
            assert np.abs(angular_velocity(th, beta, normalisation=normalisation)).max() < 1e-14
            ev = np.sort(np.linalg.eigvals(circle_jacobian(th, beta, normalisation=normalisation)).real)
            s = cluster_spectrum(k, beta, normalisation=normalisation)
            pred = np.sort([0.0, *s.inter, *([s.intra] * (k * (n - 1)))])
            assert np.abs(ev - pred).max() < 1e-12 * (1 + np.abs(pred).max()), (k, n, beta)
            if n > 1:
                assert top_nontrivial_eigenvalue(th, beta, normalisation=normalisation) == pytest.approx(
                    s.top, abs=1e-12 * (1 + abs(s.top)))


def test_softmax_spectrum_is_mean_spectrum_over_zeta():
    for k in (2, 3, 4, 6):
        for beta in BETAS:
            s, m = cluster_spectrum(k, beta), cluster_spectrum(k, beta, normalisation="mean")
            zeta = np.mean(np.exp(beta * np.cos(2 * np.pi * np.arange(k) / k)))
            assert s.zeta == pytest.approx(zeta, rel=1e-14)
            assert s.intra == pytest.approx(m.intra / zeta, rel=1e-12, abs=1e-15)
            assert np.allclose(s.inter, m.inter / zeta, rtol=1e-12, atol=1e-15)


def test_three_cluster_closed_form_and_threshold():
    for beta in np.linspace(-4, 2, 25):
        s = cluster_spectrum(3, beta, normalisation="mean")
        assert s.inter[0] == pytest.approx(math.exp(-beta / 2) * (0.5 + 0.75 * beta), rel=1e-12, abs=1e-14)
        assert s.intra <= 1e-15
    roots = stability_thresholds(3, -4.0, 2.0)
    assert roots.size == 1 and abs(roots[0] + 2 / 3) < 0.05      # the tolerance
    assert abs(roots[0] + 2 / 3) < 1e-12                          # root finding to xtol
    assert stability_thresholds(2, -4.0, 2.0).size == 0 and stability_thresholds(4, -4.0, 2.0).size == 0
    assert not cluster_spectrum(2, -1.0).stable and not cluster_spectrum(4, 1.0).stable


def test_three_cluster_threshold_from_perturbation_runs():
    # the measured rate of the inter mode vanishes exactly with the eigenvalue (scheme_rate), so the
    # root in β of the measured rate is -2/3 up to the measurement error of a rate (~1e-8 here)
    beta, n_runs = perturbation_threshold(3, -1.0, -0.5, t_total=4.0, xtol=1e-7)
    assert abs(beta + 2 / 3) < 0.05
    assert abs(beta + 2 / 3) < 1e-5, beta
    assert n_runs <= 20


@pytest.mark.parametrize("k,kind,p", [(2, "inter", 1), (2, "intra", 1), (3, "inter", 1), (3, "intra", 1),
                                      (4, "inter", 1), (4, "inter", 2), (4, "intra", 1)])
def test_eigenvalue_predicts_measured_growth_rate(k, kind, p):
    # amplitude 1e-7: nonlinear terms change a rate by O(1e-7), round-off by 1e-16 / 1e-7 per unit time
    for beta in (-3.0, -0.8, 1.0):
        run = perturbation_growth(k, 2, beta, kind=kind, p=p, t_total=4.0)
        assert abs(run.rate - run.predicted_scheme) < 1e-6, (k, kind, p, beta, run.rate, run.predicted_scheme)
        h, lam = run.dt, run.predicted
        # log(1 + z + z²/2) / h = λ - h²λ³/6 + h³λ⁴/8 - ...: the first two terms bound the difference
        assert abs(run.predicted_scheme - lam) <= h**2 * abs(lam) ** 3 / 6 + h**3 * lam**4 / 4


def test_random_perturbation_finds_the_top_eigenvalue():
    # power iteration: after t the error decays like e^{-gap t}; k = 3, β = -3 has gap 0.86 and t >= 8
    run = perturbation_growth(3, 3, -3.0, kind="random", t_total=16.0, seed=4)
    s = cluster_spectrum(3, -3.0)
    gap = s.top - min(s.intra, s.inter.min())
    assert abs(run.rate - run.predicted_scheme) < 4 * math.exp(-gap * run.fit_from)
    assert run.rate < 0


def test_scheme_rate_vanishes_with_the_eigenvalue():
    for scheme in ("euler", "heun"):
        assert scheme_rate(0.0, 0.1, scheme) == 0.0
        assert scheme_rate(1e-3, 0.1, scheme) > 0 > scheme_rate(-1e-3, 0.1, scheme)


def test_half_circle_certificate_along_a_run():
    # tokens in an arc of length < π converge to one point for every β: the arc never grows
    rng = np.random.default_rng(5)
    th = rng.uniform(0.0, 3.0, 24)
    assert in_open_half_circle(th)
    for beta in (-4.0, 0.5):
        sol = solve_particles(circle_points(th), None, beta, 2**-5, np.arange(1, 41) * 0.5, attention="direct")
        arcs = np.array([2 * np.pi - largest_gap(circle_angles(x)) for x in sol.x])
        assert np.all(np.diff(arcs) <= 1e-12) and arcs[-1] < 1e-6, (beta, arcs[[0, -1]])


def test_modes_are_unit_eigenvectors():
    for k, n in ((3, 2), (4, 3)):
        th = clustered_state(k, n)
        J = circle_jacobian(th, -1.2)
        s = cluster_spectrum(k, -1.2)
        for kind, p, lam in [("intra", 1, s.intra), ("inter", 1, s.inter[0])]:
            v = cluster_mode(k, n, kind, p)
            assert np.linalg.norm(v) == pytest.approx(1.0)
            assert np.abs(J @ v - lam * v).max() < 1e-13


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="normalisation"):
        angular_velocity([0.0, 1.0], 1.0, normalisation="none")
    with pytest.raises(ValueError, match="theta"):
        circle_jacobian(np.zeros((2, 2)), 1.0)
    with pytest.raises(ValueError, match="k must be"):
        cluster_spectrum(0, 1.0)
    with pytest.raises(ValueError, match="beta"):
        cluster_spectrum(3, 800.0, normalisation="mean")
    with pytest.raises(ValueError, match="intra"):
        cluster_mode(3, 1, "intra")
    with pytest.raises(ValueError, match="sign"):
        perturbation_threshold(2, -1.0, 1.0, t_total=2.0)

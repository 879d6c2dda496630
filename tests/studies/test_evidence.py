"""Verdicts that cannot over-claim, the exact two-point law, and the tangent-flow Lyapunov estimator."""

import numpy as np
import pandas as pd
import pytest

from meanfield.kernels import ActivationKernel
from meanfield.reporting import effect_verdict, fit_effect_slope, fit_linear_model, rate_table
from meanfield.studies.depth._two_point import two_point_law, two_token_transformer, w1_to_law
from meanfield.studies.synchronisation import tangent_lyapunov


def test_unresolved_design_is_inconclusive():
    """Errors whose means sit within 2 SE of zero: the rate table must not say 'consistent'."""
    n = np.repeat([10.0, 100.0, 1000.0], 3)
    y = np.tile([1e-3, 1e-3, 1.0], 3) * n**-1.0  # each group: mean about 1 SE above zero
    tab = rate_table(pd.DataFrame({"N": n, "e": y}), "N", "e", -1.0, verdicts="three-way")
    assert set(tab["verdict"]) == {"inconclusive"}


def test_effect_sign_change_and_unresolved_are_inconclusive():
    rng = np.random.default_rng(1)
    m = [1, 4, 16]
    signs = [1, -1, 1]
    a = [s / mm + 0.001 * rng.standard_normal(500) for s, mm in zip(signs, m)]
    fit = fit_effect_slope(m, a)
    assert fit.sign_change and str(effect_verdict(fit, -1.0)) == "inconclusive"
    a = [1 / mm + 3.0 * rng.standard_normal(100) for mm in m]
    fit = fit_effect_slope(m, a)
    assert not all(fit.resolved) and str(effect_verdict(fit, -1.0)) == "inconclusive"
    a = [1 / mm + 0.001 * rng.standard_normal(500) for mm in m]
    assert str(effect_verdict(fit_effect_slope(m, a), -1.0)) == "consistent"


def test_linear_model_coverage():
    """95 % studentized intervals of a two-parameter fit cover the truth in most seeds."""
    L = np.array([4.0, 16, 64, 256])
    X = np.c_[np.log(L) / L, np.ones(4)]
    hits = 0
    for s in range(40):
        rng = np.random.default_rng(s)
        ys = [0.5 * np.log(l) / l + 0.01 + 0.02 * rng.standard_normal(30) for l in L]
        fit = fit_linear_model(X, ys, terms=("A", "B"), n_boot=400, seed=s)
        hits += fit.ci_low[0] <= 0.5 <= fit.ci_high[0]
    assert hits >= 33


def test_two_point_law_converged():
    coarse, fine = two_point_law(n=96, K=72), two_point_law(n=160, K=120)
    assert abs(coarse.mean - fine.mean) < 1e-8 and fine.moments[0] == pytest.approx(1.0, abs=1e-10)
    assert fine.accuracy < 1e-5 and fine.cdf_truncation < 1e-3


def test_two_token_transformer_matches_exact_law_at_depth():
    """Gaussian layers at L = 64: weak error ~0.16/L, and W1 close to the sampling floor."""
    law = two_point_law()
    out = two_token_transformer([1.0, 0, 0], [0, 1.0, 0], L=64, width=0, n=20000, seed=3)
    c = out["c"]
    assert abs(c.mean() - law.mean) < 0.0025 + 4 * c.std() / np.sqrt(c.size)
    assert w1_to_law(c, law) < 0.02


def test_coupled_width_effect_has_small_variance():
    out = two_token_transformer([1.0, 0, 0], [0, 1.0, 0], L=4, width=64, n=4000, seed=4, coupled=True)
    assert np.std(out["c"] - out["c_gauss"]) < 0.3 * np.std(out["c"])


@pytest.mark.parametrize("act,sw,d", [("relu", 1.0, 5), ("erf", 2.0, 8)])
def test_tangent_lyapunov_within_3se(act, sw, d):
    est = tangent_lyapunov(ActivationKernel(act, sigma_w=sw), d, n_tokens=2048, n_steps=16, n_replicas=8, seed=5)
    assert est.agrees(3.0), (est.mean, est.se, est.closed_form)

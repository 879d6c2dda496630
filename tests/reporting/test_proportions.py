"""Binomial proportion intervals: closed forms at the boundary and exact coverage."""

import numpy as np
import pytest
from scipy import stats

from meanfield.reporting import proportion_interval


def test_clopper_pearson_boundaries_closed_form():
    # k = 0: upper = 1 - (α/2)^{1/n}; k = n: lower = (α/2)^{1/n}
    for n in (1, 7, 20, 64):
        lo, hi = proportion_interval(0, n)
        assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-12)
        lo, hi = proportion_interval(n, n)
        assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / n), rel=1e-12)


def test_clopper_pearson_coverage_is_at_least_nominal():
    # exact coverage P_p(low <= p <= high) = Σ_k pmf(k) 1[p in CI(k)] over a fine grid of p
    n = 20
    k = np.arange(n + 1)
    lo, hi = proportion_interval(k, np.full(n + 1, n))
    for p in np.linspace(0.001, 0.999, 500):
        cover = stats.binom.pmf(k, n, p)[(lo <= p) & (p <= hi)].sum()
        assert cover >= 0.95 - 1e-12, (p, cover)


def test_wilson_matches_score_test_inversion():
    # the Wilson interval is the set of p whose score statistic |k - n p| / sqrt(n p (1-p)) is <= z
    n, z = 30, stats.norm.ppf(0.975)
    for k in (0, 3, 15, 29):
        lo, hi = proportion_interval(k, n, method="wilson")
        for p in (lo, hi):
            if 0 < p < 1:
                assert abs(k - n * p) / np.sqrt(n * p * (1 - p)) == pytest.approx(z, rel=1e-9)


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="successes"):
        proportion_interval(5, 4)
    with pytest.raises(ValueError, match="method"):
        proportion_interval(1, 4, method="exact")
    with pytest.raises(TypeError, match="integers"):
        proportion_interval(1.5, 4)

"""Tests of meanfield.rates: slope fits, rate tables, exports and figures (theory §9)."""

import numpy as np
import pandas as pd
import pytest

from meanfield.rates import (
    RATE_COLUMNS,
    export_table,
    fit_slope,
    plot_rates,
    rate_table,
    slope_summary,
    to_csv,
    to_latex,
    to_markdown,
)

XS = np.array([16.0, 64.0, 256.0, 1024.0, 4096.0])


def synthetic(slope, replicas, seed, constant=2.0, noise=0.3):
    """y = C x^s (1 + U(-noise, noise)): positive, and the group means stay unbiased."""
    rng = np.random.default_rng(seed)
    x = np.repeat(XS, replicas)
    return x, constant * x**slope * (1.0 + rng.uniform(-noise, noise, x.size))


def study(seed=0, replicas=8):
    x, w2 = synthetic(-0.5, replicas, seed)
    _, coupling = synthetic(-1.0, replicas, seed + 1000, constant=0.5)
    return pd.DataFrame(
        {"N": x.astype(int), "replica": np.tile(np.arange(replicas), XS.size), "w2": w2, "coupling": coupling}
    )


# ----------------------------------------------------------------------------
# fit_slope
# ----------------------------------------------------------------------------


def test_noise_free_power_law_is_fitted_exactly():
    x = np.repeat(XS, 3)
    fit = fit_slope(x, 5.0 * x**-0.75)
    assert fit.slope == pytest.approx(-0.75, abs=1e-12)
    assert fit.intercept == pytest.approx(np.log(5.0), abs=1e-12)
    assert fit.ci_low == pytest.approx(-0.75, abs=1e-12) and fit.ci_high == pytest.approx(-0.75, abs=1e-12)
    assert fit.r2 == pytest.approx(1.0)
    assert (fit.n_groups, fit.n_obs, fit.n_boot) == (5, 15, 2000)
    np.testing.assert_allclose(fit.predict(XS), 5.0 * XS**-0.75, rtol=1e-12)


@pytest.mark.parametrize("slope", [-0.5, -1.0])
def test_true_slope_inside_ci_in_most_seeds(slope):
    # Measured coverage of the 95 % within-group percentile bootstrap with 8
    # replicas on this design: 0.945 (200 seeds).  For 40 seeds, Bin(40, 0.945)
    # has mean 37.8 and sd 1.4; 33 is 3.3 sd below.
    hits = 0
    for seed in range(40):
        fit = fit_slope(*synthetic(slope, 8, seed), n_boot=1000, seed=seed)
        hits += fit.ci_low <= slope <= fit.ci_high
        assert abs(fit.slope - slope) < 0.1
    assert hits >= 33


def test_ci_shrinks_with_more_replicas():
    def mean_width(replicas):
        fits = [fit_slope(*synthetic(-0.5, replicas, seed), n_boot=500, seed=seed) for seed in range(10)]
        return np.mean([f.ci_high - f.ci_low for f in fits])

    # Width ~ 1/sqrt(replicas): 16x the replicas should give ~1/4 the width (bootstrap
    # bias at 4 replicas makes it ~1/3.5); require at least a factor 2.
    assert mean_width(64) < 0.5 * mean_width(4)


def test_bootstrap_resamples_within_groups():
    # Two groups with no spread in one of them: resampling within groups keeps that
    # group's mean fixed, so the slope CI comes only from the other group.
    x = np.repeat([10.0, 100.0], 6)
    y = np.r_[np.full(6, 1.0), 0.1 * np.array([0.8, 0.9, 1.0, 1.0, 1.1, 1.2])]
    fit = fit_slope(x, y, seed=1)
    # With ȳ_10 = 1 fixed, slope = log10(ȳ_100): the CI maps to a CI of ȳ_100 inside
    # the range of its 6 values (SE 0.006).  Pooled resampling would move ȳ_10 too.
    mean_100_low, mean_100_high = 10.0**fit.ci_low, 10.0**fit.ci_high
    assert 0.08 < mean_100_low < 0.1 < mean_100_high < 0.12


def test_groups_argument_matches_default_grouping():
    x, y = synthetic(-0.5, 4, 3)
    labels = np.repeat(["a", "b", "c", "d", "e"], 4)
    assert fit_slope(x, y, groups=labels, seed=2) == fit_slope(x, y, seed=2)
    with pytest.raises(ValueError, match="constant within each group"):
        fit_slope(x, y, groups=np.arange(x.size) % 2)


def test_single_replica_groups_warn():
    with pytest.warns(UserWarning, match="single replica"):
        fit_slope(XS, XS**-0.5)


@pytest.mark.parametrize(
    "x, y, match",
    [
        (XS, -(XS**-0.5), "y must be > 0"),
        (XS, np.r_[0.0, XS[1:] ** -0.5], "y must be > 0"),
        (-XS, XS**-0.5, "x must be > 0"),
        (XS, np.r_[np.nan, XS[1:] ** -0.5], "NaN"),
        (np.full(4, 8.0), np.ones(4), "at least 2 distinct values"),
        (XS, XS[:3], "same length"),
        (XS.reshape(5, 1), XS, "1-D"),
    ],
)
def test_fit_slope_rejects_bad_input(x, y, match):
    with pytest.raises(ValueError, match=match):
        fit_slope(x, y)


def test_fit_slope_rejects_bad_options():
    x, y = synthetic(-0.5, 3, 0)
    with pytest.raises(ValueError, match="n_boot must be >= 100"):
        fit_slope(x, y, n_boot=10)
    with pytest.raises(ValueError, match=r"ci must be in \(0, 1\)"):
        fit_slope(x, y, ci=1.0)
    with pytest.raises(ValueError, match="ci must be > 0"):
        fit_slope(x, y, ci=0.0)


# ----------------------------------------------------------------------------
# rate_table
# ----------------------------------------------------------------------------


def test_rate_table_layout_and_verdicts():
    table = rate_table(study(), "N", ["w2", "coupling"], {"w2": -0.5, "coupling": -1.0})
    assert list(table.columns) == [c if c != "<param>" else "N" for c in RATE_COLUMNS]
    assert table.shape[0] == 2 * XS.size
    assert list(table["N"].iloc[:5]) == list(XS.astype(int))
    assert set(table["verdict"]) == {"consistent"}
    assert (table["n_replicas"] == 8).all()
    assert np.all((table["ci_low"] < table["mean"]) & (table["mean"] < table["ci_high"]))
    assert table.attrs["param"] == "N" and set(table.attrs["fits"]) == {"w2", "coupling"}
    assert table.attrs["fits"]["w2"]["slope"] == table["slope"].iloc[0]


def test_verdict_flips_for_a_wrong_theory_slope_and_tolerance_restores_it():
    df = study()
    assert set(rate_table(df, "N", "w2", -1.0)["verdict"]) == {"not consistent"}
    summary = slope_summary(rate_table(df, "N", "w2", -1.0, tolerance=0.6))
    assert summary["verdict"].tolist() == ["consistent"]
    assert summary["n_points"].tolist() == [XS.size]


def test_t_and_bootstrap_mean_cis():
    df = study(replicas=6)
    t = rate_table(df, "N", "w2", -0.5)
    b = rate_table(df, "N", "w2", -0.5, mean_ci="bootstrap")
    # t quantile 2.571 (5 dof) vs the bootstrap's ~1.96 sqrt(5/6): the t interval is wider.
    assert np.all(t["ci_high"] - t["ci_low"] > b["ci_high"] - b["ci_low"])
    assert np.all(b["ci_low"] > 0)
    sd = df.groupby("N")["w2"].std(ddof=1).to_numpy()
    np.testing.assert_allclose(t["ci_high"] - t["mean"], 2.570581836614739 * sd / np.sqrt(6), rtol=1e-9)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"error": "missing"}, ValueError, "column 'missing' not in df"),
        ({"param": "replica_x"}, ValueError, "column 'replica_x' not in df"),
        ({"theory_slope": {"coupling": -1.0}}, ValueError, "no entry for error column"),
        ({"theory_slope": float("nan")}, ValueError, "must be finite"),
        ({"tolerance": -0.1}, ValueError, "tolerance"),
        ({"mean_ci": "normal"}, ValueError, "mean_ci must be one of"),
        ({"error": 3}, TypeError, "column name"),
        ({"df": {"N": [1]}}, TypeError, "DataFrame"),
    ],
)
def test_rate_table_rejects_bad_arguments(kwargs, error, match):
    args = {"df": study(), "param": "N", "error": "w2", "theory_slope": -0.5, **kwargs}
    with pytest.raises(error, match=match):
        rate_table(**args)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.assign(w2=-d["w2"]), "column 'w2' must be > 0"),
        (lambda d: d.assign(w2=d["w2"].where(d.index != 3, 0.0)), "column 'w2' must be > 0"),
        (lambda d: d.assign(w2=d["w2"].where(d.index != 3, np.nan)), "NaN"),
        (lambda d: d.assign(N=7), "at least 2 distinct values"),
        (lambda d: d.iloc[:0], "no rows"),
    ],
)
def test_rate_table_rejects_bad_data(mutate, match):
    with pytest.raises(ValueError, match=match):
        rate_table(mutate(study()), "N", "w2", -0.5)


# ----------------------------------------------------------------------------
# exports and figures
# ----------------------------------------------------------------------------


def test_exports_write_files_that_read_back(tmp_path):
    table = rate_table(study(), "N", ["w2", "coupling"], {"w2": -0.5, "coupling": -1.0})
    written = export_table(table, tmp_path / "sub" / "rates")
    assert sorted(written) == ["csv", "md", "tex"]
    back = pd.read_csv(written["csv"])
    pd.testing.assert_frame_equal(back, table, check_dtype=False, check_exact=True)
    md = written["md"].read_text().splitlines()
    assert md[0].startswith("| error | N | replicas | mean | 95% CI |")
    assert set(md[1]) <= set("|-:") and md[1].count("|") == 6
    assert any(line.startswith("| error | slope |") for line in md)
    tex = written["tex"].read_text()
    assert tex.count(r"\begin{tabular}") == 2 and r"\toprule" in tex and r"95\% CI" in tex
    assert to_markdown(table) == written["md"].read_text()


def test_export_of_a_plain_frame_and_escaping(tmp_path):
    df = pd.DataFrame({"name": ["a|b", "x_y & z"], "val": [1.5, 2.0]})
    assert "a\\|b" in to_markdown(df)
    tex = to_latex(df)
    assert r"x\_y \& z" in tex and tex.startswith(r"\begin{tabular}{lr}")
    path = to_csv(df, tmp_path / "plain.csv")
    pd.testing.assert_frame_equal(pd.read_csv(path), df, check_dtype=False)
    with pytest.raises(ValueError, match="formats must be"):
        export_table(df, tmp_path / "t", formats=("xlsx",))
    with pytest.raises(TypeError, match="DataFrame"):
        to_markdown([1, 2])


def test_plot_writes_png_and_pdf(tmp_path):
    table = rate_table(study(), "N", ["w2", "coupling"], {"w2": -0.5, "coupling": -1.0})
    fig = plot_rates(table, path_stem=tmp_path / "fig" / "rates", title="propagation of chaos")
    png, pdf = tmp_path / "fig" / "rates.png", tmp_path / "fig" / "rates.pdf"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    # Per error column: the error bars, the fitted line and the theory line.
    assert len(ax.get_lines()) >= 4 and len(ax.get_legend().get_texts()) == 6


def test_plot_from_long_form_and_from_csv(tmp_path):
    df = study()
    fig = plot_rates(df, "N", "w2", -0.5, path_stem=tmp_path / "long", formats=("png",), n_boot=200)
    assert (tmp_path / "long.png").stat().st_size > 1000 and not (tmp_path / "long.pdf").exists()
    assert "theory -0.5 (consistent)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    export_table(rate_table(df, "N", "w2", -0.5), tmp_path / "t", formats=("csv",))
    fig = plot_rates(pd.read_csv(tmp_path / "t.csv"))  # parameter column inferred
    assert fig.axes[0].get_xlabel() == "N"


def test_plot_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="needs param, error and theory_slope"):
        plot_rates(study(), "N")
    table = rate_table(study(), "N", "w2", -0.5)
    with pytest.raises(ValueError, match="not in the rate table"):
        plot_rates(table, error="coupling")
    with pytest.raises(ValueError, match="formats must be"):
        plot_rates(table, path_stem=tmp_path / "x", formats=("gif",))
    with pytest.raises(TypeError, match="only apply to long-form"):
        plot_rates(table, n_boot=100)


# ----------------------------------------------------------------------------
# three-way verdicts: studentized bootstrap interval, delta-method cross-check
# ----------------------------------------------------------------------------


def test_studentized_and_delta_intervals_cover_the_true_slope_95_percent():
    # y = 2 x^-0.5 LogNormal(0, 0.3): log E[y] has slope -0.5 exactly.
    rng = np.random.default_rng(2024)
    draws, x = 600, np.repeat(XS, 8)
    hits = np.zeros(2)
    for _ in range(draws):
        fit = fit_slope(x, 2.0 * x**-0.5 * rng.lognormal(0.0, 0.3, x.size), n_boot=400, seed=rng)
        iv = fit.intervals
        hits += [iv.ci_low <= -0.5 <= iv.ci_high, iv.delta_ci_low <= -0.5 <= iv.delta_ci_high]
    coverage = hits / draws
    tol = 3.0 * np.sqrt(0.95 * 0.05 / draws)  # 3 binomial SE of the coverage count
    assert np.all(np.abs(coverage - 0.95) <= tol), (coverage, tol)


def test_verdict_outcomes_on_resolved_and_unresolved_designs():
    rng = np.random.default_rng(3)
    x = np.repeat(XS, 8)
    fit = fit_slope(x, x**-0.5 * rng.lognormal(0.0, 0.1, x.size))
    assert all(fit.intervals.resolved)
    assert fit.verdict(-0.5).outcome == "consistent"
    assert fit.verdict(-1.0).outcome == "inconsistent"
    assert fit.consistent_with(-0.5)  # the two-way check still works
    # a point whose mean error is within 2 SE of zero: inconclusive, whatever the theory
    y = x**-0.5 * rng.lognormal(0.0, 0.1, x.size)
    y[x == XS[-1]] = np.array([1e-4] * 7 + [0.5])  # mean 0.0626, SE 0.0625
    unresolved = fit_slope(x, y)
    assert list(unresolved.intervals.resolved) == [True] * 4 + [False]
    for theory in (-0.5, -1.0, 0.5):
        v = unresolved.verdict(theory)
        assert v.outcome == "inconclusive" and "unresolved" in v.reason
    # single replicas: unresolved
    with pytest.warns(UserWarning, match="single replica"):
        single = fit_slope(XS, XS**-0.5)
    assert single.verdict(-0.5).outcome == "inconclusive"
    # resolved points but an interval wider than ±0.5 |theory|: inconclusive (no power)
    xs = np.repeat(XS[:2], 3)
    weak = fit_slope(xs, xs**-0.5 * rng.lognormal(0.0, 0.8, xs.size), n_boot=500)
    assert all(weak.intervals.resolved)
    half = (weak.intervals.ci_high - weak.intervals.ci_low) / 2
    assert half > 0.25
    v = weak.verdict(-0.5)
    assert v.outcome == "inconclusive" and "half-width" in v.reason
    # the threshold is a parameter: a lax one lets the interval decide
    assert "half-width" not in weak.verdict(-0.5, power=1e6).reason


def test_rate_table_three_way_layout_and_verdicts():
    from meanfield.reporting import THREE_WAY_COLUMNS, verdict

    df = study(seed=4)
    two = rate_table(df, "N", "w2", -0.5, n_boot=500)
    three = rate_table(df, "N", "w2", -0.5, n_boot=500, verdicts="three-way")
    assert list(three.columns) == list(two.columns) + list(THREE_WAY_COLUMNS)
    fit = three.attrs["fits"]["w2"]
    assert three["slope_ci_low"].iloc[0] == fit["intervals"]["ci_low"]
    assert three["slope_delta_ci_high"].iloc[0] == fit["intervals"]["delta_ci_high"]
    assert set(three["verdict"]) == {"consistent"} and three["resolved"].all()
    assert "three-way" in three.attrs["verdict_rule"] and three.attrs["power"] == 0.5
    assert set(rate_table(df, "N", "w2", -1.5, n_boot=500, verdicts="three-way")["verdict"]) == {"inconsistent"}
    summary = slope_summary(three)
    assert {"slope_se", "slope_delta_ci_low", "slope_delta_ci_high"} <= set(summary.columns)
    assert "inconclusive" in to_markdown(rate_table(df, "N", "w2", -0.5, n_boot=500, verdicts="three-way",
                                                    power=1e-3))
    with pytest.raises(ValueError, match="verdicts must be one of"):
        rate_table(df, "N", "w2", -0.5, verdicts="yes")
    with pytest.raises(TypeError, match="SlopeFit or SlopeIntervals"):
        verdict(0.3, -0.5)

"""Metastability study: survival estimates, the growth-law choice, the task, the store and the ``meta`` CLI."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from meanfield.cli import main
from meanfield.studies import meta
from meanfield.studies.meta import (
    config,
    growth_table,
    kaplan_meier,
    km_median,
    meta_run_task,
    noisy_step,
)


def test_kaplan_meier_without_censoring_is_the_empirical_survival():
    rng = np.random.default_rng(0)
    t = rng.exponential(2.0, 50)
    km = kaplan_meier(t)
    emp = np.array([np.mean(t > s) for s in km["time"].to_numpy()[1:]])
    np.testing.assert_allclose(km["survival"].to_numpy()[1:], emp, rtol=0, atol=1e-15)
    assert km_median(t)[0] == np.sort(t)[24]  # first time S <= 1/2: the 25th of 50


def test_kaplan_meier_with_censoring_by_hand():
    # events at 1, 3; censored at 2 and 4 (textbook product limit: (1 - 1/4)(1 - 1/2))
    km = kaplan_meier([1.0, 2.0, 3.0, 4.0], [True, False, True, False])
    assert km["survival"].tolist() == [1.0, 0.75, 0.375]
    assert km["at_risk"].tolist() == [4.0, 4.0, 2.0]
    # inf is censoring at the horizon
    a = kaplan_meier([1.0, 3.0, math.inf, math.inf], horizon=10.0)
    assert a["survival"].tolist() == [1.0, 0.75, 0.5]
    assert km_median([1.0, 3.0, math.inf, math.inf], horizon=10.0)[0] == 3.0


def test_km_median_interval_covers_the_true_median():
    """Exponential(mean 2) with independent censoring: the 95 % interval covers 2 log 2 in ~95 % of samples."""
    rng = np.random.default_rng(1)
    truth, hits, n_rep = 2 * math.log(2), 0, 300
    for _ in range(n_rep):
        t = rng.exponential(2.0, 80)
        c = rng.exponential(6.0, 80)
        med, lo, hi = km_median(np.minimum(t, c), t <= c)
        hits += lo <= truth <= hi
    cover = hits / n_rep
    se = math.sqrt(0.95 * 0.05 / n_rep)
    assert abs(cover - 0.95) <= 4 * se + 0.02, cover  # Brookmeyer–Crowley is slightly conservative/liberal


def _synthetic_plateaus(law, betas, reps=6, per=4, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for b in betas:
        for r in range(reps):
            for _ in range(per):
                rows.append({"d": 2, "N": 32, "beta": b, "sigma": 0.0, "replica": r, "k": 3, "t_start": 0.0,
                             "duration": law(b) * rng.lognormal(0.0, 0.1), "censored": False})
    return pd.DataFrame(rows)


def test_growth_table_tells_exponential_from_power_law():
    betas = [4.0, 6.0, 8.0, 11.0, 16.0, 23.0, 32.0]
    exp_law = growth_table(_synthetic_plateaus(lambda b: math.exp(1 + 0.2 * b), betas), horizon=1e9)
    row = exp_law.iloc[0]
    assert row["favoured"] == "exponential"
    lo, hi = (float(v) for v in row["exponential_b_ci"].strip("[]").split(","))
    assert lo <= 0.2 <= hi
    pow_law = growth_table(_synthetic_plateaus(lambda b: 0.5 * b**2.0, betas), horizon=1e9)
    row = pow_law.iloc[0]
    assert row["favoured"] == "power"
    lo, hi = (float(v) for v in row["power_b_ci"].strip("[]").split(","))
    assert lo <= 2.0 <= hi
    # two β only: not fitted
    assert growth_table(_synthetic_plateaus(lambda b: b, [4.0, 8.0]), horizon=1e9).iloc[0]["favoured"] == "not fitted"


def test_same_cloud_and_path_across_beta_and_sigma():
    cfg = config("test")["noise"]
    study = meta.make_study("noise", {**cfg, "betas": [4.0, 8.0], "sigmas": [0.5, 1.0]})
    seeds = {(t.params["beta"], t.params["sigma"], t.replica): study.seed(t).spawn_key for t in study.tasks}
    assert seeds[(4.0, 0.5, 0)] == seeds[(8.0, 1.0, 0)] != seeds[(4.0, 0.5, 1)]
    base = {k: v for k, v in cfg.items() if k not in ("dims", "N", "betas", "sigmas", "replicas")}
    seed = study.seed(study.tasks[0])
    a = meta_run_task({**base, "d": 2, "N": 16, "beta": 4.0, "sigma": 0.5, "replica": 0}, seed)
    b = meta_run_task({**base, "d": 2, "N": 16, "beta": 8.0, "sigma": 1.0, "replica": 0}, seed)
    assert a["spread0"] == b["spread0"]  # one initial cloud
    assert b["lambda1"] == pytest.approx(4 * a["lambda1"], rel=1e-14)  # λ_1(σ) = σ² λ_1
    assert a["counts"].shape == (17,) and a["counts"][0] <= 16


def test_noisy_step_and_config_checks():
    c = {"dt": 0.125, "noise_step": 0.05, "save_every": 1.0}
    assert noisy_step(c, 0.0, 0.5) == 0.125
    assert noisy_step(c, 0.5, 0.5) == 0.125  # 0.05 / 0.125 = 0.4 > dt
    assert noisy_step(c, 2.0, 0.5) == 2.0**-6  # 0.025 rounded down to 1/64 (1/32 > 0.025)
    with pytest.raises(ValueError, match="betas"):
        config("test", noise={"betas": [-1.0]})
    with pytest.raises(ValueError, match="sigmas"):
        config("test", noise={"sigmas": [-0.1]})
    with pytest.raises(ValueError, match="power of 2"):
        config("test", noise={"dt": 0.3})
    with pytest.raises(ValueError, match="override"):
        config("test", runs={})


def test_meta_cli_test_preset_and_resume(tmp_path, capsys):
    out, store = tmp_path / "out", tmp_path / "store"
    args = ["meta", "--test", "--executor", "serial", "--out", str(out), "--store", str(store)]
    assert main(args) == 0
    first = pd.read_csv(out / "sync.csv")
    for name in ("growth", "escape", "sync", "sizes", "spectral", "timing"):
        assert (out / f"{name}.md").exists()
    for name in ("counts", "survival", "phase", "growth"):
        assert (out / f"{name}.png").exists() and (out / f"{name}.pdf").exists()
    text = (out / "summary.md").read_text()
    assert "arXiv 2604.26898" in text and "Plateau growth law" in text
    capsys.readouterr()
    assert main(args) == 0  # resumed from the store: identical tables
    assert "0 computed" in capsys.readouterr().out
    pd.testing.assert_frame_equal(first, pd.read_csv(out / "sync.csv"))
    # the noise part synchronises faster than the deterministic runs at the same β
    det = first[first["sigma"] == 0]
    assert det["synchronised"].sum() <= first[first["sigma"] > 0]["synchronised"].sum()

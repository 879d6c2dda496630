"""Depth/width convergence study (theory §9, Thm 1.1): meanfield.studies.depth and the ``depth`` CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from meanfield.cli import build_parser
from meanfield.rates import slope_summary
from meanfield.runner import run_study
from meanfield.studies.depth import (
    STRONG_TOLERANCE,
    depth_config,
    make_law_study,
    make_strong_study,
    make_width_study,
    strong_depth_task,
    strong_table,
    width_tables,
)


def test_strong_error_slope_in_L():
    """Test preset (d = 3, N = 8, β = 1, L = 4, 16, 64, reference dt = T/2^9, 6 replicas, seeded).

    Theory: projected Euler on one path with non-commutative noise has strong order 1/2,
    so the slope in L is -1/2. Tolerance STRONG_TOLERANCE = 0.1 beyond the 95 % bootstrap
    CI: the CI reflects replica noise only, and at L = 4 the error is pre-asymptotic (O(1)
    on the sphere). The test can fail: a scheme of the wrong order (slope -1 or -1/4)
    or an uncoupled reference path (slope ~0) is outside.
    """
    cfg = depth_config("test")["strong"]
    res = run_study(make_strong_study(cfg, root_seed=0), executor="serial", progress=False)
    table = strong_table(res.frame)
    s = slope_summary(table).iloc[0]
    print(f"\nstrong slope {s['slope']:.3f} [{s['slope_ci_low']:.3f}, {s['slope_ci_high']:.3f}]")
    assert s["verdict"] in ("consistent", "inconclusive"), s  # three-way: few replicas may lack power
    assert s["slope_ci_low"] - STRONG_TOLERANCE <= -0.5 <= s["slope_ci_high"] + STRONG_TOLERANCE
    # the error decreases monotonically in the mean and is far from the O(1) of an uncoupled path
    means = table["mean"].to_numpy()
    assert np.all(np.diff(means) < 0)
    assert means[-1] < 0.15


def test_strong_error_is_coupled():
    """On one path the L-layer transformer approaches the reference: e_256 < e_4 for one replica,
    and a different path for the reference gives an O(1) error (the coupling matters)."""
    params = {"d": 3, "N": 6, "T": 0.5, "beta": 1.0, "lmax": 6, "L_values": [4, 128], "ref_log2": 9,
              "activation": "relu", "sigma_w": 1.0}
    out = strong_depth_task(params, np.random.SeedSequence(3))
    assert out["err_L128"] < 0.5 * out["err_L4"]
    assert out["err_L128"] < 0.1


def test_width_effect_in_law():
    """A width-1 MLP layer is visibly non-Gaussian at L = 1 (Δg > 3 SE), the effect shrinks with m,
    and the two iterated limits agree within CI on this small grid."""
    cfg = dict(depth_config("test")["width"])
    cfg.update(L_values=[1], widths=[1, 16, 0], L_ref=4, n_draws=300, batches=2)
    res = run_study(make_width_study(cfg, root_seed=1), executor="serial", progress=False)
    tabs = width_tables(res)
    cells = tabs["cells"]
    d1 = cells[(cells["L"] == 1) & (cells["width"] == 1)].iloc[0]
    d16 = cells[(cells["L"] == 1) & (cells["width"] == 16)].iloc[0]
    print(f"\nΔg m=1: {d1['delta_g']:.4f} ± {d1['delta_se']:.4f}; m=16: {d16['delta_g']:.4f} ± {d16['delta_se']:.4f}")
    assert d1["delta_g"] > 3 * d1["delta_se"]
    assert abs(d16["delta_g"]) < abs(d1["delta_g"])
    assert d1["w2_token0"] > d1["w2_floor"]
    assert set(tabs) == {"cells", "width_fit", "weak_L", "limits"}
    assert tabs["limits"].attrs["agree"]


def test_bad_inputs():
    with pytest.raises(ValueError, match="preset"):
        depth_config("huge")
    with pytest.raises(ValueError, match="unknown strong parameters"):
        depth_config("test", strong={"LL": [1]})
    with pytest.raises(ValueError, match="override"):
        depth_config("test", other={})
    with pytest.raises(ValueError, match="divide"):
        depth_config("test", strong={"L_values": [3, 16]})
    with pytest.raises(ValueError, match="4 times finer"):
        depth_config("test", strong={"L_values": [4, 256], "ref_log2": 9})
    with pytest.raises(ValueError, match="at least 2 distinct"):
        depth_config("test", strong={"L_values": [16, 16]})
    with pytest.raises(ValueError, match="Gaussian"):
        depth_config("test", width={"widths": [1, 4]})
    with pytest.raises(ValueError, match="L_ref"):
        depth_config("test", width={"L_ref": 4})
    with pytest.raises(ValueError):
        depth_config("test", strong={"d": 5})
    with pytest.raises(ValueError, match="err_L"):
        strong_table(pd.DataFrame({"replica": [0, 1], "x": [1.0, 2.0]}))


def test_law_limits_split_the_corner_cells_exactly():
    """Each corner cell of the deepest width row is its coupled Gaussian part plus the width effect
    (the same draws, so to rounding); the L-first estimate is Δ plus the deepest Gaussian cell; and the
    coupled Gaussian part agrees with the independent Gaussian cell at the same L within 4 SE."""
    from meanfield.studies.depth._analysis import law_tables
    from meanfield.studies.depth._report import _limits_agreement

    law = depth_config("test", law={"L_values": [1, 8], "widths": [1, 4], "width_L": [1, 8], "n": 2000,
                                    "n_width": 2000, "n_limit": 4000})["law"]
    tabs = law_tables(run_study(make_law_study(law, root_seed=3), executor="serial", progress=False))
    lim = tabs["law_limits"].set_index(["limit", "m"])
    width = tabs["law_width"].set_index(["L", "width"])
    gauss = tabs["law_L"].set_index("L").loc[8]
    e_inf = gauss["weak_error"]
    assert lim.loc[("m first", "∞"), "value"] == pytest.approx(e_inf, abs=1e-15)
    for m in (1, 4):
        corner, depth = lim.loc[("corner cell", str(m)), "value"], lim.loc[("its depth part", str(m)), "value"]
        delta = width.loc[(8, m), "delta"]
        assert corner == pytest.approx(depth + delta, abs=1e-12)
        assert lim.loc[("L first", str(m)), "value"] == pytest.approx(delta + e_inf, abs=1e-12)
        assert lim.loc[("L first", str(m)), "ci95"] > lim.loc[("m first", "∞"), "ci95"]
        assert width.loc[(8, m), "n_draws"] == 2 * 4000  # n_limit draws in the corner row
        # the coupled Gaussian transformer is a Gaussian-layer transformer: same law as the column's cell
        se = np.hypot(lim.loc[("its depth part", str(m)), "ci95"] / 1.96, gauss["se"])
        assert abs(depth - e_inf) < 4 * se, (m, depth, e_inf, se)
    text = _limits_agreement(tabs["law_limits"], tabs["law_width"])
    assert text.startswith("m first: ") and "L first: " in text and "not limits themselves" in text
    assert f"differ by {width.loc[(8, 4), 'delta']:+.2e}" in text


def test_law_study_puts_n_limit_draws_in_the_corner_cells_only():
    law = depth_config("test", law={"n_limit": 8000})["law"]
    study = make_law_study(law)
    draws = {(t.params["L"], t.params["width"]): t.params["n"] for t in study.tasks}
    Lmax, wLmax = max(law["L_values"]), max(law["width_L"])
    for (L, m), n in draws.items():
        corner = (m == 0 and L == Lmax) or (m > 0 and L == wLmax)
        assert n == (8000 if corner else law["n"] if m == 0 else law["n_width"]), (L, m, n)
    assert {(L, m) for (L, m), n in draws.items() if n == 8000} == {(Lmax, 0)} | {(wLmax, m) for m in law["widths"]}
    with pytest.raises(ValueError, match="n_limit = 8010 must be a multiple of n_sub"):
        depth_config("test", law={"n_limit": 8010})
    with pytest.raises(ValueError, match="n_limit"):
        depth_config("test", law={"n_limit": 1})


def test_cli_registered():
    args = build_parser().parse_args(["depth", "--test", "--out", "o", "--workers", "2", "--no-progress"])
    assert args.preset == "test" and args.out == "o" and args.workers == 2 and not args.progress
    assert build_parser().parse_args(["depth"]).preset == "quick"
    args = build_parser().parse_args(["sync", "--full", "--only", "energy"])
    assert args.preset == "full" and args.only == "energy"

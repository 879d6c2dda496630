"""The circle study (reproduction of arXiv 2507.22857): presets, the test preset end to end, outputs."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.studies import circle


def test_quick_preset_has_the_fraction_synchronised_curve():
    cfg = circle.config("quick")["circle_sync"]
    assert min(cfg["betas"]) == -4.0 and max(cfg["betas"]) == 2.0
    assert any(b < circle.BETA_NO_SYNC for b in cfg["betas"]) and any(b >= circle.BETA_SYNC for b in cfg["betas"])
    assert len(cfg["Ns"]) >= 2 and min(cfg["Ns"]) == 16
    full = circle.config("full")["circle_sync"]
    assert full["Ns"] == [16, 32, 64, 128, 256]


def test_config_rejects_bad_settings():
    with pytest.raises(ValueError, match="segment / save_every"):
        circle.config("test", circle_sync={"save_every": 0.3})
    with pytest.raises(ValueError, match="brackets"):
        circle.config("test", circle_threshold={"ks": [5]})
    with pytest.raises(ValueError, match="unknown circle_sync parameters"):
        circle.config("test", circle_sync={"horizon": 3})


def test_verdict_rules():
    assert circle.sync_verdict(0.0, 0, 0) == "consistent"
    assert circle.sync_verdict(-0.16, 1, 0) == "inconsistent"
    assert circle.sync_verdict(2.0, 0, 2) == "inconclusive"
    assert circle.sync_verdict(-2.0, 3, 0) == "consistent"
    assert circle.sync_verdict(-2.0, 0, 0) == "inconclusive"
    assert circle.sync_verdict(-0.5, 5, 0) == ""


@pytest.fixture(scope="module")
def report():
    return circle.run("test", executor="serial", progress=False)


def test_test_preset_end_to_end(report, tmp_path):
    thr = report.thresholds.set_index("k")
    assert abs(float(thr.loc[3, "eigen_thresholds"]) + 2 / 3) < 1e-12
    assert abs(thr.loc[3, "runs_threshold"] + 2 / 3) < 1e-5
    assert thr.loc[2, "eigen_thresholds"] == "none" and thr.loc[4, "eigen_thresholds"] == "none"
    # the eigenvector runs reproduce the scheme's rate of the eigenvalue (amplitude 1e-7: error ~1e-8)
    modes = report.stability[report.stability["kind"] != "random"]
    assert modes["diff"].abs().max() < 1e-6
    sync = report.sync
    assert np.all(sync["synchronised"] + sync["stuck"] + sync["unresolved"] == sync["runs"])
    assert np.all((sync["cp_low"] <= sync["fraction"]) & (sync["fraction"] <= sync["cp_high"]))
    # theorem (β >= -0.16): no run may end at a stable non-synchronised state
    assert sync.loc[sync["beta"] >= circle.BETA_SYNC, "stuck"].sum() == 0
    files = circle.write_outputs(report, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert all(n.startswith("circle_") for n in names), names
    assert {"circle_summary.md", "circle_config.json", "circle_sync.png", "circle_spectrum.pdf"} <= set(names)
    text = (tmp_path / "circle_summary.md").read_text()
    assert "arXiv 2507.22857" in text and "Clopper" in text
    assert sum(len(v) for v in files.values()) == len(names)

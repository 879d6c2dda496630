"""The cross-dimension part of the chaos study (d = 2, 3, 4, 5): settings, the task's exact properties, outputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from meanfield.cli import main
from meanfield.studies import chaos
from meanfield.studies.chaos import build, chaos_dims_replica, config, dims_config, dims_theory_slopes


def _params(d, **over):
    cfg = dims_config("tiny", overrides={str(d): over} if over else None)
    return {"d": d, "configs": cfg["configs"], "replica": 0, "preset": "tiny"}


def test_settings_and_parts():
    cfg = config("tiny", dims=True)
    assert cfg["dims"]["dims"] == [2, 3, 4, 5] and cfg["dims"]["replicas"] == 2
    assert set(build(cfg)) == {"chaos", "long", "dims"}
    assert set(build(cfg, parts=["dims"])) == {"dims"}
    assert "dims" not in config("tiny")  # opt-in: the other parts are unchanged
    assert config("test", dims=True).get("dims") is None  # the test preset has no cross-dimension part
    assert dims_theory_slopes(4, 64)[0] == {"coupling": -0.5, "w2": -1 / 3, "observable": -0.5}
    slopes, tol = dims_theory_slopes(3, 64)
    assert slopes["w2"] - tol["w2"] == pytest.approx(-0.5) and tol["coupling"] == 0.0
    with pytest.raises(ValueError, match="ref_coarse"):
        dims_config("tiny", overrides={"4": {"ref_coarse": [6]}})
    with pytest.raises(ValueError, match="unknown cross-dimension chaos settings"):
        dims_config("tiny", overrides={"lmax": 3})
    with pytest.raises(ValueError, match="the cross-dimension part has the dimensions"):
        dims_config("tiny", dims=[6])


@pytest.mark.parametrize("d", [2, 4, 5])
def test_task_outputs_obey_the_coupling_inequality(d):
    """X̄ = Φ_T(X(0)) pairs every particle with a sample of ρ_T, so by the triangle inequality
    |W_2(μ^N, ref) - W_2(X̄, ref)| <= W_2(μ^N, X̄) <= (π/2) × the chordal RMS coupling error
    (geodesic <= π/2 chordal); the reference is finer than the driving cloud."""
    out = chaos_dims_replica(_params(d), np.random.SeedSequence(3))
    assert out["Ns"].tolist() == [16, 32, 64]
    assert np.all(out["coupling"] > 0) and np.all(out["observable"] > 0)
    ok = np.isfinite(out["w2"])
    assert ok.sum() >= 2 and np.all(np.isfinite(out["w2_iid"][ok]))
    assert np.all(np.abs(out["w2"][ok] - out["w2_iid"][ok]) <= np.pi / 2 * out["coupling"][ok] + 1e-12)
    assert out["spde_coupling"] >= 0 and out["ref_rms"] > 0 and out["ref_nodes"] > out["M"]


def test_push_is_the_particle_map():
    """Without attention the stored step maps are the particles' maps: push() = solve_particles to round-off."""
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import RandomFeatureNoise
    from meanfield.particles import solve_particles
    from meanfield.spde import VonMisesFisher, solve_characteristics

    d = 4
    noise = RandomFeatureNoise(ActivationKernel("relu"), d=d, width=32, seed=1, t_max=0.25)
    rho0 = VonMisesFisher(np.eye(d)[-1], 1.0)
    sol = solve_characteristics(rho0, noise, 1.0, [0.0, 0.25], 0.0625, n_lat=5, attention=False, tol=None)
    x0 = rho0.sample(40, seed=2)
    p = solve_particles(x0, noise, 1.0, 0.0625, [0.25], attention="off")
    assert np.abs(sol.push(x0, 1) - p.final).max() < 1e-14


def test_cli_dims_part_writes_its_files(tmp_path, capsys):
    out = tmp_path / "chaos"
    assert main(["chaos", "--preset", "tiny", "--parts", "dims", "--out", str(out), "--executor", "serial",
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "Across dimensions: fitted exponents" in text
    for name in ["dims_table.csv", "dims_table.md", "dims_table.tex", "dims_figure.png", "dims_figure.pdf",
                 "dims_summary.md", "dims_spde_check.csv", "dims_reference.csv", "dims_diagnostics.csv",
                 "dims_config.json"]:
        assert (out / name).stat().st_size > 100, name
    assert not (out / "config.json").exists() and not (out / "summary.md").exists()
    table = pd.read_csv(out / "dims_table.csv")
    assert set(table["d"]) == {2, 3, 4, 5} and set(table["error"]) == {"coupling", "w2", "observable", "w2_iid"}
    assert set(table["verdict"]) <= {"consistent", "inconsistent", "inconclusive"}
    w2 = table[table["error"] == "w2"].set_index("d")["theory_slope"]
    assert w2[2] == -0.5 and w2[4] == pytest.approx(-1 / 3) and w2[5] == -0.25
    cfg = json.loads((out / "dims_config.json").read_text())
    assert cfg["part"] == "dims" and cfg["dims"] == [2, 3, 4, 5]


def test_cli_bad_parts(capsys, tmp_path):
    assert main(["chaos", "--preset", "tiny", "--parts", "dims,xyz", "--out", str(tmp_path)]) == 2
    assert "--parts" in capsys.readouterr().err
    assert main(["chaos", "--preset", "test", "--parts", "dims", "--out", str(tmp_path)]) == 2
    assert "presets" in capsys.readouterr().err


def test_module_paths():
    assert chaos_dims_replica.__module__ == "meanfield.studies.chaos"
    assert chaos.DIMS == (2, 3, 4, 5)

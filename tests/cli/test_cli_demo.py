"""The ``meanfield demo`` command: runs on small settings, prints the summary, writes the PNG."""

from __future__ import annotations

import pytest

from meanfield.cli import main
from meanfield.cli.demo import run_demo


def test_demo_summary_and_plot(tmp_path):
    summary = run_demo(out=tmp_path, n_tokens=6, layers=16, T=0.5, plot=True)
    assert (tmp_path / "demo_trajectories.png").stat().st_size > 10_000
    assert summary["largest | |x| - 1 |"] < 1e-12
    assert 0.99 < summary["kept fraction of kappa(1)"] <= 1.0
    assert abs(summary["Lyapunov exponent λ_1"] + summary["kappa(1) truncated"]) < 1e-12  # d = 3: λ_1 = -κ(1)
    assert summary["RMS distance transformer vs SDE at T"] < 1.0


def test_demo_cli_d2(tmp_path, capsys):
    assert main(["demo", "--d", "2", "--tokens", "5", "--layers", "8", "--T", "0.5", "--no-plot",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kept fraction of kappa(1)" in out and "RMS distance transformer vs SDE at T" in out


def test_demo_bad_input(capsys):
    assert main(["demo", "--tokens", "0", "--no-plot"]) == 2
    assert "tokens" in capsys.readouterr().err
    with pytest.raises(ValueError, match="beta"):
        run_demo(beta=float("inf"), plot=False)

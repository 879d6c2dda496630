"""The command line never loses work and never ends in a traceback: checks before computing,
one-line errors with documented exit codes, a fallback save, plain help texts."""

from __future__ import annotations

import json
import pickle
import time

import pytest

from meanfield.cli import SUBCOMMANDS, build_parser, main

UNWRITABLE = "/proc/meanfield-no-such-dir/x"


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.fixture
def no_compute(monkeypatch):
    """Fail loudly if a study starts computing: the checks must come first."""
    import meanfield.studies._common as common

    def refuse(*a, **k):
        raise AssertionError("computed before checking the outputs")

    monkeypatch.setattr(common, "run_parts", refuse)


@pytest.mark.parametrize("argv", [
    ["depth", "--test"],
    ["sync", "--test"],
    ["chaos", "--preset", "tiny", "--sphere", "1"],
])
def test_unwritable_out_fails_before_computing(argv, capsys, no_compute):
    start = time.perf_counter()
    assert main([*argv, "--out", UNWRITABLE, "--executor", "serial", "--no-progress"]) == 4
    assert time.perf_counter() - start < 5
    _one_line_error(capsys, f"meanfield {argv[0]}: error:", UNWRITABLE)


def test_unwritable_store_fails_before_computing(tmp_path, capsys, no_compute):
    assert main(["depth", "--test", "--out", str(tmp_path), "--store", UNWRITABLE, "--no-progress"]) == 4
    _one_line_error(capsys, "result store", UNWRITABLE)


def test_unreachable_scheduler(tmp_path, capsys, no_compute):
    start = time.perf_counter()
    code = main(["chaos", "--preset", "tiny", "--out", str(tmp_path), "--scheduler", "tcp://127.0.0.1:1"])
    assert code == 5 and time.perf_counter() - start < 10
    _one_line_error(capsys, "tcp://127.0.0.1:1")


def test_write_failure_after_computing_saves_the_results(tmp_path, monkeypatch, capsys):
    from meanfield.studies import chaos

    def fail(*a, **k):
        raise PermissionError(13, "Permission denied", str(tmp_path / "out"))

    monkeypatch.setattr(chaos, "write_outputs", fail)
    monkeypatch.chdir(tmp_path)
    argv = ["chaos", "--preset", "tiny", "--sphere", "1", "--out", str(tmp_path / "out"), "--executor", "serial",
            "--no-progress"]
    assert main(argv) == 4
    err = _one_line_error(capsys, "Permission denied", "saved to")
    saved = sorted(tmp_path.glob("meanfield-chaos-results-*.pkl"))
    assert len(saved) == 1 and str(saved[0]) in err
    with open(saved[0], "rb") as f:
        report = pickle.load(f)
    assert set(report.tables) == {1} and len(report.frame) == 2 * 3


def test_study_writes_resolved_config(tmp_path, capsys):
    out = tmp_path / "chaos"
    assert main(["chaos", "--preset", "tiny", "--sphere", "1", "--out", str(out), "--executor", "serial",
                 "--no-progress", "--seed", "0"]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["study"] == "chaos" and cfg["preset"] == "tiny" and cfg["root_seed"] == 0
    assert cfg["configs"]["1"]["Ns"] == [16, 32, 64] and cfg["spheres"] == [1]


# ---------------------------------------------------------------------------- spde


def _spde(tmp_path, *extra):
    return main(["spde", "--d", "2", "--lmax", "16", "--dt", "0.01", "--T", "0.02", "--n-save", "2",
                 "--noise-lmax", "4", "--no-plot", "--output", str(tmp_path / "run"), *extra])


@pytest.mark.parametrize("extra, needle", [
    (["--dt", "0"], "--dt must be > 0"),
    (["--noise-lmax", "-2"], "--noise-lmax must be >= 0"),
    (["--T", "-1"], "--T must be > 0"),
    (["--n-save", "0"], "--n-save must be >= 1"),
    (["--T", "0.025"], "must be a positive multiple of --dt"),
    (["--mu", "1", "0", "0"], "--mu must have d = 2 entries"),
])
def test_spde_parameter_messages(tmp_path, capsys, extra, needle):
    assert _spde(tmp_path, *extra) == 2
    _one_line_error(capsys, "meanfield spde: error:", needle)


def test_spde_config_errors(tmp_path, capsys):
    assert main(["spde", "--config", str(tmp_path / "missing.toml")]) == 4
    _one_line_error(capsys, "missing.toml", "No such file")
    garbage = tmp_path / "garbage.toml"
    garbage.write_bytes(b"this is = = not toml\x00\xff")
    assert main(["spde", "--config", str(garbage)]) == 2
    _one_line_error(capsys, "cannot parse", "garbage.toml")
    bad_t = tmp_path / "bad_t.toml"
    bad_t.write_text("T = -1\n")
    assert main(["spde", "--config", str(bad_t)]) == 2
    _one_line_error(capsys, "T (in ", "must be > 0")
    wrong_type = tmp_path / "wrong_type.toml"
    wrong_type.write_text('lmax = "many"\n')
    assert main(["spde", "--config", str(wrong_type)]) == 2
    _one_line_error(capsys, "lmax (in ", "must be an integer")


def test_spde_unwritable_output(capsys):
    assert main(["spde", "--output", UNWRITABLE + "/run"]) == 4
    _one_line_error(capsys, UNWRITABLE)


def test_spde_writes_settings_and_progress(tmp_path, capsys):
    assert _spde(tmp_path, "--progress") == 0
    cfg = json.loads((tmp_path / "run.json").read_text())
    assert cfg["lmax"] == 16 and cfg["d"] == 2 and cfg["command"] == "spde"
    assert build_parser().parse_args(["spde", "--progress"]).progress


def test_spde_unresolved_keeps_partial_solution_and_figure(tmp_path, capsys):
    from meanfield.spde import SPDESolution

    code = main(["spde", "--scheme", "pushforward", "--d", "2", "--lmax", "16", "--dt", "0.01", "--T", "0.3",
                 "--n-save", "31", "--kappa", "10", "--output", str(tmp_path / "run")])
    assert code == 3
    err = _one_line_error(capsys, "no longer resolved at t = 0.04", "--T 0.03", "--lmax 32", "--filter 16",
                          "--scheme characteristics", "run_partial.npz")
    assert "lower dt" not in err
    assert (tmp_path / "run_partial.png").stat().st_size > 1000
    assert (tmp_path / "run_partial.json").exists()
    assert len(SPDESolution.load(tmp_path / "run_partial.npz")) >= 1


# ---------------------------------------------------------------------------- help


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_help_is_plain_text_with_defaults_and_exit_codes(name, capsys):
    with pytest.raises(SystemExit):
        main([name, "--help"])
    text = capsys.readouterr().out
    for raw in (":func:", ":mod:", ":class:", ":math:", ":meth:", ":doc:", ":ref:", "``", "`~", ".. ", "SPEC",
                "\\beta", "\\rho", "$"):
        assert raw not in text, (raw, text)
    assert "exit codes:" in text and "4    file-system error" in text
    assert "(default: " in text
    # every option that has a value by default says which (including a default of 0), in the printed help
    import argparse

    from meanfield.cli._common import HelpFormatter

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flat = " ".join(text.split())
    formatter = HelpFormatter(f"meanfield {name}")
    for action in sub.choices[name]._actions:
        if not action.option_strings or action.default in (None, argparse.SUPPRESS) or action.default is False:
            continue
        if isinstance(action, (argparse._HelpAction, argparse._StoreConstAction)):
            continue
        shown = " ".join((formatter._get_help_string(action) % {"default": action.default}).split())
        assert "default" in shown and shown in flat, (name, action.option_strings, shown)


def test_demo_unwritable_out(capsys):
    assert main(["demo", "--tokens", "4", "--layers", "4", "--out", UNWRITABLE]) == 4
    _one_line_error(capsys, UNWRITABLE)

"""Tests of the study runner (meanfield.runner) and its result store (meanfield.runner.store)."""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import meanfield
import runner_tasks
from meanfield.runner._tasks import spawn_key
from meanfield.cli.execution import add_execution_arguments, execution_kwargs, report_location
from meanfield.runner import Study, StudyFailedError, run_study
from meanfield.runner.store import StoreMismatchError, load_store

TASKS_DIR = Path(__file__).resolve().parent  # holds runner_tasks.py
REPO_ROOT = TASKS_DIR.parents[1]

GRID = {"n": [1, 2, 3], "scale": [0.5, 2.0]}


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        yield client


def sorted_frame(frame: pd.DataFrame, columns) -> pd.DataFrame:
    return frame.sort_values(["n", "scale", "replica"]).reset_index(drop=True)[list(columns)]


def assert_bit_identical(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    for name in a.columns:
        if a[name].dtype.kind == "f":
            assert a[name].to_numpy().tobytes() == b[name].to_numpy().tobytes(), name


def with_arrays(result) -> pd.DataFrame:
    frame = result.frame.copy()
    frame["vec"] = [v.tobytes() for v in result.arrays["vec"]]
    return frame


# --------------------------------------------------------------------------- seeds and determinism


def test_task_seed_is_the_documented_seed_sequence():
    study = Study("det", runner_tasks.noise, grid=GRID, replicas=2, root_seed=7)
    task = study.tasks[3]
    expected = np.random.SeedSequence(7, spawn_key=spawn_key(task.params, task.replica))
    assert study.seed(task).entropy == 7
    assert study.seed(task).spawn_key == expected.spawn_key
    assert np.array_equal(study.seed(task).generate_state(4), expected.generate_state(4))
    assert len({t.spawn_key for t in study.tasks}) == len(study.tasks)
    assert len({t.key for t in study.tasks}) == len(study.tasks)


def test_results_bit_identical_across_executors_and_grid_orders(dask_client):
    study = Study("det", runner_tasks.noise, grid=GRID, replicas=2, root_seed=7)
    serial = run_study(study, executor="serial", progress=False)
    frame = with_arrays(serial)
    assert len(frame) == 12 and frame["mean"].nunique() == 12 and frame["first"].nunique() == 12

    # The documented seed formula reproduces every row.
    for task, row in zip(study.tasks, frame.itertuples()):
        direct = runner_tasks.noise(study.task_params(task), np.random.SeedSequence(7, spawn_key=task.spawn_key))
        assert direct["mean"] == row.mean and direct["vec"].tobytes() == row.vec

    pool = run_study(study, executor="pool", workers=2, progress=False)
    assert_bit_identical(with_arrays(pool), frame)
    dask = run_study(study, scheduler=dask_client.scheduler.address, progress=False)
    assert_bit_identical(with_arrays(dask), frame)

    shuffled = Study("det", runner_tasks.noise, grid={"scale": [2.0, 0.5], "n": [3, 1, 2]}, replicas=2, root_seed=7)
    points = [{"n": n, "scale": s} for n in GRID["n"] for s in GRID["scale"]]
    random.Random(1).shuffle(points)
    explicit = Study("det", runner_tasks.noise, grid=points, replicas=2, root_seed=7)
    for other in (shuffled, explicit):
        result = run_study(other, executor="serial", progress=False)
        assert_bit_identical(sorted_frame(with_arrays(result), frame.columns), sorted_frame(frame, frame.columns))

    # A different root seed changes every number.
    reseeded = run_study(Study("det", runner_tasks.noise, grid=GRID, replicas=2, root_seed=8), executor="serial", progress=False)
    assert not np.any(reseeded.frame["mean"].to_numpy() == frame["mean"].to_numpy())


def test_adding_grid_values_and_replicas_leaves_existing_results_unchanged():
    small = run_study(Study("det", runner_tasks.noise, grid=GRID, replicas=2, root_seed=7), executor="serial", progress=False)
    big_study = Study("det", runner_tasks.noise, grid={"n": [0, 1, 2, 3, 4], "scale": [0.5, 1.0, 2.0]}, replicas=3, root_seed=7)
    big = run_study(big_study, executor="serial", progress=False)
    big_frame = with_arrays(big)
    old = big_frame[big_frame["n"].isin(GRID["n"]) & big_frame["scale"].isin(GRID["scale"]) & (big_frame["replica"] < 2)]
    assert len(old) == 12
    assert_bit_identical(old.reset_index(drop=True), with_arrays(small))


def test_seed_by_gives_common_random_numbers():
    study = Study("crn", runner_tasks.noise, grid=GRID, replicas=2, seed_by=["n"])
    frame = run_study(study, executor="serial", progress=False).frame
    # The seed ignores "scale", so the draws only scale with it.
    for (_, _), group in frame.groupby(["n", "replica"]):
        first = group.set_index("scale")["first"]
        assert first[2.0] == 4.0 * first[0.5]
    assert frame.groupby("replica")["first"].nunique().eq(6).all()


# --------------------------------------------------------------------------- resume after SIGKILL

RESUME_STUDY = (
    "Study('resume', runner_tasks.slow_noise, grid={{'i': list(range(8))}}, replicas=2, root_seed=3, "
    "fixed={{'sleep': {sleep}, 'markers': {markers!r}}})"
)


def test_resume_after_sigkill_recomputes_nothing_and_loses_nothing(tmp_path):
    store, markers = tmp_path / "store", tmp_path / "markers"
    markers.mkdir()
    study_code = RESUME_STUDY.format(sleep=0.15, markers=str(markers))
    script = (
        "import sys, runner_tasks\n"
        "from meanfield.runner import Study, run_study\n"
        f"run_study({study_code}, executor='pool', workers=2, store=sys.argv[1], progress=False)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(TASKS_DIR)])}
    proc = subprocess.Popen([sys.executable, "-c", script, str(store)], env=env, start_new_session=True)
    records = store / "records"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if records.is_dir() and len(list(records.glob("*.parquet"))) >= 3:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the study finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and its pool workers, mid-run
    finally:
        proc.wait(timeout=30)

    before = {p.name: p.stat().st_mtime_ns for p in records.glob("*.parquet")}
    assert 3 <= len(before) < 16
    study = eval(study_code, {"Study": Study, "runner_tasks": runner_tasks})
    calls_before = {(t.params["i"], t.replica): runner_tasks.calls(markers, t.params["i"], t.replica) for t in study.tasks}
    finished = {(t.params["i"], t.replica) for t in study.tasks if f"{t.key}.parquet" in before}
    assert len(finished) == len(before)

    resumed = run_study(study, executor="serial", store=store, progress=False)

    assert resumed.n_resumed == len(before) and resumed.n_computed == 16 - len(before)
    for task in study.tasks:
        key = (task.params["i"], task.replica)
        added = runner_tasks.calls(markers, *key) - calls_before[key]
        assert added == (0 if key in finished else 1), key
    assert {name: (records / name).stat().st_mtime_ns for name in before} == before
    assert len(list(records.glob("*.parquet"))) == 16

    reference_markers = tmp_path / "reference_markers"
    reference_markers.mkdir()
    reference_study = eval(
        RESUME_STUDY.format(sleep=0.0, markers=str(reference_markers)), {"Study": Study, "runner_tasks": runner_tasks}
    )
    reference = run_study(reference_study, executor="serial", progress=False)
    assert_bit_identical(with_arrays(resumed), with_arrays(reference))
    _, loaded = load_store(store)
    assert_bit_identical(loaded, reference.frame)


def test_stored_records_keep_result_types_exactly(tmp_path):
    study = Study("types", runner_tasks.mixed_types, grid={"a": [1, 2]}, replicas=2)
    fresh = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    again = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    assert again.n_resumed == 4 and again.n_computed == 0
    pd.testing.assert_frame_equal(again.frame, fresh.frame, check_exact=True)
    dtypes = fresh.frame.dtypes
    assert dtypes["f32"] == np.float32 and dtypes["i8"] == np.int8 and dtypes["u64"] == np.uint64
    assert dtypes["py_int"] == np.int64 and dtypes["flag"] == np.bool_ and dtypes["zero_d"] == np.float64
    assert fresh.frame["u64"].iloc[0] == 2**63 + 5 and fresh.frame["nan"].isna().all()
    for name in ("grid", "ints", "spectrum"):
        for a, b in zip(fresh.arrays[name], again.arrays[name]):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert fresh.array("grid").shape == (4, 2, 3)


def test_unreadable_record_is_recomputed(tmp_path):
    study = Study("torn", runner_tasks.noise, grid={"n": [1, 2, 3]})
    first = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    victim = tmp_path / "s" / "records" / f"{study.tasks[1].key}.parquet"
    victim.write_bytes(b"not parquet")
    (tmp_path / "s" / "records" / ".leftover.parquet.123.abcd.tmp").write_bytes(b"partial")
    second = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    assert second.n_resumed == 2 and second.n_computed == 1
    assert_bit_identical(with_arrays(second), with_arrays(first))


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("executor", ["serial", "pool", "dask"])
def test_failing_task_is_reported_retried_once_and_others_kept(tmp_path, executor, request):
    markers = tmp_path / "markers"
    markers.mkdir()
    study = Study("flaky", runner_tasks.flaky, grid={"i": [0, 1, 2, 3, 4]}, fixed={"markers": str(markers)})
    scheduler = request.getfixturevalue("dask_client") if executor == "dask" else None
    with pytest.warns(RuntimeWarning, match="1 of 5 tasks"):
        result = run_study(
            study, executor=executor, scheduler=scheduler, workers=2, store=tmp_path / "s", progress=False
        )
    assert len(result.failures) == 1
    failure = result.failures[0]
    assert failure.params == {"i": 2, "replica": 0}
    assert failure.attempts == 2 and failure.error == "ValueError: boom at i=2"
    assert "in flaky" in failure.traceback and "ValueError: boom at i=2" in failure.traceback
    assert [runner_tasks.calls(markers, i, 0) for i in range(5)] == [1, 1, 2, 2, 1]
    assert result.frame["i"].tolist() == [0, 1, 3, 4]
    assert len(list((tmp_path / "s" / "records").glob("*.parquet"))) == 4

    # A rerun retries only the failed task.
    with pytest.warns(RuntimeWarning):
        again = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    assert again.n_resumed == 4 and again.n_computed == 0
    assert [runner_tasks.calls(markers, i, 0) for i in range(5)] == [1, 1, 4, 2, 1]


def test_raise_on_failure_and_no_retries(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    study = Study("flaky", runner_tasks.flaky, grid={"i": [0, 1, 2, 3, 4]}, fixed={"markers": str(markers)})
    with pytest.raises(StudyFailedError, match="boom at i=2") as info:
        run_study(study, executor="serial", retries=0, raise_on_failure=True, progress=False)
    result = info.value.result
    assert [f.params["i"] for f in result.failures] == [2, 3]
    assert all(f.attempts == 1 for f in result.failures)
    assert result.frame["i"].tolist() == [0, 1, 4]
    assert [runner_tasks.calls(markers, i, 0) for i in range(5)] == [1, 1, 1, 1, 1]


def test_dead_worker_process_is_retried_in_a_new_pool(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    study = Study("dies", runner_tasks.dies_once, grid={"i": [0, 1, 2, 3]}, fixed={"markers": str(markers)})
    result = run_study(study, executor="pool", workers=2, progress=False)
    assert result.failures == []
    assert result.frame["i"].tolist() == [0, 1, 2, 3]
    assert runner_tasks.calls(markers, 1, 0) == 2
    reference = run_study(study, executor="serial", progress=False)  # i=1 has been called, so it does not die
    assert_bit_identical(result.frame, reference.frame)


def test_invalid_result_is_a_task_failure():
    study = Study("clash", runner_tasks.noise, grid={"count": [1]})  # noise returns a result named "count"
    with pytest.warns(RuntimeWarning):
        result = run_study(study, executor="serial", progress=False)
    assert "clashes with a grid parameter" in result.failures[0].error


# --------------------------------------------------------------------------- the store refuses other studies


def test_store_of_a_different_study_is_refused(tmp_path, monkeypatch):
    store = tmp_path / "s"
    base = dict(name="m", fn=runner_tasks.noise, grid={"n": [1]}, replicas=2, fixed={"T": 1.0})
    first = run_study(Study(**base), executor="serial", store=store, progress=False)
    manifest_text = (store / "manifest.json").read_text()

    changes = {
        "fixed": ({"fixed": {"T": 2.0}}, r"T: stored 1\.0, now 2\.0"),
        "root seed": ({"root_seed": 1}, "root seed"),
        "name": ({"name": "other"}, "study name"),
        "function": ({"fn": runner_tasks.slow_noise}, "task function"),
        "seed_by": ({"seed_by": []}, "seed_by"),
    }
    for what, (change, message) in changes.items():
        with pytest.raises(StoreMismatchError, match=message):
            run_study(Study(**{**base, **change}), executor="serial", store=store, progress=False)
        with pytest.raises(StoreMismatchError):
            run_study(Study(**{**base, **change}), executor="serial", store=store, resume=False, progress=False)
    monkeypatch.setattr(meanfield, "__version__", "99.0")
    with pytest.raises(StoreMismatchError, match="meanfield version"):
        run_study(Study(**base), executor="serial", store=store, progress=False)
    monkeypatch.undo()
    assert (store / "manifest.json").read_text() == manifest_text  # refusals leave the store untouched

    # Extending the grid and the replicas only adds tasks.
    extended = run_study(Study(**{**base, "grid": {"n": [1, 2]}, "replicas": 3}), executor="serial", store=store, progress=False)
    assert extended.n_resumed == 2 and extended.n_computed == 4
    assert_bit_identical(with_arrays(extended).iloc[:2], with_arrays(first))

    # overwrite=True discards the old results.
    replaced = run_study(Study(**{**base, "fixed": {"T": 2.0}}), executor="serial", store=store, overwrite=True, progress=False)
    assert replaced.n_resumed == 0
    manifest, frame = load_store(store)
    assert manifest["fixed"] == {"T": 2.0} and len(frame) == 2

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(StoreMismatchError, match="not a meanfield result store"):
        run_study(Study(**base), executor="serial", store=foreign, progress=False)


def test_load_store_reads_manifest_table_and_arrays(tmp_path):
    study = Study("load", runner_tasks.noise, grid=GRID, replicas=2, root_seed=5, fixed={"T": 1.0})
    result = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    manifest, frame = load_store(tmp_path / "s", arrays=True)
    assert manifest["name"] == "load" and manifest["root_seed"] == 5 and manifest["replicas"] == 2
    assert manifest["task"] == "runner_tasks:noise" and manifest["version"] == meanfield.__version__
    assert manifest["fixed"] == {"T": 1.0} and len(manifest["fingerprint"]) == 64
    assert_bit_identical(frame.drop(columns="vec"), result.frame)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(frame["vec"], result.arrays["vec"]))
    with pytest.raises(FileNotFoundError, match="not a meanfield result store"):
        load_store(tmp_path / "nothing")


# --------------------------------------------------------------------------- arguments, Dask extra, CLI


def test_input_validation():
    with pytest.raises(TypeError, match="module level"):
        Study("bad", lambda params, seed: {}, grid={"n": [1]})
    with pytest.raises(ValueError, match="twice"):
        Study("bad", runner_tasks.noise, grid={"n": [1, 1]})
    with pytest.raises(ValueError, match="reserved"):
        Study("bad", runner_tasks.noise, grid={"replica": [1]})
    with pytest.raises(ValueError, match="repeat a grid parameter"):
        Study("bad", runner_tasks.noise, grid={"n": [1]}, fixed={"n": 2})
    with pytest.raises(ValueError, match="seed_by"):
        Study("bad", runner_tasks.noise, grid={"n": [1]}, seed_by=["m"])
    with pytest.raises(ValueError, match="replicas"):
        Study("bad", runner_tasks.noise, replicas=0)
    study = Study("ok", runner_tasks.noise)
    with pytest.raises(ValueError, match="executor"):
        run_study(study, executor="threads")
    with pytest.raises(ValueError, match="scheduler"):
        run_study(study, executor="pool", scheduler="tcp://127.0.0.1:1")


def test_dask_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"pip install meanfield\[distributed\]"):
        run_study(Study("d", runner_tasks.noise), executor="dask", progress=False)


def test_cli_execution_arguments_and_report(tmp_path, capsys):
    parser = add_execution_arguments(argparse.ArgumentParser())
    assert execution_kwargs(parser.parse_args([])) == {
        "executor": None, "workers": None, "scheduler": None, "store": None, "resume": True, "progress": True,
    }
    args = parser.parse_args(
        ["--workers", "2", "--scheduler", "tcp://10.0.0.5:8786", "--store", "out", "--no-resume", "--no-progress"]
    )
    assert execution_kwargs(args) == {
        "executor": None, "workers": 2, "scheduler": "tcp://10.0.0.5:8786", "store": "out", "resume": False,
        "progress": False,
    }
    with pytest.raises(SystemExit):
        parser.parse_args(["--workers", "0"])

    store = tmp_path / "s"
    result = run_study(Study("cli", runner_tasks.noise, replicas=3), executor="serial", store=store, progress=False)
    text = report_location(result)
    assert str(store) in text and "3 tasks done" in text and capsys.readouterr().out.strip() == text
    memory = run_study(Study("cli", runner_tasks.noise), executor="serial", progress=False)
    assert "not saved" in report_location(memory)

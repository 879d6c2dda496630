"""Tests of the result store's safety: locking, record fingerprints and checksums, damaged files,
unusable paths, and pool workers that end with the main process."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import runner_tasks
from meanfield.runner import (
    Study,
    StoreCorruptError,
    StoreError,
    StoreInUseError,
    StoreMismatchError,
    check_store_writable,
    child_seed,
    load_store,
    open_store,
    run_study,
)

TASKS_DIR = Path(__file__).resolve().parent  # holds runner_tasks.py
REPO_ROOT = TASKS_DIR.parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(TASKS_DIR)])}


def race_study(seed: int) -> Study:
    return Study("race", runner_tasks.pause, grid={"n": [1, 2, 3, 4]}, root_seed=seed, fixed={"sleep": 0.02})


def assert_same_table(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)


# --------------------------------------------------------------------------- two processes, one store

RACER = """
import sys, time
from pathlib import Path
import runner_tasks
from meanfield.runner import Study, StoreInUseError, StoreMismatchError, run_study

base, seed, rounds, tag = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
study = Study("race", runner_tasks.pause, grid={"n": [1, 2, 3, 4]}, root_seed=seed, fixed={"sleep": 0.02})
for r in range(rounds):
    (base / f"ready-{r}-{tag}").touch()
    while not (base / f"go-{r}").exists():
        time.sleep(0.0002)
    try:
        run_study(study, executor="serial", store=base / f"store-{r}", progress=False)
        outcome = "ok"
    except StoreMismatchError:
        outcome = "mismatch"
    except StoreInUseError:
        outcome = "in-use"
    # write then rename: the parent polls for the file and must never read it half-written
    (base / f"out-{r}-{tag}.tmp").write_text(outcome)
    (base / f"out-{r}-{tag}.tmp").replace(base / f"out-{r}-{tag}")
"""


def race(base: Path, seeds: tuple[int, int], rounds: int) -> list[dict]:
    """Run two processes that open ``base/store-r`` at the same moment, ``rounds`` times; return their outcomes."""
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, str(base), str(seed), str(rounds), str(i)], env=ENV)
        for i, seed in enumerate(seeds)
    ]
    outcomes = []
    try:
        for r in range(rounds):
            for name in (f"ready-{r}-0", f"ready-{r}-1", None, f"out-{r}-0", f"out-{r}-1"):
                if name is None:
                    (base / f"go-{r}").touch()  # both are spinning on this file: a synchronised start
                    continue
                deadline = time.monotonic() + 60
                while not (base / name).exists():
                    assert time.monotonic() < deadline and all(p.poll() in (None, 0) for p in procs), name
                    time.sleep(0.005)
            outcomes.append({seeds[i]: (base / f"out-{r}-{i}").read_text() for i in range(2)})
    finally:
        for p in procs:
            p.wait(timeout=60)
    assert [p.returncode for p in procs] == [0, 0]
    return outcomes


def test_two_studies_racing_for_a_new_store_never_mix(tmp_path):
    rounds = 4
    outcomes = race(tmp_path, (0, 1), rounds)
    references = {seed: run_study(race_study(seed), executor="serial", progress=False).frame for seed in (0, 1)}
    for r, outcome in enumerate(outcomes):
        assert sorted(outcome.values()) == ["mismatch", "ok"], outcome
        winner = next(seed for seed, what in outcome.items() if what == "ok")
        manifest, frame = load_store(tmp_path / f"store-{r}")  # verifies every record's fingerprint and checksum
        assert manifest["root_seed"] == winner
        assert_same_table(frame, references[winner])
        records = list((tmp_path / f"store-{r}" / "records").glob("*.parquet"))
        assert len(records) == 4
        for path in records:
            meta = json.loads(pq.read_schema(path).metadata[b"meanfield"])
            assert meta["fingerprint"] == manifest["fingerprint"]


def test_two_runs_of_one_study_racing_for_a_store_do_not_corrupt_it(tmp_path):
    rounds = 3
    outcomes = race(tmp_path, (5, 5), rounds)  # same seed: same manifest
    reference = run_study(race_study(5), executor="serial", progress=False).frame
    for r, outcome in enumerate(outcomes):
        # one dictionary key (same seed): read the files for both outcomes
        both = [(tmp_path / f"out-{r}-{i}").read_text() for i in range(2)]
        assert set(both) <= {"ok", "in-use"} and "ok" in both, both
        manifest, frame = load_store(tmp_path / f"store-{r}")
        assert manifest["root_seed"] == 5
        assert_same_table(frame, reference)
        again = run_study(race_study(5), executor="serial", store=tmp_path / f"store-{r}", progress=False)
        assert again.n_resumed == 4 and again.n_computed == 0


def test_open_store_is_exclusive_in_process(tmp_path):
    path = tmp_path / "s"
    study, other = race_study(0), race_study(1)
    with open_store(path, study.manifest()):
        with pytest.raises(StoreInUseError, match=rf"in use by pid {os.getpid()}\b") as info:
            open_store(path, study.manifest())
        assert info.value.pid == os.getpid() and "\n" not in str(info.value)
        with pytest.raises(StoreMismatchError, match="root seed"):
            open_store(path, other.manifest())
        start = time.monotonic()
        with pytest.raises(StoreInUseError):
            open_store(path, study.manifest(), wait=0.3)
        assert time.monotonic() - start >= 0.3
    with open_store(path, study.manifest()) as store:  # released on close
        assert store.path == path
    result = run_study(study, executor="serial", store=path, progress=False)
    assert result.n_computed == 4


# --------------------------------------------------------------------------- edited, foreign and damaged files


def rewrite_record(path: Path, change) -> None:
    """Rewrite a Parquet record through ``change(table) -> table``, keeping its metadata."""
    table = pq.read_table(path)
    pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), path)


def test_edited_record_fails_its_checksum_and_is_recomputed(tmp_path, caplog):
    study = Study("edit", runner_tasks.noise, grid={"n": [1, 2, 3]}, root_seed=2)
    first = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    victim = tmp_path / "s" / "records" / f"{study.tasks[1].key}.parquet"
    column = "mean"
    rewrite_record(victim, lambda t: t.set_column(t.column_names.index(column), column, [[0.123]]))

    with pytest.raises(StoreCorruptError, match=f"{victim}.*checksum") as info:
        load_store(tmp_path / "s")
    assert "\n" not in str(info.value)

    with caplog.at_level(logging.WARNING, logger="meanfield.runner"):
        second = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    assert str(victim) in caplog.text and "checksum" in caplog.text
    assert second.n_resumed == 2 and second.n_computed == 1
    assert_same_table(second.frame, first.frame)
    assert_same_table(load_store(tmp_path / "s")[1], first.frame)

    # An edited array (in the .npz file) is caught too.
    npz = victim.with_suffix(".npz")
    with np.load(npz) as data:
        arrays = dict(data)
    arrays["vec"] = arrays["vec"] + 1.0
    np.savez(npz, **arrays)
    with pytest.raises(StoreCorruptError, match="checksum"):
        load_store(tmp_path / "s")


def test_record_with_a_column_removed_names_the_file(tmp_path):
    study = Study("cut", runner_tasks.noise, grid={"n": [1, 2]})
    first = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    victim = tmp_path / "s" / "records" / f"{study.tasks[0].key}.parquet"
    rewrite_record(victim, lambda t: t.drop(["first"]))
    with pytest.raises(StoreCorruptError, match=rf"{victim}.*'first'.*missing"):
        load_store(tmp_path / "s")
    second = run_study(study, executor="serial", store=tmp_path / "s", progress=False)
    assert second.n_computed == 1
    assert_same_table(second.frame, first.frame)


def test_foreign_record_is_refused(tmp_path):
    mine = Study("f", runner_tasks.noise, grid={"n": [1, 2]}, root_seed=0)
    theirs = Study("f", runner_tasks.noise, grid={"n": [1, 2]}, root_seed=1)
    run_study(mine, executor="serial", store=tmp_path / "mine", progress=False)
    run_study(theirs, executor="serial", store=tmp_path / "theirs", progress=False)
    key = mine.tasks[0].key  # the same key in both stores: keys depend on the task's parameters only
    for suffix in (".npz", ".parquet"):
        source = tmp_path / "theirs" / "records" / f"{key}{suffix}"
        (tmp_path / "mine" / "records" / source.name).write_bytes(source.read_bytes())
    target = tmp_path / "mine" / "records" / f"{key}.parquet"
    with pytest.raises(StoreMismatchError, match=rf"{target}.*another study"):
        run_study(mine, executor="serial", store=tmp_path / "mine", progress=False)
    with pytest.raises(StoreMismatchError, match="another study"):
        load_store(tmp_path / "mine")


def test_garbage_or_edited_manifest_names_the_file(tmp_path):
    study = Study("g", runner_tasks.noise, grid={"n": [1]}, root_seed=0)
    store = tmp_path / "s"
    run_study(study, executor="serial", store=store, progress=False)
    manifest_path = store / "manifest.json"
    original = manifest_path.read_text()

    manifest_path.write_text("{ this is not json")
    for call in (lambda: load_store(store), lambda: run_study(study, executor="serial", store=store, progress=False)):
        with pytest.raises(StoreCorruptError, match=rf"{manifest_path} is not valid JSON") as info:
            call()
        assert "\n" not in str(info.value) and isinstance(info.value, OSError)

    manifest_path.write_text("[1, 2]")
    with pytest.raises(StoreCorruptError, match=rf"{manifest_path} is not a JSON object"):
        load_store(store)

    edited = json.loads(original)
    edited["root_seed"] = 1  # edited by hand: the fingerprint no longer matches
    manifest_path.write_text(json.dumps(edited))
    with pytest.raises(StoreCorruptError, match=rf"{manifest_path} does not match its fingerprint"):
        run_study(Study("g", runner_tasks.noise, grid={"n": [1]}, root_seed=1), executor="serial", store=store,
                  progress=False)
    with pytest.raises(StoreCorruptError, match="fingerprint"):
        load_store(store)

    # overwrite=True discards a damaged store.
    replaced = run_study(study, executor="serial", store=store, overwrite=True, progress=False)
    assert replaced.n_computed == 1 and len(load_store(store)[1]) == 1


# --------------------------------------------------------------------------- unusable store paths


def test_unwritable_store_fails_fast_naming_the_path(tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    study = Study("w", runner_tasks.slow_noise, grid={"i": [0, 1]}, fixed={"sleep": 0.0, "markers": str(markers)})
    with pytest.raises(StoreError, match=r"^cannot create store at /proc/x/store: ") as info:
        run_study(study, executor="serial", store="/proc/x/store", progress=False)
    assert "\n" not in str(info.value) and info.value.path == Path("/proc/x/store")
    assert list(markers.iterdir()) == []  # nothing was computed

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(StoreError, match=rf"cannot create store at {a_file / 'sub'}: "):
        check_store_writable(a_file / "sub")
    assert check_store_writable(tmp_path / "new" / "store").is_dir()


# --------------------------------------------------------------------------- pool workers end with the main process


def descendants(pid: int) -> list[int]:
    try:
        import psutil
    except ImportError:
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        found, frontier = [], [pid]
        while frontier:
            children = [p for p, parent in parents.items() if parent in frontier]
            found += children
            frontier = children
        return found
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        import psutil
    except ImportError:
        stat = Path(f"/proc/{pid}/stat")
        if stat.parent.exists():
            try:
                return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_pool_workers_end_when_the_main_process_is_killed(tmp_path, sig):
    markers = tmp_path / "markers"
    markers.mkdir()
    script = (
        "import sys, runner_tasks\n"
        "from meanfield.runner import Study, run_study\n"
        "study = Study('k', runner_tasks.slow_noise, grid={'i': [0, 1, 2, 3]}, fixed={'sleep': 60, 'markers': sys.argv[1]})\n"
        "run_study(study, executor='pool', workers=2, store=sys.argv[2], progress=False)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(markers), str(tmp_path / "s")], env=ENV,
                            start_new_session=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(list(markers.iterdir())) < 2:  # both workers are inside a 60 s task
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        workers = descendants(proc.pid)
        assert len(workers) >= 2
        os.kill(proc.pid, sig)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [p for p in workers if alive(p)]
        assert survivors == [], f"processes still running {time.monotonic() - deadline + 5:.1f} s after the kill"
    finally:
        for p in [proc.pid, *workers]:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        proc.wait(timeout=10)
    # The killed run left a store that a new run can open (the OS released its lock).
    with open_store(tmp_path / "s", Study("k", runner_tasks.slow_noise, grid={"i": [0, 1, 2, 3]},
                                          fixed={"sleep": 60, "markers": str(markers)}).manifest()):
        pass


# --------------------------------------------------------------------------- child seeds


def test_child_seed_is_the_task_seed_and_nests():
    for seed_by in (None, ["n"]):
        study = Study("c", runner_tasks.noise, grid={"n": [1, 2], "scale": [0.5, 2.0]}, replicas=2, root_seed=9,
                      seed_by=seed_by)
        for task in study.tasks:
            params = task.params if seed_by is None else {"n": task.params["n"]}
            derived = child_seed(9, {"params": params, "replica": task.replica})
            assert derived.spawn_key == study.seed(task).spawn_key and derived.entropy == 9
            assert np.array_equal(derived.generate_state(4), study.seed(task).generate_state(4))
    parent = child_seed(3, "a")
    assert child_seed(parent, "b").spawn_key == child_seed(3, "a", "b").spawn_key
    assert child_seed(np.random.SeedSequence(3), "a").spawn_key == parent.spawn_key
    states = {tuple(child_seed(3, k).generate_state(2)) for k in ("a", "b", 1, 1.0, {"x": 1})}
    assert len(states) == 5
    with pytest.raises(TypeError):
        child_seed(-1, "a")

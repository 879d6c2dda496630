"""The deterministic mode of the study runner: every task runs the package's transforms on one
thread (ducc0's multithreaded transforms add in a timing-dependent order), so that study tables
are bit-identical across runs and executors, and so is an S^2 SPDE solve repeated in one process."""

from __future__ import annotations

import os
import threading

import numpy as np
import pandas as pd
import pytest

import runner_tasks
from meanfield._threads import (POINTS_PER_THREAD, default_threads, deterministic, is_deterministic, point_threads,
                                usable_cpus)
from meanfield.cli import main
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath
from meanfield.runner import Study, run_study
from meanfield.spde import VonMisesFisher, solve_spde


def test_deterministic_block_sets_one_thread_only_inside_and_only_in_its_thread(monkeypatch):
    monkeypatch.delenv("MEANFIELD_NUM_THREADS", raising=False)
    outside = default_threads()
    seen = []
    with deterministic():
        assert default_threads() == 1 and is_deterministic()
        with deterministic(False):  # a disabled block does not switch an enclosing one off
            assert default_threads() == 1
        worker = threading.Thread(target=lambda: seen.append(default_threads()))
        worker.start()
        worker.join()
    assert default_threads() == outside and seen == [outside]
    with deterministic(False):
        assert default_threads() == outside
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "two")
    with deterministic(), pytest.raises(ValueError, match="MEANFIELD_NUM_THREADS must be a positive integer"):
        default_threads()


def test_point_transforms_take_one_thread_per_block_of_points_and_one_inside_deterministic(monkeypatch):
    """point_threads: one thread below POINTS_PER_THREAD units of work n + 2 (lmax + 1)², then at most one
    per unit, never more than default_threads() (MEANFIELD_NUM_THREADS), one inside deterministic(); the
    spectral attention asks it per call (with its degree) unless given a thread count."""
    import meanfield.attention_spectral as att_mod
    from meanfield.attention_spectral import SpectralAttention

    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "4")
    assert [point_threads(n) for n in (1, POINTS_PER_THREAD - 1, POINTS_PER_THREAD, 3 * POINTS_PER_THREAD,
                                       100 * POINTS_PER_THREAD)] == [1, 1, 1, 3, 4]
    lmax = 63  # 2 (lmax + 1)² = 8192 units of work on top of the points: the second assertion fails if lmax is ignored
    assert point_threads(POINTS_PER_THREAD - 8192, lmax) == 1 and point_threads(2 * POINTS_PER_THREAD - 8192, lmax) == 2
    with deterministic():
        assert point_threads(100 * POINTS_PER_THREAD) == 1
    seen = []
    real = att_mod.synthesis_at

    def spy(*args, **kw):
        seen.append(kw["nthreads"])
        return real(*args, **kw)

    monkeypatch.setattr(att_mod, "synthesis_at", spy)
    x = np.random.default_rng(0).normal(size=(2 * POINTS_PER_THREAD, 3))
    x /= np.linalg.norm(x, axis=1)[:, None]
    # ducc0's transforms (500 tokens at degree 12 would take the exact ones, which have no threads argument)
    SpectralAttention(3, 1.0, s2_backend="nufft").velocity(x[:500])
    SpectralAttention(3, 1.0, s2_backend="nufft").velocity(x)
    SpectralAttention(3, 1.0, nthreads=3, s2_backend="nufft").velocity(x[:500])
    assert seen == [1, 1, 2, 2, 3, 3]


def test_parallel_rows_covers_every_row_once_and_runs_blas_on_one_thread_while_split(monkeypatch):
    """parallel_rows: blocks of at most ``block`` rows covering range(n) once each; from ``min_rows``
    rows they run on default_threads() threads, with the BLAS pools on one thread meanwhile (their
    threads would spin on the cores these use) and restored afterwards."""
    import meanfield._threads as threads

    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "2")
    before = runner_tasks.blas_threads()
    for n, block, min_rows, split in [(threads.PARALLEL_MIN_ROWS + 1001, None, None, True), (100, 7, None, False),
                                      (100, 7, 14, True)]:
        seen = np.zeros(n, dtype=int)
        sizes, blas, names = [], set(), set()

        def fn(s, e):
            seen[s:e] += 1
            sizes.append(e - s)
            blas.add(runner_tasks.blas_threads())
            names.add(threading.current_thread().name)

        threads.parallel_rows(fn, n, block=block, min_rows=min_rows)
        assert (seen == 1).all() and max(sizes) <= (block or threads.CACHE_ROWS)
        assert len(names) == (2 if split else 1)
        assert blas == ({1} if split else {before})
        assert runner_tasks.blas_threads() == before


def test_parallel_rows_called_concurrently_restores_the_blas_threads(monkeypatch):
    """Two threads split rows at once, interleaved so that the first finishes while the second is
    running: every row is covered once, and afterwards the BLAS pools have their threads back (with
    a limit per call, the second call would restore the first one's limit of one thread). A call
    from inside a kernel runs too (no thread waits for itself)."""
    import meanfield._threads as threads

    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "2")
    before = runner_tasks.blas_threads()
    n = threads.PARALLEL_MIN_ROWS + 10
    seen = {"a": np.zeros(n, dtype=int), "b": np.zeros(n, dtype=int)}
    a_running, b_running, a_done = threading.Event(), threading.Event(), threading.Event()

    def fn_a(s, e):
        a_running.set()
        seen["a"][s:e] += 1
        assert b_running.wait(10)

    def fn_b(s, e):
        b_running.set()
        assert a_done.wait(10)
        seen["b"][s:e] += 1

    def run_a():
        threads.parallel_rows(fn_a, n)
        a_done.set()

    def nested(s, e):
        threads.parallel_rows(lambda s2, e2: None, n)
        seen["b"][s:e] += 1

    ta, tb = threading.Thread(target=run_a), threading.Thread(target=threads.parallel_rows, args=(fn_b, n))
    ta.start()
    assert a_running.wait(10)  # the first call is split before the second starts
    tb.start()
    ta.join(20)
    tb.join(20)
    assert (seen["a"] == 1).all() and (seen["b"] == 1).all()
    assert runner_tasks.blas_threads() == before
    threads.parallel_rows(nested, n)
    assert (seen["b"] == 2).all()


def _split_rows_in_child(n, queue):
    import meanfield._threads as threads

    y = np.zeros(n)

    def fn(s, e):
        y[s:e] += 1

    threads.parallel_rows(fn, n)
    queue.put(int(y.sum()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_parallel_rows_in_a_forked_child_after_the_parent_split(monkeypatch):
    """A child forked after the parent split rows inherits the pool object without its threads:
    it must start a pool of its own, not wait for ever on the inherited one."""
    import multiprocessing

    import meanfield._threads as threads

    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "2")
    n = threads.PARALLEL_MIN_ROWS + 5
    threads.parallel_rows(lambda s, e: None, n)  # the parent's pool now has threads
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_split_rows_in_child, args=(n, queue))
    child.start()
    child.join(30)
    hung = child.is_alive()
    if hung:
        child.kill()
    assert not hung and child.exitcode == 0 and queue.get(timeout=5) == n


def test_inside_deterministic_spin0_point_syntheses_avoid_synthesis_general(monkeypatch):
    """Inside deterministic() no spin-0 field at points goes through ducc0's synthesis_general (which
    gives another last bit in some calls, on one thread, as the addresses of its buffers vary: this
    made the chaos records of a Dask worker differ from the serial run's): evaluation, the Hessian's
    value and Laplacian, and the spectral attention's g take the doubled-circle route. Outside the
    block synthesis_general is used, and both agree to the transforms' accuracy (1e-12 requested)."""
    import ducc0

    from meanfield.attention_spectral import SpectralAttention
    from meanfield.sphere import basis

    spins = []
    general = ducc0.sht.synthesis_general

    def spy(**kw):
        spins.append(kw["spin"])
        return general(**kw)

    monkeypatch.setattr(ducc0.sht, "synthesis_general", spy)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2000, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    att = SpectralAttention(3, 2.0)
    for lmax in (16, 40):
        b = basis(3, lmax)
        c = b.from_real(rng.normal(size=b.n_real))
        spins.clear()
        with deterministic():
            det, hess, v_det = b.evaluate(c, x), b.hessian_at(c, x), att(x)
        assert 0 not in spins and spins  # the gradient and spin-2 parts still use the fast transform
        spins.clear()
        nufft, v_nufft = b.evaluate(c, x), att(x)
        assert 0 in spins
        # each route is within ~ε = 1e-12 (relative) of the field: measured differences 1e-13-7e-13
        assert np.abs(det - nufft).max() <= 1e-11 * np.abs(nufft).max()
        assert np.abs(hess[0] - nufft).max() <= 1e-11 * np.abs(nufft).max()
        # each velocity is within the evaluator's tol of the exact attention velocity
        assert np.abs(v_det - v_nufft).max() <= 2 * att.tol


def _solve(scheme: str) -> bytes:
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=6, seed=1, t_max=0.25)
    extra = {"n_lat": 24} if scheme == "characteristics" else {}
    sol = solve_spde(VonMisesFisher([0, 0, 1], 4.0), noise, beta=1.0, lmax=64, dt=2**-6, t_eval=[0.125, 0.25],
                     scheme=scheme, **extra)
    return np.asarray([sol.real_coefficients(i) for i in range(len(sol))]).tobytes()


@pytest.mark.parametrize("scheme", ["pushforward", "characteristics"])
def test_solve_spde_on_s2_twice_in_one_process_is_bit_identical(scheme, monkeypatch):
    monkeypatch.delenv("MEANFIELD_NUM_THREADS", raising=False)
    with deterministic():
        runs = {_solve(scheme) for _ in range(3)}
    assert len(runs) == 1


@pytest.mark.parametrize("executor", ["serial", "pool", "dask"])
def test_every_executor_runs_tasks_on_one_thread(executor, monkeypatch):
    if executor == "dask":
        pytest.importorskip("distributed")
    monkeypatch.delenv("MEANFIELD_NUM_THREADS", raising=False)
    study = Study("threads", runner_tasks.threads, grid={"i": [0, 1]})
    before = runner_tasks.blas_threads()
    frame = run_study(study, executor=executor, workers=2, progress=False).frame
    assert frame["threads"].tolist() == [1, 1] and frame["deterministic"].all()
    assert frame["blas_threads"].tolist() == [1, 1]
    # the serial back-end's tasks run in this process: its BLAS pools are restored afterwards
    assert runner_tasks.blas_threads() == before
    if executor == "serial":
        free = run_study(study, executor="serial", progress=False, deterministic=False).frame
        assert free["threads"].tolist() == [default_threads()] * 2
        assert free["blas_threads"].tolist() == [before] * 2
    if executor == "pool":
        # without deterministic, each of the 2 workers keeps its share of the cores for BLAS
        free = run_study(study, executor="pool", workers=2, progress=False, deterministic=False).frame
        assert free["blas_threads"].tolist() == [max(1, usable_cpus() // 2)] * 2
        with pytest.raises(TypeError, match="deterministic must be True or False"):
            run_study(study, executor="serial", progress=False, deterministic="yes")


def _numbers(frame: pd.DataFrame) -> bytes:
    """A table's bytes, without the wall-time columns (which no run repeats)."""
    return frame.drop(columns=[c for c in frame.columns if c.endswith("_seconds")]).to_csv(index=False).encode()


def _records(result) -> bytes:
    arrays = b"".join(name.encode() + np.ascontiguousarray(a).tobytes() for name, a in sorted(result.arrays.items()))
    return _numbers(result.frame) + arrays


def _mismatch(x: np.ndarray, y: np.ndarray) -> str:
    """How two same-shaped float arrays with different bits differ: the entries whose values differ
    (NaN against NaN counts as equal) and the largest difference among them."""
    unequal = ~((x == y) | (np.isnan(x) & np.isnan(y)))
    if not unequal.any():
        return "equal values, other bits (signed zeros or NaN payloads)"
    both = unequal & np.isfinite(x) & np.isfinite(y)
    largest = f", largest difference {np.max(np.abs(x[both] - y[both])):.3g}" if both.any() else ""
    return f"{int(unequal.sum())} of {x.size} entries differ{largest} (values up to {np.nanmax(np.abs(y)):.3g})"


def _differences(result, reference) -> str:
    """What differs between two runs of one study: failed tasks, then each column and array that is
    not bit-identical (the message of a failed comparison, so that a rare mismatch names its quantity)."""
    out = [f"failed task {f.params}: {f.error}" for f in result.failures]
    a, b = result.frame, reference.frame
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return "; ".join(out + [f"tables differ in shape: {a.shape} {list(a.columns)} against {b.shape}"])
    pairs = [(col, a[col].to_numpy(), b[col].to_numpy()) for col in a.columns if not col.endswith("_seconds")]
    for name in sorted(set(result.arrays) | set(reference.arrays)):
        x, y = (np.asarray(r.arrays[name]) if name in r.arrays else None for r in (result, reference))
        if x is None or y is None or x.shape != y.shape:
            out.append(f"array {name}: present or shaped differently")
        else:
            pairs.append((f"array {name}", x, y))
    for name, x, y in pairs:
        if np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes():
            continue
        floats = x.dtype.kind == "f" and y.dtype.kind == "f"
        out.append(f"{name}: {_mismatch(x, y) if floats else f'{x.tolist()} against {y.tolist()}'}")
    return "; ".join(out)


def test_chaos_records_are_bit_identical_across_runs_and_executors(monkeypatch):
    """Every number of the S^2 chaos study (tiny preset: the SPDE, particles, coupling, W_2 and
    observable errors of two replicas): two serial runs, the pool and Dask agree bit for bit."""
    pytest.importorskip("distributed")
    from meanfield.studies import chaos

    monkeypatch.delenv("MEANFIELD_NUM_THREADS", raising=False)
    study = chaos.build(chaos.config("tiny", "2", long=False), 0)["chaos"]
    reference = run_study(study, executor="serial", progress=False)
    first = _records(reference)
    for executor in ("serial", "pool", "dask"):
        result = run_study(study, executor=executor, workers=2, progress=False)
        assert _records(result) == first, f"{executor}: {_differences(result, reference)}"


def test_chaos_tables_are_bit_identical_between_executors(tmp_path, monkeypatch, capsys):
    """What ``meanfield chaos`` writes: the serial run and the pool write the same S^2 rate
    table and SPDE check byte for byte, and the same diagnostics up to wall times."""
    monkeypatch.delenv("MEANFIELD_NUM_THREADS", raising=False)
    for executor in ("serial", "pool"):
        argv = ["chaos", "--preset", "tiny", "--sphere", "2", "--no-long", "--out", str(tmp_path / executor),
                "--executor", executor, "--workers", "2", "--no-progress"]
        assert main(argv) == 0, capsys.readouterr().err
    a, b = tmp_path / "serial", tmp_path / "pool"
    for table in ("table_s2.csv", "spde_check.csv"):
        assert (a / table).read_bytes() == (b / table).read_bytes(), table
    assert _numbers(pd.read_csv(a / "diagnostics.csv")) == _numbers(pd.read_csv(b / "diagnostics.csv"))

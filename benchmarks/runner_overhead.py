"""Measure the study runner's cost: overhead per task of each executor, and pool speed-up.

Run from the repository root::

    python benchmarks/runner_overhead.py [--workers 2] [--tasks 2000]

Prints, for each executor, the start-up time (a one-task study) and the extra
wall time per trivial task, with results kept in memory and with a result store
(which writes one Parquet file per task); then 20 tasks of about 0.2 s CPU each,
serially, on ``--workers`` pool and Dask workers, and on a bare
``multiprocessing.Pool`` for reference: wall time, and the span from the first
task's start to the last task's end (start-up excluded). Other load on the
machine distorts the numbers: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time

from meanfield.runner import Study, run_study


def trivial(params, seed):
    """Do nothing: the runner's own cost per task."""
    return {"x": 0.0}


def busy(params, seed=None):
    """Pure-Python arithmetic (``params['loops']`` iterations); returns its start and end times."""
    start = time.perf_counter()
    x = 0
    for i in range(params["loops"]):
        x += i * i % 7
    return {"x": x, "start": start, "end": time.perf_counter()}


def _calibrate(seconds: float) -> int:
    loops = 100_000
    start = time.perf_counter()
    busy({"loops": loops}, None)
    return int(loops * seconds / (time.perf_counter() - start))


def _wall(study, **kwargs) -> float:
    start = time.perf_counter()
    result = run_study(study, progress=False, **kwargs)
    assert not result.failures
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=2000)
    args = parser.parse_args()
    workers, n = args.workers, args.tasks

    print(f"overhead per trivial task ({n} tasks, {workers} workers)")
    for executor in ("serial", "pool", "dask"):
        one = Study("one", trivial)
        many = Study("many", trivial, grid={"i": list(range(n))})
        for label, use_store in (("memory", False), ("store", True)):
            with tempfile.TemporaryDirectory() as tmp:
                store_one = f"{tmp}/one" if use_store else None
                store_many = f"{tmp}/many" if use_store else None
                t1 = _wall(one, executor=executor, workers=workers, store=store_one)
                tn = _wall(many, executor=executor, workers=workers, store=store_many)
            print(f"  {executor:6s} {label:6s}: start-up {t1:6.2f} s, per task {1e3 * (tn - t1) / (n - 1):6.3f} ms")

    loops = _calibrate(0.2)
    print(f"20 tasks of about 0.2 s CPU, {workers} workers: wall time, span from first task start to last")
    print("task end, mean task duration (it grows when the machine's cores are busy with other work)")
    study = Study("busy", busy, grid={"i": list(range(20))}, fixed={"loops": loops})

    def report(label, wall, rows):
        span = max(r["end"] for r in rows) - min(r["start"] for r in rows)
        mean = sum(r["end"] - r["start"] for r in rows) / len(rows)
        print(f"  {label:28s} wall {wall:5.2f} s, span {span:5.2f} s, mean task {mean:5.3f} s")
        return wall, span

    def runner(executor):
        start = time.perf_counter()
        result = run_study(study, executor=executor, workers=workers, progress=False)
        return report(f"runner {executor}", time.perf_counter() - start, result.frame.to_dict("records"))

    serial_wall, serial_span = runner("serial")
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(busy, [{"loops": 1}] * workers)  # start the processes first
        start = time.perf_counter()
        rows = pool.map(busy, [{"loops": loops}] * 20, chunksize=1)
        _, bare_span = report("bare multiprocessing.Pool", time.perf_counter() - start, rows)
    for executor in ("pool", "dask"):
        wall, span = runner(executor)
        print(f"    speed-up over serial: {serial_wall / wall:4.2f} (wall), {serial_span / span:4.2f} (span)")
    print(f"  bare pool speed-up (span): {serial_span / bare_span:4.2f}")


if __name__ == "__main__":
    main()

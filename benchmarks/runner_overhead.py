"""Measure the study runner's cost: overhead per task of each executor, and pool speed-up.

Run from the repository root::

    python benchmarks/runner_overhead.py [--workers 2] [--tasks 2000]

Prints, for each executor, the start-up time (a one-task study) and the extra
wall time per trivial task, with results kept in memory and with a result store
(which writes one Parquet file per task); then the wall time of 20 tasks of
about 0.2 s CPU each, serially and on ``--workers`` pool workers and Dask
workers. Other load on the machine distorts the numbers: run it on a quiet one.
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
    """Pure-Python arithmetic: ``params['loops']`` iterations (no system calls)."""
    x = 0
    for i in range(params["loops"]):
        x += i * i % 7
    return {"x": x}


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
    startup = {}
    for executor in ("serial", "pool", "dask"):
        one = Study("one", trivial)
        many = Study("many", trivial, grid={"i": list(range(n))})
        for label, use_store in (("memory", False), ("store", True)):
            with tempfile.TemporaryDirectory() as tmp:
                store_one = f"{tmp}/one" if use_store else None
                store_many = f"{tmp}/many" if use_store else None
                t1 = _wall(one, executor=executor, workers=workers, store=store_one)
                tn = _wall(many, executor=executor, workers=workers, store=store_many)
            startup.setdefault(executor, t1)
            print(f"  {executor:6s} {label:6s}: start-up {t1:6.2f} s, per task {1e3 * (tn - t1) / (n - 1):6.3f} ms")

    loops = _calibrate(0.2)
    print(f"20 tasks of about 0.2 s CPU, {workers} workers")
    study = Study("busy", busy, grid={"i": list(range(20))}, fixed={"loops": loops})
    serial = _wall(study, executor="serial")
    print(f"  serial: {serial:5.2f} s")
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(busy, [{"loops": 1}] * workers)  # start the processes first
        start = time.perf_counter()
        pool.map(busy, [{"loops": loops}] * 20, chunksize=1)
        raw = time.perf_counter() - start
    print(f"  bare multiprocessing.Pool, without start-up: {raw:5.2f} s, speed-up {serial / raw:4.2f} (what the machine allows now)")
    for executor in ("pool", "dask"):
        wall = _wall(study, executor=executor, workers=workers)
        net = wall - startup[executor]
        print(
            f"  {executor:6s}: {wall:5.2f} s, speed-up {serial / wall:4.2f}; "
            f"without its start-up {net:5.2f} s, speed-up {serial / net:4.2f}"
        )


if __name__ == "__main__":
    main()

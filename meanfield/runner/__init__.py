"""The study runner: many independent, seeded runs, resumable, on any executor.

A :class:`Study` names a task function, a parameter grid, a number of
replicas, a root seed and fixed study parameters. :func:`run_study` expands it
into independent tasks (one per grid point and replica), runs the unfinished
ones serially, on a local process pool or on Dask, writes each result to a
result store (:mod:`meanfield.runner.store`) as soon as it finishes, and
returns a :class:`StudyResult` whose table does not depend on the executor,
the number of workers, the completion order or on how many times the run was
interrupted and resumed.

Seeds: task ``t`` gets ``SeedSequence(root_seed, spawn_key=t.spawn_key)``,
where the spawn key is a hash of the task's own grid parameters and replica
index; this is :func:`child_seed` of the root seed and the task's seed
parameters (see there). Adding grid values or replicas never changes another
task's random numbers.

The package holds the study description (:class:`Study`, :class:`StudyResult`,
:class:`TaskFailure`, :class:`StudyFailedError`), :func:`run_study`, the
per-task seeds (:func:`child_seed`) and the result store
(:mod:`meanfield.runner.store`, whose public names are re-exported here:
:class:`~meanfield.runner.store.ResultStore`,
:func:`~meanfield.runner.store.open_store`,
:func:`~meanfield.runner.store.load_store`,
:func:`~meanfield.runner.store.check_store_writable`,
:func:`~meanfield.runner.store.fingerprint` and the store exceptions). Names
are imported on first use, so that worker processes, which import only
``meanfield.runner._worker``, do not pay for pandas and pyarrow.

Examples
--------
>>> import numpy as np
>>> from meanfield.runner import Study, run_study
>>> def noise_mean(params, seed):          # in an importable module
...     x = np.random.default_rng(seed).standard_normal(params["n"])
...     return {"mean": x.mean(), "head": x[:3]}
>>> study = Study("demo", noise_mean, grid={"n": [10, 1000]}, replicas=4)
>>> result = run_study(study, executor="serial", progress=False)  # doctest: +SKIP
>>> result.frame.groupby("n")["mean"].std()  # doctest: +SKIP
"""

from __future__ import annotations

import importlib

#: Public name -> submodule that defines it.
_PUBLIC = {
    "Study": "_study",
    "StudyResult": "_study",
    "TaskFailure": "_study",
    "StudyFailedError": "_study",
    "run_study": "_run",
    "EXECUTORS": "_run",
    "child_seed": "_tasks",
    "STORE_FORMAT": "store",
    "ResultStore": "store",
    "open_store": "store",
    "load_store": "store",
    "check_store_writable": "store",
    "fingerprint": "store",
    "StoreError": "store",
    "StoreInUseError": "store",
    "StoreCorruptError": "store",
    "StoreMismatchError": "store",
}

#: Names importable from ``meanfield.runner`` before it became a package; kept working.
_LEGACY = {
    "Task": "_tasks",
    "REPLICA": "_tasks",
    "expand_tasks": "_tasks",
    "grid_parameter_names": "_tasks",
    "normalise_grid": "_tasks",
    "plain_value": "_tasks",
    "build_frame": "_frame",
    "run_task": "_worker",
    "SerialBackend": "_executors",
    "PoolBackend": "_executors",
    "DaskBackend": "_executors",
    "logger": "_run",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name) or _LEGACY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))

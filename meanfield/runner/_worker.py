"""What runs inside a worker: call the task function, check and normalise its result.

Kept free of pandas, pyarrow and dask so that a spawned worker process imports
only NumPy, this module and the module of the task function (with SciPy's linear algebra
and threadpoolctl to cap the BLAS threads of a deterministic task).
"""

from __future__ import annotations

import contextlib
import numbers
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping

import numpy as np

from meanfield._threads import deterministic as _deterministic
from meanfield._threads import limit_native_threads, native_threads

__all__ = ["run_task", "normalise_result", "end_with_parent", "init_worker"]

#: Seconds between two checks of the parent process by the portable watcher thread.
_PARENT_POLL = 0.5
_PR_SET_PDEATHSIG = 1

#: Scalar dtypes a record may hold (Parquet columns): bool, signed/unsigned int, float.
_SCALAR_KINDS = "biuf"
#: Array dtypes a record may hold (``.npz``): the scalar kinds plus complex.
_ARRAY_KINDS = "biufc"


def _scalar(value, name: str):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, np.generic):
        if not -(2**63) <= value < 2**63:
            raise OverflowError(f"result {name!r} = {value} does not fit in int64")
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    arr = np.asarray(value)
    if arr.dtype.kind == "U":
        return str(arr)
    if arr.dtype.kind not in _SCALAR_KINDS:
        hint = " (return the real and imaginary parts as two results)" if arr.dtype.kind == "c" else ""
        raise TypeError(f"result {name!r} has unsupported scalar type {arr.dtype}{hint}")
    return arr[()]


def normalise_result(result, reserved=()) -> dict:
    """Check a task function's return value and split it into scalars and arrays.

    Parameters
    ----------
    result : dict
        ``name -> value``. Scalars (``bool``, ``int``, ``float``, ``str``,
        NumPy bool/int/float scalars and 0-d arrays) become table columns;
        arrays of dimension >= 1 (numeric or complex, also given as lists)
        are kept as arrays.
    reserved : collection of str
        Names the result may not use (grid parameter names and ``replica``).

    Returns
    -------
    dict
        ``{"scalars": {name: numpy scalar or str}, "arrays": {name: ndarray}}``,
        each in the order the task returned them. Python ``int``, ``float``
        and ``bool`` become ``int64``, ``float64`` and ``bool``; NumPy scalars
        keep their dtype.

    Raises
    ------
    TypeError, ValueError
        If ``result`` is not a mapping, a name is not a non-empty string, is
        reserved or starts with ``__``, or a value has an unsupported type.

    Examples
    --------
    >>> out = normalise_result({"err": 0.5, "path": [1.0, 2.0]})
    >>> out["scalars"]["err"].dtype, out["arrays"]["path"].shape
    (dtype('float64'), (2,))
    """
    if not isinstance(result, Mapping):
        raise TypeError(f"the task function must return a dict of results, got {type(result).__name__}")
    scalars, arrays = {}, {}
    for name, value in result.items():
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise ValueError(f"result names must be non-empty strings not starting with '__', got {name!r}")
        if name in reserved:
            raise ValueError(f"result name {name!r} clashes with a grid parameter or 'replica'; rename it")
        if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0):
            arr = np.array(value)
            if arr.ndim == 0 or arr.dtype.kind not in _ARRAY_KINDS:
                raise TypeError(f"result {name!r} must be a numeric array, got dtype {arr.dtype} and shape {arr.shape}")
            arrays[name] = arr
        else:
            scalars[name] = _scalar(value, name)
    return {"scalars": scalars, "arrays": arrays}


def run_task(params: dict, seed: np.random.SeedSequence, fn, reserved: tuple = (), deterministic: bool = True) -> tuple:
    """Run one task and report its outcome as data, never by raising.

    Parameters
    ----------
    params : dict
        Parameters passed to ``fn`` (fixed study parameters, grid parameters
        and ``replica``).
    seed : numpy.random.SeedSequence
        The task's seed.
    fn : callable
        The task function ``fn(params, seed) -> dict``.
    reserved : tuple of str
        Result names that would clash with table columns.
    deterministic : bool
        Run ``fn`` inside :func:`meanfield.deterministic` (default), with the
        native thread pools (BLAS, OpenMP) of the process on one thread for its
        duration (:func:`meanfield._threads.native_threads`): every transform and
        matrix product runs on one thread, so that the result does not depend on
        thread timing, the executor or the number of workers, bit for bit.

    Returns
    -------
    tuple
        ``("ok", record)`` with ``record`` from :func:`normalise_result`, or
        ``("error", summary, traceback_text)`` if ``fn`` raised or returned
        something invalid.

    Examples
    --------
    >>> def fn(params, seed):
    ...     return {"x": np.random.default_rng(seed).random()}
    >>> run_task({}, np.random.SeedSequence(0), fn)[0]
    'ok'
    """
    try:
        with _deterministic(deterministic), (native_threads(1) if deterministic else contextlib.nullcontext()):
            value = fn(params, seed)
        record = normalise_result(value, reserved)
    except Exception as exc:  # report any task error with its traceback
        return ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc())
    return ("ok", record)


def _parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; return whether that worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(_PARENT_POLL)
        if os.getppid() != parent_pid:
            os._exit(1)


def end_with_parent(parent_pid: int) -> None:
    """Make this worker process end as soon as the process ``parent_pid`` dies.

    The initializer of the runner's pool workers: without it, a worker of a
    main process that was killed (SIGKILL, SIGTERM, out of memory) finishes
    its current task, and possibly more, before it notices. On Linux the
    kernel sends the worker SIGKILL when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread checks every
    0.5 s whether the worker was re-parented (``os.getppid()`` changed) and
    then ends the process. On Windows, where ``os.getppid()`` does not change,
    it has no effect.

    Parameters
    ----------
    parent_pid : int
        Process id of the main process (the pool's owner).

    Examples
    --------
    >>> pool = ProcessPoolExecutor(2, initializer=end_with_parent, initargs=(os.getpid(),))  # doctest: +SKIP
    """
    if _parent_death_signal() and os.getppid() == parent_pid:
        return
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="meanfield-parent-watch", daemon=True).start()


def init_worker(parent_pid: int, threads: int) -> None:
    """Initializer of the runner's pool workers: :func:`end_with_parent`, and the native thread
    pools (BLAS, OpenMP) capped at ``threads`` (:func:`meanfield._threads.limit_native_threads`).

    The pool passes its share of the cores, ``max(1, cpus // workers)``, so that the workers'
    BLAS threads do not outnumber the cores (as Dask's nannies do by setting
    ``OPENBLAS_NUM_THREADS=1``). Tasks run with ``deterministic=True`` use one thread anyway
    (:func:`run_task`); the cap is for the others.

    Parameters
    ----------
    parent_pid : int
        Process id of the main process (the pool's owner).
    threads : int
        Threads for each native library's pool in this worker, >= 1.

    Examples
    --------
    >>> pool = ProcessPoolExecutor(2, initializer=init_worker, initargs=(os.getpid(), 1))  # doctest: +SKIP
    """
    end_with_parent(parent_pid)
    limit_native_threads(threads)

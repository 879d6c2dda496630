"""Run a study: expand it into tasks, run the unfinished ones, store and tabulate the results."""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import sys
import warnings
from collections import deque
from pathlib import Path

from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from meanfield._validate import as_bool, as_int
from meanfield.runner._executors import DaskBackend, PoolBackend, SerialBackend
from meanfield.runner._frame import build_frame
from meanfield.runner._study import Study, StudyFailedError, StudyResult, TaskFailure
from meanfield.runner._tasks import REPLICA
from meanfield.runner._worker import run_task
from meanfield.runner.store import ResultStore, open_store

__all__ = ["run_study", "EXECUTORS"]

#: Logger of the runner: failed attempts are logged here.
logger = logging.getLogger("meanfield.runner")

#: Failed tasks whose full traceback is logged; later ones get one line (all are in the result).
_FULL_TRACEBACKS = 3

#: The executors :func:`run_study` accepts.
EXECUTORS = ("serial", "pool", "dask")


def _resolve_executor(executor, scheduler) -> str:
    if executor is None:
        return "dask" if scheduler is not None else "pool"
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if scheduler is not None and executor != "dask":
        raise ValueError(f"a Dask scheduler was given, but executor={executor!r}; use executor='dask' or drop the scheduler")
    return executor


def _check_sendable(study: Study, executor: str) -> None:
    if executor == "serial":
        return
    try:
        pickle.dumps(study.fn)
    except Exception as exc:
        raise TypeError(
            f"the task function {study.function_id} cannot be sent to worker processes ({exc}); "
            "define it at module level in an importable module"
        ) from exc
    if executor != "pool":
        return
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if study.fn.__module__ == "__main__" and main_file is None:
        raise TypeError(
            f"the task function {study.function_id} is defined in an interactive session or `python -c`, which "
            "spawned worker processes cannot import; move it to a module, or use executor='serial'"
        )
    if main_file is not None and not os.path.exists(main_file):
        raise TypeError(
            f"the main script {main_file!r} cannot be re-imported by spawned worker processes (a script read "
            "from stdin?); run it from a file, or use executor='serial'"
        )


def _make_backend(executor: str, workers: int | None, scheduler, n_tasks: int):
    if executor == "serial":
        return SerialBackend()
    local_workers = min(workers or os.cpu_count() or 1, n_tasks)
    if executor == "pool":
        return PoolBackend(local_workers)
    if scheduler is None:
        return DaskBackend(None, local_workers)
    return DaskBackend(scheduler, None)


def run_study(
    study: Study,
    *,
    executor: str | None = None,
    workers: int | None = None,
    scheduler=None,
    store=None,
    resume: bool = True,
    overwrite: bool = False,
    progress: bool = True,
    retries: int = 1,
    raise_on_failure: bool = False,
    deterministic: bool = True,
) -> StudyResult:
    """Run every unfinished task of a study and return the table of results.

    Parameters
    ----------
    study : Study
        What to run.
    executor : {"serial", "pool", "dask"} or None
        ``"serial"``: one task at a time in this process (for debugging).
        ``"pool"``: a local ``ProcessPoolExecutor`` of spawned processes.
        ``"dask"``: a Dask cluster (needs ``pip install meanfield[distributed]``).
        ``None`` (default): ``"dask"`` if ``scheduler`` is given, else ``"pool"``.
    workers : int or None
        Worker processes of the pool, or of the local Dask cluster started
        when no ``scheduler`` is given; default ``os.cpu_count()``, and never
        more than the tasks left to run. Ignored by ``"serial"`` and by an
        existing Dask scheduler. Each worker runs one task at a time, with
        the package's transforms and the BLAS / OpenMP pools on one thread
        (``deterministic``); without ``deterministic``, each pool worker's BLAS
        and OpenMP pools get its share of the cores (``cpus // workers``, at
        least 1), as Dask's worker processes have one thread. A task that
        starts threads of its own should limit them likewise.
    scheduler : str, distributed.Client or None
        Dask scheduler address (``"tcp://host:8786"``) or a running client
        (left open); implies ``executor="dask"``. The cluster's workers must
        be able to import ``meanfield`` and the task function's module.
        Results come back to this process, which alone writes the store.
    store : str, pathlib.Path or None
        Result store directory (see :mod:`meanfield.runner.store`): created if
        needed (checked before any task runs), each result written atomically
        with its checksum as soon as its task finishes, and locked for the
        duration of the run. A store may be reused after adding grid values
        or replicas (only the new tasks run); any change of the name, task
        function, fixed parameters, root seed, ``seed_by`` or package version
        is refused. A damaged record (e.g. edited by hand) is logged with its
        file name and computed again. ``None`` keeps results in memory only.
    resume : bool
        Load finished tasks from the store and run only the others (default).
        With ``False`` every task is computed again and its record replaced.
    overwrite : bool
        Discard a store that belongs to a different study instead of refusing
        it with :class:`meanfield.runner.store.StoreMismatchError`.
    progress : bool
        Show a tqdm bar of finished tasks / total with an ETA (on stderr).
    retries : int
        How many times a failing task is run again (default 1, so two
        attempts). Every failed attempt is logged (logger
        ``meanfield.runner``) with the task's parameters.
    raise_on_failure : bool
        After all tasks ran, raise :class:`StudyFailedError` if any failed
        (its ``result`` attribute holds the rest). Otherwise (default) a
        ``RuntimeWarning`` is issued and the failures are listed in
        :attr:`StudyResult.failures`.
    deterministic : bool
        Run every task with the package's transforms on one thread
        (:func:`meanfield.deterministic`; default), and the BLAS and OpenMP
        pools of the process on one thread for its duration (a BLAS product
        can differ in its last bits between thread counts). ducc0's
        multithreaded adjoint transforms add in a timing-dependent order, so
        with ``False`` a task on S^2 may differ in the last bits from one run
        to the next; with ``True`` the table is bit-identical across runs,
        executors and worker counts. Parallelism comes from the workers.

    Returns
    -------
    StudyResult
        The table does not depend on ``executor``, ``workers``, completion
        order or interruptions: a resumed run gives exactly the table of an
        uninterrupted one, bit for bit (with ``deterministic=True``).

    Raises
    ------
    meanfield.runner.store.StoreMismatchError
        If ``store`` holds results of a different study (see
        :mod:`meanfield.runner.store`) and ``overwrite`` is false, or one of
        its records belongs to another study.
    meanfield.runner.store.StoreInUseError
        If another process is running the same study on ``store``.
    meanfield.runner.store.StoreError
        If ``store`` cannot be created or written, or its manifest is damaged
        (:class:`~meanfield.runner.store.StoreCorruptError`); the one-line
        message names the path.
    ImportError
        If ``executor="dask"`` and Dask is not installed.
    TypeError
        If the task function cannot be sent to worker processes.

    Examples
    --------
    >>> result = run_study(study, workers=2, store="results/toy")  # doctest: +SKIP
    >>> result = run_study(study, scheduler="tcp://10.0.0.5:8786", store="results/toy")  # doctest: +SKIP
    """
    if not isinstance(study, Study):
        raise TypeError(f"study must be a Study, got {type(study).__name__}")
    executor = _resolve_executor(executor, scheduler)
    if workers is not None:
        workers = as_int(workers, "workers", min_value=1)
    retries = as_int(retries, "retries", min_value=0)
    deterministic = as_bool(deterministic, "deterministic")
    _check_sendable(study, executor)

    tasks = study.tasks
    opened: ResultStore | None = None
    records: dict[str, dict] = {}
    if store is not None:
        opened = open_store(store, study.manifest(), overwrite=overwrite)  # locked until closed below
        if resume:
            try:
                records = opened.read_all(tasks)
            except BaseException:
                opened.close()
                raise
    n_resumed = len(records)
    pending = deque((task, 1) for task in tasks if task.key not in records)
    reserved = (*study.param_names, REPLICA)
    failures: dict[str, TaskFailure] = {}

    bar = tqdm(total=len(tasks), initial=n_resumed, desc=study.name, unit="task", disable=not progress, dynamic_ncols=True)
    backend = None
    interrupted = True
    try:
        if pending:
            backend = _make_backend(executor, workers, scheduler, len(pending))
        with logging_redirect_tqdm() if progress else contextlib.nullcontext():
            in_flight = 0
            while pending or in_flight:
                batch = []
                while pending and in_flight + len(batch) < backend.window:
                    task, attempt = pending.popleft()
                    batch.append(((task, attempt), (study.task_params(task), study.seed(task))))
                backend.submit_many(run_task, batch, fn=study.fn, reserved=reserved, deterministic=deterministic)
                in_flight += len(batch)
                (task, attempt), outcome = backend.next_done()
                in_flight -= 1
                if outcome[0] == "ok":
                    if opened is not None:
                        opened.write(task, outcome[1])
                    records[task.key] = outcome[1]
                    bar.update()
                    continue
                _, summary, text = outcome
                if attempt <= retries:
                    logger.warning(
                        "task %s failed on attempt %d of %d (%s); retrying", task.label(), attempt, retries + 1, summary
                    )
                    pending.append((task, attempt + 1))
                    continue
                if len(failures) < _FULL_TRACEBACKS:
                    logger.warning("task %s failed after %d attempt(s):\n%s", task.label(), attempt, text)
                else:
                    logger.warning("task %s failed after %d attempt(s): %s", task.label(), attempt, summary)
                failures[task.key] = TaskFailure(task.label(), task.key, attempt, summary, text)
                bar.update()
                bar.set_postfix(failed=len(failures))
        interrupted = False
    finally:
        try:
            if backend is not None:
                backend.close(cancel=interrupted)
        finally:
            if opened is not None:
                opened.close()
            bar.close()

    frame, arrays = build_frame(tasks, records, study.param_names)
    result = StudyResult(
        study=study,
        frame=frame,
        arrays=arrays,
        failures=[failures[t.key] for t in tasks if t.key in failures],
        store=None if store is None else Path(store),
        n_resumed=n_resumed,
        n_computed=len(records) - n_resumed,
    )
    if result.failures:
        if raise_on_failure:
            raise StudyFailedError(result)
        warnings.warn(
            f"{len(result.failures)} of {len(tasks)} tasks of study {study.name!r} failed; "
            "see StudyResult.failures for their parameters and tracebacks",
            RuntimeWarning,
            stacklevel=2,
        )
    return result

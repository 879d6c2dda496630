"""The study runner: many independent, seeded runs, resumable, on any executor.

A :class:`Study` names a task function, a parameter grid, a number of
replicas, a root seed and fixed study parameters. :func:`run_study` expands it
into independent tasks (one per grid point and replica), runs the unfinished
ones serially, on a local process pool or on Dask, writes each result to a
result store (:mod:`meanfield.store`) as soon as it finishes, and returns a
:class:`StudyResult` whose table does not depend on the executor, the number
of workers, the completion order or on how many times the run was interrupted
and resumed.

Seeds: task ``t`` gets ``SeedSequence(root_seed, spawn_key=t.spawn_key)``,
where the spawn key is a hash of the task's own grid parameters and replica
index (:func:`meanfield._tasks.spawn_key`). Adding grid values or replicas
never changes another task's random numbers.

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

import contextlib
import logging
import os
import pickle
import sys
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from meanfield._executors import DaskBackend, PoolBackend, SerialBackend
from meanfield._frame import build_frame
from meanfield._tasks import (
    REPLICA,
    Task,
    expand_tasks,
    grid_parameter_names,
    normalise_grid,
    plain_value,
)
from meanfield._validate import as_int
from meanfield._worker import run_task
from meanfield.store import ResultStore, open_store

__all__ = ["Study", "StudyResult", "TaskFailure", "StudyFailedError", "run_study", "EXECUTORS"]

logger = logging.getLogger(__name__)

#: Failed tasks whose full traceback is logged; later ones get one line (all are in the result).
_FULL_TRACEBACKS = 3

#: The executors :func:`run_study` accepts.
EXECUTORS = ("serial", "pool", "dask")


def _function_id(fn) -> str:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not callable(fn) or not module or not qualname or "<" in qualname:
        raise TypeError(
            f"the task function must be a function defined at module level (so that workers can import it), got {fn!r}"
        )
    return f"{module}:{qualname}"


@dataclass(frozen=True, eq=False)
class Study:
    """Description of a study: a task function run over a parameter grid and replicas.

    Parameters
    ----------
    name : str
        Name of the study (recorded in the result store; a store of another
        name is not reused).
    fn : callable
        The task function ``fn(params: dict, seed: numpy.random.SeedSequence) -> dict``,
        defined at module level in an importable module. ``params`` holds the
        fixed study parameters, the task's grid parameters and ``replica``.
        It returns a flat dict of scalars (``bool``, ``int``, ``float``,
        ``str`` or NumPy scalars: table columns) and/or small NumPy arrays
        (kept per task, see :attr:`StudyResult.arrays`). Result names may not
        repeat a grid parameter name or ``replica``, nor start with ``__``.
    grid : dict of lists, list of dicts, or None
        The grid: ``{"N": [64, 128], "beta": [1.0, 4.0]}`` is the Cartesian
        product (first key slowest); ``[{"N": 64}, {"N": 128, "beta": 2.0}]``
        lists grid points explicitly; ``None`` is a single point. Values are
        ``None``, ``bool``, ``int``, finite ``float`` or ``str``; ``1`` and
        ``1.0`` are different values.
    replicas : int
        Independent replicas per grid point (``>= 1``).
    root_seed : int
        Root entropy of every task's ``SeedSequence`` (``>= 0``).
    fixed : dict or None
        Study parameters shared by all tasks that alter results (e.g.
        ``{"T": 5.0, "dt": 0.01}``): passed to ``fn`` in ``params`` and part
        of the store's fingerprint. Values are plain data (scalars, lists,
        dicts). Names may not repeat a grid parameter.
    seed_by : sequence of str or None
        Grid parameters the task seed depends on (default: all). Tasks that
        differ only in the other parameters get the same seed for the same
        replica, i.e. common random numbers (e.g. ``seed_by=()`` to run
        every ``N`` on the same noise).

    Attributes
    ----------
    tasks : list of Task
        The tasks in expansion order: grid points in order, replicas innermost.
    param_names : list of str
        The grid parameter names (the leading columns of the result table).

    Examples
    --------
    >>> def task(params, seed):
    ...     return {"x": np.random.default_rng(seed).random()}
    >>> study = Study("toy", task, grid={"N": [8, 16]}, replicas=3, fixed={"T": 1.0})
    >>> len(study.tasks), study.task_params(study.tasks[0])
    (6, {'T': 1.0, 'N': 8, 'replica': 0})
    """

    name: str
    fn: Callable
    grid: Mapping | Sequence | None = None
    replicas: int = 1
    root_seed: int = 0
    fixed: Mapping | None = None
    seed_by: Sequence[str] | None = None
    grid_spec: dict = field(init=False, repr=False)
    tasks: list = field(init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        _function_id(self.fn)
        spec = normalise_grid(self.grid)
        names = grid_parameter_names(spec)
        replicas = as_int(self.replicas, "replicas", min_value=1)
        root_seed = as_int(self.root_seed, "root_seed", min_value=0)
        fixed = plain_value(dict(self.fixed or {}), "fixed")
        clash = sorted((set(fixed) & set(names)) | ({REPLICA} & set(fixed)))
        if clash:
            raise ValueError(f"fixed study parameters {clash} repeat a grid parameter or 'replica'")
        seed_by = self.seed_by
        if seed_by is not None:
            if isinstance(seed_by, str):
                raise TypeError("seed_by must be a sequence of grid parameter names, not a string")
            unknown = sorted(set(seed_by) - set(names))
            if unknown:
                raise ValueError(f"seed_by names {unknown} are not grid parameters (grid parameters: {names})")
            seed_by = sorted(set(seed_by))
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "root_seed", root_seed)
        object.__setattr__(self, "fixed", fixed)
        object.__setattr__(self, "seed_by", seed_by)
        object.__setattr__(self, "grid_spec", spec)
        object.__setattr__(self, "tasks", expand_tasks(spec, replicas, seed_by))

    @property
    def param_names(self) -> list[str]:
        """The grid parameter names, in table column order."""
        return grid_parameter_names(self.grid_spec)

    @property
    def function_id(self) -> str:
        """The task function as ``"module:qualname"`` (recorded in the store)."""
        return _function_id(self.fn)

    def task_params(self, task: Task) -> dict:
        """Return the ``params`` dict passed to the task function for ``task``.

        Parameters
        ----------
        task : Task
            One of :attr:`tasks`.

        Returns
        -------
        dict
            Fixed study parameters, then the task's grid parameters, then
            ``replica``.

        Examples
        --------
        >>> study.task_params(study.tasks[0])  # doctest: +SKIP
        {'T': 1.0, 'N': 8, 'replica': 0}
        """
        return {**self.fixed, **task.params, REPLICA: task.replica}

    def seed(self, task: Task) -> np.random.SeedSequence:
        """Return the seed of ``task``: ``SeedSequence(root_seed, spawn_key=task.spawn_key)``.

        Parameters
        ----------
        task : Task

        Returns
        -------
        numpy.random.SeedSequence

        Examples
        --------
        >>> rng = np.random.default_rng(study.seed(study.tasks[0]))  # doctest: +SKIP
        """
        return task.seed(self.root_seed)

    def manifest(self) -> dict:
        """Return the study's description as recorded in a result store.

        Returns
        -------
        dict
            ``name``, ``task``, ``fixed``, ``grid``, ``replicas``,
            ``root_seed``, ``seed_by`` and ``version``
            (``meanfield.__version__``).

        Examples
        --------
        >>> study.manifest()["task"]  # doctest: +SKIP
        'mymodule:task'
        """
        from meanfield import __version__

        return {
            "name": self.name,
            "task": self.function_id,
            "fixed": self.fixed,
            "grid": self.grid_spec,
            "replicas": self.replicas,
            "root_seed": self.root_seed,
            "seed_by": self.seed_by,
            "version": __version__,
        }


@dataclass(frozen=True)
class TaskFailure:
    """A task that raised on every attempt.

    Attributes
    ----------
    params : dict
        The task's grid parameters and ``replica``.
    key : str
        The task key (its record name in the store).
    attempts : int
        How many times it was run.
    error : str
        ``"ExceptionType: message"`` of the last attempt.
    traceback : str
        The full traceback text of the last attempt.

    Examples
    --------
    >>> for failure in result.failures:  # doctest: +SKIP
    ...     print(failure.params, failure.error)
    """

    params: dict
    key: str
    attempts: int
    error: str
    traceback: str


@dataclass(frozen=True, eq=False)
class StudyResult:
    """The outcome of :func:`run_study`.

    Attributes
    ----------
    study : Study
        The study that was run.
    frame : pandas.DataFrame
        One row per successful task, in expansion order (index ``0..n-1``):
        the grid parameter columns, ``replica``, then the scalar results. A
        result column whose values share one NumPy dtype keeps it (Python
        ``float``/``int``/``bool`` become ``float64``/``int64``/``bool``).
    arrays : dict of str to list
        Array results: ``name -> list`` aligned with the rows of ``frame``
        (``None`` where a task did not return that name). :meth:`array`
        stacks one into a single NumPy array.
    failures : list of TaskFailure
        Tasks that failed on every attempt, in expansion order.
    store : pathlib.Path or None
        The result store directory, or ``None`` if results were kept in
        memory only.
    n_resumed : int
        Tasks whose results were loaded from the store instead of computed.
    n_computed : int
        Tasks computed successfully in this run.

    Examples
    --------
    >>> result = run_study(study, store="results/toy")  # doctest: +SKIP
    >>> result.frame.groupby("N")["x"].mean()  # doctest: +SKIP
    """

    study: Study
    frame: pd.DataFrame
    arrays: dict
    failures: list
    store: Path | None
    n_resumed: int
    n_computed: int

    def array(self, name: str) -> np.ndarray:
        """Return array result ``name`` stacked over the rows of :attr:`frame`.

        Parameters
        ----------
        name : str
            An array result name.

        Returns
        -------
        numpy.ndarray
            Shape ``(len(frame), *shape)``.

        Raises
        ------
        KeyError
            If no task returned ``name``.
        ValueError
            If some task did not return it or the shapes differ (use
            :attr:`arrays` then).

        Examples
        --------
        >>> paths = result.array("head")  # doctest: +SKIP
        """
        values = self.arrays[name]
        if any(v is None for v in values):
            raise ValueError(f"array result {name!r} is missing for some rows; use result.arrays[{name!r}]")
        shapes = {v.shape for v in values}
        if len(shapes) > 1:
            raise ValueError(f"array result {name!r} has several shapes {sorted(shapes)}; use result.arrays[{name!r}]")
        return np.stack(values) if values else np.empty((0,))


class StudyFailedError(RuntimeError):
    """Raised by ``run_study(..., raise_on_failure=True)`` when a task failed.

    The finished results are in the store and in the ``result`` attribute.

    Attributes
    ----------
    result : StudyResult

    Examples
    --------
    >>> try:  # doctest: +SKIP
    ...     run_study(study, raise_on_failure=True)
    ... except StudyFailedError as exc:
    ...     print(exc.result.failures[0].traceback)
    """

    def __init__(self, result: StudyResult):
        self.result = result
        lines = [f"{f.params}: {f.error}" for f in result.failures[:5]]
        more = len(result.failures) - len(lines)
        super().__init__(
            f"{len(result.failures)} task(s) of study {result.study.name!r} failed:\n  "
            + "\n  ".join(lines)
            + (f"\n  ... and {more} more" if more > 0 else "")
            + "\n(full tracebacks in exc.result.failures)"
        )


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
        existing Dask scheduler. Each worker runs one task at a time; a task
        that uses threads itself (BLAS, ducc0) should limit them so that
        workers x threads does not exceed the cores.
    scheduler : str, distributed.Client or None
        Dask scheduler address (``"tcp://host:8786"``) or a running client
        (left open); implies ``executor="dask"``. The cluster's workers must
        be able to import ``meanfield`` and the task function's module.
        Results come back to this process, which alone writes the store.
    store : str, pathlib.Path or None
        Result store directory (see :mod:`meanfield.store`): created if
        needed, each result written atomically as soon as its task finishes.
        A store may be reused after adding grid values or replicas (only the
        new tasks run); any change of the name, task function, fixed
        parameters, root seed, ``seed_by`` or package version is refused.
        ``None`` keeps results in memory only.
    resume : bool
        Load finished tasks from the store and run only the others (default).
        With ``False`` every task is computed again and its record replaced.
    overwrite : bool
        Discard a store that belongs to a different study instead of refusing
        it with :class:`meanfield.store.StoreMismatchError`.
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

    Returns
    -------
    StudyResult
        The table does not depend on ``executor``, ``workers``, completion
        order or interruptions: a resumed run gives exactly the table of an
        uninterrupted one.

    Raises
    ------
    meanfield.store.StoreMismatchError
        If ``store`` holds results of a different study (see
        :mod:`meanfield.store`) and ``overwrite`` is false.
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
    _check_sendable(study, executor)

    tasks = study.tasks
    opened: ResultStore | None = None
    records: dict[str, dict] = {}
    if store is not None:
        opened = open_store(store, study.manifest(), overwrite=overwrite)
        if resume:
            records = opened.read_all(tasks)
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
                backend.submit_many(run_task, batch, fn=study.fn, reserved=reserved)
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
        if backend is not None:
            backend.close(cancel=interrupted)
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

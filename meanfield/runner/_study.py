"""Description of a study and of its outcome: :class:`Study`, :class:`StudyResult`.

See :mod:`meanfield.runner` for an overview and :func:`meanfield.runner.run_study`
to run a study.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import meanfield
from meanfield._validate import as_int
from meanfield.runner._tasks import (
    REPLICA,
    Task,
    expand_tasks,
    grid_parameter_names,
    normalise_grid,
    plain_value,
)

__all__ = ["Study", "StudyResult", "TaskFailure", "StudyFailedError"]


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
        return {
            "name": self.name,
            "task": self.function_id,
            "fixed": self.fixed,
            "grid": self.grid_spec,
            "replicas": self.replicas,
            "root_seed": self.root_seed,
            "seed_by": self.seed_by,
            "version": meanfield.__version__,  # read when called (tests patch it)
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

"""Parameter grids, task expansion, task keys and per-task seeds.

A study is a set of independent tasks, one per (grid point, replica). Each task
has two names derived from a canonical serialisation of its parameters, never
from its position in the grid:

* the *task key*, a 32-digit hex string naming its record in a result store;
* the *spawn key*, four uint32 words that give the task its own
  ``numpy.random.SeedSequence(root_seed, spawn_key=...)``.

Because both depend only on the task's own parameters, adding grid values or
replicas, reordering the grid, chunking the work or changing the number of
workers never changes another task's random numbers.

This module is pure Python + NumPy so that worker processes import it cheaply.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .._seeds import extend_seed

__all__ = [
    "Task",
    "canonical_json",
    "plain_scalar",
    "plain_value",
    "normalise_grid",
    "grid_points",
    "grid_parameter_names",
    "expand_tasks",
    "task_key",
    "spawn_key",
    "child_seed",
]

#: Reserved parameter name: the replica index is a column of every result table.
REPLICA = "replica"


def canonical_json(obj) -> str:
    """Serialise plain data to one canonical JSON string.

    Keys are sorted, separators are compact, floats use Python's shortest
    round-trip representation and non-finite floats are refused, so equal
    parameter sets always give the same string on every platform.

    Parameters
    ----------
    obj : None, bool, int, float, str, list or dict of those
        Plain data, as returned by :func:`plain_value`.

    Returns
    -------
    str
        The canonical serialisation.

    Examples
    --------
    >>> canonical_json({"b": 1.0, "a": [1, "x"]})
    '{"a":[1,"x"],"b":1.0}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def plain_scalar(value, name: str):
    """Return a grid value as a plain JSON scalar or raise naming ``name``.

    Accepted: ``None``, ``bool``, integers, finite reals and ``str`` (NumPy
    scalars are converted to the matching Python type). ``1`` and ``1.0`` stay
    distinct: they name different tasks.

    Parameters
    ----------
    value : object
        The value to convert.
    name : str
        The parameter name, used in the error message.

    Returns
    -------
    None, bool, int, float or str

    Examples
    --------
    >>> plain_scalar(np.int64(3), "N")
    3
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"parameter {name!r} must be finite, got {value}")
        return value
    raise TypeError(
        f"parameter {name!r} must be None, a bool, an int, a finite float or a str, got {type(value).__name__} {value!r}"
    )


def plain_value(value, name: str):
    """Return nested plain data (scalars, lists, str-keyed dicts) or raise naming ``name``.

    Used for fixed study parameters, which may be lists (e.g. output times) or
    small dicts. Tuples and 1-D NumPy arrays become lists.

    Parameters
    ----------
    value : object
        Scalar, sequence, mapping or NumPy array.
    name : str
        The parameter name, used in error messages.

    Returns
    -------
    object
        The same data built from ``None``, ``bool``, ``int``, ``float``,
        ``str``, ``list`` and ``dict``.

    Examples
    --------
    >>> plain_value((0.5, np.float64(1.0)), "times")
    [0.5, 1.0]
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"parameter {name!r} has a non-string key {key!r}")
            out[key] = plain_value(item, f"{name}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [plain_value(item, f"{name}[{i}]") for i, item in enumerate(value)]
    return plain_scalar(value, name)


def _check_name(name, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{where} names must be non-empty strings, got {name!r}")
    if name == REPLICA:
        raise ValueError(f"{where} may not use the reserved name {REPLICA!r} (the replica index is added for you)")
    return name


def normalise_grid(grid) -> dict:
    """Validate a parameter grid and return its plain, JSON-ready description.

    Parameters
    ----------
    grid : dict of lists, list of dicts, or None
        A mapping ``name -> list of values`` is the Cartesian product of its
        axes (the first axis varies slowest). A list of mappings is an explicit
        list of grid points. ``None`` or ``{}`` is a single point with no
        parameters. Values must be plain scalars (see :func:`plain_scalar`).

    Returns
    -------
    dict
        ``{"kind": "product", "axes": [[name, [values...]], ...]}`` or
        ``{"kind": "points", "points": [{...}, ...]}``.

    Raises
    ------
    TypeError, ValueError
        On an empty axis or point list, a duplicate value or point, a reserved
        or non-string name, or a value that is not a plain scalar.

    Examples
    --------
    >>> normalise_grid({"N": [64, 128]})
    {'kind': 'product', 'axes': [['N', [64, 128]]]}
    """
    if grid is None:
        return {"kind": "product", "axes": []}
    if isinstance(grid, Mapping):
        axes = []
        for name, values in grid.items():
            _check_name(name, "grid parameter")
            if isinstance(values, np.ndarray):
                values = values.tolist()
            if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, range)):
                raise TypeError(f"grid[{name!r}] must be a list of values, got {type(values).__name__}")
            plain = [plain_scalar(v, name) for v in values]
            if not plain:
                raise ValueError(f"grid[{name!r}] is empty; give at least one value")
            seen = set()
            for v in plain:
                text = canonical_json(v)
                if text in seen:
                    raise ValueError(f"grid[{name!r}] lists the value {v!r} twice")
                seen.add(text)
            axes.append([name, plain])
        return {"kind": "product", "axes": axes}
    if isinstance(grid, Sequence) and not isinstance(grid, (str, bytes)):
        points, seen = [], set()
        for i, point in enumerate(grid):
            if not isinstance(point, Mapping):
                raise TypeError(f"grid[{i}] must be a dict of parameter values, got {type(point).__name__}")
            plain = {_check_name(k, "grid parameter"): plain_scalar(v, k) for k, v in point.items()}
            text = canonical_json(plain)
            if text in seen:
                raise ValueError(f"grid[{i}] = {plain!r} repeats an earlier grid point")
            seen.add(text)
            points.append(plain)
        if not points:
            raise ValueError("grid is an empty list; give at least one grid point (or None for a single task)")
        return {"kind": "points", "points": points}
    raise TypeError(f"grid must be a dict of lists, a list of dicts or None, got {type(grid).__name__}")


def grid_points(spec: Mapping) -> list[dict]:
    """Return the grid points of a normalised grid, in expansion order.

    Parameters
    ----------
    spec : dict
        Output of :func:`normalise_grid`.

    Returns
    -------
    list of dict

    Examples
    --------
    >>> grid_points(normalise_grid({"a": [1, 2], "b": ["x"]}))
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]
    """
    if spec["kind"] == "product":
        names = [name for name, _ in spec["axes"]]
        return [dict(zip(names, combo)) for combo in itertools.product(*(values for _, values in spec["axes"]))]
    return [dict(point) for point in spec["points"]]


def grid_parameter_names(spec: Mapping) -> list[str]:
    """Return the grid's parameter names: axis order, or first appearance for a point list.

    Parameters
    ----------
    spec : dict
        Output of :func:`normalise_grid`.

    Returns
    -------
    list of str

    Examples
    --------
    >>> grid_parameter_names(normalise_grid([{"a": 1}, {"b": 2, "a": 3}]))
    ['a', 'b']
    """
    if spec["kind"] == "product":
        return [name for name, _ in spec["axes"]]
    names: dict[str, None] = {}
    for point in spec["points"]:
        names.update(dict.fromkeys(point))
    return list(names)


def _digest(params: Mapping, replica: int) -> bytes:
    return hashlib.sha256(canonical_json(_seed_key(params, replica)).encode("ascii")).digest()


def _seed_key(params: Mapping, replica: int) -> dict:
    return {"params": dict(params), REPLICA: int(replica)}


def _key_words(key) -> tuple[int, int, int, int]:
    digest = hashlib.sha256(canonical_json(plain_value(key, "key")).encode("ascii")).digest()
    return tuple(int.from_bytes(digest[4 * i : 4 * i + 4], "big") for i in range(4))


def task_key(params: Mapping, replica: int) -> str:
    """Return the 32-hex-digit key that names a task's record in a result store.

    It is the first 128 bits of the SHA-256 of the canonical JSON of the
    task's grid parameters and replica index; fixed study parameters are not
    part of it (they are part of the store's fingerprint instead).

    Parameters
    ----------
    params : dict
        The task's grid parameters (plain scalars).
    replica : int
        The replica index.

    Returns
    -------
    str

    Examples
    --------
    >>> len(task_key({"N": 64}, 0))
    32
    """
    return _digest(params, replica)[:16].hex()


def spawn_key(params: Mapping, replica: int) -> tuple[int, int, int, int]:
    """Return the ``SeedSequence`` spawn key of a task: four uint32 words.

    The words are the first 128 bits (big-endian) of the SHA-256 of the
    canonical JSON of ``{"params": params, "replica": replica}``. The task's
    seed is ``numpy.random.SeedSequence(root_seed, spawn_key=spawn_key(params, replica))``,
    which is also ``child_seed(root_seed, {"params": params, "replica": replica})``
    (see :func:`child_seed`).

    Parameters
    ----------
    params : dict
        The parameters the seed depends on (plain scalars).
    replica : int
        The replica index.

    Returns
    -------
    tuple of 4 int

    Examples
    --------
    >>> seed = np.random.SeedSequence(0, spawn_key=spawn_key({"N": 64}, 0))
    """
    return _key_words(_seed_key(params, replica))


def child_seed(parent, *keys) -> np.random.SeedSequence:
    """Return the seed of the child of ``parent`` named by ``keys``: the canonical derivation.

    Each key (plain data: ``None``, ``bool``, ``int``, finite ``float``,
    ``str``, and lists or str-keyed dicts of those) appends four uint32 words
    to the parent's spawn key: the first 128 bits (big-endian) of the SHA-256
    of the key's canonical JSON (:func:`canonical_json`). The entropy and pool
    size stay the parent's. So ``child_seed(p, a, b) == child_seed(child_seed(p, a), b)``,
    distinct keys give independent streams, and a child depends only on its
    own keys, never on how many other children were derived or in which
    order (unlike ``SeedSequence.spawn``).

    The runner derives every task's seed this way:
    ``Study.seed(task) == child_seed(root_seed, {"params": seed_params, "replica": replica})``,
    where ``seed_params`` are the task's grid parameters (only those named by
    ``seed_by`` if given). Use it to derive further independent streams
    inside a task, e.g. ``child_seed(seed, "noise")`` and
    ``child_seed(seed, "init")``.

    Parameters
    ----------
    parent : numpy.random.SeedSequence or int
        The parent seed; an int ``>= 0`` stands for ``SeedSequence(parent)``.
    *keys : plain data
        The child's name, one level of the seed tree per key.

    Returns
    -------
    numpy.random.SeedSequence

    Examples
    --------
    >>> study_seed = child_seed(7, {"params": {"N": 64}, "replica": 0})
    >>> from meanfield.runner._tasks import spawn_key
    >>> study_seed.spawn_key == spawn_key({"N": 64}, 0)
    True
    >>> noise = np.random.default_rng(child_seed(study_seed, "noise"))
    """
    return extend_seed(parent, *(word for key in keys for word in _key_words(key)))


@dataclass(frozen=True, eq=False)
class Task:
    """One independent unit of work of a study.

    Attributes
    ----------
    index : int
        Position in the study's expansion order (grid order, replica innermost).
    params : dict
        The task's grid parameters.
    replica : int
        The replica index, ``0 <= replica < replicas``.
    key : str
        The record name, :func:`task_key` of ``params`` and ``replica``.
    spawn_key : tuple of int
        The seed's spawn key, :func:`spawn_key` of the seed parameters.

    Examples
    --------
    >>> expand_tasks(normalise_grid({"N": [8]}), replicas=2)[1].replica
    1
    """

    index: int
    params: dict
    replica: int
    key: str
    spawn_key: tuple

    def seed(self, root_seed: int) -> np.random.SeedSequence:
        """Return the task's ``SeedSequence(root_seed, spawn_key=self.spawn_key)``.

        Parameters
        ----------
        root_seed : int
            The study's root seed.

        Returns
        -------
        numpy.random.SeedSequence
            Equal to ``child_seed(root_seed, {"params": seed_params, "replica": replica})``
            (:func:`child_seed`).

        Examples
        --------
        >>> task = expand_tasks(normalise_grid(None), replicas=1)[0]
        >>> rng = np.random.default_rng(task.seed(0))
        """
        return np.random.SeedSequence(root_seed, spawn_key=self.spawn_key)

    def label(self) -> dict:
        """Return the task's grid parameters with its ``replica`` index, for messages.

        Returns
        -------
        dict

        Examples
        --------
        >>> expand_tasks(normalise_grid({"N": [8]}), replicas=1)[0].label()
        {'N': 8, 'replica': 0}
        """
        return {**self.params, REPLICA: self.replica}


def expand_tasks(spec: Mapping, replicas: int, seed_by: Sequence[str] | None = None) -> list[Task]:
    """Expand a normalised grid into tasks: grid points in order, replicas innermost.

    Parameters
    ----------
    spec : dict
        Output of :func:`normalise_grid`.
    replicas : int
        Number of replicas per grid point.
    seed_by : sequence of str or None
        Grid parameters the seed depends on; ``None`` means all of them. Tasks
        that differ only in other parameters share their seed (common random
        numbers). The replica index always enters the seed.

    Returns
    -------
    list of Task

    Examples
    --------
    >>> [t.label() for t in expand_tasks(normalise_grid({"N": [8, 16]}), 2)][:2]
    [{'N': 8, 'replica': 0}, {'N': 8, 'replica': 1}]
    """
    tasks = []
    for point in grid_points(spec):
        seed_params = point if seed_by is None else {k: point[k] for k in seed_by if k in point}
        for replica in range(replicas):
            tasks.append(
                Task(
                    index=len(tasks),
                    params=point,
                    replica=replica,
                    key=task_key(point, replica),
                    spawn_key=spawn_key(seed_params, replica),
                )
            )
    return tasks

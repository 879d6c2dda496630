"""Assemble the result table of a study from its task records.

The same function builds the table of a fresh run, of a resumed run and of
:func:`meanfield.runner.store.load_store`, so the three agree exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from meanfield.runner._tasks import REPLICA, Task

__all__ = ["build_frame"]


def _column(values: list):
    present = [v for v in values if v is not None]
    if len(present) == len(values) and present and all(isinstance(v, np.generic) for v in present):
        dtypes = {v.dtype for v in present}
        if len(dtypes) == 1:
            return np.array(values, dtype=dtypes.pop())
    return values


def build_frame(
    tasks: Sequence[Task], records: Mapping[str, dict], param_names: Sequence[str]
) -> tuple[pd.DataFrame, dict[str, list]]:
    """Return the result table and the array results of the finished tasks.

    Parameters
    ----------
    tasks : sequence of Task
        All tasks of the study, in expansion order.
    records : dict
        ``task key -> record`` (see :func:`meanfield.runner._worker.normalise_result`)
        for the finished tasks; tasks without a record are left out.
    param_names : sequence of str
        Grid parameter names, in column order.

    Returns
    -------
    frame : pandas.DataFrame
        One row per finished task in expansion order (index ``0..n-1``):
        the grid parameter columns, ``replica``, then the scalar results in
        order of first appearance. A scalar result column whose values share
        one NumPy dtype keeps it; a task that did not return a result has a
        missing value there.
    arrays : dict
        ``name -> list`` of the array results, aligned with the rows of
        ``frame``; ``None`` where a task did not return that array.

    Examples
    --------
    >>> from meanfield.runner._tasks import expand_tasks, normalise_grid
    >>> tasks = expand_tasks(normalise_grid({"N": [8]}), 1)
    >>> rec = {tasks[0].key: {"scalars": {"e": np.float64(0.5)}, "arrays": {}}}
    >>> build_frame(tasks, rec, ["N"])[0].columns.tolist()
    ['N', 'replica', 'e']
    """
    done = [t for t in tasks if t.key in records]
    columns: dict[str, object] = {}
    for name in param_names:
        columns[name] = [t.params.get(name) for t in done]
    columns[REPLICA] = np.array([t.replica for t in done], dtype=np.int64)
    scalar_names: dict[str, None] = {}
    array_names: dict[str, None] = {}
    for t in done:
        scalar_names.update(dict.fromkeys(records[t.key]["scalars"]))
        array_names.update(dict.fromkeys(records[t.key]["arrays"]))
    for name in scalar_names:
        columns[name] = _column([records[t.key]["scalars"].get(name) for t in done])
    frame = pd.DataFrame(columns, index=pd.RangeIndex(len(done)))
    arrays = {name: [records[t.key]["arrays"].get(name) for t in done] for name in array_names}
    return frame, arrays

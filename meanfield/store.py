"""On-disk result store of a study: a manifest and one record per finished task.

Layout of a store directory::

    manifest.json            what the study is (see below)
    records/<key>.parquet    one row: the task's scalar results
    records/<key>.npz        the task's array results, if it returned any

``<key>`` is the task key (:func:`meanfield._tasks.task_key`), a hash of the
task's grid parameters and replica index, so a record never depends on the
task's position in the grid. Every file is written to a temporary file in the
same directory, flushed to disk and moved into place with ``os.replace``; the
``.parquet`` file is written last and marks the task as finished. A process
killed at any moment therefore leaves only whole records (plus possibly a
hidden ``.*.tmp`` file, which is ignored). Files are not ``fsync``-ed (that
cost several ms per task): after a power loss or OS crash a record may be
truncated, which is detected on reading (the task is then computed again).

The manifest holds the study name, the task function (``module:qualname``),
the fixed study parameters, the grid, the number of replicas, the root seed,
``seed_by``, the ``meanfield`` version, the creation and last-update times and
a *fingerprint*: the SHA-256 of everything that alters a task's results (task
function, fixed parameters, root seed, ``seed_by``, package version, store
format). Opening a store whose name or any fingerprinted field differs is
refused with :class:`StoreMismatchError`, so results of different studies are
never mixed.

The grid and the number of replicas are *not* fingerprinted: a record is
looked up by the exact parameters of its task, so extending the grid or adding
replicas only adds tasks, and the existing records keep their meaning. A task
whose parameters change (including adding a new grid axis) gets a new key and
is computed afresh. Records of tasks no longer in the grid stay on disk and are
used again if their values return.

Concurrent runs of the same study on one store are safe but duplicate work.
The store does not detect edits to the task function's code: change a fixed
parameter (e.g. ``{"revision": 2}``) or the version, or start a new store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import zipfile
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from meanfield._frame import build_frame
from meanfield._tasks import Task, canonical_json, expand_tasks, grid_parameter_names

__all__ = [
    "STORE_FORMAT",
    "StoreMismatchError",
    "ResultStore",
    "open_store",
    "load_store",
    "fingerprint",
]

logger = logging.getLogger(__name__)

#: Version of the on-disk layout; part of the fingerprint.
STORE_FORMAT = 1
MANIFEST = "manifest.json"
RECORDS = "records"
_META = b"meanfield"
_KEY_COLUMN = "__key__"

#: Manifest fields that alter a task's results, with the words used in error messages.
FINGERPRINT_FIELDS = {
    "format": "store format",
    "task": "task function",
    "fixed": "fixed study parameters",
    "root_seed": "root seed",
    "seed_by": "seed_by",
    "version": "meanfield version",
}


class StoreMismatchError(ValueError):
    """A result store holds results of a different study and is not reused.

    Examples
    --------
    >>> issubclass(StoreMismatchError, ValueError)
    True
    """


def fingerprint(manifest: Mapping) -> str:
    """Return the SHA-256 hex digest of the manifest fields that alter results.

    Parameters
    ----------
    manifest : dict
        A study manifest with the keys of ``FINGERPRINT_FIELDS`` (``format``
        defaults to :data:`STORE_FORMAT`).

    Returns
    -------
    str

    Examples
    --------
    >>> m = {"task": "m:f", "fixed": {}, "root_seed": 0, "seed_by": None, "version": "0.1.0"}
    >>> len(fingerprint(m))
    64
    """
    fields = {"format": STORE_FORMAT, **manifest}
    return hashlib.sha256(canonical_json({k: fields[k] for k in FINGERPRINT_FIELDS}).encode()).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _atomic_write(path: Path, write: Callable) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read_manifest(path: Path) -> dict:
    try:
        return json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} holds no {MANIFEST}: it is not a meanfield result store") from None


def _describe_difference(field: str, old, new) -> str:
    if field == "fixed" and isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if canonical_json(old.get(k)) != canonical_json(new.get(k)))
        parts = [f"{k}: stored {old.get(k, '<absent>')!r}, now {new.get(k, '<absent>')!r}" for k in keys]
        return "fixed study parameters differ (" + "; ".join(parts) + ")"
    return f"{FINGERPRINT_FIELDS.get(field, 'study name')} differs: stored {old!r}, now {new!r}"


class ResultStore:
    """A study's result directory, opened for reading and writing records.

    Create one with :func:`open_store`; read one with :func:`load_store`.

    Parameters
    ----------
    path : str or pathlib.Path
        The store directory.
    manifest : dict
        Its manifest.

    Attributes
    ----------
    path : pathlib.Path
    manifest : dict

    Examples
    --------
    >>> store = open_store(tmp_path / "study", manifest)  # doctest: +SKIP
    >>> store.write(task, {"scalars": {"err": np.float64(0.1)}, "arrays": {}})  # doctest: +SKIP
    """

    def __init__(self, path, manifest: Mapping):
        self.path = Path(path)
        self.manifest = dict(manifest)

    @property
    def records_dir(self) -> Path:
        """The directory that holds the task records."""
        return self.path / RECORDS

    def record_path(self, task: Task) -> Path:
        """Return the path of ``task``'s Parquet record (it may not exist).

        Parameters
        ----------
        task : Task

        Returns
        -------
        pathlib.Path

        Examples
        --------
        >>> store.record_path(task).name  # doctest: +SKIP
        '3f1c...e2.parquet'
        """
        return self.records_dir / f"{task.key}.parquet"

    def write(self, task: Task, record: Mapping) -> None:
        """Write a finished task's record atomically (arrays first, then the Parquet row).

        Parameters
        ----------
        task : Task
            The finished task.
        record : dict
            ``{"scalars": {...}, "arrays": {...}}`` as made by
            :func:`meanfield._worker.normalise_result`.

        Examples
        --------
        >>> store.write(task, {"scalars": {"err": np.float64(0.1)}, "arrays": {}})  # doctest: +SKIP
        """
        scalars, arrays = record["scalars"], record["arrays"]
        if arrays:
            _atomic_write(self.records_dir / f"{task.key}.npz", lambda fh: np.savez(fh, **arrays))
        columns = {_KEY_COLUMN: pa.array([task.key], type=pa.string())}
        for name, value in scalars.items():
            columns[name] = pa.array([value], type=pa.string()) if isinstance(value, str) else pa.array(np.asarray([value]))
        meta = {
            "key": task.key,
            "params": task.params,
            "replica": task.replica,
            "scalars": list(scalars),
            "arrays": list(arrays),
        }
        table = pa.table(columns).replace_schema_metadata({_META: canonical_json(meta).encode()})
        _atomic_write(self.record_path(task), lambda fh: pq.write_table(table, fh))

    def read(self, task: Task) -> dict | None:
        """Return ``task``'s record, or ``None`` if it has not finished.

        An unreadable record (e.g. an array file removed by hand) is logged
        and treated as unfinished, so the task is computed again.

        Parameters
        ----------
        task : Task

        Returns
        -------
        dict or None
            ``{"scalars": {...}, "arrays": {...}}`` with the same types as a
            freshly computed record.

        Raises
        ------
        StoreMismatchError
            If the record found under the task's key was written for other
            parameters.

        Examples
        --------
        >>> store.read(task)["scalars"]  # doctest: +SKIP
        {'err': np.float64(0.1)}
        """
        path = self.record_path(task)
        try:
            table = pq.read_table(path)
            meta = json.loads(table.schema.metadata[_META])
        except FileNotFoundError:
            return None
        except (OSError, KeyError, TypeError, ValueError, pa.ArrowException) as exc:
            logger.warning("unreadable record %s (%s); the task will be computed again", path.name, exc)
            return None
        if canonical_json([meta["params"], meta["replica"]]) != canonical_json([task.params, task.replica]):
            raise StoreMismatchError(
                f"record {path.name} was written for {meta['params']} replica {meta['replica']}, "
                f"not {task.params} replica {task.replica}"
            )
        scalars = {}
        for name in meta["scalars"]:
            scalars[name] = table.column(name).to_numpy()[0]
        arrays = {}
        if meta["arrays"]:
            try:
                with np.load(self.records_dir / f"{task.key}.npz", allow_pickle=False) as npz:
                    arrays = {name: npz[name] for name in meta["arrays"]}
            except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
                logger.warning("unreadable arrays of record %s (%s); the task will be computed again", path.name, exc)
                return None
        return {"scalars": scalars, "arrays": arrays}

    def read_all(self, tasks: Sequence[Task]) -> dict[str, dict]:
        """Return ``key -> record`` for every finished task among ``tasks``.

        Parameters
        ----------
        tasks : sequence of Task

        Returns
        -------
        dict

        Examples
        --------
        >>> done = store.read_all(study.tasks)  # doctest: +SKIP
        """
        try:
            present = {p.name[: -len(".parquet")] for p in self.records_dir.iterdir() if p.name.endswith(".parquet")}
        except FileNotFoundError:
            return {}
        records = {}
        for task in tasks:
            if task.key in present:
                record = self.read(task)
                if record is not None:
                    records[task.key] = record
        return records


def _clear(path: Path) -> None:
    shutil.rmtree(path / RECORDS, ignore_errors=True)
    (path / MANIFEST).unlink(missing_ok=True)


def open_store(path, manifest: Mapping, *, overwrite: bool = False) -> ResultStore:
    """Create a result store, or reopen one that belongs to the same study.

    Parameters
    ----------
    path : str or pathlib.Path
        The store directory: new, empty, or an existing store.
    manifest : dict
        The study's description: ``name``, ``task``, ``fixed``, ``grid``,
        ``replicas``, ``root_seed``, ``seed_by`` and ``version`` (as built by
        :meth:`meanfield.runner.Study.manifest`).
    overwrite : bool
        Discard the stored manifest and records first, whatever study wrote
        them.

    Returns
    -------
    ResultStore
        With its manifest rewritten: current grid and replicas, the original
        creation time and a new update time.

    Raises
    ------
    StoreMismatchError
        If the directory holds a store of a study with another name or any
        other fingerprinted field (see the module docstring), naming what
        differs; or if it is a non-empty directory that is not a store.

    Examples
    --------
    >>> store = open_store("results/chaos", study.manifest())  # doctest: +SKIP
    """
    path = Path(path)
    created = None
    if (path / MANIFEST).exists():
        old = _read_manifest(path)
        if overwrite:
            _clear(path)
        else:
            old = {"format": old.get("format"), **old}
            new = {"format": STORE_FORMAT, **manifest}
            diffs = [
                _describe_difference(field, old.get(field), new.get(field))
                for field in ("name", *FINGERPRINT_FIELDS)
                if canonical_json(old.get(field)) != canonical_json(new.get(field))
            ]
            if diffs:
                raise StoreMismatchError(
                    f"the store {path} holds results of a different study, refusing to mix them: "
                    + "; ".join(diffs)
                    + ". Use a new store directory, or overwrite=True to discard the stored results."
                )
            created = old.get("created")
    elif path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise StoreMismatchError(
            f"{path} exists and is not a meanfield result store (no {MANIFEST}); choose a new or empty directory"
        )
    path.mkdir(parents=True, exist_ok=True)
    now = _now()
    full = {
        "format": STORE_FORMAT,
        **manifest,
        "fingerprint": fingerprint(manifest),
        "created": created or now,
        "updated": now,
    }
    text = json.dumps(full, indent=2, allow_nan=False) + "\n"
    _atomic_write(path / MANIFEST, lambda fh: fh.write(text.encode("utf-8")))
    (path / RECORDS).mkdir(exist_ok=True)
    return ResultStore(path, full)


def load_store(path, *, arrays: bool = False) -> tuple[dict, pd.DataFrame]:
    """Read a result store: its manifest and the table of its finished tasks.

    Parameters
    ----------
    path : str or pathlib.Path
        The store directory.
    arrays : bool
        Also return array results, as object columns holding one NumPy array
        per row (``None`` where a task did not return it).

    Returns
    -------
    manifest : dict
        The parsed ``manifest.json``.
    frame : pandas.DataFrame
        One row per finished task of the manifest's grid, in expansion order:
        grid parameters, ``replica`` and scalar results, exactly as in
        :attr:`meanfield.runner.StudyResult.frame`.

    Raises
    ------
    FileNotFoundError
        If ``path`` holds no ``manifest.json``.

    Examples
    --------
    >>> manifest, frame = load_store("results/chaos")  # doctest: +SKIP
    >>> frame.groupby("N")["err"].mean()  # doctest: +SKIP
    """
    path = Path(path)
    manifest = _read_manifest(path)
    spec = manifest["grid"]
    tasks = expand_tasks(spec, manifest["replicas"], manifest["seed_by"])
    records = ResultStore(path, manifest).read_all(tasks)
    frame, array_results = build_frame(tasks, records, grid_parameter_names(spec))
    if arrays:
        for name, values in array_results.items():
            column = np.empty(len(values), dtype=object)
            for i, value in enumerate(values):
                column[i] = value
            frame[name] = column
    return manifest, frame

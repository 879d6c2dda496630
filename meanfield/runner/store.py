"""On-disk result store of a study: a manifest and one checksummed record per finished task.

Layout of a store directory::

    manifest.json            what the study is (see below)
    .lock                    the lock file of the run that has the store open
    records/<key>.parquet    one row: the task's scalar results and its description
    records/<key>.npz        the task's array results, if it returned any

``<key>`` is the task key (:func:`meanfield.runner._tasks.task_key`), a hash of
the task's grid parameters and replica index, so a record never depends on the
task's position in the grid. Every file is written to a temporary file in the
same directory and moved into place with ``os.replace``; the ``.parquet`` file
is written last and marks the task as finished. A process killed at any moment
therefore leaves only whole records (plus possibly a hidden ``.*.tmp`` file,
which is ignored). Files are not ``fsync``-ed (that cost several ms per task):
after a power loss or OS crash a record may be truncated, which is detected on
reading.

**Manifest.** It holds the study name, the task function
(``module:qualname``), the fixed study parameters, the grid, the number of
replicas, the root seed, ``seed_by``, the ``meanfield`` version, the store
format, the creation and last-update times and a *fingerprint*: the SHA-256 of
everything that identifies the study's results (study name, task function,
fixed parameters, root seed, ``seed_by``, package version, store format).
Opening a store whose fingerprinted fields differ is refused with
:class:`StoreMismatchError`, so results of different studies are never mixed.
A manifest that is not valid JSON, lacks a field, or whose fields no longer
match its fingerprint (edited by hand) is refused with
:class:`StoreCorruptError`, naming the file.

The grid and the number of replicas are *not* fingerprinted: a record is
looked up by the exact parameters of its task, so extending the grid or adding
replicas only adds tasks, and the existing records keep their meaning. A task
whose parameters change (including adding a new grid axis) gets a new key and
is computed afresh. Records of tasks no longer in the grid stay on disk and are
used again if their values return.

**Records.** Each record carries the study name and the store fingerprint and
a SHA-256 checksum of its payload (see :mod:`meanfield.runner._records`). On
reading, a record of another study (a different fingerprint, e.g. copied from
another store) is refused with :class:`StoreMismatchError`; a damaged record
(unreadable, a column or array removed, or contents that fail the checksum,
e.g. edited by hand) is logged with its file name and computed again by
:func:`meanfield.runner.run_study`, while :func:`load_store` raises
:class:`StoreCorruptError` naming the file.

**Locking.** A run holds an exclusive lock on ``.lock`` (``fcntl.flock``; the
operating system releases it when the process ends, however it ends) from
before it reads the manifest until it closes the store, so checking and
writing the manifest cannot interleave with another process. A second
process that opens a locked store gets :class:`StoreMismatchError` if the
store belongs to a different study, and :class:`StoreInUseError` ("store ...
is in use by pid N") if it belongs to the same study, after waiting up to
``wait`` seconds (default 0) for the lock. While the first process is still
creating a new store, the second waits (up to 10 s) for its manifest, so two
runs of different studies started at the same moment on one new store always
end with exactly one of them refused. :func:`load_store` takes no lock and may
read a store while a run writes it. The lock needs a file system with working
``flock`` (local disks; NFS on Linux emulates it with byte-range locks).

The store does not detect edits to the task function's code: change a fixed
parameter (e.g. ``{"revision": 2}``) or the version, or start a new store.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from meanfield.runner._frame import build_frame
from meanfield.runner._lock import StoreLock
from meanfield.runner._manifest import (
    FINGERPRINT_FIELDS,  # noqa: F401  (re-exported)
    MANIFEST,
    STORE_FORMAT,
    StoreCorruptError,
    StoreError,
    StoreInUseError,
    StoreMismatchError,
    check_fingerprint,
    differences,
    fingerprint,
    mismatch,
    read_manifest,
)
from meanfield.runner._records import DamagedRecord, atomic_write, read_record, write_record
from meanfield.runner._tasks import Task, canonical_json, expand_tasks, grid_parameter_names

__all__ = [
    "STORE_FORMAT",
    "StoreError",
    "StoreInUseError",
    "StoreCorruptError",
    "StoreMismatchError",
    "ResultStore",
    "check_store_writable",
    "open_store",
    "load_store",
    "fingerprint",
]

logger = logging.getLogger(__name__)

RECORDS = "records"
LOCK = ".lock"
#: Seconds a process waits for the manifest of a new store that another process is creating.
_CREATE_GRACE = 10.0
_POLL = 0.02

def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _is_foreign(path: Path) -> bool:
    """Whether ``path`` exists and is neither an empty directory nor a store (ignoring the lock and temporary files)."""
    if not path.exists() or (path / MANIFEST).exists():
        return False
    if not path.is_dir():
        return True
    return any(p.name != LOCK and not (p.name.startswith(".") and p.name.endswith(".tmp")) for p in path.iterdir())


class ResultStore:
    """A study's result directory, opened for reading and writing records.

    Create one with :func:`open_store` (which locks it: call :meth:`close`
    or use it as a context manager); read one with :func:`load_store`.

    Parameters
    ----------
    path : str or pathlib.Path
        The store directory.
    manifest : dict
        Its manifest.
    lock : StoreLock or None
        The store's lock, held by this object and released by :meth:`close`.

    Attributes
    ----------
    path : pathlib.Path
    manifest : dict

    Examples
    --------
    >>> with open_store(tmp_path / "study", manifest) as store:  # doctest: +SKIP
    ...     store.write(task, {"scalars": {"err": np.float64(0.1)}, "arrays": {}})
    """

    def __init__(self, path, manifest: Mapping, lock: StoreLock | None = None):
        self.path = Path(path)
        self.manifest = dict(manifest)
        self._lock = lock

    @property
    def records_dir(self) -> Path:
        """The directory that holds the task records."""
        return self.path / RECORDS

    @property
    def identity(self) -> dict:
        """What every record of this store carries: store ``format``, ``study`` name and ``fingerprint``."""
        m = self.manifest
        return {"format": m.get("format"), "study": m.get("name"), "fingerprint": m.get("fingerprint")}

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
            :func:`meanfield.runner._worker.normalise_result`.

        Examples
        --------
        >>> store.write(task, {"scalars": {"err": np.float64(0.1)}, "arrays": {}})  # doctest: +SKIP
        """
        write_record(self.records_dir, task, record, self.identity)

    def read(self, task: Task, *, damaged: str = "recompute") -> dict | None:
        """Return ``task``'s record, or ``None`` if it has not finished.

        Parameters
        ----------
        task : Task
        damaged : {"recompute", "raise"}
            What to do with a damaged record (unreadable, a column or array
            missing, or failing its checksum): log a warning naming the file
            and return ``None``, so that the task is computed again; or raise.

        Returns
        -------
        dict or None
            ``{"scalars": {...}, "arrays": {...}}`` with the same types as a
            freshly computed record.

        Raises
        ------
        StoreMismatchError
            If the record belongs to another study (another fingerprint) or
            was written for other parameters.
        StoreCorruptError
            If the record is damaged and ``damaged="raise"``.

        Examples
        --------
        >>> store.read(task)["scalars"]  # doctest: +SKIP
        {'err': np.float64(0.1)}
        """
        if damaged not in ("recompute", "raise"):
            raise ValueError(f"damaged must be 'recompute' or 'raise', got {damaged!r}")
        try:
            found = read_record(self.records_dir, task)
        except DamagedRecord as exc:
            if damaged == "raise":
                raise StoreCorruptError(f"damaged record {exc.path}: {exc.cause}", exc.path) from None
            logger.warning("damaged record %s: %s; the task will be computed again", exc.path, exc.cause)
            return None
        if found is None:
            return None
        meta, record = found
        path = self.record_path(task)
        mine = self.identity
        if meta.get("fingerprint") != mine["fingerprint"] or meta.get("study") != mine["study"]:
            raise StoreMismatchError(
                f"record {path} belongs to another study ({meta.get('study')!r}, fingerprint "
                f"{str(meta.get('fingerprint'))[:12]}...) than the store ({mine['study']!r}, fingerprint "
                f"{str(mine['fingerprint'])[:12]}...), refusing to mix them; delete it to have the task computed again"
            )
        if canonical_json([meta["params"], meta["replica"]]) != canonical_json([task.params, task.replica]):
            raise StoreMismatchError(
                f"record {path} was written for {meta['params']} replica {meta['replica']}, "
                f"not {task.params} replica {task.replica}"
            )
        return record

    def read_all(self, tasks: Sequence[Task], *, damaged: str = "recompute") -> dict[str, dict]:
        """Return ``key -> record`` for every finished task among ``tasks``.

        Parameters
        ----------
        tasks : sequence of Task
        damaged : {"recompute", "raise"}
            See :meth:`read`.

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
                record = self.read(task, damaged=damaged)
                if record is not None:
                    records[task.key] = record
        return records

    def close(self) -> None:
        """Release the store's lock (if this object holds it). Safe to call twice."""
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_store_writable(path) -> Path:
    """Check that a store can be created or written at ``path``, creating the directory if needed.

    Commands call it (or :func:`open_store`, which does the same) before
    computing anything, so that a bad ``--store`` fails at once.

    Parameters
    ----------
    path : str or pathlib.Path
        The store directory.

    Returns
    -------
    pathlib.Path
        ``path``, which now exists as a writable directory.

    Raises
    ------
    StoreError
        With a one-line message naming the path and the cause, e.g.
        ``cannot create store at /proc/x: No such file or directory``.

    Examples
    --------
    >>> check_store_writable("/proc/x")  # doctest: +SKIP
    Traceback (most recent call last):
    StoreError: cannot create store at /proc/x: No such file or directory
    """
    path = Path(path)
    verb = "write to" if path.is_dir() else "create"
    try:
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(f"{path} exists and is not a directory")
        path.mkdir(parents=True, exist_ok=True)
        for directory in (path, path / RECORDS):
            if directory.is_dir():
                fd, probe = tempfile.mkstemp(prefix=".probe.", suffix=".tmp", dir=directory)
                os.close(fd)
                os.unlink(probe)
    except OSError as exc:
        cause = exc.strerror or str(exc) if not isinstance(exc, NotADirectoryError) else "it exists and is not a directory"
        raise StoreError(f"cannot {verb} store at {path}: {cause}", path) from exc
    return path


def _clear(path: Path) -> None:
    shutil.rmtree(path / RECORDS, ignore_errors=True)
    (path / MANIFEST).unlink(missing_ok=True)


def _acquire(path: Path, manifest: Mapping, overwrite: bool, wait: float) -> StoreLock:
    """Take the store's lock, or raise StoreMismatchError / StoreInUseError while another process holds it."""
    lock = StoreLock(path / LOCK)
    start = time.monotonic()
    while True:
        try:
            if lock.acquire():
                return lock
        except OSError as exc:
            raise StoreError(f"cannot lock store at {path}: {exc.strerror or exc}", path) from exc
        old = read_manifest(path, missing_ok=True)
        if old is not None and not overwrite:
            diffs = differences(old, manifest)
            if diffs:
                raise mismatch(path, diffs, lock.holder())
        limit = wait if old is not None else max(wait, _CREATE_GRACE)
        if time.monotonic() - start >= limit:
            raise StoreInUseError(path, lock.holder())
        time.sleep(_POLL)


def open_store(path, manifest: Mapping, *, overwrite: bool = False, wait: float = 0.0) -> ResultStore:
    """Create a result store, or reopen one that belongs to the same study, and lock it.

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
        them (even if the manifest is damaged).
    wait : float
        Seconds to wait for a store of the same study that another process
        has open (see the module docstring); default 0: fail at once.

    Returns
    -------
    ResultStore
        Locked until its :meth:`~ResultStore.close`; with its manifest
        rewritten: current grid and replicas, the original creation time and
        a new update time.

    Raises
    ------
    StoreMismatchError
        If the directory holds a store of a study with another name or any
        other fingerprinted field (see the module docstring), naming what
        differs; or if it is a non-empty directory that is not a store.
    StoreInUseError
        If another process has the store open for the same study.
    StoreCorruptError
        If the manifest is damaged or was edited (and not ``overwrite``).
    StoreError
        If the store cannot be created or written (the message names the
        path and the cause).

    Examples
    --------
    >>> with open_store("results/chaos", study.manifest()) as store:  # doctest: +SKIP
    ...     done = store.read_all(study.tasks)
    """
    path = Path(path)
    if _is_foreign(path):
        raise StoreMismatchError(
            f"{path} exists and is not a meanfield result store (no {MANIFEST}); choose a new or empty directory"
        )
    check_store_writable(path)
    lock = _acquire(path, manifest, overwrite, wait)
    try:
        created = None
        if overwrite:
            _clear(path)
        else:
            old = read_manifest(path, missing_ok=True)
            if old is not None:
                diffs = differences(old, manifest)
                if diffs:
                    raise mismatch(path, diffs)
                check_fingerprint(path, old)
                created = old.get("created")
            elif _is_foreign(path):
                raise StoreMismatchError(
                    f"{path} exists and is not a meanfield result store (no {MANIFEST}); choose a new or empty directory"
                )
        now = _now()
        full = {
            "format": STORE_FORMAT,
            **manifest,
            "fingerprint": fingerprint(manifest),
            "created": created or now,
            "updated": now,
        }
        text = json.dumps(full, indent=2, allow_nan=False) + "\n"
        atomic_write(path / MANIFEST, lambda fh: fh.write(text.encode("utf-8")))
        (path / RECORDS).mkdir(exist_ok=True)
    except BaseException:
        lock.release()
        raise
    return ResultStore(path, full, lock)


def load_store(path, *, arrays: bool = False) -> tuple[dict, pd.DataFrame]:
    """Read a result store: its manifest and the table of its finished tasks.

    Every record is verified (fingerprint and checksum). No lock is taken: a
    store may be read while a run writes it.

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
    StoreCorruptError
        If the manifest or a record is damaged or was edited (the message
        names the file).
    StoreMismatchError
        If a record belongs to another study.
    StoreError
        If the store was written in another store format.

    Examples
    --------
    >>> manifest, frame = load_store("results/chaos")  # doctest: +SKIP
    >>> frame.groupby("N")["err"].mean()  # doctest: +SKIP
    """
    path = Path(path)
    manifest = read_manifest(path)
    if manifest["format"] != STORE_FORMAT:
        raise StoreError(
            f"the store {path} has store format {manifest['format']!r}; this version of meanfield reads format "
            f"{STORE_FORMAT}",
            path,
        )
    check_fingerprint(path, manifest)
    spec = manifest["grid"]
    tasks = expand_tasks(spec, manifest["replicas"], manifest["seed_by"])
    records = ResultStore(path, manifest).read_all(tasks, damaged="raise")
    frame, array_results = build_frame(tasks, records, grid_parameter_names(spec))
    if arrays:
        for name, values in array_results.items():
            column = np.empty(len(values), dtype=object)
            for i, value in enumerate(values):
                column[i] = value
            frame[name] = column
    return manifest, frame

"""Task records on disk: one Parquet row of scalars, an ``.npz`` of arrays, a checksum.

The Parquet file's schema metadata (key ``meanfield``) holds the record's
description: store format, study name and store fingerprint, task key, grid
parameters, replica, the names of the scalar and array results, and
``sha256``, the SHA-256 of the record payload (:func:`record_checksum`: the
description without ``sha256``, every scalar's name, dtype and bytes, every
array's name, dtype, shape and bytes). A record that cannot be read, lacks a
column or an array, or whose payload does not match its checksum raises
:class:`DamagedRecord`, which names the file and the cause.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from meanfield.runner._tasks import Task, canonical_json

__all__ = ["DamagedRecord", "atomic_write", "record_checksum", "write_record", "read_record"]

_META = b"meanfield"
_KEY_COLUMN = "__key__"


class DamagedRecord(Exception):
    """A record file that cannot be used: unreadable, incomplete, or failing its checksum."""

    def __init__(self, path: Path, cause: str):
        self.path, self.cause = Path(path), cause
        super().__init__(f"{path}: {cause}")


def atomic_write(path: Path, write: Callable) -> None:
    """Write ``path`` through a hidden temporary file in the same directory and ``os.replace``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _feed(h, *parts: bytes) -> None:
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)


def record_checksum(meta: Mapping, scalars: Mapping, arrays: Mapping) -> str:
    """Return the SHA-256 hex digest of a record's payload.

    Parameters
    ----------
    meta : dict
        The record's description, without ``sha256``.
    scalars : dict
        ``name -> numpy scalar or str``.
    arrays : dict
        ``name -> numpy.ndarray``.

    Returns
    -------
    str

    Examples
    --------
    >>> len(record_checksum({"key": "k"}, {"x": np.float64(1.0)}, {}))
    64
    """
    h = hashlib.sha256()
    _feed(h, canonical_json(dict(meta)).encode("utf-8"))
    for name, value in scalars.items():
        if isinstance(value, str):
            _feed(h, name.encode(), b"str", value.encode("utf-8"))
        else:
            arr = np.asarray(value)
            _feed(h, name.encode(), arr.dtype.str.encode(), arr.tobytes())
    for name, value in arrays.items():
        arr = np.ascontiguousarray(value)
        _feed(h, name.encode(), arr.dtype.str.encode(), repr(arr.shape).encode(), arr.tobytes())
    return h.hexdigest()


def write_record(records_dir: Path, task: Task, record: Mapping, identity: Mapping) -> None:
    """Write a finished task's record atomically: arrays first, then the Parquet row that marks it done.

    Parameters
    ----------
    records_dir : pathlib.Path
        The store's ``records`` directory.
    task : Task
    record : dict
        ``{"scalars": {...}, "arrays": {...}}``.
    identity : dict
        ``format``, ``study`` and ``fingerprint`` of the store, recorded in the row.
    """
    scalars, arrays = record["scalars"], record["arrays"]
    if arrays:
        atomic_write(records_dir / f"{task.key}.npz", lambda fh: np.savez(fh, **arrays))
    columns = {_KEY_COLUMN: pa.array([task.key], type=pa.string())}
    for name, value in scalars.items():
        columns[name] = pa.array([value], type=pa.string()) if isinstance(value, str) else pa.array(np.asarray([value]))
    meta = {
        **identity,
        "key": task.key,
        "params": task.params,
        "replica": task.replica,
        "scalars": list(scalars),
        "arrays": list(arrays),
    }
    meta["sha256"] = record_checksum(meta, scalars, arrays)
    table = pa.table(columns).replace_schema_metadata({_META: canonical_json(meta).encode()})
    atomic_write(records_dir / f"{task.key}.parquet", lambda fh: pq.write_table(table, fh))


def read_record(records_dir: Path, task: Task) -> tuple[dict, dict] | None:
    """Read and verify ``task``'s record.

    Parameters
    ----------
    records_dir : pathlib.Path
    task : Task

    Returns
    -------
    (meta, record) or None
        The record's description and ``{"scalars": ..., "arrays": ...}``;
        ``None`` if the task has no record.

    Raises
    ------
    DamagedRecord
        If the record is unreadable, incomplete or fails its checksum.
    """
    path = records_dir / f"{task.key}.parquet"
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowException) as exc:
        raise DamagedRecord(path, f"not a readable Parquet file ({exc})") from exc
    try:
        meta = json.loads((table.schema.metadata or {})[_META])
        names, array_names, checksum = list(meta["scalars"]), list(meta["arrays"]), meta.pop("sha256")
    except KeyError as exc:
        raise DamagedRecord(path, f"its metadata lacks {exc} (not written by this version of meanfield?)") from None
    except (TypeError, ValueError) as exc:
        raise DamagedRecord(path, f"its metadata is not valid ({exc})") from None
    missing = [name for name in names if name not in table.column_names]
    if missing:
        raise DamagedRecord(path, f"the column(s) {missing} listed in its metadata are missing")
    scalars = {name: table.column(name).to_numpy()[0] for name in names}
    arrays = {}
    if array_names:
        npz_path = records_dir / f"{task.key}.npz"
        try:
            with np.load(npz_path, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in array_names}
        except FileNotFoundError:
            raise DamagedRecord(path, f"its array file {npz_path.name} is missing") from None
        except KeyError as exc:
            raise DamagedRecord(path, f"its array file {npz_path.name} lacks the array {exc}") from None
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise DamagedRecord(path, f"its array file {npz_path.name} is unreadable ({exc})") from None
    if record_checksum(meta, scalars, arrays) != checksum:
        raise DamagedRecord(path, "its contents do not match its SHA-256 checksum (edited or corrupted)")
    return meta, {"scalars": scalars, "arrays": arrays}

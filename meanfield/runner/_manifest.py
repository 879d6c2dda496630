"""The store's manifest (fingerprint, reading, comparison) and the store's exceptions.

Documented in :mod:`meanfield.runner.store`, which re-exports the public names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from meanfield.runner._tasks import canonical_json

__all__ = [
    "STORE_FORMAT",
    "FINGERPRINT_FIELDS",
    "StoreError",
    "StoreInUseError",
    "StoreCorruptError",
    "StoreMismatchError",
    "fingerprint",
]

#: Version of the on-disk layout; part of the fingerprint (2: locked stores, records with fingerprint and checksum).
STORE_FORMAT = 2
MANIFEST = "manifest.json"

#: Manifest fields that identify a study's results, with the words used in error messages.
FINGERPRINT_FIELDS = {
    "format": "store format",
    "name": "study name",
    "task": "task function",
    "fixed": "fixed study parameters",
    "root_seed": "root seed",
    "seed_by": "seed_by",
    "version": "meanfield version",
}
#: Fields every manifest must hold.
_MANIFEST_FIELDS = ("format", "name", "task", "fixed", "grid", "replicas", "root_seed", "seed_by", "version", "fingerprint")


class StoreError(OSError):
    """A result store cannot be used: not creatable or writable, in use, or damaged.

    Its message is one line naming the store or file and the cause; the path
    is in the ``path`` attribute.

    Examples
    --------
    >>> str(StoreError("cannot create store at /proc/x: No such file or directory", "/proc/x"))
    'cannot create store at /proc/x: No such file or directory'
    """

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = None if path is None else Path(path)


class StoreInUseError(StoreError):
    """The store is open by another run of the same study (it holds the store's lock).

    Attributes
    ----------
    pid : int or None
        Process id of the run that holds the lock, if known.

    Examples
    --------
    >>> str(StoreInUseError("results/x", 1234))
    'store results/x is in use by pid 1234 (another run of the same study); wait for it to finish or use another store'
    """

    def __init__(self, path, pid: int | None):
        self.pid = pid
        who = f"pid {pid}" if pid is not None else "another process"
        super().__init__(
            f"store {path} is in use by {who} (another run of the same study); wait for it to finish or use another store",
            path,
        )


class StoreCorruptError(StoreError):
    """A manifest or record file of the store is damaged or was edited; the message names the file.

    Examples
    --------
    >>> issubclass(StoreCorruptError, OSError)
    True
    """


class StoreMismatchError(ValueError):
    """A result store (or one of its records) holds results of a different study and is not used.

    Examples
    --------
    >>> issubclass(StoreMismatchError, ValueError)
    True
    """


def fingerprint(manifest: Mapping) -> str:
    """Return the SHA-256 hex digest of the manifest fields that identify a study's results.

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
    >>> m = {"name": "s", "task": "m:f", "fixed": {}, "root_seed": 0, "seed_by": None, "version": "0.1.0"}
    >>> len(fingerprint(m))
    64
    """
    fields = {"format": STORE_FORMAT, **manifest}
    return hashlib.sha256(canonical_json({k: fields[k] for k in FINGERPRINT_FIELDS}).encode()).hexdigest()


def read_manifest(path: Path, *, missing_ok: bool = False) -> dict | None:
    file = path / MANIFEST
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return None
        raise FileNotFoundError(f"{path} holds no {MANIFEST}: it is not a meanfield result store") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreCorruptError(f"cannot read the store manifest {file}: {exc}", file) from exc
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(f"the store manifest {file} is not valid JSON ({exc}); it is damaged", file) from None
    if not isinstance(manifest, dict):
        raise StoreCorruptError(f"the store manifest {file} is not a JSON object; it is damaged", file)
    missing = [k for k in _MANIFEST_FIELDS if k not in manifest]
    if missing:
        raise StoreCorruptError(f"the store manifest {file} lacks the field(s) {missing}; it is damaged", file)
    return manifest


def check_fingerprint(path: Path, manifest: Mapping) -> None:
    """Refuse a manifest whose fields no longer match its recorded fingerprint."""
    if manifest.get("format") == STORE_FORMAT and fingerprint(manifest) != manifest["fingerprint"]:
        raise StoreCorruptError(
            f"the store manifest {path / MANIFEST} does not match its fingerprint: it was edited by hand or is "
            "damaged; restore it, or start a new store",
            path / MANIFEST,
        )


def _describe_difference(field: str, old, new) -> str:
    if field == "fixed" and isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in old.keys() | new.keys() if canonical_json(old.get(k)) != canonical_json(new.get(k)))
        parts = [f"{k}: stored {old.get(k, '<absent>')!r}, now {new.get(k, '<absent>')!r}" for k in keys]
        return "fixed study parameters differ (" + "; ".join(parts) + ")"
    return f"{FINGERPRINT_FIELDS[field]} differs: stored {old!r}, now {new!r}"


def differences(old: Mapping, new: Mapping) -> list[str]:
    new = {"format": STORE_FORMAT, **new}
    return [
        _describe_difference(field, old.get(field), new.get(field))
        for field in FINGERPRINT_FIELDS
        if canonical_json(old.get(field)) != canonical_json(new.get(field))
    ]


def mismatch(path: Path, diffs: list[str], holder: int | None = None) -> StoreMismatchError:
    busy = "" if holder is None else f" (the store is in use by pid {holder})"
    return StoreMismatchError(
        f"the store {path} holds results of a different study{busy}, refusing to mix them: "
        + "; ".join(diffs)
        + ". Use a new store directory, or overwrite=True to discard the stored results."
    )

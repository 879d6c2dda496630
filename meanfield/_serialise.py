"""JSON encoding of result metadata (NumPy arrays and scalars as plain lists and numbers)."""

from __future__ import annotations

import numpy as np

__all__ = ["json_default"]


def json_default(o):
    """``default=`` hook of :func:`json.dumps`: arrays to lists, NumPy scalars to Python, anything else to repr."""
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return repr(o)


def load_named(reader, path, writer: str):
    """``reader(path)``, with any failure other than ``OSError`` turned into one ``ValueError``
    naming the file and the ``writer`` (e.g. ``"SPDESolution.save"``) that should have made it."""
    try:
        return reader(path)
    except OSError:
        raise
    except Exception as exc:  # a foreign .npz, a truncated file, a missing key: name the file
        raise ValueError(f"{str(path)!r} is not a file written by {writer} "
                         f"({type(exc).__name__}: {exc})") from None

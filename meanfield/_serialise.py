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

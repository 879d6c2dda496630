"""Input checks shared by the public entry points.

Every public function validates its arguments here, so that bad input raises a
``ValueError`` or ``TypeError`` that names the parameter and the allowed range
instead of a NumPy traceback from deep inside a solver.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "as_int",
    "as_float",
    "as_points",
    "as_times",
    "as_rng",
    "as_matrix",
]


def as_int(value, name: str, *, min_value: int | None = None, max_value: int | None = None) -> int:
    """Return ``value`` as an ``int`` or raise naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if min_value is not None and value < min_value:
        raise ValueError(f"{name} must be >= {min_value}, got {value}")
    if max_value is not None and value > max_value:
        raise ValueError(f"{name} must be <= {max_value}, got {value}")
    return value


def as_float(
    value,
    name: str,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    strict_min: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` or raise naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if min_value is not None:
        if strict_min and value <= min_value:
            raise ValueError(f"{name} must be > {min_value}, got {value}")
        if not strict_min and value < min_value:
            raise ValueError(f"{name} must be >= {min_value}, got {value}")
    if max_value is not None and value > max_value:
        raise ValueError(f"{name} must be <= {max_value}, got {value}")
    return value


def as_points(x, name: str, d: int | None = None, *, unit_tol: float = 1e-8) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array of unit vectors, shape ``(N, d)``.

    Raises if the shape is wrong, a value is not finite, or a row is not of unit
    norm to ``unit_tol`` (tokens live on the sphere S^{d-1}).
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of shape (N, d) of real numbers") from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (N, d), got shape {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one point, got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError(f"{name} must have d >= 2 columns (points on S^(d-1)), got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} must have d = {d} columns, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if unit_tol is not None:
        err = np.max(np.abs(np.einsum("ij,ij->i", arr, arr) - 1.0))
        if err > unit_tol:
            raise ValueError(
                f"{name} must be unit vectors (|x| = 1 to {unit_tol:g}); the largest deviation of |x|^2 from 1 is {err:.3g}. "
                "Normalise with x / np.linalg.norm(x, axis=1, keepdims=True)."
            )
    return np.ascontiguousarray(arr)


def as_times(t, name: str, *, min_value: float = 0.0) -> np.ndarray:
    """Return a 1-D, finite, non-decreasing float64 array of times >= ``min_value``."""
    arr = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of times, got shape {np.shape(t)}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(arr < min_value):
        raise ValueError(f"{name} must be >= {min_value}, got min {arr.min()}")
    if np.any(np.diff(arr) < 0):
        raise ValueError(f"{name} must be non-decreasing")
    return arr


def as_rng(seed, name: str = "seed") -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from an int seed, a SeedSequence or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (numbers.Integral, np.random.SeedSequence)) and not isinstance(seed, bool):
        if isinstance(seed, numbers.Integral) and seed < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {seed}")
        return np.random.default_rng(seed)
    raise TypeError(f"{name} must be an int, a numpy SeedSequence or a numpy Generator, got {type(seed).__name__}")


def as_matrix(m, name: str, d: int) -> np.ndarray | None:
    """Return ``m`` as a finite ``(d, d)`` float64 matrix, or ``None`` for the identity."""
    if m is None:
        return None
    arr = np.asarray(m, dtype=np.float64)
    if arr.shape != (d, d):
        raise ValueError(f"{name} must have shape ({d}, {d}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr

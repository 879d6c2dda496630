"""Input checks shared by the public entry points.

Every public function validates its arguments here, so that bad input raises a
``ValueError`` or ``TypeError`` that names the parameter and the allowed range
instead of a NumPy traceback from deep inside a solver.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "as_int",
    "as_float",
    "as_bool",
    "as_real_array",
    "as_points",
    "as_times",
    "as_rng",
    "as_matrix",
    "check_cost",
    "COST_LIMIT_SECONDS",
    "COST_LIMIT_BYTES",
]

#: Calls estimated to run longer than this (seconds, one laptop core) are refused up front.
#: Raise it (``meanfield._validate.COST_LIMIT_SECONDS = ...``) to run larger problems on purpose.
COST_LIMIT_SECONDS = 60.0
#: Calls estimated to need more memory than this (bytes) are refused up front.
COST_LIMIT_BYTES = 4 * 2**30


def as_bool(value, name: str) -> bool:
    """Return ``value`` as a ``bool``; only ``True``/``False`` (and NumPy booleans) are accepted.

    Strings such as ``"no"`` or ``"false"`` and numbers are refused, because ``bool("no")`` is True.

    Examples
    --------
    >>> as_bool(np.bool_(False), "attention")
    False
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}")


def _reject_complex(arr: np.ndarray, name: str) -> None:
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got a complex array (dtype {arr.dtype}); pass its real part "
                        "explicitly if that is what you mean")


def as_real_array(x, name: str, *, ndim: int | None = None, finite: bool = True) -> np.ndarray:
    """Return ``x`` as a float64 array, refusing complex, non-numeric and (by default) non-finite input.

    Examples
    --------
    >>> as_real_array([1, 2], "w").dtype
    dtype('float64')
    """
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers") from exc
    _reject_complex(raw, name)
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be an array of real numbers, got dtype {raw.dtype}")
    arr = raw.astype(np.float64)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _format_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n / 2**10:.3g} KiB"


def check_cost(what: str, *, seconds: float, memory: float, parameter: str, value, largest) -> None:
    """Refuse a call whose estimated run time or memory exceeds the limits, naming the parameter.

    Parameters
    ----------
    what : str
        The call, as the user wrote it (``"NoisePath"``, ``"harmonic_coefficients"``).
    seconds, memory : float
        Estimated run time (seconds; 0 when only memory is estimated) and peak memory (bytes).
    parameter : str
        The size parameter, as the caller knows it (``"lmax"``).
    value
        Its value.
    largest
        The largest value accepted with the other arguments unchanged.

    Examples
    --------
    >>> check_cost("demo", seconds=1.0, memory=1e6, parameter="n", value=10, largest=100)
    """
    if seconds <= COST_LIMIT_SECONDS and memory <= COST_LIMIT_BYTES:
        return
    if seconds > 0:
        cost = (f"the estimated cost is about {seconds:.3g} s and {_format_bytes(memory)} of memory (limits "
                f"{COST_LIMIT_SECONDS:g} s and {_format_bytes(COST_LIMIT_BYTES)})")
    else:
        cost = f"the estimated memory is about {_format_bytes(memory)} (limit {_format_bytes(COST_LIMIT_BYTES)})"
    raise ValueError(f"{what}: {parameter} = {value} is too large: {cost}; the largest accepted {parameter} here is "
                     f"{largest}")


#: Most time steps one solver call may take (at the fastest, ~1e-4 s a step, more than 15 minutes).
MAX_STEPS = 10**7


def check_steps(what: str, n_steps, dt: float, t_end: float) -> None:
    """Refuse a solver call of more than :data:`MAX_STEPS` time steps, naming ``dt`` and the horizon.

    Examples
    --------
    >>> check_steps("solve_particles", 100, 0.01, 1.0)
    """
    if n_steps > MAX_STEPS:
        raise ValueError(f"{what}: dt = {dt:g} up to t = {t_end:g} needs {float(n_steps):.3g} steps, more than the "
                         f"{MAX_STEPS:.0e} one call may take; use dt >= {t_end / MAX_STEPS:.3g} or a shorter horizon")


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
    # a Python float skips the ABC check, and math.isfinite is no ufunc call: inside a solver's
    # step (the noise's times) the two took about 7 us a call once the transforms had run
    if type(value) is not float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
        value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if min_value is not None:
        if strict_min and value <= min_value:
            raise ValueError(f"{name} must be > {min_value}, got {value}")
        if not strict_min and value < min_value:
            raise ValueError(f"{name} must be >= {min_value}, got {value}")
    if max_value is not None and value > max_value:
        raise ValueError(f"{name} must be <= {max_value}, got {value}")
    return value


def as_points(x, name: str, d: int | None = None, *, unit_tol: float = 1e-8, copy: bool = True) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 array of unit vectors, shape ``(N, d)``.

    Raises if the shape is wrong, a value is not finite, or a row is not of unit
    norm to ``unit_tol`` (tokens live on the sphere S^{d-1}). The result is a new array,
    or with ``copy=False`` ``x`` itself when it already is C-contiguous float64 (for callers
    that only read it).
    """
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of shape (N, d) of real numbers") from exc
    _reject_complex(raw, name)
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be an array of shape (N, d) of real numbers, got dtype {raw.dtype}")
    arr = raw.astype(np.float64, copy=copy)
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (N, d), got shape {arr.shape}")
    if arr.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one point, got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ValueError(f"{name} must have d >= 2 columns (points on S^(d-1)), got shape {arr.shape}")
    if d is not None and arr.shape[1] != d:
        raise ValueError(f"{name} must have d = {d} columns, got shape {arr.shape}")
    if unit_tol is None:
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
    else:
        # |x|² is NaN or infinite exactly where a row holds a NaN or an infinity, or overflows:
        # the finiteness check rides on the norm check's pass (a separate isfinite pass costs as much)
        r2 = np.einsum("ij,ij->i", arr, arr)
        if not np.isfinite(r2.sum()) and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or infinite values")
        r2 -= 1.0
        np.abs(r2, out=r2)
        err = r2.max()
        if err > unit_tol:
            raise ValueError(
                f"{name} must be unit vectors (|x| = 1 to {unit_tol:g}); the largest deviation of |x|^2 from 1 is {err:.3g}. "
                "Normalise with x / np.linalg.norm(x, axis=1, keepdims=True)."
            )
    return np.ascontiguousarray(arr)


def as_times(t, name: str, *, min_value: float = 0.0) -> np.ndarray:
    """Return a 1-D, finite, non-decreasing float64 array of times >= ``min_value``."""
    arr = np.atleast_1d(as_real_array(t, name, finite=False))
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
    arr = as_real_array(m, name, finite=False)
    if arr.shape != (d, d):
        raise ValueError(f"{name} must have shape ({d}, {d}), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


#: The attention inverse temperature β may be any finite real number: β > 0 weights nearby tokens
#: more (the paper's setting), β < 0 weights distant tokens more (the "repulsive" or anti-aligned
#: attention of part of the literature), β = 0 is the plain mean.
#: This is the one place its range is stated.


def as_beta(beta, name: str = "beta", *, nonzero: bool = False) -> float:
    """Validate the attention inverse temperature β ∈ ℝ (β ≠ 0 with ``nonzero``); the one definition of its range.

    Examples
    --------
    >>> as_beta(-2)
    -2.0
    """
    value = as_float(beta, name)
    if nonzero and value == 0.0:
        raise ValueError(f"{name} must be nonzero here (the log-gradient form of the attention divides by it), got 0")
    return value

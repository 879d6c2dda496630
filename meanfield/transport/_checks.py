"""Argument checks shared by the transport functions.

Points are validated by :func:`meanfield._validate.as_points`; weights,
orders, cost names and quadrature triples are validated here, once, for every
family (exact, circle, sliced, densities, moments).
"""

from __future__ import annotations

import numbers

import numpy as np

from meanfield._validate import as_points

#: Tolerance on ``|sum(weights) - 1|`` accepted at every entry point.
WEIGHT_SUM_TOL = 1e-9

_COSTS = ("geodesic", "chordal")
# Rows of the cost matrix (and projections of a sliced batch) built per block
# (bounds temporaries to ~32 MB).
_BLOCK_ELEMENTS = 1 << 22


def _as_vector(v, n: int, name: str, *, what: str, match: str) -> np.ndarray:
    """``v`` as a finite float64 array of shape (n,); ``what`` and ``match`` word the errors."""
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a 1-D array of {n} {what}") from exc
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match {match}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_weights(w, n: int, name: str) -> np.ndarray:
    """Return probability weights of length ``n`` (uniform for None), renormalised exactly."""
    if w is None:
        return np.full(n, 1.0 / n)
    arr = _as_vector(w, n, name, what="real weights", match="its points")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative, got min {arr.min():.3g}")
    total = float(arr.sum())
    if abs(total - 1.0) > WEIGHT_SUM_TOL:
        raise ValueError(
            f"{name} must sum to 1 within {WEIGHT_SUM_TOL:g}, got sum {total!r}; "
            f"pass {name} / {name}.sum() if it is an unnormalised measure"
        )
    return arr / total


def _as_p(p) -> int:
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    return int(p)


def _as_choice(value, name: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _as_cloud(x, a, name_x: str, name_a: str, d: int | None = None):
    pts = as_points(x, name_x, d)
    return pts, _as_weights(a, pts.shape[0], name_a)


def _as_pair(x, y, a, b):
    x, a = _as_cloud(x, a, "x", "a")
    y = as_points(y, "y")
    if y.shape[1] != x.shape[1]:
        raise ValueError(f"x and y must have the same dimension d, got x {x.shape} and y {y.shape}")
    return x, y, a, _as_weights(b, y.shape[0], "b")


def _as_quadrature(nodes, weights, values):
    nodes = as_points(nodes, "nodes")
    q = nodes.shape[0]
    weights = _as_vector(weights, q, "weights", what="real numbers", match="nodes")
    values = _as_vector(values, q, "values", what="real numbers", match="nodes")
    if np.any(weights <= 0):
        raise ValueError(f"weights must be positive quadrature weights, got min {weights.min():.3g}")
    return nodes, weights, values


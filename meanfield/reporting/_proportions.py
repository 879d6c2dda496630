"""Confidence intervals for a binomial proportion: Wilson score and Clopper–Pearson (exact)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .._validate import as_float

__all__ = ["proportion_interval", "PROPORTION_METHODS"]

#: Interval methods of :func:`proportion_interval`.
PROPORTION_METHODS = ("wilson", "clopper-pearson")


def proportion_interval(successes, trials, *, ci: float = 0.95, method: str = "clopper-pearson"):
    """Two-sided confidence interval for a proportion p from ``successes`` out of ``trials``.

    * ``"clopper-pearson"``: the exact interval, [B(α/2; k, n-k+1), B(1-α/2; k+1, n-k)] with B the
      Beta quantile (0 if k = 0, 1 if k = n); its coverage is at least ``ci`` for every p;
    * ``"wilson"``: the score interval (p̂ + z²/2n ± z sqrt(p̂(1-p̂)/n + z²/4n²)) / (1 + z²/n), closer
      to nominal coverage on average, not guaranteed.

    Parameters
    ----------
    successes, trials : int or array_like of int
        k and n (0 <= k <= n, n >= 1), broadcast together.
    ci : float in (0, 1)
    method : {"clopper-pearson", "wilson"}

    Returns
    -------
    (low, high) : floats, or arrays shaped like the broadcast inputs

    Examples
    --------
    >>> lo, hi = proportion_interval(20, 20)
    >>> round(lo, 4), hi                          # 20 of 20: p >= 0.8316 at 95 %
    (0.8316, 1.0)
    >>> [round(v, 4) for v in proportion_interval(5, 10, method="wilson")]
    [0.2366, 0.7634]
    """
    ci = as_float(ci, "ci", min_value=0.0, strict_min=True, max_value=1.0)
    if ci >= 1.0:
        raise ValueError(f"ci must be < 1, got {ci}")
    if method not in PROPORTION_METHODS:
        raise ValueError(f"method must be one of {PROPORTION_METHODS}, got {method!r}")
    k = np.asarray(successes)
    n = np.asarray(trials)
    if k.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise TypeError("successes and trials must be integers")
    k, n = np.broadcast_arrays(k.astype(np.int64), n.astype(np.int64))
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need trials >= 1 and 0 <= successes <= trials")
    alpha = 1.0 - ci
    if method == "clopper-pearson":
        with np.errstate(invalid="ignore"):
            low = np.where(k == 0, 0.0, stats.beta.ppf(alpha / 2, k, n - k + 1))
            high = np.where(k == n, 1.0, stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    else:
        z = stats.norm.ppf(1 - alpha / 2)
        p = k / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / denom
        low, high = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high

"""Kaplan–Meier survival curves and medians for right-censored times (escape times, time to one cluster)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from meanfield._validate import as_float, as_real_array

__all__ = ["kaplan_meier", "km_median"]


def _inputs(durations, observed) -> tuple[np.ndarray, np.ndarray]:
    t = as_real_array(durations, "durations", finite=False).ravel()
    if np.any(np.isnan(t)) or np.any(t < 0):
        raise ValueError("durations must be >= 0 (inf for a time never observed)")
    if observed is None:
        e = np.isfinite(t)
    else:
        e = np.asarray(observed, dtype=bool).ravel()
        if e.shape != t.shape:
            raise ValueError(f"observed must have the shape of durations {t.shape}, got {e.shape}")
        if np.any(e & ~np.isfinite(t)):
            raise ValueError("an observed (uncensored) duration must be finite")
    return t, e


def kaplan_meier(durations, observed=None, *, horizon: float | None = None, ci: float = 0.95) -> pd.DataFrame:
    """Kaplan–Meier estimate S(t) = Π_{t_i <= t} (1 - d_i / n_i) with a pointwise confidence band.

    Greenwood's variance, Var log S = Σ d_i / (n_i (n_i - d_i)), on the log(-log S) scale
    (the band stays inside [0, 1]).

    Parameters
    ----------
    durations : array_like, shape (n,)
        Event or censoring times; ``inf`` means "not observed by the horizon".
    observed : array_like of bool, optional
        True where the event was observed; default ``isfinite(durations)``.
    horizon : float, optional
        Censoring time of the ``inf`` durations (default: the largest finite duration).
    ci : float

    Returns
    -------
    pandas.DataFrame
        Columns ``time, at_risk, events, survival, ci_low, ci_high``; the first row is
        ``time = 0, survival = 1``, then one row per distinct event time.

    Examples
    --------
    >>> km = kaplan_meier([1.0, 2.0, 2.0, float("inf")], horizon=5.0)
    >>> km[["time", "at_risk", "events", "survival"]].to_numpy().tolist()
    [[0.0, 4.0, 0.0, 1.0], [1.0, 4.0, 1.0, 0.75], [2.0, 3.0, 2.0, 0.25]]
    """
    t, e = _inputs(durations, observed)
    ci = as_float(ci, "ci", min_value=0.0, strict_min=True, max_value=0.999999)
    finite = t[np.isfinite(t)]
    hz = (float(finite.max()) if finite.size else 0.0) if horizon is None else as_float(horizon, "horizon", min_value=0.0)
    t = np.where(np.isfinite(t), t, hz)
    ev_times = np.unique(t[e])
    at_risk = (t[None, :] >= ev_times[:, None]).sum(axis=1).astype(float)
    events = (e[None, :] & (t[None, :] == ev_times[:, None])).sum(axis=1).astype(float)
    s = np.cumprod(1.0 - events / at_risk)
    with np.errstate(divide="ignore", invalid="ignore"):
        green = np.cumsum(events / (at_risk * (at_risk - events)))
        z = stats.norm.ppf(0.5 + ci / 2)
        logs = np.log(s)
        se = np.sqrt(green) / np.abs(logs)
        loglog = np.log(-logs)
        lo = np.exp(-np.exp(loglog + z * se))
        hi = np.exp(-np.exp(loglog - z * se))
    lo = np.where(s > 0, np.where(np.isfinite(lo), lo, 0.0), 0.0)
    hi = np.where(s > 0, np.where(np.isfinite(hi), hi, 1.0), 0.0)
    return pd.DataFrame({
        "time": np.concatenate([[0.0], ev_times]),
        "at_risk": np.concatenate([[float(t.size)], at_risk]),
        "events": np.concatenate([[0.0], events]),
        "survival": np.concatenate([[1.0], s]),
        "ci_low": np.concatenate([[1.0], lo]),
        "ci_high": np.concatenate([[1.0], hi]),
    })


def km_median(durations, observed=None, *, horizon: float | None = None, ci: float = 0.95) -> tuple[float, float, float]:
    """Median of a right-censored sample from its Kaplan–Meier curve, with a confidence interval.

    The median is the first time with S(t) <= 1/2; the interval runs from the first time the
    lower band is <= 1/2 to the first time the upper band is <= 1/2 (Brookmeyer–Crowley
    inversion of the pointwise band). ``inf`` where a curve never reaches 1/2 (too much
    censoring: the median exceeds the horizon).

    Returns
    -------
    (median, ci_low, ci_high) : tuple of float

    Examples
    --------
    >>> km_median([1.0, 2.0, 3.0, 4.0, 5.0])[0]
    3.0
    >>> km_median([1.0, float("inf"), float("inf")], horizon=9.0)[0]
    inf
    """
    km = kaplan_meier(durations, observed, horizon=horizon, ci=ci)

    def first(col):
        hit = np.flatnonzero(km[col].to_numpy() <= 0.5)
        return float(km["time"].iloc[hit[0]]) if hit.size else math.inf

    return first("survival"), first("ci_low"), first("ci_high")

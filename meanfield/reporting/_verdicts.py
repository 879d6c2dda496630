"""Slope intervals that cannot over-claim, and three-way verdicts against a theory slope.

The method and the rules are documented in :mod:`meanfield.reporting`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from meanfield._validate import as_float

__all__ = ["CONSISTENT", "INCONSISTENT", "INCONCLUSIVE", "SlopeIntervals", "Verdict", "verdict"]

CONSISTENT = "consistent"
INCONSISTENT = "inconsistent"
INCONCLUSIVE = "inconclusive"
#: Default power threshold: a slope interval wider than ±0.5 |theory slope| is inconclusive.
DEFAULT_POWER = 0.5
#: Default resolution: a point whose mean is within 2 standard errors of zero is unresolved.
DEFAULT_RESOLUTION = 2.0


@dataclass(frozen=True)
class SlopeIntervals:
    """Studentized-bootstrap and delta-method intervals of a log–log slope.

    Attributes
    ----------
    slope : float
        Least-squares slope of log group means on log x.
    se : float
        Delta-method standard error of the slope (NaN if a group has < 2 replicas).
    ci_low, ci_high : float
        Studentized bootstrap interval at level ``ci`` (NaN if ``se`` is NaN).
    delta_ci_low, delta_ci_high : float
        Delta-method interval ``slope ± z se``.
    ci : float
        Confidence level.
    group_mean, group_se : tuple of float, length G
        Mean error per group (increasing x) and its standard error ``sd / sqrt(n)`` (NaN for one replica).
    resolved : tuple of bool, length G
        ``n_g >= 2`` and ``group_mean > resolution * group_se``.
    """

    slope: float
    se: float
    ci_low: float
    ci_high: float
    delta_ci_low: float
    delta_ci_high: float
    ci: float
    group_mean: tuple
    group_se: tuple
    resolved: tuple


@dataclass(frozen=True)
class Verdict:
    """A three-way verdict and why.

    Attributes
    ----------
    outcome : str
        ``"consistent"``, ``"inconsistent"`` or ``"inconclusive"``.
    reason : str
        One sentence: which rule decided.
    """

    outcome: str
    reason: str

    def __str__(self) -> str:
        return self.outcome


def _slope_and_se(lx_c, means, variances, counts):
    """Slope of log means on centred log x (last axis = groups) and its delta-method SE."""
    c = lx_c / (lx_c @ lx_c)
    slope = np.log(means) @ c
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt((variances / (counts * means**2)) @ (c * c))
    return slope, se


def bootstrap_group_moments(y, inverse, n_groups, n_boot, rng) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance (ddof 1; NaN for one replica) of y resampled within each group, (n_boot, G) each."""
    bmean = np.empty((n_boot, n_groups))
    bvar = np.empty((n_boot, n_groups))
    for g in range(n_groups):
        yg = y[inverse == g]
        draws = yg[rng.integers(0, yg.size, size=(n_boot, yg.size))]
        bmean[:, g] = draws.mean(axis=1)
        bvar[:, g] = draws.var(axis=1, ddof=1) if yg.size > 1 else np.nan
    return bmean, bvar


def slope_intervals(y, inverse, xg, ci: float, bmean, bvar, resolution: float = DEFAULT_RESOLUTION):
    """Intervals of the slope of ``log mean(y | g)`` on ``log xg`` (validated inputs; see module doc).

    ``bmean, bvar`` are the bootstrap group moments of :func:`bootstrap_group_moments`.
    """
    n_groups = xg.size
    counts = np.bincount(inverse, minlength=n_groups).astype(np.float64)
    mean = np.bincount(inverse, weights=y, minlength=n_groups) / counts
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.bincount(inverse, weights=(y - mean[inverse]) ** 2, minlength=n_groups) / (counts - 1)
        group_se = np.sqrt(var / counts)
    lx = np.log(xg)
    lx_c = lx - lx.mean()
    slope, se = _slope_and_se(lx_c, mean, var, counts)
    bslope, bse = _slope_and_se(lx_c, bmean, bvar, counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (bslope - slope) / bse
    t[(bslope == slope) & (bse == 0)] = 0.0  # 0/0: a resample equal to the data
    alpha = 1.0 - ci
    if np.isfinite(se) and not np.any(np.isnan(t)):
        # no interpolation between order statistics: t* = ±inf (a resample with SE* = 0) stays ±inf
        q_lo, q_hi = np.quantile(t, [alpha / 2.0, 1.0 - alpha / 2.0], method="inverted_cdf")
        lo, hi = slope - q_hi * se, slope - q_lo * se
    else:
        lo = hi = np.nan
    z = stats.norm.ppf(1.0 - alpha / 2.0)
    with np.errstate(invalid="ignore"):
        resolved = (counts >= 2) & (mean > resolution * group_se)
    return SlopeIntervals(
        slope=float(slope),
        se=float(se),
        ci_low=float(lo),
        ci_high=float(hi),
        delta_ci_low=float(slope - z * se),
        delta_ci_high=float(slope + z * se),
        ci=ci,
        group_mean=tuple(mean.tolist()),
        group_se=tuple(group_se.tolist()),
        resolved=tuple(resolved.tolist()),
    )


def verdict(
    intervals,
    theory_slope: float,
    *,
    tolerance: float = 0.0,
    power: float = DEFAULT_POWER,
) -> Verdict:
    """Three-way verdict of a slope against theory: consistent, inconsistent or inconclusive.

    Rules, in order (see the module documentation for the intervals):

    1. inconclusive if any point is unresolved (fewer than 2 replicas, or mean
       error within 2 standard errors of zero — ``resolved`` of the fit);
    2. inconclusive if the studentized interval's half-width exceeds
       ``power * |theory_slope|`` (the design cannot tell the theory slope
       from one ``power`` times it away; with ``theory_slope == 0`` every
       interval of positive width is inconclusive);
    3. inconclusive if the studentized and delta-method intervals disagree on
       whether ``theory_slope`` lies within ``tolerance`` of them;
    4. consistent if ``ci_low - tolerance <= theory_slope <= ci_high +
       tolerance``, else inconsistent.

    Parameters
    ----------
    intervals : SlopeFit or SlopeIntervals
        A fit from :func:`fit_slope` (its ``intervals``) or the intervals themselves.
    theory_slope : float
        Expected slope.
    tolerance : float, >= 0
        Allowed distance between the theory slope and the interval.
    power : float, > 0
        Largest acceptable half-width of the interval, relative to ``|theory_slope|``.

    Returns
    -------
    Verdict
        ``outcome`` and ``reason``; ``str(v)`` is the outcome.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.reporting import fit_slope, verdict
    >>> rng = np.random.default_rng(0)
    >>> n = np.repeat([64.0, 256.0, 1024.0, 4096.0], 8)
    >>> fit = fit_slope(n, n ** -0.5 * rng.lognormal(0, 0.1, n.size))
    >>> str(verdict(fit, -0.5)), str(verdict(fit, -1.0))
    ('consistent', 'inconsistent')
    >>> noisy = fit_slope(n[:16], n[:16] ** -0.5 * rng.lognormal(0, 1.5, 16))
    >>> str(verdict(noisy, -0.5))
    'inconclusive'
    """
    iv = getattr(intervals, "intervals", intervals)
    if not isinstance(iv, SlopeIntervals):
        raise TypeError(f"intervals must be a SlopeFit or SlopeIntervals, got {type(intervals).__name__}")
    theory = as_float(theory_slope, "theory_slope")
    tol = as_float(tolerance, "tolerance", min_value=0.0)
    power = as_float(power, "power", min_value=0.0, strict_min=True)
    unresolved = len(iv.resolved) - sum(iv.resolved)
    if unresolved:
        return Verdict(INCONCLUSIVE, f"{unresolved} point(s) unresolved (< 2 replicas or mean within 2 SE of 0)")
    half = 0.5 * (iv.ci_high - iv.ci_low)
    if not np.isfinite(half) or half > power * abs(theory):
        return Verdict(
            INCONCLUSIVE, f"slope CI half-width {half:.3g} > {power:g} |theory slope| = {power * abs(theory):.3g}"
        )
    inside = iv.ci_low - tol <= theory <= iv.ci_high + tol
    inside_delta = iv.delta_ci_low - tol <= theory <= iv.delta_ci_high + tol
    if inside != inside_delta:
        return Verdict(INCONCLUSIVE, "studentized bootstrap and delta-method intervals disagree")
    if inside:
        return Verdict(CONSISTENT, f"theory slope {theory:g} within the {iv.ci:.0%} CI (± tolerance {tol:g})")
    return Verdict(INCONSISTENT, f"theory slope {theory:g} outside the {iv.ci:.0%} CI (± tolerance {tol:g})")

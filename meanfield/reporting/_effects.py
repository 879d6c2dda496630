"""Signed effects (differences of means) against a parameter: slope fits and three-way verdicts.

A rate table fits positive errors. Many convergence studies measure a *signed* effect
instead, e.g. Δ(m) = E g(m) - E g(∞) or a weak error E f(X_L) - E f(X): its magnitude
should fall like x^s, but a noisy estimate can change sign or sit within its standard
error of zero, and a log–log fit of |Δ| then measures noise. :func:`fit_effect_slope`
fits log|Δ_g| on log x_g with the interval method of :mod:`meanfield.reporting`
(studentized bootstrap over replicas within each group, cross-checked by the delta method
with Var log|Δ| ≈ Var Δ / Δ²) and :func:`effect_verdict` applies the three-way rules with
one more: **inconclusive if the sign of Δ changes** across the groups (a power law in x
cannot change sign).

:func:`fit_linear_model` fits a model linear in its parameters, y_g = Σ_j θ_j X_gj, by
weighted least squares on group means (weights 1/SE²), with the same two intervals for
every parameter and a χ² goodness of fit — used to compare readings of a rate such as
log L / L + c/m against 1/L + c/m on one grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._verdicts import CONSISTENT, DEFAULT_POWER, DEFAULT_RESOLUTION, INCONCLUSIVE, INCONSISTENT, Verdict

__all__ = ["EffectFit", "fit_effect_slope", "effect_verdict", "ModelFit", "fit_linear_model"]


@dataclass(frozen=True)
class EffectFit:
    """Slope of log|Δ| on log x for a signed effect Δ, with studentized and delta-method intervals.

    Attributes
    ----------
    x : tuple of float
    effect, effect_se : tuple of float
        Δ_g and its standard error per group.
    z : tuple of float
        Δ_g / SE_g.
    slope, se : float
        Least-squares slope and its delta-method SE.
    ci_low, ci_high : float
        Studentized bootstrap interval (NaN when an effect is 0 or a SE is not finite).
    delta_ci_low, delta_ci_high : float
        ``slope ± z se``.
    ci : float
    resolved : tuple of bool
        ``|Δ_g| > 2 SE_g``.
    sign_change : bool
        The Δ_g do not all have the same sign.
    """

    x: tuple
    effect: tuple
    effect_se: tuple
    z: tuple
    slope: float
    se: float
    ci_low: float
    ci_high: float
    delta_ci_low: float
    delta_ci_high: float
    ci: float
    resolved: tuple
    sign_change: bool


def _moments(samples):
    means = np.array([np.mean(s) for s in samples])
    var = np.array([np.var(s, ddof=1) / len(s) if len(s) > 1 else np.nan for s in samples])
    return means, var


def _effect_slope(lx_c, eff, var):
    c = lx_c / (lx_c @ lx_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.log(np.abs(eff)) @ c
        se = np.sqrt((var / eff**2) @ (c * c))
    return slope, se


def fit_effect_slope(x, a, b=None, *, n_boot: int = 2000, ci: float = 0.95, seed=0,
                     resolution: float = DEFAULT_RESOLUTION) -> EffectFit:
    """Fit log|Δ_g| = c + s log x_g, Δ_g = mean(a_g) - mean(b_g) (or mean(a_g) without ``b``).

    Parameters
    ----------
    x : array_like, shape (G,)
        Parameter values, > 0, at least 2 distinct.
    a, b : sequence of G 1-D arrays
        Replica values per group; ``b`` is an independent ensemble (resampled separately)
        or None. For a paired (coupled) design pass the per-replica differences as ``a``.
    n_boot, ci, seed
        Bootstrap resamples (replicas within each group and ensemble), level, seed.

    Returns
    -------
    EffectFit
    """
    x = np.asarray(x, dtype=np.float64)
    a = [np.asarray(s, dtype=np.float64) for s in a]
    b = None if b is None else [np.asarray(s, dtype=np.float64) for s in b]
    if x.ndim != 1 or x.size != len(a) or (b is not None and len(b) != x.size):
        raise ValueError("x, a (and b) must have one entry per group")
    if np.unique(x).size < 2 or np.any(x <= 0):
        raise ValueError("x must be > 0 with at least 2 distinct values")
    ma, va = _moments(a)
    eff, var = (ma, va) if b is None else (ma - _moments(b)[0], va + _moments(b)[1])
    lx_c = np.log(x) - np.log(x).mean()
    slope, se = _effect_slope(lx_c, eff, var)
    rng = np.random.default_rng(seed)

    def boot(samples):
        out_m = np.empty((n_boot, len(samples)))
        out_v = np.empty((n_boot, len(samples)))
        for g, s in enumerate(samples):
            draws = s[rng.integers(0, s.size, size=(n_boot, s.size))]
            out_m[:, g] = draws.mean(axis=1)
            out_v[:, g] = draws.var(axis=1, ddof=1) / s.size if s.size > 1 else np.nan
        return out_m, out_v

    bm, bv = boot(a)
    if b is not None:
        bm2, bv2 = boot(b)
        bm, bv = bm - bm2, bv + bv2
    bslope, bse = _effect_slope(lx_c, bm, bv)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (bslope - slope) / bse
    alpha = 1 - ci
    if np.isfinite(se) and np.all(np.isfinite(t)):
        q_lo, q_hi = np.quantile(t, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
        lo, hi = slope - q_hi * se, slope - q_lo * se
    else:
        lo = hi = math.nan
    zq = stats.norm.ppf(1 - alpha / 2)
    sd = np.sqrt(var)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = eff / sd
    signs = np.sign(eff)
    return EffectFit(
        x=tuple(x.tolist()), effect=tuple(eff.tolist()), effect_se=tuple(sd.tolist()), z=tuple(z.tolist()),
        slope=float(slope), se=float(se), ci_low=float(lo), ci_high=float(hi),
        delta_ci_low=float(slope - zq * se), delta_ci_high=float(slope + zq * se), ci=ci,
        resolved=tuple(bool(v) for v in np.abs(eff) > resolution * sd),
        sign_change=bool(np.unique(signs[signs != 0]).size > 1),
    )


def effect_verdict(fit: EffectFit, theory_slope: float, *, tolerance: float = 0.0,
                   power: float = DEFAULT_POWER) -> Verdict:
    """Three-way verdict of an :class:`EffectFit` against a theory slope.

    Rules, in order: inconclusive if an effect is unresolved (within 2 SE of zero), if the
    sign of the effect changes, if the studentized interval's half-width exceeds ``power ×
    |theory_slope|`` (or is not finite), or if the studentized and delta-method intervals
    disagree; else consistent iff ``ci_low - tolerance <= theory <= ci_high + tolerance``,
    inconsistent otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> m = [1, 4, 16]
    >>> a = [1 / mm + 0.01 * rng.standard_normal(400) for mm in m]
    >>> str(effect_verdict(fit_effect_slope(m, a), -1.0))
    'consistent'
    >>> a = [1 / mm + 2.0 * rng.standard_normal(400) for mm in m]
    >>> str(effect_verdict(fit_effect_slope(m, a), -1.0))
    'inconclusive'
    """
    unresolved = len(fit.resolved) - sum(fit.resolved)
    if unresolved:
        return Verdict(INCONCLUSIVE, f"{unresolved} effect(s) within 2 SE of zero")
    if fit.sign_change:
        return Verdict(INCONCLUSIVE, "the effect changes sign")
    half = 0.5 * (fit.ci_high - fit.ci_low)
    if not np.isfinite(half) or half > power * abs(theory_slope):
        return Verdict(INCONCLUSIVE, f"slope CI half-width {half:.3g} > {power:g} |theory slope|")
    inside = fit.ci_low - tolerance <= theory_slope <= fit.ci_high + tolerance
    inside_delta = fit.delta_ci_low - tolerance <= theory_slope <= fit.delta_ci_high + tolerance
    if inside != inside_delta:
        return Verdict(INCONCLUSIVE, "studentized bootstrap and delta-method intervals disagree")
    if inside:
        return Verdict(CONSISTENT, f"theory slope {theory_slope:g} within the {fit.ci:.0%} CI")
    return Verdict(INCONSISTENT, f"theory slope {theory_slope:g} outside the {fit.ci:.0%} CI")


@dataclass(frozen=True)
class ModelFit:
    """Weighted least-squares fit of y_g = Σ_j θ_j X_gj on group means (see :func:`fit_linear_model`).

    Attributes
    ----------
    name : str
    terms : tuple of str
    params, se : tuple of float
        Estimates and delta-method (least-squares covariance) standard errors.
    ci_low, ci_high : tuple of float
        Studentized bootstrap intervals.
    delta_ci_low, delta_ci_high : tuple of float
        ``θ ± z se``.
    chi2 : float
        Weighted residual sum of squares; ``dof`` = groups - parameters.
    p_value : float
        χ² goodness of fit (points treated as independent).
    """

    name: str
    terms: tuple
    params: tuple
    se: tuple
    ci_low: tuple
    ci_high: tuple
    delta_ci_low: tuple
    delta_ci_high: tuple
    chi2: float
    dof: int
    p_value: float
    ci: float

    def row(self) -> dict:
        """A flat dict for a table: model, per-term estimate and CIs, χ², dof, p-value."""
        out = {"model": self.name}
        for j, t in enumerate(self.terms):
            out[t] = self.params[j]
            out[f"{t} 95% CI"] = f"[{self.ci_low[j]:.4g}, {self.ci_high[j]:.4g}]"
            out[f"{t} delta CI"] = f"[{self.delta_ci_low[j]:.4g}, {self.delta_ci_high[j]:.4g}]"
        out.update({"chi2": self.chi2, "dof": self.dof, "p_value": self.p_value})
        return out


def _wls(X, y, var):
    w = 1.0 / var
    A = X.T @ (w[:, None] * X)
    cov = np.linalg.inv(A)
    theta = cov @ (X.T @ (w * y))
    r = y - X @ theta
    return theta, np.sqrt(np.diag(cov)), float(np.sum(w * r * r))


def fit_linear_model(X, samples, *, terms, name: str = "", paired: bool = False, n_boot: int = 2000,
                     ci: float = 0.95, seed=0) -> ModelFit:
    """Weighted least squares of the group means on the columns of ``X``, with intervals.

    Parameters
    ----------
    X : array_like, shape (G, P)
        Design: the model's terms at each group (e.g. columns log L / L and 1/m).
    samples : sequence of G 1-D arrays
        Replica values of the response per group (their means are fitted, with weights
        n_g / var_g).
    terms : sequence of P str
    paired : bool
        Replicas are shared by all groups (same length, replica r of every group from
        the same run): the bootstrap then resamples whole replicas, keeping the
        correlation between groups; the χ² still treats the points as independent.
    n_boot, ci, seed
        Bootstrap resamples, level, seed.

    Returns
    -------
    ModelFit

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> L = np.array([4.0, 16, 64, 256])
    >>> ys = [2 / l + 0.001 * rng.standard_normal(50) for l in L]
    >>> fit = fit_linear_model(np.c_[1 / L, np.ones(4)], ys, terms=("A", "B"))
    >>> fit.ci_low[0] < 2 < fit.ci_high[0]
    True
    """
    X = np.asarray(X, dtype=np.float64)
    samples = [np.asarray(s, dtype=np.float64) for s in samples]
    G, P = X.shape
    if len(samples) != G or len(terms) != P:
        raise ValueError("X needs one row per group and one column per term")
    if G < P:
        raise ValueError(f"{G} groups cannot fit {P} parameters")
    mean, var = _moments(samples)
    theta, se, chi2 = _wls(X, mean, var)
    rng = np.random.default_rng(seed)
    tstar = np.empty((n_boot, P))
    n = samples[0].size
    if paired and any(s.size != n for s in samples):
        raise ValueError("paired=True needs the same number of replicas in every group")
    for k in range(n_boot):
        if paired:
            idx = rng.integers(0, n, n)
            bs = [s[idx] for s in samples]
        else:
            bs = [s[rng.integers(0, s.size, s.size)] for s in samples]
        bm, bv = _moments(bs)
        th, sk, _ = _wls(X, bm, np.maximum(bv, 1e-300))
        tstar[k] = (th - theta) / sk
    alpha = 1 - ci
    q_lo, q_hi = np.quantile(tstar, [alpha / 2, 1 - alpha / 2], axis=0, method="inverted_cdf")
    zq = stats.norm.ppf(1 - alpha / 2)
    dof = G - P
    return ModelFit(
        name=name, terms=tuple(terms), params=tuple(theta.tolist()), se=tuple(se.tolist()),
        ci_low=tuple((theta - q_hi * se).tolist()), ci_high=tuple((theta - q_lo * se).tolist()),
        delta_ci_low=tuple((theta - zq * se).tolist()), delta_ci_high=tuple((theta + zq * se).tolist()),
        chi2=chi2, dof=dof, p_value=float(stats.chi2.sf(chi2, dof)) if dof > 0 else math.nan, ci=ci,
    )

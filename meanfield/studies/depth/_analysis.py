"""Analysis of the depth/width study: the strong-error rate table and the tables of the (L, m) grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._presets import STRONG_TOLERANCE, WIDTH_TOLERANCE



def strong_table(frame: pd.DataFrame, *, tolerance: float = STRONG_TOLERANCE, seed=0) -> pd.DataFrame:
    """Rate table of the strong error against L (theory slope -1/2), from the study's frame.

    Parameters
    ----------
    frame : DataFrame
        ``run_study(make_strong_study(...)).frame``: columns ``replica`` and ``err_L<L>``.

    Returns
    -------
    DataFrame
        :func:`meanfield.rates.rate_table` with ``param = "L"``, error ``strong_error``.
    """
    from meanfield.rates import rate_table

    cols = [c for c in frame.columns if c.startswith("err_L")]
    if len(cols) < 2:
        raise ValueError("frame has fewer than 2 'err_L<L>' columns: not a strong-error study frame")
    long = frame.melt(id_vars=["replica"], value_vars=cols, var_name="L", value_name="strong_error")
    long["L"] = long["L"].str[5:].astype(int)
    return rate_table(long, "L", "strong_error", theory_slope=-0.5, tolerance=tolerance, seed=seed)


@dataclass
class _Cell:
    g: np.ndarray
    theta: np.ndarray


def _cells(result) -> dict:
    frame = result.frame
    cells: dict = {}
    has_theta = "theta0" in result.arrays
    for idx, row in frame.iterrows():
        key = (int(row["L"]), int(row["width"]))
        g = result.arrays["g"][idx]
        th = result.arrays["theta0"][idx] if has_theta else result.arrays["x0_final"][idx]
        cells.setdefault(key, []).append((int(row["replica"]), g, th))
    out = {}
    for key, items in cells.items():
        items.sort(key=lambda t: t[0])
        out[key] = _Cell(np.concatenate([i[1] for i in items]), np.concatenate([i[2] for i in items]))
    return out


def _w2(a: np.ndarray, b: np.ndarray) -> float:
    from meanfield.transport import wasserstein, wasserstein_circle

    if a.ndim == 1:
        return float(wasserstein_circle(np.stack([np.cos(a), np.sin(a)], 1), np.stack([np.cos(b), np.sin(b)], 1), p=2))
    return float(wasserstein(a, b, p=2))


def _fit_abs_slope(x, delta, se, n_boot: int = 2000, seed=0) -> tuple[float, float, float]:
    """Slope of log|Δ| on log x with a parametric bootstrap CI (Δ* ~ N(Δ, se²))."""
    x, delta, se = map(np.asarray, (x, delta, se))
    lx = np.log(x)
    slope = float(np.polyfit(lx, np.log(np.abs(delta)), 1)[0])
    rng = np.random.default_rng(seed)
    draws = np.abs(delta + se * rng.standard_normal((n_boot, delta.size)))
    draws = np.maximum(draws, 1e-300)
    lxc = lx - lx.mean()
    boots = (np.log(draws) - np.log(draws).mean(axis=1, keepdims=True)) @ lxc / (lxc @ lxc)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return slope, float(lo), float(hi)


def width_tables(result, *, tolerance: float = WIDTH_TOLERANCE) -> dict:
    """Tables of the (L, m) study.

    Returns
    -------
    dict of DataFrame
        ``cells``: one row per (L, m): n, E g, its SE, Δg = E g - E g(L, ∞) with SE
        (independent ensembles), W_2 of token 0 to the Gaussian ensemble and the sampling
        floor W_2(Gaussian half, Gaussian half) / sqrt 2 at the same L.
        ``width_fit``: per L, the slope of log|Δg| against log m (parametric bootstrap 95 %
        CI), theory -1, verdict with ``tolerance``.
        ``weak_L``: Gaussian column, paired weak error E g(L, ∞) - E g(L_ref, ∞) with SE
        (same paths) and the fitted slope (theory -1).
        ``limits``: the two iterated limits (lim_L lim_m: Gaussian at L_ref; lim_m lim_L:
        largest L and largest finite m) with CIs, and their difference.
    """
    cells = _cells(result)
    Ls = sorted({L for L, _ in cells})
    L_ref = max(Ls)
    grid_L = [L for L in Ls if L != L_ref]
    rows = []
    for L in grid_L:
        gauss = cells[(L, 0)]
        half = gauss.theta.shape[0] // 2
        # W2 of two independent n/2-samples of one law, rescaled to n-samples by the
        # empirical-measure scaling n^{-1/2} of W2 on S^1 (an approximate floor)
        floor = _w2(gauss.theta[:half], gauss.theta[half : 2 * half]) / math.sqrt(2.0)
        for m in sorted({w for LL, w in cells if LL == L}, key=lambda w: (w == 0, w)):
            c = cells[(L, m)]
            n = c.g.size
            se = c.g.std(ddof=1) / math.sqrt(n)
            se_gauss = gauss.g.std(ddof=1) / math.sqrt(gauss.g.size)
            delta = c.g.mean() - gauss.g.mean()
            rows.append({
                "L": L, "width": "inf" if m == 0 else m, "n_draws": n, "g_mean": c.g.mean(), "g_se": se,
                "delta_g": delta if m else 0.0, "delta_se": math.hypot(se, se_gauss) if m else 0.0,
                "w2_token0": _w2(c.theta, gauss.theta) if m else np.nan, "w2_floor": floor,
            })
    cells_df = pd.DataFrame(rows)
    fits = []
    for L in grid_L:
        sub = cells_df[(cells_df["L"] == L) & (cells_df["width"] != "inf")]
        m = sub["width"].astype(float).to_numpy()
        s, lo, hi = _fit_abs_slope(m, sub["delta_g"].to_numpy(), sub["delta_se"].to_numpy())
        resolved = int(np.sum(np.abs(sub["delta_g"]) > 2 * sub["delta_se"]))
        ok = lo - tolerance <= -1.0 <= hi + tolerance
        fits.append({"L": L, "slope": s, "slope_ci_low": lo, "slope_ci_high": hi, "theory_slope": -1.0,
                     "tolerance": tolerance, "widths_resolved_2se": resolved, "n_widths": m.size,
                     "verdict": "consistent" if ok else "not consistent"})
    fit_df = pd.DataFrame(fits)
    ref = cells[(L_ref, 0)]
    weak = []
    for L in grid_L:
        diff = cells[(L, 0)].g - ref.g  # same seeds: paired
        weak.append({"L": L, "weak_error": diff.mean(), "weak_se": diff.std(ddof=1) / math.sqrt(diff.size)})
    weak_df = pd.DataFrame(weak)
    if len(weak_df) >= 2:
        s, lo, hi = _fit_abs_slope(weak_df["L"].to_numpy(float), weak_df["weak_error"].to_numpy(),
                                   weak_df["weak_se"].to_numpy())
        weak_df["slope"], weak_df["slope_ci_low"], weak_df["slope_ci_high"], weak_df["theory_slope"] = s, lo, hi, -1.0
    L_max = max(grid_L)
    m_max = max(w for LL, w in cells if LL == L_max and w > 0)
    a, b = ref.g, cells[(L_max, m_max)].g
    se_a, se_b = a.std(ddof=1) / math.sqrt(a.size), b.std(ddof=1) / math.sqrt(b.size)
    diff = b.mean() - a.mean()
    se_d = math.hypot(se_a, se_b)
    limits = pd.DataFrame([
        {"limit": f"lim_L lim_m  (Gaussian layers, L_ref = {L_ref})", "g": a.mean(), "ci95": 1.96 * se_a},
        {"limit": f"lim_m lim_L  (L = {L_max}, m = {m_max})", "g": b.mean(), "ci95": 1.96 * se_b},
        {"limit": "difference", "g": diff, "ci95": 1.96 * se_d},
    ])
    limits.attrs["agree"] = bool(abs(diff) <= 1.96 * se_d)
    return {"cells": cells_df, "width_fit": fit_df, "weak_L": weak_df, "limits": limits}


@dataclass
class DepthStudyResult:
    """Outcome of :func:`run` (the report of the depth study).

    Attributes
    ----------
    config : dict
    strong, width_result : StudyResult
        The runner results of the two parts.
    strong_table : DataFrame
        Rate table of the strong error in L.
    width : dict of DataFrame
        :func:`width_tables` (``cells``, ``width_fit``, ``weak_L``, ``limits``).
    seconds : dict
        Wall time of each part.
    preset : str or None
        Name of the preset the configuration came from.
    """

    config: dict
    strong: object
    width_result: object
    strong_table: pd.DataFrame
    width: dict
    seconds: dict = field(default_factory=dict)
    preset: str | None = None



def analyse(results: dict, cfg: dict, *, seconds: dict | None = None, preset: str | None = None) -> DepthStudyResult:
    """Tables of the results of :func:`build`'s studies (``{"strong": StudyResult, "width": StudyResult}``).

    A missing part leaves its fields None.
    """
    strong, width = results.get("strong"), results.get("width")
    return DepthStudyResult(cfg, strong, width, None if strong is None else strong_table(strong.frame),
                            None if width is None else width_tables(width), dict(seconds or {}), preset)

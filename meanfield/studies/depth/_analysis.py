"""Analysis of the depth/width study: the strong-error rate table and the tables of the (L, m) grid."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from meanfield.reporting import effect_verdict, fit_effect_slope, fit_linear_model, rate_table
from meanfield.transport import wasserstein, wasserstein_circle

from ._presets import POWER, STRONG_TOLERANCE, WIDTH_TOLERANCE



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
    cols = [c for c in frame.columns if c.startswith("err_L")]
    if len(cols) < 2:
        raise ValueError("frame has fewer than 2 'err_L<L>' columns: not a strong-error study frame")
    long = frame.melt(id_vars=["replica"], value_vars=cols, var_name="L", value_name="strong_error")
    long["L"] = long["L"].str[5:].astype(int)
    table = rate_table(long, "L", "strong_error", theory_slope=-0.5, tolerance=tolerance, seed=seed,
                       verdicts="three-way", power=POWER)
    table.attrs["models"] = strong_models(frame, seed=seed)
    return table


def strong_models(frame: pd.DataFrame, seed=0) -> pd.DataFrame:
    """Two-parameter least-squares fits of the pathwise error against the readings of the rate.

    ``MSE = A log L / L + B`` (the bound read for the squared L² distance, i.e.
    RMS = sqrt(log L / L + c)), ``MSE = A / L + B`` (strong order 1/2 without the log) and
    ``RMS = A log L / L + B`` (the bound read for the RMS distance itself). Replicas are
    shared by all L (one path per replica), so the bootstrap resamples whole replicas.
    """
    cols = sorted((c for c in frame.columns if c.startswith("err_L")), key=lambda c: int(c[5:]))
    L = np.array([int(c[5:]) for c in cols], dtype=float)
    rms = [frame[c].to_numpy(float) for c in cols]
    mse = [v * v for v in rms]
    one = np.ones_like(L)
    fits = [
        fit_linear_model(np.c_[np.log(L) / L, one], mse, terms=("A", "B"), name="MSE = A log L/L + B",
                         paired=True, seed=seed),
        fit_linear_model(np.c_[1 / L, one], mse, terms=("A", "B"), name="MSE = A/L + B", paired=True, seed=seed),
        fit_linear_model(np.c_[np.log(L) / L, one], rms, terms=("A", "B"), name="RMS = A log L/L + B",
                         paired=True, seed=seed),
    ]
    return pd.DataFrame([f.row() for f in fits])


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
        ms = sorted(w for LL, w in cells if LL == L and w > 0)
        fit = fit_effect_slope(ms, [cells[(L, m)].g for m in ms], [cells[(L, 0)].g for _ in ms])
        v = effect_verdict(fit, -1.0, tolerance=tolerance, power=POWER)
        fits.append({"L": L, "slope": fit.slope, "slope_ci_low": fit.ci_low, "slope_ci_high": fit.ci_high,
                     "slope_delta_ci_low": fit.delta_ci_low, "slope_delta_ci_high": fit.delta_ci_high,
                     "theory_slope": -1.0, "tolerance": tolerance, "widths_resolved_2se": int(sum(fit.resolved)),
                     "n_widths": len(ms), "sign_change": fit.sign_change, "verdict": v.outcome, "reason": v.reason})
    fit_df = pd.DataFrame(fits)
    ref = cells[(L_ref, 0)]
    weak = []
    for L in grid_L:
        diff = cells[(L, 0)].g - ref.g  # same seeds: paired
        weak.append({"L": L, "weak_error": diff.mean(), "weak_se": diff.std(ddof=1) / math.sqrt(diff.size)})
    weak_df = pd.DataFrame(weak)
    if len(weak_df) >= 2:
        fit = fit_effect_slope([float(L) for L in grid_L], [cells[(L, 0)].g - ref.g for L in grid_L])
        v = effect_verdict(fit, -1.0, tolerance=0.25, power=POWER)
        weak_df["slope"], weak_df["slope_ci_low"], weak_df["slope_ci_high"] = fit.slope, fit.ci_low, fit.ci_high
        weak_df["theory_slope"], weak_df["verdict"] = -1.0, v.outcome
        weak_df.attrs["reason"] = v.reason
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
    # a difference CI is informative only if it is small against the width effects it should resolve
    effects = cells_df[(cells_df["width"] != "inf") & (cells_df["L"] > min(grid_L))]["delta_g"].abs()
    limits.attrs["ci_vs_effects"] = float(1.96 * se_d / effects.max()) if len(effects) else math.nan
    return {"cells": cells_df, "width_fit": fit_df, "weak_L": weak_df, "limits": limits}


def law_tables(result) -> dict:
    """Tables of the two-token error-in-law study against the exact law of c_T.

    Returns
    -------
    dict of DataFrame
        ``law_L``: Gaussian layers, per L: weak error E c_T(L) - E c_T (exact) with SE and
        z, W_1 to the exact law per batch and its sampling floor, W_1 excess.
        ``law_L_fit``: slope of log|weak error| on log L (theory -1), three-way verdict on
        every depth, and on the resolved depths only.
        ``law_models``: two-parameter least squares of the weak error of every cell (Gaussian
        column and width cells, L >= 2) against ``A log L / L + C / m`` and ``A / L + C / m``.
        ``law_width``: coupled width effect Δ(L, m) = E c_T(L, m) - E c_T(L, ∞) with SE, z,
        the SE of an uncoupled estimate at the same sample size, and the draws needed to
        resolve Δ at 3 SE; ``law_width_fit``: per L the slope in m (theory -1) and verdict.
        ``law_limits``: the two iterated limits on the grid.
    """
    frame = result.frame
    arr = result.arrays
    cells: dict = {}
    for idx, row in frame.iterrows():
        key = (int(row["L"]), int(row["width"]))
        c = cells.setdefault(key, {"err": [], "diff": [], "w1": [], "floor": [], "sd": [], "diff_sd": [], "n": 0})
        c["err"].append(arr["err_means"][idx])
        if key[1] > 0:
            c["diff"].append(arr["diff_means"][idx])
            c["diff_sd"].append(row["diff_sd"])
        c["w1"].append(row["w1"])
        c["floor"].append(row["w1_floor"])
        c["sd"].append(row["sd"])
        c["n"] += int(row["n"])
    for c in cells.values():
        c["err"] = np.concatenate(c["err"])
        c["diff"] = np.concatenate(c["diff"]) if c["diff"] else None
    acc = float(frame["law_accuracy"].max())
    trunc = float(frame["law_cdf_truncation"].max())
    Ls = sorted(L for L, m in cells if m == 0)
    rows = []
    for L in Ls:
        c = cells[(L, 0)]
        e, se = c["err"].mean(), c["err"].std(ddof=1) / math.sqrt(c["err"].size)
        w1, fl = np.array(c["w1"]), np.array(c["floor"])
        rows.append({"L": L, "n_draws": c["n"], "weak_error": e, "se": se, "z": e / se,
                     "resolved": bool(abs(e) > 2 * se), "w1": w1.mean(), "w1_floor": fl.mean(),
                     "w1_excess": (w1 - fl).mean(),
                     "w1_excess_se": (w1 - fl).std(ddof=1) / math.sqrt(w1.size) if w1.size > 1 else math.nan})
    law_L = pd.DataFrame(rows)
    law_L.attrs.update({"exact_mean": float(frame["exact_mean"].iloc[0]), "law_accuracy": acc,
                        "law_cdf_truncation": trunc})
    fit_rows = []
    resolved_L = [L for L, r in zip(Ls, law_L["resolved"]) if r]
    for label, sel in (("every depth", Ls), ("resolved depths", resolved_L)):
        if len(set(sel)) < 2:
            fit_rows.append({"depths": label, "L_values": str(sel), "verdict": "inconclusive",
                             "reason": "fewer than 2 resolved depths"})
            continue
        fit = fit_effect_slope([float(L) for L in sel], [cells[(L, 0)]["err"] for L in sel])
        v = effect_verdict(fit, -1.0, power=POWER)
        fit_rows.append({"depths": label, "L_values": " ".join(map(str, sel)), "slope": fit.slope,
                         "slope_ci_low": fit.ci_low, "slope_ci_high": fit.ci_high,
                         "slope_delta_ci_low": fit.delta_ci_low, "slope_delta_ci_high": fit.delta_ci_high,
                         "theory_slope": -1.0, "verdict": v.outcome, "reason": v.reason})
    law_L_fit = pd.DataFrame(fit_rows)
    # two-parameter models on every cell with L >= 2 (log L / L vanishes at L = 1)
    keys = sorted(k for k in cells if k[0] >= 2)
    Lk = np.array([k[0] for k in keys], dtype=float)
    inv_m = np.array([0.0 if k[1] == 0 else 1.0 / k[1] for k in keys])
    samples = [cells[k]["err"] for k in keys]
    designs = [(np.c_[np.log(Lk) / Lk, inv_m], "A log L/L + C/m"), (np.c_[1 / Lk, inv_m], "A/L + C/m"),
               (np.c_[1 / Lk, inv_m / Lk], "A/L + C/(L m)")]
    law_models = pd.DataFrame([fit_linear_model(X, samples, terms=("A", "C"), name=name).row()
                               for X, name in designs if len(keys) > 2 and np.linalg.matrix_rank(X) == 2])
    law_models["cells"] = len(keys)
    wrows, wfits = [], []
    width_L = sorted({L for L, m in cells if m > 0})
    for L in width_L:
        ms = sorted(m for LL, m in cells if LL == L and m > 0)
        for m in ms:
            c = cells[(L, m)]
            d, se = c["diff"].mean(), c["diff"].std(ddof=1) / math.sqrt(c["diff"].size)
            sd_plain = float(np.mean(c["sd"])) * math.sqrt(2.0)  # two independent ensembles
            wrows.append({"L": L, "width": m, "n_draws": c["n"], "delta": d, "se": se, "z": d / se,
                          "resolved": bool(abs(d) > 2 * se), "se_uncoupled": sd_plain / math.sqrt(c["n"]),
                          "draws_for_3se": int(math.ceil(c["n"] * (3 * se / abs(d)) ** 2)) if d else -1})
        fit = fit_effect_slope([float(m) for m in ms], [cells[(L, m)]["diff"] for m in ms])
        v = effect_verdict(fit, -1.0, power=POWER)
        wfits.append({"L": L, "slope": fit.slope, "slope_ci_low": fit.ci_low, "slope_ci_high": fit.ci_high,
                      "slope_delta_ci_low": fit.delta_ci_low, "slope_delta_ci_high": fit.delta_ci_high,
                      "theory_slope": -1.0, "widths_resolved_2se": int(sum(fit.resolved)), "n_widths": len(ms),
                      "sign_change": fit.sign_change, "verdict": v.outcome, "reason": v.reason})
    law_width = pd.DataFrame(wrows)
    law_width_fit = pd.DataFrame(wfits)
    lim = _iterated_limits(cells, width_L, max(Ls))
    law_limits = pd.DataFrame(lim)
    return {"law_L": law_L, "law_L_fit": law_L_fit, "law_models": law_models, "law_width": law_width,
            "law_width_fit": law_width_fit, "law_limits": law_limits}


def _mean_ci(x) -> tuple[float, float]:
    return float(np.mean(x)), float(1.96 * np.std(x, ddof=1) / math.sqrt(np.size(x)))


def _iterated_limits(cells: dict, width_L: list, Lmax: int) -> list:
    """Rows of ``law_limits``: the two iterated limits of e(L, m) estimated on the grid.

    m first: e(Lmax, ∞), the Gaussian column at its deepest cell. L first, at each width m:
    e(Lw, m) of the deepest width row Lw splits exactly into the coupled Gaussian part
    e(Lw, ∞) (the depth error at Lw) and the width effect Δ(Lw, m); replacing the first by
    the deepest Gaussian cell, Δ(Lw, m) + e(Lmax, ∞), takes the depth to Lmax while keeping
    the width effect measured at Lw (independent cells: the variances add).
    """
    e_inf, h_inf = _mean_ci(cells[(Lmax, 0)]["err"])
    lim = [{"limit": "m first", "m": "∞", "estimate": f"e(L = {Lmax}, m = ∞)", "value": e_inf, "ci95": h_inf}]
    if not width_L:
        return lim
    Lw = max(width_L)
    for m in sorted(m for LL, m in cells if LL == Lw and m > 0):
        c = cells[(Lw, m)]
        e, h = _mean_ci(c["err"])
        g, hg = _mean_ci(c["err"] - c["diff"])
        d, hd = _mean_ci(c["diff"])
        lim += [{"limit": "corner cell", "m": str(m), "estimate": f"e(L = {Lw}, m = {m})", "value": e, "ci95": h},
                {"limit": "its depth part", "m": str(m), "estimate": f"e(L = {Lw}, ∞), coupled", "value": g,
                 "ci95": hg},
                {"limit": "L first", "m": str(m), "estimate": f"Δ(L = {Lw}, m = {m}) + e(L = {Lmax}, ∞)",
                 "value": d + e_inf, "ci95": math.hypot(hd, h_inf)}]
    return lim


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
    law_result: object = None
    law: dict | None = None



def analyse(results: dict, cfg: dict, *, seconds: dict | None = None, preset: str | None = None) -> DepthStudyResult:
    """Tables of the results of :func:`build`'s studies (``{"strong": StudyResult, "width": StudyResult}``).

    A missing part leaves its fields None.
    """
    strong, width, law = results.get("strong"), results.get("width"), results.get("law")
    return DepthStudyResult(cfg, strong, width, None if strong is None else strong_table(strong.frame),
                            None if width is None else width_tables(width), dict(seconds or {}), preset,
                            law, None if law is None else law_tables(law))

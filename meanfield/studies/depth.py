"""Depth and width convergence of the discrete transformer to the limiting SDE (SPEC §9, Thm 1.1).

Three measurements, all with softmax attention (Q = K = V = I) and ReLU MLP noise:

1. **Strong error in depth L** (Gaussian-field layers, one coupled noise path). The layer
   fields of the L-layer transformer are the increments of one refinable
   :class:`~meanfield.noise.NoisePath` over [lT/L, (l+1)T/L]; the reference is the particle
   SDE (projected Euler) on the *same* path with a much finer step T / 2^k. The error is

       ``e_L = sqrt( mean_i |X_i^L - X_i^ref|² )``        (RMS over tokens, one path),

   averaged over replicas (paths and initial clouds). Each layer is one projected Euler
   step x <- Π(x + α1 A + ΔW(x)) with the field evaluated at the current point only: the
   Milstein terms (σ_k·∇)σ_j ΔB_k ΔB_j, whose off-diagonal part involves Lévy areas, are
   missing and the noise of SPEC §3 is not commutative, so the scheme has strong order
   1/2 and the theory slope is **-1/2** in L. Because the coarse and fine errors are
   nearly orthogonal martingale sums, E|X_L - X_ref|² ≈ C (T/L - T/2^k): the reference
   step biases the slope by a relative O(L/2^k) only.
   The bound O(log L / L + 1/m) of Thm 1.1 concerns the *law* (a weak error). It is not
   what the strong error measures: one path converges at L^{-1/2} while laws converge at
   (almost) L^{-1}. The weak error in L is measured in 3 on paired Gaussian runs.

2. **Error in law in the width m at fixed L.** A fixed small cloud x0 (N tokens on S^1)
   goes through ``n_draws`` independent weight draws of finite-width MLP layers and
   through as many Gaussian-field layers (the m -> ∞ limit). Every layer field has the
   exact covariance α2² κ for every m (SPEC §2); the difference is non-Gaussianity:
   conditionally on (W, b) the field is Gaussian with the empirical kernel
   (1/m) Σ_k h_k(x) h_k(y), so its excess kurtosis is O(1/m). Per layer this moves
   expectations by O(α2⁴/m) = O(T²/(L² m)); over L layers by O(T²/(L m)). Theory slope in
   m: **-1** at fixed L (with a constant that shrinks like 1/L). Measured: the
   observable g = mean_i <x_i(T), x_i(0)> (mean and MC standard error), its difference
   to the Gaussian ensemble Δg(L, m), and W_2 between the laws of token 0 (exact circle
   solver) together with its sampling floor (W_2 between the two halves of the Gaussian
   ensemble divided by sqrt 2, i.e. what two independent samples of equal law and full
   size give under the n^{-1/2} scaling of W_2 on S^1).

3. **Iterated limits on an (L, m) grid.** E g(L, m) with CIs for every cell, plus a
   Gaussian run at L_ref >> L_max as the SDE value. lim_L lim_m is the Gaussian column
   as L grows; lim_m lim_L is the largest-L row as m grows: both must end at the SDE
   value within CI. The Gaussian column is run on coupled paths (refinable NoisePath,
   the same seeds for every L), so its weak error in L, E g(L, ∞) - E g(L_ref, ∞), is a
   paired difference with a small standard error; theory slope -1 (weak order 1 of
   projected Euler for this smooth observable; the log L of Thm 1.1 is a bound).

Task functions are module-level (``fn(params, seed) -> dict``) and run through
:func:`meanfield.runner.run_study`. :func:`run_depth_study` runs a preset and
:func:`write_depth_outputs` writes the tables (CSV, Markdown, LaTeX) and figures.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._presets import preset_config
from .._validate import as_float, as_int

__all__ = [
    "DEPTH_PRESETS",
    "depth_config",
    "strong_depth_task",
    "width_law_task",
    "make_strong_study",
    "make_width_study",
    "strong_table",
    "width_tables",
    "DepthStudyResult",
    "run_depth_study",
    "write_depth_outputs",
]

#: Presets of :func:`run_depth_study`. ``strong``: the L study; ``width``: the (L, m) study.
#: ``width`` value 0 in ``widths`` means the Gaussian-field layers (m = ∞).
DEPTH_PRESETS: dict[str, dict] = {
    "test": {
        "strong": {"d": 3, "N": 8, "T": 1.0, "beta": 1.0, "lmax": 8, "L_values": [4, 16, 64], "ref_log2": 9,
                   "replicas": 6, "activation": "relu", "sigma_w": 1.0},
        "width": {"d": 2, "N": 4, "T": 1.0, "beta": 1.0, "lmax": 64, "L_values": [1, 4], "widths": [1, 4, 16, 0],
                  "L_ref": 16, "n_draws": 400, "batches": 2, "activation": "relu", "sigma_w": 1.0},
    },
    "quick": {
        "strong": {"d": 3, "N": 8, "T": 1.0, "beta": 1.0, "lmax": 8, "L_values": [4, 8, 16, 32, 64, 128],
                   "ref_log2": 11, "replicas": 16, "activation": "relu", "sigma_w": 1.0},
        "width": {"d": 2, "N": 4, "T": 1.0, "beta": 1.0, "lmax": 64, "L_values": [1, 4, 16],
                  "widths": [1, 2, 4, 8, 16, 64, 0], "L_ref": 32, "n_draws": 600, "batches": 4,
                  "activation": "relu", "sigma_w": 1.0},
    },
    "full": {
        "strong": {"d": 3, "N": 16, "T": 1.0, "beta": 1.0, "lmax": 8, "L_values": [4, 8, 16, 32, 64, 128, 256, 512],
                   "ref_log2": 13, "replicas": 32, "activation": "relu", "sigma_w": 1.0},
        "width": {"d": 2, "N": 4, "T": 1.0, "beta": 1.0, "lmax": 64, "L_values": [1, 2, 4, 8, 16, 32],
                  "widths": [1, 2, 4, 8, 16, 32, 64, 256, 0], "L_ref": 256, "n_draws": 2000, "batches": 8,
                  "activation": "relu", "sigma_w": 1.0},
    },
}

#: Allowed distance between the theory slope and the bootstrap CI of the fitted slope.
#: Strong error: the smallest depths are pre-asymptotic (the error saturates at O(1) on the
#: sphere for L = 4) and the CI covers replica noise only, not this curvature: 0.1.
STRONG_TOLERANCE = 0.1
#: Width: the fit is on |Δg| of a few widths whose smallest values are near the MC floor: 0.25.
WIDTH_TOLERANCE = 0.25

_X0_SEED = 20240601  # the fixed cloud of the width study


def depth_config(preset: str = "quick", **overrides) -> dict:
    """A copy of ``DEPTH_PRESETS[preset]`` with ``overrides`` of the form ``strong={...}``/``width={...}``.

    Raises
    ------
    ValueError
        Unknown preset or override key.

    Examples
    --------
    >>> depth_config("test")["strong"]["L_values"]
    [4, 16, 64]
    """
    cfg = preset_config(DEPTH_PRESETS, preset, overrides)
    _check_strong(cfg["strong"])
    _check_width(cfg["width"])
    return cfg


def _check_strong(c: dict) -> None:
    as_int(c["d"], "d", min_value=2, max_value=3)
    as_int(c["N"], "N", min_value=1)
    as_float(c["T"], "T", min_value=0.0, strict_min=True)
    as_float(c["beta"], "beta", min_value=0.0)
    as_int(c["replicas"], "replicas", min_value=2)
    ref = as_int(c["ref_log2"], "ref_log2", min_value=1, max_value=20)
    Ls = [as_int(v, "L_values[]", min_value=1) for v in c["L_values"]]
    if len(set(Ls)) < 2:
        raise ValueError(f"L_values needs at least 2 distinct depths, got {c['L_values']}")
    if max(Ls) * 4 > 2**ref:
        raise ValueError(f"the reference step T/2^{ref} must be at least 4 times finer than T/L_max = T/{max(Ls)}")
    for L in Ls:
        if (2**ref) % L:
            raise ValueError(f"L = {L} must divide 2^ref_log2 = {2**ref} (layer times on the reference grid)")


def _check_width(c: dict) -> None:
    as_int(c["d"], "d", min_value=2, max_value=3)
    as_int(c["N"], "N", min_value=1)
    as_float(c["T"], "T", min_value=0.0, strict_min=True)
    as_float(c["beta"], "beta", min_value=0.0)
    as_int(c["n_draws"], "n_draws", min_value=10)
    as_int(c["batches"], "batches", min_value=2)
    Ls = [as_int(v, "L_values[]", min_value=1) for v in c["L_values"]]
    ws = [as_int(v, "widths[]", min_value=0) for v in c["widths"]]
    if 0 not in ws or len([w for w in ws if w > 0]) < 2:
        raise ValueError(f"widths needs the Gaussian layers (0) and at least 2 finite widths, got {c['widths']}")
    if not Ls:
        raise ValueError("L_values is empty")
    if as_int(c["L_ref"], "L_ref", min_value=1) <= max(Ls):
        raise ValueError(f"L_ref = {c['L_ref']} must exceed max(L_values) = {max(Ls)}")


def _kernel(params: dict):
    from ..kernels import ActivationKernel

    return ActivationKernel(params["activation"], sigma_w=params["sigma_w"])


def _uniform(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# --------------------------------------------------------------------------------------
# task functions
# --------------------------------------------------------------------------------------


def strong_depth_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replica of the strong-error study: one noise path, one cloud, every L.

    Parameters
    ----------
    params : dict
        ``d`` (2 or 3), ``N``, ``T``, ``beta``, ``lmax``, ``L_values``, ``ref_log2``,
        ``activation``, ``sigma_w``.
    seed : SeedSequence
        Spawns the noise path's key and the generator of the N iid uniform tokens.

    Returns
    -------
    dict
        ``err_L<L>`` (RMS over tokens of ``|X_L - X_ref|``) for each L, ``kept_fraction``,
        ``ref_seconds``, ``transformer_seconds``.
    """
    from ..noise import NoisePath
    from ..particles import solve_particles
    from ..transformer import Transformer

    d, T, beta = int(params["d"]), float(params["T"]), float(params["beta"])
    s_noise, s_x = seed.spawn(2)
    kern = _kernel(params)
    noise = NoisePath(kern, d, int(params["lmax"]), seed=s_noise, t_max=T)
    x0 = _uniform(int(params["N"]), d, np.random.default_rng(s_x))
    t = time.perf_counter()
    ref = solve_particles(x0, noise, beta, T / 2 ** int(params["ref_log2"]), [T], attention="direct").final
    out = {"kept_fraction": float(noise.kept_fraction), "ref_seconds": time.perf_counter() - t}
    t = time.perf_counter()
    for L in params["L_values"]:
        xl = Transformer(d, int(L), None, T, beta, kern, noise=noise).run(x0).final
        out[f"err_L{int(L)}"] = float(np.sqrt(np.mean(np.sum((xl - ref) ** 2, axis=1))))
    out["transformer_seconds"] = time.perf_counter() - t
    return out


def _width_x0(params: dict) -> np.ndarray:
    return _uniform(int(params["N"]), int(params["d"]), np.random.default_rng(_X0_SEED))


def width_law_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One batch of the width study: ``n_draws`` independent transformers on the fixed cloud.

    ``width > 0``: finite-width MLP layers, weights from the draw's seed.
    ``width == 0``: Gaussian-field layers, the increments of a
    :class:`~meanfield.noise.NoisePath` of degree ``lmax`` keyed by the draw's seed — so
    Gaussian tasks of different L with the same seed see the same Brownian paths.

    Returns
    -------
    dict
        Arrays ``g`` (n_draws,) = mean_i <x_i(T), x_i(0)>, ``theta0`` (n_draws,) = angle of
        token 0 at T (d = 2) or ``x0_final`` (n_draws, d) (d = 3); scalar ``g_mean``,
        ``kept_fraction``.
    """
    from ..noise import NoisePath
    from ..transformer import Transformer

    d, T, beta, L, m = int(params["d"]), float(params["T"]), float(params["beta"]), int(params["L"]), int(params["width"])
    n = int(params["n_draws"])
    kern = _kernel(params)
    x0 = _width_x0(params)
    if m > 0:
        # finite widths get their own streams (independent ensembles across m); the Gaussian
        # cells keep the task seed, shared across L (seed_by=()), for paired weak errors in L
        seed = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, 1_000_003, m))
    seeds = seed.spawn(n)
    finals = np.empty((n, x0.shape[0], d))
    kept = 1.0
    if m > 0:
        model = Transformer(d, L, m, T, beta, kern)
        for k, s in enumerate(seeds):
            finals[k] = model.run(x0, seed=s).final
    else:
        base = NoisePath(kern, d, int(params["lmax"]), seed=seeds[0], t_max=T)
        kept = float(base.kept_fraction)
        for k, s in enumerate(seeds):
            noise = base if k == 0 else NoisePath(base.kernel, d, base.lmax, seed=s, t_max=T)
            finals[k] = Transformer(d, L, None, T, beta, kern, noise=noise).run(x0).final
    g = np.einsum("kid,id->ki", finals, x0).mean(axis=1)
    out = {"g": g, "g_mean": float(g.mean()), "kept_fraction": kept}
    if d == 2:
        out["theta0"] = np.arctan2(finals[:, 0, 1], finals[:, 0, 0])
    else:
        out["x0_final"] = finals[:, 0, :]
    return out


# --------------------------------------------------------------------------------------
# studies
# --------------------------------------------------------------------------------------


def make_strong_study(config: dict, root_seed: int = 0):
    """The :class:`~meanfield.runner.Study` of the strong error in L (one task per replica)."""
    from ..runner import Study

    c = dict(config)
    _check_strong(c)
    replicas = int(c.pop("replicas"))
    c["L_values"] = [int(v) for v in c["L_values"]]
    return Study("depth-strong", strong_depth_task, grid=None, replicas=replicas, root_seed=root_seed, fixed=c)


def make_width_study(config: dict, root_seed: int = 0):
    """The :class:`~meanfield.runner.Study` of the (L, m) grid plus the Gaussian run at ``L_ref``.

    ``seed_by=()``: batch r of every cell gets the same task seed, so the Gaussian cells of
    different L share their Brownian paths (paired weak errors in L); finite-width cells
    derive their own stream from it and the width, so cells of different m are independent.
    """
    from ..runner import Study

    c = dict(config)
    _check_width(c)
    Ls, ws, L_ref, batches = c.pop("L_values"), c.pop("widths"), int(c.pop("L_ref")), int(c.pop("batches"))
    grid = [{"L": int(L), "width": int(w)} for L in Ls for w in ws] + [{"L": L_ref, "width": 0}]
    return Study("depth-width", width_law_task, grid=grid, replicas=batches, root_seed=root_seed, fixed=c,
                 seed_by=())


# --------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------


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
    from ..rates import rate_table

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
    from ..transport import wasserstein, wasserstein_circle

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


# --------------------------------------------------------------------------------------
# driver and outputs
# --------------------------------------------------------------------------------------


@dataclass
class DepthStudyResult:
    """Outcome of :func:`run_depth_study`.

    Attributes
    ----------
    config : dict
    strong : StudyResult
    width : StudyResult
    strong_table : DataFrame
        Rate table of the strong error in L.
    width : dict of DataFrame
        :func:`width_tables` (``cells``, ``width_fit``, ``weak_L``, ``limits``).
    seconds : dict
        Wall time of each part.
    """

    config: dict
    strong: object
    width_result: object
    strong_table: pd.DataFrame
    width: dict
    seconds: dict = field(default_factory=dict)


def run_depth_study(preset: str = "quick", *, config: dict | None = None, root_seed: int = 0,
                    **execution) -> DepthStudyResult:
    """Run the strong-L study and the (L, m) study of a preset (or ``config``).

    Parameters
    ----------
    preset : {"test", "quick", "full"}
    config : dict, optional
        A full configuration as returned by :func:`depth_config` (overrides ``preset``).
    root_seed : int
    **execution
        Passed to :func:`meanfield.runner.run_study` (``executor``, ``workers``,
        ``store``, ``progress``...). A ``store`` directory gets the two sub-stores
        ``strong`` and ``width``.

    Returns
    -------
    DepthStudyResult

    Examples
    --------
    >>> res = run_depth_study("test", executor="serial", progress=False)  # doctest: +SKIP
    >>> res.strong_table.attrs["fits"]["strong_error"]["slope"]            # doctest: +SKIP
    -0.47...
    """
    from ..runner import run_study

    cfg = config if config is not None else depth_config(preset)
    _check_strong(cfg["strong"])
    _check_width(cfg["width"])
    store = execution.pop("store", None)
    sec = {}
    t = time.perf_counter()
    strong = run_study(make_strong_study(cfg["strong"], root_seed), store=None if store is None else Path(store) / "strong",
                       raise_on_failure=True, **execution)
    sec["strong"] = time.perf_counter() - t
    t = time.perf_counter()
    width = run_study(make_width_study(cfg["width"], root_seed), store=None if store is None else Path(store) / "width",
                      raise_on_failure=True, **execution)
    sec["width"] = time.perf_counter() - t
    return DepthStudyResult(cfg, strong, width, strong_table(strong.frame), width_tables(width), sec)


def _fig_strong(table: pd.DataFrame, paths: list) -> None:
    from ..rates import plot_rates

    fig = plot_rates(table, title="strong error in L vs the SDE (one path)")
    ax = fig.axes[0]
    L = table["L"].to_numpy(float)
    y0 = table["mean"].to_numpy()[0]
    ax.plot(L, y0 * (np.log(L) / L) / (np.log(L[0]) / L[0]), ":", color="grey", label="log L / L (law bound)")
    ax.legend(fontsize=8)
    for p in paths:
        fig.savefig(p, dpi=110)


def _fig_width(tabs: dict, paths: list) -> None:
    from matplotlib.figure import Figure

    cells = tabs["cells"]
    fig = Figure(figsize=(12, 4))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    for L, sub in cells[cells["width"] != "inf"].groupby("L"):
        m = sub["width"].astype(float)
        ax1.errorbar(m, np.abs(sub["delta_g"]), yerr=1.96 * sub["delta_se"], marker="o", capsize=3, label=f"L = {L}")
    finite = cells[cells["width"] != "inf"]
    m0 = finite["width"].astype(float).min()
    top = np.abs(finite[finite["width"].astype(float) == m0]["delta_g"]).max()
    mm = np.array(sorted(finite["width"].astype(float).unique()))
    ax1.plot(mm, top * m0 / mm, "k:", label="1/m")
    ax1.set_xscale("log"), ax1.set_yscale("log")
    ax1.set_xlabel("width m"), ax1.set_ylabel("|E g(L, m) - E g(L, ∞)|  (95 % CI)")
    ax1.legend(fontsize=8)
    ax1.set_title("error in law in m (observable)")
    for L, sub in cells[cells["width"] != "inf"].groupby("L"):
        ax2.plot(sub["width"].astype(float), sub["w2_token0"], marker="o", label=f"L = {L}")
        ax2.axhline(sub["w2_floor"].iloc[0], ls=":", lw=1, color=ax2.lines[-1].get_color())
    ax2.set_xscale("log"), ax2.set_yscale("log")
    ax2.set_xlabel("width m"), ax2.set_ylabel("W2(token 0: width m, Gaussian)")
    ax2.set_title("W2 (dotted: sampling floor)")
    ax2.legend(fontsize=8)
    lim = tabs["limits"]
    for w, sub in cells.groupby("width", sort=False):
        ax3.errorbar(sub["L"], sub["g_mean"], yerr=1.96 * sub["g_se"], marker="o", capsize=2, label=f"m = {w}")
    ax3.axhspan(lim["g"].iloc[0] - lim["ci95"].iloc[0], lim["g"].iloc[0] + lim["ci95"].iloc[0], color="grey",
                alpha=0.3, label="SDE (Gaussian, L_ref)")
    ax3.set_xscale("log")
    ax3.set_xlabel("L"), ax3.set_ylabel("E g = E mean_i <x_i(T), x_i(0)>")
    ax3.set_title("(L, m) grid: iterated limits")
    ax3.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)


def write_depth_outputs(res: DepthStudyResult, out_dir) -> dict:
    """Write tables (CSV, Markdown, LaTeX) and figures (PNG, PDF) of a depth study.

    Files: ``strong_L.{csv,md,tex}``, ``width_cells``, ``width_fit``, ``weak_L``,
    ``limits`` (same three formats), ``strong_L.{png,pdf}``, ``width.{png,pdf}``.

    Returns
    -------
    dict
        ``{name: [paths]}``.
    """
    from ..rates import export_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {"strong_L": list(export_table(res.strong_table, out / "strong_L").values())}
    for name, key in (("width_cells", "cells"), ("width_fit", "width_fit"), ("weak_L", "weak_L"), ("limits", "limits")):
        files[name] = list(export_table(res.width[key], out / name).values())
    figs = [out / "strong_L.png", out / "strong_L.pdf"]
    _fig_strong(res.strong_table, figs)
    files["strong_L_fig"] = figs
    figs = [out / "width.png", out / "width.pdf"]
    _fig_width(res.width, figs)
    files["width_fig"] = figs
    return files

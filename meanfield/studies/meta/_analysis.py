"""Analysis of the metastability study: plateaus, the growth law, escape times, time to one cluster."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from meanfield.clusters import plateaus

from ._survival import km_median
from ._tasks import clustered_from

__all__ = ["MetaReport", "analyse", "plateau_table", "growth_table", "escape_table", "sync_table",
           "spectral_table", "count_bands"]

#: Bootstrap resamples of the growth-law fits.
N_BOOT = 1000
#: A growth model is "favoured" when its residual sum of squares is the smaller one in at least
#: this fraction of the bootstrap resamples (and "disfavoured" at most 1 - this); else inconclusive.
FAVOUR_LEVEL = 0.95
#: Fewest plateaus of one (d, k, β) group for its median to enter a growth fit.
MIN_PLATEAUS = 3


@dataclass
class MetaReport:
    """The analysed metastability study (tables as pandas DataFrames; see :func:`analyse`)."""

    config: dict
    preset: str | None
    frames: dict
    plateaus: pd.DataFrame
    growth: pd.DataFrame
    escape: pd.DataFrame
    sync: pd.DataFrame
    spectral: pd.DataFrame
    sizes: pd.DataFrame
    timing: pd.DataFrame
    seconds: dict = field(default_factory=dict)
    root_seed: int | None = None


def _times(c: dict) -> np.ndarray:
    return np.arange(0.0, float(c["T"]) + 0.5 * float(c["save_every"]), float(c["save_every"]))


def _frame(result) -> pd.DataFrame:
    f = result.frame.copy()
    for name in ("counts", "counts_tight", "spectral"):
        if name in result.arrays:
            f[name] = list(result.arrays[name])
    return f


def plateau_table(frame: pd.DataFrame, c: dict) -> pd.DataFrame:
    """Every plateau with k >= 2 clusters that ends after the cloud first is clustered, one row each.

    Columns ``d, N, beta, sigma, replica, k, t_start, duration, censored`` (censored: the
    plateau reaches the horizon). A plateau that contains the clustering time counts from its
    own start.
    """
    ts = _times(c)
    rows = []
    for _, r in frame.iterrows():
        counts = np.asarray(r["counts"])
        start = clustered_from(counts, np.asarray(r["counts_tight"]), int(r["N"]))
        if start is None:
            continue
        p = plateaus(ts, counts)
        p = p[(p["t_end"] > ts[start]) & (p["count"] >= 2)]
        for _, q in p.iterrows():
            rows.append({"d": int(r["d"]), "N": int(r["N"]), "beta": float(r["beta"]), "sigma": float(r["sigma"]),
                         "replica": int(r["replica"]), "k": int(q["count"]), "t_start": float(q["t_start"]),
                         "duration": float(q["duration"]), "censored": bool(q["right_censored"])})
    cols = ["d", "N", "beta", "sigma", "replica", "k", "t_start", "duration", "censored"]
    return pd.DataFrame(rows, columns=cols)


def _median(sub: pd.DataFrame, horizon: float) -> tuple[float, float, float]:
    return km_median(sub["duration"].to_numpy(), ~sub["censored"].to_numpy(), horizon=horizon)


def _fit(beta: np.ndarray, logt: np.ndarray, group: np.ndarray | None = None) -> dict:
    """Least squares of log T on [intercepts, β] and [intercepts, log β]: one intercept per group."""
    group = np.zeros(beta.size, dtype=int) if group is None else group
    ids = np.unique(group)
    onehot = (group[:, None] == ids[None, :]).astype(float)
    out = {}
    for name, x in (("exponential", beta), ("power", np.log(beta))):
        X = np.c_[onehot, x]
        coef, *_ = np.linalg.lstsq(X, logt, rcond=None)
        out[name] = (np.r_[coef[0], coef[-1]], float(np.sum((X @ coef - logt) ** 2)))
    return out


def _groups(sub: pd.DataFrame, horizon: float) -> list:
    """(β, k, plateaus, median, lo, hi) for each (k, β) with >= MIN_PLATEAUS plateaus and a finite median."""
    out = []
    for (k, b), g in sub.groupby(["k", "beta"]):
        if len(g) < MIN_PLATEAUS:
            continue
        med, lo, hi = _median(g, horizon)
        if math.isfinite(med) and med > 0:
            out.append((float(b), int(k), g, med, lo, hi))
    return out


def _fast_median(t: np.ndarray, e: np.ndarray) -> float:
    """Kaplan–Meier median (first time with S <= 1/2) of finite times t with event flags e; inf if none."""
    order = np.lexsort((~e, t))  # events before censorings at equal times, as in the product limit
    t, e = t[order], e[order]
    at_risk = t.size - np.arange(t.size)
    s = np.cumprod(np.where(e, 1.0 - 1.0 / at_risk, 1.0))
    hit = np.flatnonzero(e & (s <= 0.5 + 1e-12))
    return float(t[hit[0]]) if hit.size else math.inf


def _growth_row(groups: list, runs: pd.DataFrame, horizon: float, rng) -> dict:
    beta = np.array([g[0] for g in groups])
    kid = np.array([g[1] for g in groups])
    fit = _fit(beta, np.log([g[3] for g in groups]), kid)
    # per group: the plateaus of each replica, so that a bootstrap resample of the replicas of a β
    # (shared by every k at that β) is a concatenation of index lists
    reps = {b: np.unique(runs.loc[runs["beta"] == b, "replica"]) for b in np.unique(beta)}
    data = []
    for b, k, g, *_ in groups:
        per = [(g.loc[g["replica"] == r, "duration"].to_numpy(float), ~g.loc[g["replica"] == r, "censored"].to_numpy())
               for r in reps[b]]
        data.append((b, per))
    boot = {"exponential": [], "power": []}
    wins = []
    for _ in range(N_BOOT):
        picks = {b: rng.integers(0, r.size, r.size) for b, r in reps.items()}
        meds = np.empty(len(groups))
        for i, (b, per) in enumerate(data):
            t = np.concatenate([per[j][0] for j in picks[b]])
            e = np.concatenate([per[j][1] for j in picks[b]])
            meds[i] = _fast_median(t, e) if t.size else math.inf
        if not np.all(np.isfinite(meds)) or np.any(meds <= 0):
            continue
        f = _fit(beta, np.log(meds), kid)
        for m in boot:
            boot[m].append(f[m][0])
        wins.append(f["exponential"][1] < f["power"][1])
    frac_exp = float(np.mean(wins)) if wins else math.nan
    favoured = ("exponential" if frac_exp >= FAVOUR_LEVEL else "power" if frac_exp <= 1 - FAVOUR_LEVEL
                else "inconclusive")
    row = {}
    for m in ("exponential", "power"):
        (a, b), rss = fit[m]
        bb = np.array(boot[m]) if boot[m] else np.full((1, 2), np.nan)
        row.update({f"{m}_a": a, f"{m}_b": b,
                    f"{m}_b_ci": f"[{np.quantile(bb[:, 1], 0.025):.3g}, {np.quantile(bb[:, 1], 0.975):.3g}]",
                    f"{m}_rss": rss})
    row.update({"exp_better_fraction": frac_exp, "boot_kept": len(wins) / N_BOOT, "favoured": favoured})
    return row


def growth_table(plat: pd.DataFrame, horizon: float, *, seed=0) -> pd.DataFrame:
    """Growth of the deterministic k-cluster plateau durations with β: log-linear against power law.

    For each (d, k): the Kaplan–Meier median duration of the k-cluster plateaus at each β
    (groups with >= MIN_PLATEAUS plateaus and a median below the horizon), and two
    least-squares fits of its logarithm, ``log T = a + b β`` (exponential, Arrhenius-like)
    and ``log T = a + b log β`` (power law). A last row per d, ``k = 0`` ("all k"), fits
    every k with >= 2 such β at once, with one intercept a_k per k and a common b. Intervals:
    percentiles of N_BOOT bootstrap resamples of the runs within each β (a resample in which
    a median reaches the horizon is dropped; the fraction kept is ``boot_kept``).
    ``favoured``: the model with the smaller residual sum of squares in >= 95 % of the
    resamples, else ``inconclusive``; fewer than 3 β (per k) or fewer than 2 k (pooled):
    ``not fitted``. ``a`` is the intercept of the first k in the pooled row.
    """
    rng = np.random.default_rng(seed)
    rows = []
    det = plat[plat["sigma"] == 0]
    for d, sub in det.groupby("d"):
        groups = _groups(sub, horizon)
        for k in sorted(sub["k"].unique()):
            gk = [g for g in groups if g[1] == k]
            row = {"d": int(d), "k": int(k), "betas": ", ".join(f"{g[0]:g}" for g in gk),
                   "medians": ", ".join(f"{g[3]:.3g}" for g in gk), "n_plateaus": int(sum(len(g[2]) for g in gk))}
            if len(gk) < 3:
                rows.append({**row, "favoured": "not fitted"})
                continue
            rows.append({**row, **_growth_row(gk, sub, horizon, rng)})
        counts = pd.Series([g[1] for g in groups]).value_counts()
        pooled = [g for g in groups if counts[g[1]] >= 2]
        row = {"d": int(d), "k": 0, "betas": f"{len(pooled)} (k, β) medians",
               "medians": "k = " + ", ".join(str(k) for k in sorted({g[1] for g in pooled})),
               "n_plateaus": int(sum(len(g[2]) for g in pooled))}
        if len({g[1] for g in pooled}) < 2:
            rows.append({**row, "favoured": "not fitted"})
        else:
            rows.append({**row, **_growth_row(pooled, sub, horizon, rng)})
    return pd.DataFrame(rows)


def escape_table(plat: pd.DataFrame, horizons: dict) -> pd.DataFrame:
    """Escape times from the k-cluster states (every plateau with k >= 2 after clustering), per (d, N, β, σ).

    Kaplan–Meier median and 95 % interval (censored at the horizon of the run; the plateaus
    of one run are not independent, so the interval is indicative), number of plateaus and
    censored ones, mean k.
    """
    rows = []
    for (d, n, b, s), sub in plat.groupby(["d", "N", "beta", "sigma"]):
        med, lo, hi = _median(sub, horizons[float(s) == 0])
        rows.append({"d": int(d), "N": int(n), "beta": float(b), "sigma": float(s), "plateaus": len(sub),
                     "censored": int(sub["censored"].sum()), "mean_k": float(sub["k"].mean()),
                     "median_escape": med, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def sync_table(frame: pd.DataFrame, theta: float) -> pd.DataFrame:
    """Time to one cluster per (d, N, β, σ): KM median and 95 % interval (censored at the horizon),
    the fraction of runs synchronised by the horizon, and the noise timescale
    τ(σ) = log(D_0 / θ) / abs(λ_1(σ)) (D_0 the mean initial geodesic distance, λ_1(σ) = σ² λ_1 the
    closed-form Lyapunov exponent of the truncated kernel; inf without noise)."""
    rows = []
    for (d, n, b, s), sub in frame.groupby(["d", "N", "beta", "sigma"]):
        t = sub["t_one"].to_numpy(float)
        med, lo, hi = km_median(t, np.isfinite(t), horizon=float(sub["horizon"].iloc[0]))
        lam = float(sub["lambda1"].mean())
        tau = math.log(float(sub["spread0"].mean()) / theta) / abs(lam) if lam < 0 else math.inf
        rows.append({"d": int(d), "N": int(n), "beta": float(b), "sigma": float(s), "runs": len(sub),
                     "synchronised": int(np.isfinite(t).sum()), "horizon": float(sub["horizon"].iloc[0]),
                     "median_t_one": med, "ci_low": lo, "ci_high": hi, "lambda1": lam, "tau_noise": tau,
                     "median_over_tau": med / tau if math.isfinite(tau) else math.nan})
    return pd.DataFrame(rows)


def spectral_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Agreement of the eigengap count with the single-linkage count, at saves after clustering, per (d, β, σ).

    ``agree``: fraction of those saves where the two counts are equal; ``no_structure``:
    fraction where the eigengap rule reports 0.
    """
    rows = []
    if "spectral" not in frame:
        return pd.DataFrame(rows)
    for (d, b, s), sub in frame.groupby(["d", "beta", "sigma"]):
        eq = tot = zero = 0
        for _, r in sub.iterrows():
            if not isinstance(r["spectral"], np.ndarray):
                continue
            c = np.asarray(r["counts"])
            start = clustered_from(c, np.asarray(r["counts_tight"]), int(r["N"]))
            if start is None:
                continue
            sp = np.asarray(r["spectral"])[start:]
            eq += int(np.sum(sp == c[start:]))
            zero += int(np.sum(sp == 0))
            tot += sp.size
        if tot:
            rows.append({"d": int(d), "beta": float(b), "sigma": float(s), "saves": tot, "agree": eq / tot,
                         "no_structure": zero / tot})
    return pd.DataFrame(rows)


def count_bands(frame: pd.DataFrame, c: dict, by: str) -> dict:
    """{(d, value of ``by``): (times, median, q10, q90)} of the single-linkage counts over the runs."""
    ts = _times(c)
    out = {}
    for (d, v), sub in frame.groupby(["d", by]):
        m = np.stack([np.asarray(x) for x in sub["counts"]])
        out[(int(d), float(v))] = (ts, *np.quantile(m, [0.5, 0.1, 0.9], axis=0))
    return out


def analyse(results: dict, cfg: dict, *, seconds: dict | None = None, preset: str | None = None) -> MetaReport:
    """Tables of the three parts (see the module functions).

    ``results``: ``{"plateaus", "noise", "sizes"}`` -> :class:`~meanfield.runner.StudyResult`.
    """
    frames = {p: _frame(r) for p, r in results.items()}
    parts = [p for p in ("plateaus", "noise") if p in frames]
    plat = pd.concat([plateau_table(frames[p], cfg[p]) for p in parts], ignore_index=True) if parts else \
        plateau_table(pd.DataFrame(columns=["counts"]), cfg["plateaus"])
    growth = growth_table(plat, float(cfg["plateaus"]["T"])) if "plateaus" in frames else pd.DataFrame()
    horizons = {True: float(cfg["plateaus"]["T"]), False: float(cfg["noise"]["T"])}
    escape = escape_table(plat, horizons) if len(plat) else pd.DataFrame()
    both = pd.concat([frames[p] for p in parts], ignore_index=True)
    theta = float(cfg["noise"]["theta"])
    sync = sync_table(both, theta)
    spectral = spectral_table(both)
    sizes = sync_table(frames["sizes"], theta) if "sizes" in frames else pd.DataFrame()
    timing = pd.concat([f.assign(part=p) for p, f in frames.items()]).groupby(["part", "d", "N"])["seconds"] \
        .agg(["count", "mean", "sum"]).reset_index().rename(columns={"count": "runs", "mean": "seconds_per_run",
                                                                     "sum": "seconds_total"})
    root = next((r.study.root_seed for r in results.values() if getattr(r, "study", None) is not None), None)
    return MetaReport(cfg, preset, frames, plat, growth, escape, sync, spectral, sizes, timing, dict(seconds or {}),
                      root)

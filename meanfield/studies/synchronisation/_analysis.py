"""Analysis of the synchronisation study: the Lyapunov table, the energy-decay rates, the SPDE-vs-particles curves."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._presets import ACTIVATIONS, ENERGY_FLOOR


def spde_table(result) -> pd.DataFrame:
    """Long table of the SPDE-vs-particles energy curves: one row per (replica, saved time).

    Columns ``replica, t, energy_spde, energy_particles, variance_spde, variance_particles,
    rel_diff_energy`` (``|E_spde - E_particles| / E_spde``; NaN after the SPDE's last resolved time).
    """
    rows = []
    for k, (_, r) in enumerate(result.frame.iterrows()):
        t = result.arrays["t"][k]
        for i, ti in enumerate(t):
            es, ep = result.arrays["energy_spde"][k][i], result.arrays["energy_particles"][k][i]
            rows.append({"replica": int(r["replica"]), "t": float(ti), "energy_spde": es, "energy_particles": ep,
                         "variance_spde": result.arrays["variance_spde"][k][i],
                         "variance_particles": result.arrays["variance_particles"][k][i],
                         "rel_diff_energy": abs(es - ep) / es if np.isfinite(es) else math.nan})
    return pd.DataFrame(rows)


def lyapunov_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The activation × d table: closed form, simulation ± SE, and both verdicts.

    Columns: ``activation, d, kappa_ratio`` (κ'(1)/κ(1)), ``threshold`` ((d-1)/(d-3), ∞ for
    d <= 3), ``lambda_closed``, ``lambda_sim``, ``se``, ``z``, ``sync_closed``,
    ``sync_sim`` ("yes"/"no"/"unresolved"), ``agree_3se``, ``noise``.
    """
    from meanfield.kernels import ActivationKernel

    rows = []
    ratios = {}
    for _, r in frame.iterrows():
        a = r["activation"]
        if a not in ratios:
            k = ActivationKernel(*ACTIVATIONS[a][:1], sigma_w=ACTIVATIONS[a][1])
            ratios[a] = k.dkappa1 / k.kappa1
        d = int(r["d"])
        lo, hi = r["estimate"] - 2 * r["se"], r["estimate"] + 2 * r["se"]
        sim = "yes" if hi < 0 else "no" if lo > 0 else "unresolved"
        rows.append({
            "activation": a, "d": d, "kappa_ratio": ratios[a], "threshold": (d - 1) / (d - 3) if d > 3 else math.inf,
            "lambda_closed": r["closed_form"], "lambda_sim": r["estimate"], "se": r["se"], "z": r["z"],
            "sync_closed": "yes" if r["closed_form"] < 0 else "no", "sync_sim": sim,
            "agree_3se": bool(abs(r["z"]) <= 3), "noise": r["noise"], "dt": r["dt"] if "dt" in r else math.nan,
        })
    table = pd.DataFrame(rows)
    table.attrs.update(lyapunov_chi2(table))
    return table


def lyapunov_chi2(table: pd.DataFrame) -> dict:
    """χ² test of the whole Lyapunov table against the closed form: Σ z² over the cells.

    Under the null (every estimate unbiased, Gaussian with the stated SE, cells independent)
    Σ z² is χ² with one degree of freedom per cell.

    Returns
    -------
    dict
        ``chi2``, ``dof``, ``p_value``, ``max_abs_z``, ``n_outside_3se``.
    """
    from scipy import stats

    z = table["z"].to_numpy(dtype=float)
    chi2 = float(np.sum(z * z))
    return {"chi2": chi2, "dof": int(z.size), "p_value": float(stats.chi2.sf(chi2, z.size)),
            "max_abs_z": float(np.max(np.abs(z))), "n_outside_3se": int(np.sum(np.abs(z) > 3))}


def fit_decay_rate(t, energies, *, t_fit: float = 0.0, floor: float = ENERGY_FLOOR, n_boot: int = 2000,
                   seed=0, ci: float = 0.95) -> dict:
    """Exponential decay rate of the replica mean E[E(t)] with a bootstrap CI over replicas.

    The rate γ is minus the least-squares slope of log mean_r E_r(t) against t, over the
    saved times t >= ``t_fit`` at which the mean is above ``floor`` × its initial value.
    The CI resamples replicas with replacement (the window rule is re-applied).

    Parameters
    ----------
    t : ndarray, shape (n_t,)
    energies : ndarray, shape (n_replicas, n_t)
        Non-negative energies.
    t_fit : float
        Start of the fit window.

    Returns
    -------
    dict
        ``rate``, ``ci_low``, ``ci_high``, ``n_points`` (fitted times), ``t_end`` (last
        fitted time).

    Raises
    ------
    ValueError
        Bad shapes, negative energies, or fewer than 3 times in the window.

    Examples
    --------
    >>> t = np.linspace(0, 4, 9)
    >>> e = np.exp(-2 * t)[None, :] * np.array([[1.0], [1.2], [0.8]])
    >>> round(fit_decay_rate(t, e)["rate"], 6)
    2.0
    """
    t = np.asarray(t, dtype=float)
    e = np.asarray(energies, dtype=float)
    if t.ndim != 1 or e.ndim != 2 or e.shape[1] != t.size or e.shape[0] < 2:
        raise ValueError(f"energies must have shape (n_replicas >= 2, {t.size}), got {e.shape}")
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("energies must be finite and non-negative")

    def one(mean):
        keep = (t >= t_fit) & (mean > floor * mean[0])
        if keep.sum() < 3:
            return math.nan, int(keep.sum()), math.nan
        slope = np.polyfit(t[keep], np.log(mean[keep]), 1)[0]
        return -float(slope), int(keep.sum()), float(t[keep][-1])

    rate, npts, t_end = one(e.mean(axis=0))
    if not math.isfinite(rate):
        raise ValueError(f"fewer than 3 saved times with t >= {t_fit} above the floor: cannot fit a rate")
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, e.shape[0], e.shape[0])
        r, _, _ = one(e[idx].mean(axis=0))
        if math.isfinite(r):
            boots.append(r)
    a = (1 - ci) / 2
    lo, hi = np.quantile(boots, [a, 1 - a])
    return {"rate": rate, "ci_low": float(lo), "ci_high": float(hi), "n_points": npts, "t_end": t_end}


def _as_rate(t, energy, n_clusters, floor) -> float:
    keep = (n_clusters == 1) & (energy > floor * energy[0])
    if keep.sum() < 3:
        return math.nan
    return -float(np.polyfit(t[keep], np.log(energy[keep]), 1)[0])


def energy_rates(result, config: dict, lambda1: float) -> pd.DataFrame:
    """Per β (and noise only): the mean-energy decay rate with CI and the a.s. rate with SE.

    Parameters
    ----------
    result : StudyResult
        Of :func:`make_energy_study`.
    config : dict
        The energy configuration (for ``t_fit``).
    lambda1 : float
        Closed-form λ_1 of the noise (truncated kernel), for the a.s. theory
        2 (1 - λ_1) with attention and -2 λ_1 without.

    Returns
    -------
    DataFrame
        ``beta, attention, rate_mean, ci_low, ci_high, ci_excludes_0, rate_var`` (same fit
        on the variance ``1 - |∫x dμ|²``), ``as_rate, as_se, n_as`` (replicas that reached one
        cluster), ``as_theory, decreased`` (fraction of replicas with E(T) < E(0)),
        ``sync_fraction`` (one cluster at T).
    """
    frame = result.frame
    E = result.arrays["energy"]
    V = result.arrays["variance"]
    C = result.arrays["n_clusters"]
    T_arr = result.arrays["t"]
    rows = []
    for (beta, att), sub in frame.groupby(["beta", "attention"], sort=False):
        idx = sub.index.to_numpy()
        t = T_arr[idx[0]]
        # round-off: <x, y> - 1 of unit vectors can come out slightly positive, giving an
        # energy of order -1e-16 for a collapsed cloud; such values are clipped to 0
        e = np.maximum(np.stack([E[i] for i in idx]), 0.0)
        v = np.maximum(np.stack([V[i] for i in idx]), 0.0)
        c = np.stack([C[i] for i in idx])
        fit = fit_decay_rate(t, e, t_fit=float(config["t_fit"]))
        fit_v = fit_decay_rate(t, v, t_fit=float(config["t_fit"]))
        asr = np.array([_as_rate(t, e[k], c[k], ENERGY_FLOOR) for k in range(len(idx))])
        ok = asr[np.isfinite(asr)]
        rows.append({
            "beta": float(beta), "attention": bool(att), "rate_mean": fit["rate"], "ci_low": fit["ci_low"],
            "ci_high": fit["ci_high"], "ci_excludes_0": bool(fit["ci_low"] > 0 or fit["ci_high"] < 0),
            "fit_points": fit["n_points"], "rate_var": fit_v["rate"],
            "as_rate": ok.mean() if ok.size else math.nan,
            "as_se": ok.std(ddof=1) / math.sqrt(ok.size) if ok.size > 1 else math.nan, "n_as": int(ok.size),
            "as_theory": 2 * (1 - lambda1) if att else -2 * lambda1,
            "decreased": float(np.mean(e[:, -1] < e[:, 0])), "sync_fraction": float(np.mean(c[:, -1] == 1)),
        })
    return pd.DataFrame(rows)


@dataclass
class SyncStudyResult:
    """Outcome of :func:`run` (the report of the synchronisation study).

    Attributes
    ----------
    config : dict
    lyapunov_result, energy_result : StudyResult
    lyapunov : DataFrame
        :func:`lyapunov_table`.
    rates : DataFrame
        :func:`energy_rates`.
    lambda1 : float
        Closed-form λ_1 of the energy study's noise path.
    seconds : dict
    """

    config: dict
    lyapunov_result: object
    energy_result: object
    lyapunov: pd.DataFrame
    rates: pd.DataFrame
    lambda1: float
    seconds: dict = field(default_factory=dict)
    spde_result: object = None
    spde: pd.DataFrame | None = None
    preset: str | None = None



def noise_lambda1(energy_config: dict) -> float:
    """Closed-form λ_1 of the energy study's noise path (the truncated kernel it carries)."""
    from meanfield.kernels import ActivationKernel, lyapunov_exponent
    from meanfield.noise import NoisePath

    d = int(energy_config["d"])
    return lyapunov_exponent(NoisePath(ActivationKernel(energy_config["activation"]), d,
                                       int(energy_config["lmax"])).kernel, d)


def analyse(results: dict, cfg: dict, *, seconds: dict | None = None, preset: str | None = None) -> SyncStudyResult:
    """Tables of the results of :func:`build`'s studies (``{part: StudyResult}``, any subset of the parts).

    A part that did not run leaves its fields None.
    """
    lres, eres, sres = results.get("lyapunov"), results.get("energy"), results.get("spde")
    lam = noise_lambda1(cfg["energy"])
    return SyncStudyResult(
        cfg, lres, eres,
        None if lres is None else lyapunov_table(lres.frame),
        None if eres is None else energy_rates(eres, cfg["energy"], lam),
        lam, dict(seconds or {}), sres, None if sres is None else spde_table(sres), preset)

"""Analysis of the synchronisation study: the Lyapunov table, the energy-decay rates, the SPDE-vs-particles curves."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._presets import ACTIVATIONS, ENERGY_FLOOR


def _setting(beta, attention) -> str:
    return f"β = {float(beta):g}" if attention else "noise only"


def spde_table(result) -> pd.DataFrame:
    """Long table of the SPDE-vs-particles energy curves: one row per (setting, replica, saved time).

    Columns ``setting, beta, attention, replica, t, energy_spde, energy_particles,
    energy_spde_2M, variance_spde, variance_particles, rel_diff_energy``
    (``|E_spde - E_particles| / E_spde``), ``rel_change_2M`` (``|E_M - E_2M| / E_2M``, the
    M-doubling change; NaN without the check), ``unresolved_mass``.
    """
    rows = []
    A = result.arrays
    for k, (_, r) in enumerate(result.frame.iterrows()):
        att = bool(r["attention"]) if "attention" in r else True
        e2 = A["energy_spde_2M"][k] if "energy_spde_2M" in A else np.full(len(A["t"][k]), np.nan)
        um = A["unresolved_mass"][k] if "unresolved_mass" in A else np.full(len(A["t"][k]), np.nan)
        for i, ti in enumerate(A["t"][k]):
            es, ep = float(A["energy_spde"][k][i]), float(A["energy_particles"][k][i])
            rows.append({"setting": _setting(r["beta"], att), "beta": float(r["beta"]), "attention": att,
                         "replica": int(r["replica"]), "t": float(ti), "energy_spde": es, "energy_particles": ep,
                         "energy_spde_2M": float(e2[i]), "variance_spde": float(A["variance_spde"][k][i]),
                         "variance_particles": float(A["variance_particles"][k][i]),
                         "rel_diff_energy": abs(es - ep) / es if es > 0 else math.nan,
                         "rel_change_2M": abs(es - e2[i]) / e2[i] if np.isfinite(e2[i]) and e2[i] > 0 else math.nan,
                         "unresolved_mass": float(um[i])})
    return pd.DataFrame(rows)


def _paired_rate_difference(t, a, b, t_fit, n_boot, seed, ci=0.95):
    """Rate(a) - rate(b) of the replica means with a paired replica bootstrap (same indices for both)."""
    def rate(mean):
        keep = (t >= t_fit) & (mean > ENERGY_FLOOR * mean[0])
        if keep.sum() < 3:
            return math.nan
        return -float(np.polyfit(t[keep], np.log(mean[keep]), 1)[0])

    diff = rate(a.mean(axis=0)) - rate(b.mean(axis=0))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, a.shape[0], a.shape[0])
        v = rate(a[idx].mean(axis=0)) - rate(b[idx].mean(axis=0))
        if math.isfinite(v):
            boots.append(v)
    if not boots:
        return diff, math.nan, math.nan
    lo, hi = np.quantile(boots, [(1 - ci) / 2, (1 + ci) / 2])
    return diff, float(lo), float(hi)


#: Largest relative change of the replica-mean SPDE energy under M-doubling for which a saved
#: time counts as resolved (the fit window of :func:`spde_rates` ends before the first time above it).
SPDE_RESOLUTION = 0.05
#: A rate whose 95 % CI half-width exceeds this fraction of the rate is not resolved (the
#: power rule of :func:`meanfield.reporting.verdict`).
RATE_POWER = 0.5


def decay_verdict(rate: float, lo: float, hi: float, *, resolved: bool = True, power: float = RATE_POWER) -> str:
    """Three-way verdict of Theorem 1.4 (E[E_β(μ_t)] decays exponentially) from a fitted rate and its CI.

    ``inconclusive`` if the curve is not resolved (too few times above the floor, or the
    SPDE not converged in M), if the CI reaches 0 (a plateau: no decay resolved), or if its
    half-width exceeds ``power`` × rate; ``inconsistent`` if the CI lies below 0 (the energy
    grows over the window); else ``consistent``.

    Examples
    --------
    >>> decay_verdict(2.0, 1.8, 2.2), decay_verdict(0.1, -0.1, 0.3), decay_verdict(-1.0, -1.2, -0.8)
    ('consistent', 'inconclusive', 'inconsistent')
    """
    if not (resolved and math.isfinite(rate) and math.isfinite(lo) and math.isfinite(hi)):
        return "inconclusive"
    if hi < 0:
        return "inconsistent"
    if lo <= 0 or 0.5 * (hi - lo) > power * abs(rate):
        return "inconclusive"
    return "consistent"


def agreement_verdict(rate_a: float, ci_a: tuple, rate_b: float, ci_b: tuple, *, power: float = RATE_POWER) -> str:
    """Three-way verdict of "rate a = rate b" with the replica spread as the yardstick.

    ``ci_a``, ``ci_b`` are the replica-bootstrap CIs of the two rates. ``inconclusive`` if a CI
    is not finite or wider (half-width) than ``power`` × the rate; ``consistent`` if each rate
    lies inside the other's CI; ``inconsistent`` if the two CIs do not overlap; else
    ``inconclusive``.

    Examples
    --------
    >>> agreement_verdict(2.0, (1.8, 2.2), 2.1, (1.9, 2.3)), agreement_verdict(2.0, (1.9, 2.1), 3.0, (2.9, 3.1))
    ('consistent', 'inconsistent')
    """
    vals = [rate_a, rate_b, *ci_a, *ci_b]
    if not all(math.isfinite(v) for v in vals):
        return "inconclusive"
    for r, (lo, hi) in ((rate_a, ci_a), (rate_b, ci_b)):
        if 0.5 * (hi - lo) > power * abs(r):
            return "inconclusive"
    if ci_a[0] <= rate_b <= ci_a[1] and ci_b[0] <= rate_a <= ci_b[1]:
        return "consistent"
    if ci_a[1] < ci_b[0] or ci_b[1] < ci_a[0]:
        return "inconsistent"
    return "inconclusive"


def spde_rates(result, config: dict, *, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Theorem 1.4 on the SPDE: decay rate of E[E_β(μ_t)] along the SPDE and along particles, per setting.

    Per setting (β, or noise only): the rate of the replica mean of the SPDE energy and of the
    particle energy on the same paths (:func:`fit_decay_rate`: least squares of log of the
    replica mean, above 1e-11 of the initial value, 95 % replica-bootstrap CI) over the window
    ``t_fit <= t <= t_end``. With the check solution (about 2M nodes), ``t_end`` is the last
    saved time up to which the replica mean of the SPDE energy changes by at most
    :data:`SPDE_RESOLUTION` (relative) under M-doubling — later the mean is carried by the last
    unsynchronised mass, which a fixed node cloud no longer resolves — else T. Also: the paired
    difference SPDE - particles with its paired replica-bootstrap CI (much narrower than either
    CI, since both curves share the noise paths: it resolves small systematic differences such
    as finite-N effects), the rate of the check solution on the same window, the largest
    M-doubling change of the mean inside the window and at T, and three-way verdicts
    (:func:`decay_verdict` for each curve, :func:`agreement_verdict` for the two rates against
    the replica spread of each).

    Returns
    -------
    DataFrame
        ``setting, beta, attention, replicas, t_fit, t_end, fit_points, rate_spde, ci_low_spde,
        ci_high_spde, rate_particles, ci_low_particles, ci_high_particles, diff, diff_ci_low,
        diff_ci_high, rate_spde_2M, dE_2M_window, dE_2M_T, unresolved_mass_max, verdict_spde,
        verdict_particles, verdict_agree``.
    """
    A = result.arrays
    frame = result.frame
    t_fit = float(config["t_fit"])
    rows = []
    if "attention" not in frame.columns:
        frame = frame.assign(attention=True)
    nan = {"rate": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n_points": 0, "t_end": math.nan}
    for (beta, att), sub in frame.groupby(["beta", "attention"], sort=False):
        idx = sub.index.to_numpy()
        t = np.asarray(A["t"][idx[0]], dtype=float)
        es = np.maximum(np.stack([A["energy_spde"][i] for i in idx]), 0.0)
        ep = np.maximum(np.stack([A["energy_particles"][i] for i in idx]), 0.0)
        e2 = np.stack([A["energy_spde_2M"][i] for i in idx]) if "energy_spde_2M" in A else None
        checked = e2 is not None and bool(np.all(np.isfinite(e2)))
        n_end = t.size
        rel = None
        if checked:
            e2 = np.maximum(e2, 0.0)
            m1, m2 = es.mean(axis=0), e2.mean(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(m2 > 0, np.abs(m1 - m2) / m2, 0.0)
            bad = np.nonzero(rel > SPDE_RESOLUTION)[0]
            n_end = int(bad[0]) if bad.size else t.size
        tw = t[:n_end]
        row = {"setting": _setting(beta, att), "beta": float(beta), "attention": bool(att), "replicas": len(idx),
               "t_fit": t_fit}
        fits = {}
        for name, e in (("spde", es), ("particles", ep)):
            try:
                fits[name] = fit_decay_rate(tw, e[:, :n_end], t_fit=t_fit, n_boot=n_boot, seed=seed)
            except ValueError:
                fits[name] = dict(nan)
        row.update({"t_end": float(tw[-1]) if tw.size else math.nan, "fit_points": fits["spde"]["n_points"]})
        for name in ("spde", "particles"):
            row.update({f"rate_{name}": fits[name]["rate"], f"ci_low_{name}": fits[name]["ci_low"],
                        f"ci_high_{name}": fits[name]["ci_high"]})
        row["diff"], row["diff_ci_low"], row["diff_ci_high"] = _paired_rate_difference(
            tw, es[:, :n_end], ep[:, :n_end], t_fit, n_boot, seed)
        window = (t >= t_fit) & (np.arange(t.size) < n_end)
        if checked:
            try:
                row["rate_spde_2M"] = fit_decay_rate(tw, e2[:, :n_end], t_fit=t_fit, n_boot=100, seed=seed)["rate"]
            except ValueError:
                row["rate_spde_2M"] = math.nan
            row["dE_2M_window"] = float(rel[window].max()) if window.any() else math.nan
            row["dE_2M_T"] = float(rel[-1])
        else:
            row["rate_spde_2M"] = row["dE_2M_window"] = row["dE_2M_T"] = math.nan
        um = np.stack([A["unresolved_mass"][i] for i in idx]) if "unresolved_mass" in A else None
        row["unresolved_mass_max"] = float(np.max(um[:, window])) if um is not None and window.any() else math.nan
        row["verdict_spde"] = decay_verdict(row["rate_spde"], row["ci_low_spde"], row["ci_high_spde"],
                                            resolved=row["fit_points"] >= 3)
        row["verdict_particles"] = decay_verdict(row["rate_particles"], row["ci_low_particles"],
                                                 row["ci_high_particles"])
        row["verdict_agree"] = agreement_verdict(row["rate_spde"], (row["ci_low_spde"], row["ci_high_spde"]),
                                                 row["rate_particles"],
                                                 (row["ci_low_particles"], row["ci_high_particles"]))
        rows.append(row)
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
    phase : DataFrame or None
        :func:`phase_table` (the critical dimension and λ_1 on both sides, per activation).
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
    spde_rates: pd.DataFrame | None = None
    phase_result: object = None
    phase: pd.DataFrame | None = None



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
    from ._phase import phase_table

    lres, eres, sres = results.get("lyapunov"), results.get("energy"), results.get("spde")
    pres = results.get("phase")
    lam = noise_lambda1(cfg["energy"])
    return SyncStudyResult(
        cfg, lres, eres,
        None if lres is None else lyapunov_table(lres.frame),
        None if eres is None else energy_rates(eres, cfg["energy"], lam),
        lam, dict(seconds or {}), sres, None if sres is None else spde_table(sres), preset,
        None if sres is None else spde_rates(sres, cfg["spde"]),
        pres, None if pres is None else phase_table(pres.frame))

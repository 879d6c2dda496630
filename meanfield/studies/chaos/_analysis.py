"""Analysis of the propagation-of-chaos study: long table, rate tables, SPDE-error check, the iid control."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from meanfield._validate import as_int

from ._presets import ERRORS, parse_spheres
from ._tasks import _density_nodes


def chaos_frame(result) -> pd.DataFrame:
    """Long table of a chaos :class:`~meanfield.runner.StudyResult`: one row per (sphere, replica, N).

    Parameters
    ----------
    result : meanfield.runner.StudyResult

    Returns
    -------
    DataFrame
        Columns ``sphere, replica, N, coupling, w2, observable`` (``w2`` NaN where not computed).

    Examples
    --------
    >>> long = chaos_frame(result)  # doctest: +SKIP
    >>> long.groupby(["sphere", "N"])["coupling"].mean()  # doctest: +SKIP
    """
    rows = []
    frame = result.frame
    for i, row in enumerate(frame.itertuples(index=False)):
        Ns = result.arrays["Ns"][i]
        for k, N in enumerate(Ns):
            rows.append({"sphere": int(row.sphere), "replica": int(row.replica), "N": int(N),
                         **{e: float(result.arrays[e][i][k]) for e in ERRORS}})
    return pd.DataFrame(rows, columns=["sphere", "replica", "N", *ERRORS])


def theory_slopes(sphere: int, n_min_w2: int) -> tuple[dict, dict]:
    """Theory slopes and tolerances of the three errors (SPEC §9).

    Coupling and observables: -1/2, tolerance 0. W_2: -1/2 on S^1 (tolerance 0); on S^2
    the band [-1/2, -1/2 + 1/(2 ln N_min)] of local slopes of sqrt(log N / N), written as
    centre -1/2 + 1/(4 ln N_min) with tolerance 1/(4 ln N_min).

    Parameters
    ----------
    sphere : {1, 2}
    n_min_w2 : int
        Smallest N of the W_2 fit.

    Returns
    -------
    (dict, dict)
        ``{error: theory slope}``, ``{error: tolerance}``.

    Examples
    --------
    >>> slopes, tol = theory_slopes(2, 64)
    >>> round(slopes["w2"] - tol["w2"], 12), round(slopes["w2"] + tol["w2"], 4)
    (-0.5, -0.3798)
    """
    slopes = {"coupling": -0.5, "w2": -0.5, "observable": -0.5}
    tol = {"coupling": 0.0, "w2": 0.0, "observable": 0.0}
    if sphere == 2:
        half = 1.0 / (4.0 * math.log(n_min_w2))
        slopes["w2"] = -0.5 + half
        tol["w2"] = half
    return slopes, tol


@dataclass
class ChaosReport:
    """Analysed propagation-of-chaos study.

    Attributes
    ----------
    result : meanfield.runner.StudyResult
        The raw study result (per (sphere, replica) row; arrays per N).
    frame : DataFrame
        :func:`chaos_frame` of the result.
    tables : dict of int to DataFrame
        Rate table (:func:`meanfield.rates.rate_table`) per sphere, errors stacked.
    summaries : dict of int to DataFrame
        :func:`meanfield.rates.slope_summary` per sphere.
    spde_check : DataFrame
        One row per (sphere, error): ``spde_error`` (largest over replicas),
        ``smallest_particle_error`` (smallest mean over N), ``ratio``, ``below``.
    diagnostics : DataFrame
        Per sphere: negative mass of ρ_T, min ρ_T, spectral tail, W_2 quantisation floor,
        kept fraction of κ(1), mean wall times per replica.
    control : dict or None
        ``{"frame", "fit"}`` of :func:`iid_w2_control` on S^1 when :func:`analyse` ran it.
    seconds : dict or None
        Wall time of the run per part.
    long : LongReport or None
        The long-horizon part (:func:`analyse_long`) when it ran.
    """

    result: object
    frame: pd.DataFrame
    tables: dict
    summaries: dict
    spde_check: pd.DataFrame
    diagnostics: pd.DataFrame
    control: dict | None = None
    seconds: dict | None = None
    long: object = None

    @property
    def spheres(self) -> tuple[int, ...]:
        return tuple(sorted(self.tables))


def analyse_chaos(result, *, n_boot: int = 2000, seed: int = 0) -> ChaosReport:
    """Rate tables, slope fits, SPDE-error check and diagnostics of a chaos study result.

    Parameters
    ----------
    result : meanfield.runner.StudyResult
        From ``run_study(chaos_study(...))``; needs at least 2 replicas per sphere for the
        bootstrap CIs.
    n_boot : int
        Bootstrap resamples of :func:`meanfield.rates.rate_table`.
    seed : int
        Bootstrap seed.

    Returns
    -------
    ChaosReport

    Examples
    --------
    >>> report = analyse_chaos(run_study(chaos_study("tiny"), progress=False))  # doctest: +SKIP
    """
    from meanfield.rates import rate_table, slope_summary

    if result.failures:
        raise RuntimeError(f"{len(result.failures)} chaos task(s) failed, first: {result.failures[0].error}")
    long = chaos_frame(result)
    fr = result.frame
    tables, summaries, checks, diags = {}, {}, [], []
    for sphere in sorted(long["sphere"].unique()):
        sub = long[long["sphere"] == sphere]
        w2_rows = sub[np.isfinite(sub["w2"])]
        n_min_w2 = int(w2_rows["N"].min()) if len(w2_rows) else 2
        slopes, tol = theory_slopes(int(sphere), n_min_w2)
        parts = []
        for err in ERRORS:
            data = sub if err != "w2" else w2_rows
            if data["N"].nunique() < 2:
                continue
            parts.append(rate_table(data, "N", err, slopes[err], tolerance=tol[err], n_boot=n_boot, seed=seed))
        table = pd.concat(parts, ignore_index=True)
        table.attrs["param"] = "N"
        tables[int(sphere)] = table
        summaries[int(sphere)] = slope_summary(table)
        rows = fr[fr["sphere"] == sphere]
        means = sub.groupby("N")[list(ERRORS)].mean()
        for err, col in (("coupling", "spde_coupling"), ("w2", "spde_w2_bound"), ("observable", "spde_observable")):
            smallest = float(means[err].min()) if np.isfinite(means[err]).any() else float("nan")
            spde_err = float(rows[col].max())
            checks.append({"sphere": int(sphere), "error": err, "spde_measure": col, "spde_error": spde_err,
                           "smallest_particle_error": smallest, "ratio": spde_err / smallest,
                           "below": bool(spde_err < smallest)})
        diags.append({
            "sphere": int(sphere), "replicas": int(len(rows)),
            "rho_negative_mass_max": float(rows["rho_negative_mass"].max()),
            "rho_negative_fraction_max": float(rows["rho_negative_fraction"].max()),
            "rho_min": float(rows["rho_min"].min()),
            "spde_tail_max": float(rows["spde_tail"].max()),
            "w2_floor": float(rows["w2_floor"].max()),
            "kept_fraction": float(rows["kept_fraction"].mean()),
            "spde_seconds": float(rows["spde_seconds"].mean()),
            "particle_seconds": float(rows["particle_seconds"].mean()),
            "coupling_seconds": float(rows["coupling_seconds"].mean()),
            "w2_seconds": float(rows["w2_seconds"].mean()),
        })
    return ChaosReport(result, long, tables, summaries, pd.DataFrame(checks), pd.DataFrame(diags))


def iid_w2_control(sphere: int, Ns, replicas: int = 8, *, kappa: float = 4.0, density_nodes: int = 4096,
                   seed: int = 0, n_boot: int = 2000):
    """Control for error (b): W_2 of N iid samples of ρ_0 (vMF) against ρ_0 itself, no dynamics.

    Measures the pre-asymptotic W_2 decay of pure sampling for the same initial density, the
    same N and the same quadrature representation as the study, so that a W_2 slope of the
    study can be compared with what sampling alone gives. S^1 only by default use (exact
    circle solver, cheap); S^2 works too but costs one network simplex per (N, replica).

    Parameters
    ----------
    sphere : {1, 2}
    Ns : sequence of int
        Sample sizes (>= 2, at least two distinct).
    replicas : int
    kappa : float
        vMF concentration (mean direction e_d).
    density_nodes : int
        Equispaced nodes (S^1) or Gauss–Legendre latitudes (S^2) for ρ_0.
    seed : int
    n_boot : int

    Returns
    -------
    (DataFrame, meanfield.rates.SlopeFit)
        Long table ``N, replica, w2`` and the slope fit of mean W_2 against N.

    Examples
    --------
    >>> df, fit = iid_w2_control(1, [64, 256], replicas=3, density_nodes=512)
    >>> df.shape, bool(fit.slope < 0)
    ((6, 3), True)
    """
    from meanfield.rates import fit_slope
    from meanfield.spde import VonMisesFisher
    from meanfield.transport import wasserstein_to_density

    sphere = parse_spheres(sphere)
    if len(sphere) != 1:
        raise ValueError("iid_w2_control takes one sphere")
    d = sphere[0] + 1
    Ns = [as_int(n, "N", min_value=2) for n in Ns]
    if len(set(Ns)) < 2:
        raise ValueError(f"Ns must hold at least 2 distinct values, got {Ns}")
    replicas = as_int(replicas, "replicas", min_value=1)
    mu = np.zeros(d)
    mu[-1] = 1.0
    rho0 = VonMisesFisher(mu, kappa)
    nodes, weights = _density_nodes(d, as_int(density_nodes, "density_nodes", min_value=2))
    vals = rho0.density(nodes)
    rows = []
    for N in Ns:
        for r in range(replicas):
            x = rho0.sample(N, seed=np.random.SeedSequence(seed, spawn_key=(N, r)))
            rows.append({"N": N, "replica": r, "w2": wasserstein_to_density(x, None, nodes, weights, vals)})
    df = pd.DataFrame(rows)
    return df, fit_slope(df["N"].to_numpy(float), df["w2"].to_numpy(), n_boot=n_boot, seed=seed)



def analyse(results, cfg: dict | None = None, *, n_boot: int = 2000, seed: int = 0, control: bool = False,
            seconds: dict | None = None) -> ChaosReport:
    """Analyse the results of :func:`build`'s studies (``{"chaos": StudyResult}`` or the StudyResult).

    ``cfg`` is not needed (the settings travel with the study) and is accepted for the common
    signature of the studies. With ``control`` and S^1 among the spheres, also the iid
    sampling control :func:`iid_w2_control` on S^1 (same N, replicas, κ and nodes), stored in
    ``report.control``. ``seconds`` ({part: wall time}) is kept in ``report.seconds``.
    """
    result = results["chaos"] if isinstance(results, dict) else results
    report = analyse_chaos(result, n_boot=n_boot, seed=seed)
    report.seconds = dict(seconds or {})
    if isinstance(results, dict) and results.get("long") is not None:
        report.long = analyse_long(results["long"], n_boot=n_boot, seed=seed)
    if control and 1 in report.spheres:
        cfg1 = result.study.fixed["configs"]["1"]
        frame, fit = iid_w2_control(1, cfg1["Ns"], replicas=result.study.replicas, kappa=cfg1["kappa"],
                                    density_nodes=cfg1["density_nodes"], n_boot=n_boot)
        report.control = {"frame": frame, "fit": fit}
    return report


# ----------------------------------------------------------------------------------------
# long horizons (characteristics reference)
# ----------------------------------------------------------------------------------------


@dataclass
class LongReport:
    """Analysed long-horizon part of the chaos study (:func:`chaos_long_replica`).

    Attributes
    ----------
    result : meanfield.runner.StudyResult
    frame : DataFrame
        One row per (sphere, horizon, replica, N): ``coupling, w2, observable``.
    tables : dict of (sphere, horizon) to DataFrame
        Three-way rate tables (:func:`meanfield.reporting.rate_table`, ``verdicts="three-way"``).
    summaries : dict of (sphere, horizon) to DataFrame
        :func:`meanfield.reporting.slope_summary` of each table.
    rates : DataFrame
        All summaries stacked, with ``sphere`` and ``T`` columns.
    spde_check : DataFrame
        Per (sphere, T, error): the reference's own error (the same replica with 2M nodes;
        largest over replicas), the mean particle error and its replica standard deviation at
        the largest N, and whether the former lies below both. Where it does not, the
        verdicts of that cell in ``tables``, ``summaries``, ``rates`` and ``replica_slopes`` are
        set to inconclusive (column ``reference_resolved``).
    diagnostics : DataFrame
        Per (sphere, T): variance of ρ_T, unresolved mass, area defect, nodes, wall times.
    """

    result: object
    frame: pd.DataFrame
    tables: dict
    summaries: dict
    rates: pd.DataFrame
    spde_check: pd.DataFrame
    diagnostics: pd.DataFrame
    replica_slopes: pd.DataFrame | None = None


def replica_slopes(frame: pd.DataFrame, *, ci: float = 0.95, power: float = 0.5) -> pd.DataFrame:
    """Per-replica log–log slopes of each error against N, summarised over replicas.

    On one noise path the error behaves like C(path) N^(-1/2), and C(path) varies by orders of
    magnitude between paths once the tokens synchronise, so the replica mean is carried by one
    or two paths. Fitting log e_r(N) on log N within each replica r removes C(path); the mean of
    these slopes with its t-interval over replicas is the replica-spread yardstick of the rate
    itself. Verdict (three-way): inconclusive if fewer than 3 replicas or the interval's
    half-width exceeds ``power`` × |theory|; consistent if the theory band (theory ± tolerance,
    :func:`theory_slopes`) meets the interval; else inconsistent.

    Returns
    -------
    DataFrame
        ``sphere, T, error, replicas, slope_mean, slope_sd, ci_low, ci_high, theory_slope,
        tolerance, verdict``.
    """
    from scipy import stats

    rows = []
    for (sphere, T), sub in frame.groupby(["sphere", "T"], sort=True):
        w2n = sub.loc[np.isfinite(sub["w2"]), "N"]
        slopes_th, tol = theory_slopes(int(sphere), int(w2n.min()) if len(w2n) else 2)
        for err in ERRORS:
            per = []
            for _, rep in sub.groupby("replica"):
                ok = np.isfinite(rep[err]) & (rep[err] > 0)
                if ok.sum() >= 2 and rep.loc[ok, "N"].nunique() >= 2:
                    per.append(np.polyfit(np.log(rep.loc[ok, "N"]), np.log(rep.loc[ok, err]), 1)[0])
            per = np.asarray(per)
            n = per.size
            mean = float(per.mean()) if n else float("nan")
            sd = float(per.std(ddof=1)) if n > 1 else float("nan")
            half = float(stats.t.ppf((1 + ci) / 2, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
            th, tl = slopes_th[err], tol[err]
            if n < 3 or not np.isfinite(half) or half > power * abs(th):
                verdict = "inconclusive"
            elif mean - half - tl <= th <= mean + half + tl:
                verdict = "consistent"
            else:
                verdict = "inconsistent"
            rows.append({"sphere": int(sphere), "T": float(T), "error": err, "replicas": n, "slope_mean": mean,
                         "slope_sd": sd, "ci_low": mean - half, "ci_high": mean + half, "theory_slope": th,
                         "tolerance": tl, "verdict": verdict})
    return pd.DataFrame(rows)


def long_frame(result) -> pd.DataFrame:
    """Long table of a long-horizon chaos result: one row per (sphere, T, replica, N)."""
    rows = []
    for i, row in enumerate(result.frame.itertuples(index=False)):
        Ns, hs = result.arrays["Ns"][i], result.arrays["horizons"][i]
        for a, T in enumerate(hs):
            for k, N in enumerate(Ns):
                rows.append({"sphere": int(row.sphere), "T": float(T), "replica": int(row.replica), "N": int(N),
                             **{e: float(result.arrays[e][i][a][k]) for e in ERRORS}})
    return pd.DataFrame(rows, columns=["sphere", "T", "replica", "N", *ERRORS])


def analyse_long(result, *, n_boot: int = 2000, seed: int = 0) -> LongReport:
    """Three-way rate tables per (sphere, horizon), the reference check and diagnostics of the long part.

    Theory slopes and tolerances as for the short horizons (:func:`theory_slopes`); verdicts
    by :func:`meanfield.reporting.verdict` (inconclusive when a point is unresolved, when the
    studentized slope interval is wider than ±0.25, or when it and the delta-method interval
    disagree). The intervals are bootstrap intervals over replicas: the yardstick is the
    spread of the errors between replicas (independent noise paths and samples), not the
    sampling scale sd/sqrt(N) of one cloud — the sampling error of the initial cloud moves
    the whole cluster through attention, so one replica's error is one draw of that shift.
    """
    from meanfield.rates import rate_table, slope_summary

    if result.failures:
        raise RuntimeError(f"{len(result.failures)} long-horizon chaos task(s) failed, first: "
                           f"{result.failures[0].error}")
    long = long_frame(result)
    fr = result.frame
    A = result.arrays
    tables, summaries, stacked, checks, diags = {}, {}, [], [], []
    for (sphere, T), sub in long.groupby(["sphere", "T"], sort=True):
        w2_rows = sub[np.isfinite(sub["w2"])]
        n_min_w2 = int(w2_rows["N"].min()) if len(w2_rows) else 2
        slopes, tol = theory_slopes(int(sphere), n_min_w2)
        parts = []
        for err in ERRORS:
            data = sub if err != "w2" else w2_rows
            if data["N"].nunique() < 2:
                continue
            parts.append(rate_table(data, "N", err, slopes[err], tolerance=tol[err], n_boot=n_boot, seed=seed,
                                    verdicts="three-way"))
        table = pd.concat(parts, ignore_index=True)
        table.attrs["param"] = "N"
        key = (int(sphere), float(T))
        tables[key] = table
        summaries[key] = slope_summary(table)
        stacked.append(summaries[key].assign(sphere=int(sphere), T=float(T)))
        idx = fr.index[fr["sphere"] == sphere].to_numpy()
        a = int(np.argmin(np.abs(np.asarray(A["horizons"][idx[0]]) - T)))
        nmax = sub["N"].max()
        at_max = sub[sub["N"] == nmax]
        for err, col in (("coupling", "spde_coupling"), ("w2", "spde_w2"), ("observable", "spde_observable")):
            vals = np.array([A[col][i][a] for i in idx], dtype=float)
            spde_err = float(np.max(vals)) if np.isfinite(vals).any() else float("nan")
            ref = at_max if err != "w2" else w2_rows[w2_rows["N"] == w2_rows["N"].max()] if len(w2_rows) else at_max
            mean, sd = float(ref[err].mean()), float(ref[err].std(ddof=1))
            checks.append({"sphere": int(sphere), "T": float(T), "error": err, "spde_error": spde_err,
                           "N": int(ref["N"].max()), "particle_mean": mean, "particle_replica_sd": sd,
                           "ratio_to_sd": spde_err / sd if sd > 0 else float("nan"),
                           "below": bool(spde_err < min(mean, sd)) if np.isfinite(spde_err) else None})
        rows = fr.loc[idx]
        diags.append({
            "sphere": int(sphere), "T": float(T), "replicas": int(len(idx)), "M": int(rows["M"].max()),
            "M_check": int(rows["M_check"].max()),
            "variance_mean": float(np.mean([A["variance"][i][a] for i in idx])),
            "variance_min": float(np.min([A["variance"][i][a] for i in idx])),
            "unresolved_mass_max": float(np.max([A["unresolved_mass"][i][a] for i in idx])),
            "area_defect_max": float(np.max([A["area_defect"][i][a] for i in idx])),
            "spde_seconds": float(rows["spde_seconds"].mean()),
            "particle_seconds": float(rows["particle_seconds"].mean()),
            "coupling_seconds": float(rows["coupling_seconds"].mean()),
            "w2_seconds": float(rows["w2_seconds"].mean()),
        })
    rates = pd.concat(stacked, ignore_index=True)
    rates = rates[["sphere", "T", *[c for c in rates.columns if c not in ("sphere", "T")]]]
    slopes = replica_slopes(long)
    # a cell whose reference error is not below the replica spread of the particle error says
    # nothing about the N-rate: its verdicts become inconclusive (reference_resolved = False)
    checks = pd.DataFrame(checks)
    unresolved = {(r.sphere, r.T, r.error) for r in checks.itertuples(index=False) if r.below is False}
    for frame_ in (rates, slopes):
        flag = [(int(a), float(b), c) not in unresolved for a, b, c in zip(frame_["sphere"], frame_["T"],
                                                                           frame_["error"])]
        frame_["reference_resolved"] = flag
        frame_.loc[~frame_["reference_resolved"], "verdict"] = "inconclusive"
    for (sphere, T), table in tables.items():
        for err in table["error"].unique():
            if (sphere, T, err) in unresolved:
                table.loc[table["error"] == err, "verdict"] = "inconclusive"
                summaries[(sphere, T)].loc[summaries[(sphere, T)]["error"] == err, "verdict"] = "inconclusive"
    return LongReport(result, long, tables, summaries, rates, checks, pd.DataFrame(diags), slopes)

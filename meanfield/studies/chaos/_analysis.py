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
    """

    result: object
    frame: pd.DataFrame
    tables: dict
    summaries: dict
    spde_check: pd.DataFrame
    diagnostics: pd.DataFrame
    control: dict | None = None
    seconds: dict | None = None

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
    if control and 1 in report.spheres:
        cfg1 = result.study.fixed["configs"]["1"]
        frame, fit = iid_w2_control(1, cfg1["Ns"], replicas=result.study.replicas, kappa=cfg1["kappa"],
                                    density_nodes=cfg1["density_nodes"], n_boot=n_boot)
        report.control = {"frame": frame, "fit": fit}
    return report

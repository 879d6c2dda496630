"""Analysis of the circle study: fraction synchronised with binomial intervals, perturbation rates
against the eigenvalues, thresholds, and the eigenvalue curves."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from meanfield.reporting import CONSISTENT, INCONCLUSIVE, INCONSISTENT, proportion_interval

from ._presets import BETA_NO_SYNC, BETA_SYNC

#: Tolerance of the issue on the three-cluster threshold (the paper's -2/3).
THRESHOLD_TOL = 0.05
#: The claim of arXiv 2507.22857 in each β range, as stated in the sync table.
CLAIM_SYNC = "sync from a.e. state"
CLAIM_NO_SYNC = "global sync fails"
CLAIM_NONE = "no claim"


@dataclass
class CircleReport:
    """The analysed circle study (:func:`analyse`); a table is None when its part did not run.

    Attributes
    ----------
    sync : DataFrame or None
        Per (β, N) at the main step: runs, outcomes, fraction synchronised with Clopper–Pearson and
        Wilson 95 % intervals, median certificate time, cluster counts of the stuck runs, the paper's
        claim for that β and a three-way verdict.
    dt_check : DataFrame or None
        Per control β: outcome agreement of the same clouds at dt and dt/2.
    stability : DataFrame or None
        Per perturbation run: measured rate, eigenvalue, scheme-predicted rate and their difference.
    thresholds : DataFrame
        Per k: sign changes of the top nontrivial eigenvalue in ``beta_range`` and, where the threshold
        part ran, the threshold located by perturbation runs.
    spectrum : DataFrame
        Eigenvalue curves (β, k, mode, eigenvalue) in softmax time.
    """

    config: dict
    preset: str | None
    seconds: dict
    sync: pd.DataFrame | None
    dt_check: pd.DataFrame | None
    stability: pd.DataFrame | None
    thresholds: pd.DataFrame
    spectrum: pd.DataFrame
    results: dict = field(default_factory=dict, repr=False)


def claim(beta: float) -> str:
    """The statement of arXiv 2507.22857 for this β (``CLAIM_SYNC``, ``CLAIM_NO_SYNC`` or ``CLAIM_NONE``).

    Examples
    --------
    >>> claim(0.0), claim(-1.0), claim(-0.5)
    ('sync from a.e. state', 'global sync fails', 'no claim')
    """
    if beta >= BETA_SYNC - 1e-12:
        return CLAIM_SYNC
    if beta < BETA_NO_SYNC:
        return CLAIM_NO_SYNC
    return CLAIM_NONE


def sync_verdict(beta: float, n_stuck: int, n_unresolved: int) -> str:
    """Three-way verdict of the runs at one β against the paper's claim.

    For β >= -0.16 (synchronisation from almost every state): inconsistent if a run is certified
    stuck at a stable non-synchronised equilibrium, inconclusive if a run is unresolved, else
    consistent. For β < -2/3 (global synchronisation fails): consistent if a run is stuck (a stable
    non-synchronised state with a basin of positive measure was reached), else inconclusive (random
    starts need not find the basin; the eigenvalues decide). No verdict in between.

    Examples
    --------
    >>> sync_verdict(1.0, 0, 0), sync_verdict(1.0, 1, 0), sync_verdict(-1.5, 0, 0), sync_verdict(-3.0, 4, 0)
    ('consistent', 'inconsistent', 'inconclusive', 'consistent')
    """
    c = claim(beta)
    if c == CLAIM_SYNC:
        return INCONSISTENT if n_stuck else (INCONCLUSIVE if n_unresolved else CONSISTENT)
    if c == CLAIM_NO_SYNC:
        return CONSISTENT if n_stuck else INCONCLUSIVE
    return ""


def _cluster_counts(values) -> str:
    vals, counts = np.unique(np.asarray(values, dtype=int), return_counts=True)
    return ", ".join(f"{v}:{c}" for v, c in zip(vals, counts))


def sync_table(frame: pd.DataFrame, dt: float) -> pd.DataFrame:
    """The fraction-synchronised table of the runs at step ``dt`` (see :class:`CircleReport`)."""
    rows = []
    main = frame[np.isclose(frame["dt"], dt)]
    for (beta, n), sub in main.groupby(["beta", "N"], sort=True):
        runs = len(sub)
        k_sync = int((sub["outcome"] == "synchronised").sum())
        k_stuck = int((sub["outcome"] == "stuck").sum())
        k_unres = runs - k_sync - k_stuck
        cp = proportion_interval(k_sync, runs)
        wi = proportion_interval(k_sync, runs, method="wilson")
        th = sub.loc[sub["outcome"] == "synchronised", "t_half"]
        rows.append({
            "beta": float(beta), "N": int(n), "runs": runs, "synchronised": k_sync, "stuck": k_stuck,
            "unresolved": k_unres, "fraction": k_sync / runs, "cp_low": cp[0], "cp_high": cp[1],
            "wilson_low": wi[0], "wilson_high": wi[1],
            "t_half_median": float(th.median()) if len(th) else math.nan,
            "t_end_max": float(sub["t_end"].max()),
            "stuck_clusters": _cluster_counts(sub.loc[sub["outcome"] == "stuck", "n_clusters"]),
            "claim": claim(float(beta)), "verdict": sync_verdict(float(beta), k_stuck, k_unres),
        })
    return pd.DataFrame(rows)


def dt_check_table(frame: pd.DataFrame, dt: float, n_check: int) -> pd.DataFrame | None:
    """Outcome agreement of the same clouds (same N and replica) at dt and dt/2, per control β."""
    half = frame[np.isclose(frame["dt"], dt / 2)]
    if half.empty:
        return None
    full = frame[np.isclose(frame["dt"], dt) & (frame["N"] == n_check)]
    rows = []
    for beta, sub in half.groupby("beta", sort=True):
        ref = full[np.isclose(full["beta"], beta)].set_index("replica")["outcome"]
        fine = sub.set_index("replica")["outcome"]
        common = ref.index.intersection(fine.index)
        agree = int((ref.loc[common] == fine.loc[common]).sum())
        rows.append({"beta": float(beta), "N": int(n_check), "pairs": len(common), "agree": agree,
                     "sync_dt": int((ref.loc[common] == "synchronised").sum()),
                     "sync_dt_half": int((fine.loc[common] == "synchronised").sum())})
    return pd.DataFrame(rows) if rows else None


def stability_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The perturbation runs with the eigenvalue and the scheme-predicted rate (see :class:`CircleReport`)."""
    cols = ["k", "n", "beta", "kind", "p", "predicted", "predicted_scheme", "rate", "diff", "top"]
    tab = frame[cols].copy()
    tab["stable"] = tab["top"] < 0
    return tab.sort_values(["k", "kind", "p", "n", "beta"]).reset_index(drop=True)


def spectrum_curves(ks, beta_range, n_points: int = 241) -> pd.DataFrame:
    """Eigenvalue curves of the k-cluster states (softmax time): intra, inter p = 1..k/2 and the top one."""
    from meanfield.circle_stability import cluster_spectrum

    betas = np.linspace(float(beta_range[0]), float(beta_range[1]), n_points)
    rows = []
    for k in ks:
        for b in betas:
            s = cluster_spectrum(int(k), float(b))
            rows.append({"k": int(k), "beta": float(b), "mode": "intra", "eigenvalue": s.intra})
            for p in range(1, int(k) // 2 + 1):
                rows.append({"k": int(k), "beta": float(b), "mode": f"inter p={p}", "eigenvalue": float(s.inter[p - 1])})
            rows.append({"k": int(k), "beta": float(b), "mode": "top", "eigenvalue": s.top})
    return pd.DataFrame(rows)


def thresholds_table(c: dict, threshold_frame: pd.DataFrame | None) -> pd.DataFrame:
    """Per k of ``eigen_ks``: the sign changes of the top eigenvalue in ``eigen_range`` (root finding),
    where the state is stable, and the threshold from perturbation runs where it was measured."""
    from meanfield.circle_stability import cluster_spectrum, stability_thresholds

    lo, hi = (float(b) for b in c["eigen_range"])
    runs = {} if threshold_frame is None else {int(r.k): r for r in threshold_frame.itertuples()}
    rows = []
    for k in c["eigen_ks"]:
        k = int(k)
        roots = stability_thresholds(k, lo, hi)
        grid = np.linspace(lo, hi, 1001)
        tops = np.array([cluster_spectrum(k, b).top for b in grid])
        stable = grid[tops < 0]
        if stable.size == 0:
            region = f"none in [{lo:g}, {hi:g}]"
        elif roots.size == 1 and stable.max() < roots[0]:
            region = f"beta < {roots[0]:.10g}"
        else:
            region = "see spectrum"
        r = runs.get(k)
        rows.append({
            "k": k, "eigen_thresholds": " ".join(f"{v:.12g}" for v in roots) or "none",
            "stable_for": region, "min_top_eigenvalue": float(tops.min()), "max_top_eigenvalue": float(tops.max()),
            "runs_threshold": float(r.beta_runs) if r is not None else math.nan,
            "runs_p": int(r.p) if r is not None else -1,
            "n_runs": int(r.n_runs) if r is not None else 0,
            "runs_minus_eigen": float(r.beta_runs - r.beta_eigen) if r is not None else math.nan,
        })
    tab = pd.DataFrame(rows)
    three = tab[tab["k"] == 3]
    if len(three):
        tab.attrs["three_cluster_eigen"] = float(three["eigen_thresholds"].iloc[0].split()[0]) \
            if three["eigen_thresholds"].iloc[0] != "none" else math.nan
        tab.attrs["three_cluster_runs"] = float(three["runs_threshold"].iloc[0])
    return tab


def threshold_verdict(value: float, target: float = BETA_NO_SYNC, tol: float = THRESHOLD_TOL) -> str:
    """Consistent if ``|value - target| <= tol``, inconsistent otherwise, inconclusive if not measured (NaN).

    Examples
    --------
    >>> threshold_verdict(-0.6667), threshold_verdict(-0.5), threshold_verdict(float("nan"))
    ('consistent', 'inconsistent', 'inconclusive')
    """
    if not math.isfinite(value):
        return INCONCLUSIVE
    return CONSISTENT if abs(value - target) <= tol else INCONSISTENT


def analyse(results: dict, config: dict, *, seconds: dict | None = None, preset: str | None = None) -> CircleReport:
    """Tables of the parts that ran (``results``: {part: StudyResult}) and the eigenvalue curves."""
    sync = dt_check = stab = None
    if "circle_sync" in results:
        c = config["circle_sync"]
        frame = results["circle_sync"].frame
        sync = sync_table(frame, float(c["dt"]))
        dt_check = dt_check_table(frame, float(c["dt"]), int(c["dt_check_N"]))
    if "circle_stability" in results:
        stab = stability_table(results["circle_stability"].frame)
    thr_frame = results["circle_threshold"].frame if "circle_threshold" in results else None
    thresholds = thresholds_table(config["circle_threshold"], thr_frame)
    ks = sorted(set(int(k) for k in config["circle_stability"]["ks"]) | {5})
    spectrum = spectrum_curves(ks, config["circle_threshold"]["beta_range"])
    return CircleReport(config=config, preset=preset, seconds=dict(seconds or {}), sync=sync, dt_check=dt_check,
                        stability=stab, thresholds=thresholds, spectrum=spectrum, results=dict(results))

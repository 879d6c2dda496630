"""Analysis and outputs of the cross-dimension part of the chaos study (d = 2, 3, 4, 5 on one table and one figure)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from meanfield.reporting import SlopeIntervals, export_table, fit_slope, rate_table, slope_summary, to_markdown, verdict

from ._dims import dims_theory_slopes
from ._presets import ERRORS

#: Power threshold of the verdicts (as in the rest of the chaos study): an interval wider than
#: ± half the predicted exponent is inconclusive.
DIMS_POWER = 0.5

_CITATION = ("Agazzi, Bruno, Mosig García, Saviozzi, Romito, \"Stochastic Scaling Limits and Synchronization by "
             "Noise in Deep Transformer Models\", arXiv 2604.26898")


@dataclass
class DimsReport:
    """Analysed cross-dimension part (:func:`~meanfield.studies.chaos.chaos_dims_replica`).

    Attributes
    ----------
    result : meanfield.runner.StudyResult
    frame : DataFrame
        One row per (d, replica, N): ``coupling, w2, observable, w2_iid`` and ``w2_ref{j}`` (the
        particles against the j-th coarser reference rule).
    tables : dict of int to DataFrame
        Three-way rate table per d (:func:`meanfield.reporting.rate_table`), the three errors and
        the control ``w2_iid`` (same prediction as ``w2``).
    rates : DataFrame
        One row per (d, error): ``n_points, slope`` with its studentized and delta-method
        95 % intervals, ``theory_slope, tolerance, verdict, reason``: the cross-dimension table.
    spde_check : DataFrame
        Per (d, error): the reference's own error, the smallest mean particle error, their ratio.
    reference : DataFrame
        Per d: the W_2 reference check (nodes, quantisation estimate, relative change of the mean
        W_2 and of its slope against the coarser rules).
    diagnostics : DataFrame
        Per d: nodes, variance of ρ_T, area defect, κ(1), mean wall times per replica.
    power : float
    """

    result: object
    frame: pd.DataFrame
    tables: dict
    rates: pd.DataFrame
    spde_check: pd.DataFrame
    reference: pd.DataFrame
    diagnostics: pd.DataFrame
    power: float = DIMS_POWER
    seconds: dict | None = None


def dims_frame(result) -> pd.DataFrame:
    """Long table of a cross-dimension result: one row per (d, replica, N)."""
    rows = []
    A = result.arrays
    for i, row in enumerate(result.frame.itertuples(index=False)):
        Ns = A["Ns"][i]
        rc = np.atleast_2d(A["w2_ref_coarse"][i])
        for k, N in enumerate(Ns):
            vals = {e: float(A[e][i][k]) for e in (*ERRORS, "w2_iid")}
            vals.update({f"w2_ref{j + 1}": float(rc[j][k]) for j in range(rc.shape[0])})
            rows.append({"d": int(row.d), "replica": int(row.replica), "N": int(N), **vals})
    return pd.DataFrame(rows)


def _reason(table: pd.DataFrame, err: str, power: float) -> str:
    fit = table.attrs["fits"][err]
    row = table[table["error"] == err].iloc[0]
    return verdict(SlopeIntervals(**fit["intervals"]), row["theory_slope"], tolerance=row["tolerance"],
                   power=power).reason


def analyse_dims(result, *, n_boot: int = 2000, seed: int = 0, power: float = DIMS_POWER) -> DimsReport:
    """Three-way rate tables per d, the cross-dimension table, the reference checks and diagnostics."""
    if result.failures:
        raise RuntimeError(f"{len(result.failures)} cross-dimension chaos task(s) failed, first: "
                           f"{result.failures[0].error}")
    long = dims_frame(result)
    fr = result.frame
    cfgs = result.study.fixed["configs"]
    tables, stacked, checks, refs, diags = {}, [], [], [], []
    for d, sub in long.groupby("d", sort=True):
        d = int(d)
        w2_rows = sub[np.isfinite(sub["w2"])]
        n_min = int(w2_rows["N"].min()) if len(w2_rows) else 2
        slopes, tol = dims_theory_slopes(d, n_min)
        slopes["w2_iid"], tol["w2_iid"] = slopes["w2"], tol["w2"]
        parts = []
        for err in (*ERRORS, "w2_iid"):
            data = sub if err in ("coupling", "observable") else sub[np.isfinite(sub[err])]
            if data["N"].nunique() < 2:
                continue
            parts.append(rate_table(data, "N", err, slopes[err], tolerance=tol[err], n_boot=n_boot, seed=seed,
                                    verdicts="three-way", power=power))
        table = pd.concat(parts, ignore_index=True)
        table.attrs = {**parts[0].attrs, "fits": {k: v for p in parts for k, v in p.attrs["fits"].items()}}
        tables[d] = table
        summ = slope_summary(table)
        summ["reason"] = [_reason(table, e, power) for e in summ["error"]]
        summ.insert(0, "d", d)
        stacked.append(summ)
        rows = fr[fr["d"] == d]
        means = sub.groupby("N")[[*ERRORS, "w2_iid"] + [c for c in sub.columns if c.startswith("w2_ref")]].mean()
        # the W_2 reference: change of the mean W_2 and of its slope against the coarser rules
        ref_cols = [c for c in sub.columns if c.startswith("w2_ref")]
        wm = means["w2"].dropna()
        ref = {"d": d, "ref_nodes": int(rows["ref_nodes"].max()), "coarse_rules": list(cfgs[str(d)]["ref_coarse"]),
               "ref_rms_mean": float(rows["ref_rms"].mean()), "w2_smallest_mean": float(wm.min()) if len(wm) else np.nan}
        if len(w2_rows) and w2_rows["N"].nunique() >= 2:
            base = fit_slope(w2_rows["N"].to_numpy(float), w2_rows["w2"].to_numpy(), n_boot=n_boot, seed=seed)
            ref["slope"] = base.slope
            for j, c in enumerate(ref_cols):
                cm = means[c].reindex(wm.index)
                ref[f"change_{j + 1}"] = float(np.max(np.abs(cm - wm)))
                ref[f"relative_change_{j + 1}"] = float(np.max(np.abs(cm - wm) / wm))
                fc = fit_slope(w2_rows["N"].to_numpy(float), w2_rows[c].to_numpy(), n_boot=n_boot, seed=seed)
                ref[f"slope_{j + 1}"] = fc.slope
            if len(ref_cols) >= 2:
                # contraction of the change under refinement; geometric extrapolation of what is left
                c1, c2 = ref["change_1"], float(np.max(np.abs(means[ref_cols[1]].reindex(wm.index)
                                                           - means[ref_cols[0]].reindex(wm.index))))
                ref["contraction"] = c2 / c1 if c1 > 0 else float("inf")
                ref["remaining_estimate"] = c1 / (ref["contraction"] - 1) if ref["contraction"] > 1 else float("nan")
        refs.append(ref)
        w2_err = ref.get("remaining_estimate", np.nan)
        if not np.isfinite(w2_err):
            w2_err = ref.get("change_1", np.nan)
        for err, val, what in (("coupling", float(rows["spde_coupling"].max()), "X̄ paths, M vs M/2 nodes"),
                               ("w2", float(w2_err), "W_2 change from the reference rule to a coarser one "
                                                     "(geometric extrapolation when two coarser rules contract)"),
                               ("observable", float(rows["spde_observable"].max()), "moments, reference rule vs M/2")):
            smallest = float(means[err].min()) if np.isfinite(means[err]).any() else np.nan
            checks.append({"d": d, "error": err, "reference_error": val, "measure": what,
                           "smallest_particle_error": smallest, "ratio": val / smallest,
                           "below": bool(val < smallest), "below_tenth": bool(val < 0.1 * smallest)})
        diags.append({"d": d, "replicas": int(len(rows)), "M": int(rows["M"].max()), "M_check": int(rows["M_check"].max()),
                      "ref_nodes": int(rows["ref_nodes"].max()), "variance_mean": float(rows["variance"].mean()),
                      "area_defect_max": float(rows["area_defect"].max()), "kappa1": float(rows["kappa1"].mean()),
                      **{c: float(rows[c].mean()) for c in ("spde_seconds", "reference_seconds", "particle_seconds",
                                                            "coupling_seconds", "w2_seconds")}})
    rates = pd.concat(stacked, ignore_index=True)
    return DimsReport(result, long, tables, rates, pd.DataFrame(checks), pd.DataFrame(refs), pd.DataFrame(diags),
                      power=power)


# ----------------------------------------------------------------------------------------
# figure
# ----------------------------------------------------------------------------------------


def plot_dims(report: DimsReport, path_stem=None, formats=("png", "pdf")):
    """Cross-dimension figure: mean W_2, coupling and observable errors against N for every d (log–log,
    95 % CI bars, fitted lines), and the fitted exponents against d with their intervals and the
    predicted ones (W_2: -1/2, the S^2 band, -1/(d-1)), so the dimension where W_2 leaves N^{-1/2} shows."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13.0, 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 4)
    colours = {2: "tab:blue", 3: "tab:orange", 4: "tab:green", 5: "tab:red"}
    titles = {"w2": "W_2(μ^N_T, ρ_T)", "coupling": "coupling sqrt(mean |X - X̄|²)", "observable": "moments, degree ≤ 2"}
    for ax, err in zip(axes[:3], ("w2", "coupling", "observable")):
        for d, table in sorted(report.tables.items()):
            t = table[table["error"] == err]
            if not len(t):
                continue
            c = colours.get(d, None)
            x, m = t["N"].to_numpy(float), t["mean"].to_numpy()
            lo = np.maximum(m - t["ci_low"].to_numpy(), 0)
            hi = t["ci_high"].to_numpy() - m
            ax.errorbar(x, m, yerr=[np.where(m - lo > 0, lo, 0.9 * m), hi], fmt="o", ms=3, color=c, capsize=2,
                        label=f"S^{d - 1}: slope {t['slope'].iloc[0]:.2f}")
            fit = table.attrs["fits"][err]
            xx = np.geomspace(x.min(), x.max(), 20)
            ax.plot(xx, np.exp(fit["intercept"]) * xx ** fit["slope"], "--", color=c, lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N")
        ax.set_title(titles[err], fontsize=9)
        ax.legend(fontsize=7)
    ax = axes[3]
    r = report.rates
    markers = {"w2": ("s", "W_2"), "coupling": ("o", "coupling"), "observable": ("^", "moments")}
    for k, (err, (mk, label)) in enumerate(markers.items()):
        sub = r[r["error"] == err]
        off = (k - 1) * 0.12
        ax.errorbar(sub["d"] + off, sub["slope"], yerr=[sub["slope"] - sub["slope_ci_low"],
                                                          sub["slope_ci_high"] - sub["slope"]],
                    fmt=mk, ms=4, capsize=2, label=f"{label} (fit, 95 % CI)")
    ds = np.array(sorted(report.tables))
    pred = [dims_theory_slopes(int(d), 64)[0]["w2"] if d != 3 else -0.5 for d in ds]
    ax.plot(ds, pred, "k:", lw=1, label="W_2 predicted: -1/2, -1/2 (log), -1/(d-1)")
    w3 = r[(r["error"] == "w2") & (r["d"] == 3)]
    if len(w3):
        t, tl = float(w3["theory_slope"].iloc[0]), float(w3["tolerance"].iloc[0])
        ax.vlines(3, t - tl, t + tl, colors="k", lw=3, alpha=0.4)
    ax.axhline(-0.5, color="grey", lw=0.8)
    ax.set_xticks(ds)
    ax.set_xticklabels([f"d={d}" for d in ds])
    ax.set_ylabel("exponent of N")
    ax.set_title("fitted exponents across the threshold d = 4", fontsize=9)
    ax.legend(fontsize=7)
    if path_stem is not None:
        stem = Path(path_stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        for fmt in formats:
            fig.savefig(stem.with_name(stem.name + "." + fmt), format=fmt)
    return fig


# ----------------------------------------------------------------------------------------
# text and files
# ----------------------------------------------------------------------------------------


def _md(df: pd.DataFrame) -> str:
    return to_markdown(df, floatfmt=".4g")


def dims_summary_markdown(report: DimsReport, *, extra=None) -> str:
    """Markdown summary of the cross-dimension part: settings, the one table, the reference checks, diagnostics."""
    study = report.result.study
    cfgs = study.fixed["configs"]
    lines = [f"# Propagation of chaos across dimensions (d = 2, 3, 4, 5), preset `{study.fixed['preset']}`", ""]
    lines.append(f"Generated by `meanfield chaos --parts dims` (do not edit by hand). {_CITATION}, Prop. 1.2 (rate "
                 "N^(-1/2) proved for d < 4).")
    lines.append("")
    c2 = cfgs[str(min(map(int, cfgs)))]
    lines.append(
        f"Replicas per dimension: {study.replicas}; root seed {study.root_seed}. Common noise: a {c2['activation']} "
        f"random-feature MLP field of width {c2['width']}, fresh each step (covariance exactly κ in every d), ρ_0 = "
        f"vMF(κ = {c2['kappa']:g}) about e_d, β = {c2['beta']:g}, T = {c2['T']:g}, h = {c2['dt']:g}. Reference: the "
        "characteristics solution of the SPDE (M quadrature nodes moved by the particles' step map; attention of the "
        "node cloud, spectral on S^1 and S^2, the direct sum in d ≥ 4), X̄_i = Φ_T(X_i(0)) through its stored maps, "
        "and ρ_T as a finer rule carried by the same maps. Errors at T: (a) coupling sqrt(mean_i |X_i - X̄_i|²) "
        "(chordal); (b) exact W_2 (geodesic) to the reference rule with cell masses; (c) the largest difference of "
        "the monomial moments of degree 1 and 2. Control `w2_iid`: W_2 of X̄(T) (N iid samples of ρ_T) to the same "
        "reference.")
    lines.append("")
    lines.append("Predicted exponents: coupling and moments -1/2 in every d; W_2 -1/2 on S^1, the local slopes of "
                 "sqrt(log N / N) on S^2 (band [-1/2, -1/2 + 1/(2 ln N_min)]), -1/(d-1) for d ≥ 4 (iid sampling). "
                 f"Verdicts (three-way, power {report.power:g}): inconclusive if a point is unresolved, if the "
                 f"studentized interval is wider than ±{report.power:g} × |prediction|, or if it and the delta-method "
                 "interval disagree; otherwise consistent if the prediction (band) meets the interval, else "
                 "inconsistent.")
    lines.append("")
    lines.append("## The cross-dimension table")
    lines.append("")
    r = report.rates.copy()
    r["band"] = [f"[{t - tl:.4g}, {t + tl:.4g}]" for t, tl in zip(r["theory_slope"], r["tolerance"])]
    lines.append(_md(r[["d", "error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "slope_delta_ci_low",
                        "slope_delta_ci_high", "band", "verdict"]]))
    lines.append("")
    lines.append(_reading(report))
    lines.append("")
    lines.append("Sizes per d: " + "; ".join(
        f"S^{int(d) - 1}: N = {c['Ns'][0]}..{c['Ns'][-1]}, W_2 for N ≤ {min(c['w2_max_N'], c['Ns'][-1])}, M = {c['M']}"
        for d, c in sorted(cfgs.items(), key=lambda kv: int(kv[0]))) + ".")
    lines.append("")
    lines.append("## Reference errors vs the smallest particle error")
    lines.append("")
    lines.append("`reference_error`: coupling — RMS distance of the X̄ paths of the largest N driven by the M-node and "
                 "the M/2-node solutions; W_2 — the change of the mean W_2 when the reference rule is replaced by the "
                 "next coarser rule, extrapolated geometrically when the changes to two coarser rules contract (an "
                 "estimate of the reference's effect on W_2 itself); moments — reference rule vs the M/2 solution. "
                 "Largest over replicas (W_2: over N).")
    lines.append("")
    lines.append(_md(report.spde_check))
    lines.append("")
    lines.append("W_2 reference per d: `ref_rms_mean` is the first-order RMS distance of a point of an image cell to "
                 "its centre, an estimate of W_2(ρ_T, reference cloud) itself. It is not the error of W_2(μ^N, ρ_T): "
                 "the W_2 of the empirical measure and that of the quantiser nearly add in squares, so the reference "
                 "moves W_2 by far less (`change_j`, `relative_change_j`: largest change of the mean W_2 over N against "
                 "the j-th coarser rule; `slope_j`: the W_2 slope against it).")
    lines.append("")
    lines.append(_md(report.reference))
    lines.append("")
    lines.append("## Diagnostics (means per replica; times in s)")
    lines.append("")
    lines.append(_md(report.diagnostics))
    lines.append("")
    for heading, text in (extra or {}).items():
        lines.append(f"## {heading}")
        lines.append("")
        lines.append(str(text).rstrip())
        lines.append("")
    return "\n".join(lines)


def _reading(report: DimsReport) -> str:
    """Plain statements generated from the table."""
    r = report.rates
    parts = []
    for err, label in (("w2", "W_2"), ("coupling", "coupling"), ("observable", "moments"), ("w2_iid", "iid control")):
        sub = r[r["error"] == err]
        parts.append(f"{label}: " + "; ".join(
            f"S^{row.d - 1} {row.slope:.3f} [{row.slope_ci_low:.3f}, {row.slope_ci_high:.3f}] vs "
            f"{row.theory_slope:.3g} ({row.verdict})" for row in sub.itertuples(index=False)) + ".")
    main = r[r["error"] != "w2_iid"]
    counts = main["verdict"].value_counts().to_dict()
    parts.append("Verdicts (control not counted): " + ", ".join(
        f"{counts.get(v, 0)} {v}" for v in ("consistent", "inconsistent", "inconclusive")) + ".")
    w2 = r[r["error"] == "w2"].set_index("d")
    dep = [int(d) for d in w2.index if w2.loc[d, "slope_ci_high"] < -0.5 + 1e-12 or w2.loc[d, "slope_ci_low"] > -0.5]
    if dep:
        parts.append("The W_2 interval excludes -1/2 for d = " + ", ".join(map(str, dep)) + ".")
    bad = main[main["verdict"] == "inconsistent"]
    if len(bad):
        parts.append("Inconsistent: " + "; ".join(f"S^{row.d - 1} {row.error}" for row in bad.itertuples(index=False))
                     + ". Reported as measured.")
    chk = report.spde_check
    if len(chk) and not chk["below"].all():
        parts.append("Reference error NOT below the smallest particle error for: " + "; ".join(
            f"S^{row.d - 1} {row.error}" for row in chk[~chk["below"]].itertuples(index=False)) + ".")
    elif len(chk):
        parts.append(f"Every reference error is below the smallest particle error of its kind (largest ratio "
                     f"{chk['ratio'].max():.2g}).")
    return " ".join(parts)


def dims_console(report: DimsReport) -> str:
    """What the ``chaos`` command prints for the cross-dimension part."""
    lines = ["Across dimensions: fitted exponents (95 % studentized bootstrap CI, three-way verdicts)",
             report.rates[["d", "error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "theory_slope",
                           "tolerance", "verdict"]].to_string(index=False), "",
             "Reference errors vs smallest particle error",
             report.spde_check[["d", "error", "reference_error", "smallest_particle_error", "ratio", "below"]]
             .to_string(index=False)]
    return "\n".join(lines)


def write_dims_outputs(report: DimsReport, out, *, extra=None, summary: bool = True) -> dict:
    """Files: ``dims_table.{csv,md,tex}`` (the cross-dimension table), ``dims_rates_d{d}.{csv,md,tex}`` (rate table
    per d), ``dims_figure.{png,pdf}``, ``dims_spde_check.{csv,md}``, ``dims_reference.csv``, ``dims_diagnostics.csv``
    and, with ``summary``, ``dims_summary.md``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    cols = ["d", "error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "slope_delta_ci_low",
            "slope_delta_ci_high", "r2", "theory_slope", "tolerance", "verdict", "reason"]
    for fmt, path in export_table(report.rates[cols], out / "dims_table").items():
        files[f"dims_table.{fmt}"] = path
    for d, table in sorted(report.tables.items()):
        for fmt, path in export_table(table, out / f"dims_rates_d{d}").items():
            files[f"dims_rates_d{d}.{fmt}"] = path
    fig = plot_dims(report, out / "dims_figure")
    del fig
    for fmt in ("png", "pdf"):
        files[f"dims_figure.{fmt}"] = out / f"dims_figure.{fmt}"
    report.spde_check.to_csv(out / "dims_spde_check.csv", index=False)
    (out / "dims_spde_check.md").write_text(_md(report.spde_check) + "\n", encoding="utf-8")
    files["dims_spde_check.csv"], files["dims_spde_check.md"] = out / "dims_spde_check.csv", out / "dims_spde_check.md"
    report.reference.to_csv(out / "dims_reference.csv", index=False)
    report.diagnostics.to_csv(out / "dims_diagnostics.csv", index=False)
    files["dims_reference.csv"], files["dims_diagnostics.csv"] = out / "dims_reference.csv", out / "dims_diagnostics.csv"
    if summary:
        (out / "dims_summary.md").write_text(dims_summary_markdown(report, extra=extra), encoding="utf-8")
        files["dims_summary.md"] = out / "dims_summary.md"
    return files


__all__ = ["DimsReport", "DIMS_POWER", "dims_frame", "analyse_dims", "plot_dims", "dims_summary_markdown",
           "dims_console", "write_dims_outputs"]

"""Outputs of the propagation-of-chaos study: Markdown summary, tables, figures, console text."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from .._common import write_summary_and_config
from ._analysis import ChaosReport


def _md(df: pd.DataFrame, floatfmt: str = ".4g") -> str:
    from meanfield.rates import to_markdown

    return to_markdown(df, floatfmt=floatfmt)


def summary_markdown(report: ChaosReport, *, extra: Mapping | None = None) -> str:
    """Markdown summary: fitted exponents with CIs and verdicts, the SPDE-error check, diagnostics.

    Parameters
    ----------
    report : ChaosReport
    extra : dict, optional
        ``{heading: markdown text}`` sections appended (run time, machine, speed-up...).

    Returns
    -------
    str

    Examples
    --------
    >>> text = summary_markdown(report)  # doctest: +SKIP
    """
    study = report.result.study
    lines = [f"# Propagation of chaos (SPEC §9), preset `{study.fixed['preset']}`", ""]
    lines.append(f"Replicas per sphere: {study.replicas}; root seed {study.root_seed}. Errors at time T: "
                 "(a) synchronous coupling sqrt(mean_i |X_i - X̄_i|²) (chordal), (b) geodesic W_2 to ρ_T as "
                 "weighted quadrature nodes, (c) max over the real harmonics of degree ≤ 2 of "
                 "|<μ^N - ρ_T, Y_lm>|. Slope CIs: 95 % within-N bootstrap of the fit of log mean error on log N.")
    lines.append("")
    for sphere in report.spheres:
        cfg = study.fixed["configs"][str(sphere)]
        lines.append(f"## S^{sphere}")
        lines.append("")
        lines.append(f"vMF ρ_0 (κ = {cfg['kappa']:g}), {cfg['activation']} noise of degree l_σ = {cfg['noise_lmax']}, "
                     f"β = {cfg['beta']:g}, T = {cfg['T']:g}, h = {cfg['dt']:g}, SPDE push-forward scheme at degree "
                     f"{cfg['lmax']} (check at {cfg['check_lmax']}), N = {cfg['Ns'][0]}..{cfg['Ns'][-1]}, "
                     f"W_2 for N ≤ {min(cfg['w2_max_N'], cfg['Ns'][-1])} against "
                     + (f"{cfg['density_nodes']} equispaced nodes (exact circle solver)." if sphere == 1 else
                        f"the {cfg['density_nodes']} × {2 * cfg['density_nodes']} Gauss–Legendre product grid "
                        "(exact network simplex)."))
        lines.append("")
        summ = report.summaries[sphere].copy()
        summ["band"] = [f"[{t - tol:.4g}, {t + tol:.4g}]" for t, tol in zip(summ["theory_slope"], summ["tolerance"])]
        lines.append(_md(summ[["error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "r2", "band",
                               "verdict"]]))
        lines.append("")
        bad = summ[summ["verdict"] != "consistent"]
        for row in bad.itertuples(index=False):
            lines.append(f"- **{row.error}: not consistent** — fitted slope {row.slope:.3f} "
                         f"[{row.slope_ci_low:.3f}, {row.slope_ci_high:.3f}] misses the accepted band {row.band}.")
        if len(bad):
            lines.append("")
    lines.append("## SPDE discretisation error vs the smallest particle error")
    lines.append("")
    lines.append("SPDE error: the same replica (path, step, initial density) at the check degree; coupling: RMS "
                 "distance of the X̄ paths driven by the two solutions; W_2: exact between the two solutions on "
                 "S^1, on S^2 the upper bound min(π sqrt(TV), sqrt(π W_1)), W_1 ≤ sqrt(4π) ‖ρ - ρ'‖_{H^-1}; observables: "
                 "largest difference of the degree ≤ 2 moments. Largest over replicas.")
    lines.append("")
    lines.append(_md(report.spde_check))
    lines.append("")
    lines.append("## Diagnostics (per sphere; negative mass of ρ_T at the W_2 nodes is clipped and reported here)")
    lines.append("")
    lines.append(_md(report.diagnostics))
    lines.append("")
    if report.control is not None:
        lines.append("## Control: W_2 of iid sampling on S^1")
        lines.append("")
        lines.append(_control_text(report))
        lines.append("")
    for heading, text in (extra or {}).items():
        lines.append(f"## {heading}")
        lines.append("")
        lines.append(str(text).rstrip())
        lines.append("")
    return "\n".join(lines)


def write_outputs(report: ChaosReport, out, *, extra: Mapping | None = None, settings: Mapping | None = None) -> dict:
    """Write the tables, figures, SPDE check and summary of a chaos study into ``out``.

    Files: ``table_s{1,2}.{csv,md,tex}`` (rate tables), ``figure_s{1,2}.{png,pdf}``
    (log–log, mean with CI, fitted and theory lines), ``spde_check.{csv,md}``,
    ``diagnostics.csv``, ``summary.md`` and ``config.json`` (the resolved settings).

    Parameters
    ----------
    report : ChaosReport
    out : str or Path
        Output directory (created).
    extra : dict, optional
        Extra summary sections, see :func:`summary_markdown`.
    settings : dict, optional
        Extra entries of ``config.json`` (e.g. the command line).

    Returns
    -------
    dict
        ``{name: Path}`` of every file written.

    Examples
    --------
    >>> files = write_outputs(report, "chaos-out")  # doctest: +SKIP
    """
    from meanfield.rates import export_table, plot_rates

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for sphere in report.spheres:
        table = report.tables[sphere]
        for fmt, path in export_table(table, out / f"table_s{sphere}").items():
            files[f"table_s{sphere}.{fmt}"] = path
        fig = plot_rates(table, "N", path_stem=out / f"figure_s{sphere}", formats=("png", "pdf"),
                         title=f"Propagation of chaos on S^{sphere}")
        del fig
        for fmt in ("png", "pdf"):
            files[f"figure_s{sphere}.{fmt}"] = out / f"figure_s{sphere}.{fmt}"
    for fmt, path in export_table(report.spde_check, out / "spde_check", formats=("csv", "md")).items():
        files[f"spde_check.{fmt}"] = path
    report.diagnostics.to_csv(out / "diagnostics.csv", index=False)
    files["diagnostics.csv"] = out / "diagnostics.csv"
    written = write_summary_and_config(out, summary_markdown(report, extra=extra), resolved_config(report), settings)
    files["summary.md"], files["config.json"] = written["summary"][0], written["config"][0]
    return files


def resolved_config(report: ChaosReport) -> dict:
    """The settings that produced ``report``: study name, preset, spheres, replicas, root seed, per-sphere settings."""
    study = report.result.study
    return {"study": "chaos", "preset": study.fixed["preset"], "spheres": list(report.spheres),
            "replicas": study.replicas, "root_seed": study.root_seed, "configs": study.fixed["configs"]}


def _control_text(report: ChaosReport) -> str:
    from meanfield.spde import VonMisesFisher
    from meanfield.transport import circle_quadrature

    study = report.result.study
    cfg1 = study.fixed["configs"]["1"]
    fit = report.control["fit"]
    means = report.control["frame"].groupby("N")["w2"].mean()
    rho0_min = float(VonMisesFisher([0.0, 1.0], cfg1["kappa"]).density(circle_quadrature(cfg1["density_nodes"])[0]).min())
    text = (f"W_2 of N iid samples of ρ_0 (vMF κ = {cfg1['kappa']:g}, no dynamics) against ρ_0 on S^1, same N "
            f"({cfg1['Ns'][0]}..{cfg1['Ns'][-1]}), {study.replicas} replicas, {cfg1['density_nodes']} nodes: "
            f"fitted slope {fit.slope:.3f} [{fit.ci_low:.3f}, {fit.ci_high:.3f}] (95 % bootstrap CI); mean W_2 "
            + ", ".join(f"{v:.3g}" for v in means.values) + f" (min ρ_0 = {rho0_min:.3g}). ")
    s1 = report.summaries[1].set_index("error").loc["w2"]
    overlap = s1["slope_ci_low"] <= fit.ci_high and fit.ci_low <= s1["slope_ci_high"]
    text += (f"Study W_2 slope on S^1: {s1['slope']:.3f} [{s1['slope_ci_low']:.3f}, {s1['slope_ci_high']:.3f}], "
             f"verdict against -1/2: {s1['verdict']}; its CI "
             + ("overlaps" if overlap else "does NOT overlap") + " the control's CI. "
             "Pure iid sampling of a density with a low-density region decays pre-asymptotically slower than "
             "N^(-1/2) on the circle (the constant of the N^(-1/2) law involves ∫ F(1-F)/ρ, large where ρ is "
             "small), and ρ_T reaches lower densities than ρ_0 (rho_min in the diagnostics above)"
             + (", so the overlap is consistent with a shallow study slope coming from sampling at these N "
                "rather than from a failure of propagation of chaos (consistent with, not a proof of)." if overlap else
                "; with no overlap the difference is NOT explained by sampling alone."))
    return text


def console_summary(report: ChaosReport) -> str:
    """The text the ``chaos`` command prints: fitted exponents per sphere and the SPDE-error check."""
    lines = []
    for sphere in report.spheres:
        summ = report.summaries[sphere]
        lines.append(f"S^{sphere}: fitted exponents (95 % bootstrap CI)")
        lines.append(summ[["error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "theory_slope", "tolerance",
                           "verdict"]].to_string(index=False))
        lines.append("")
    lines.append("SPDE discretisation error vs smallest particle error")
    lines.append(report.spde_check[["sphere", "error", "spde_error", "smallest_particle_error", "below"]]
                 .to_string(index=False))
    return "\n".join(lines)

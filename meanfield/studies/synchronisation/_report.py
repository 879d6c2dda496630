"""Outputs of the synchronisation study: tables, figures, the Markdown summary and the console text."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .._common import write_summary_and_config
from ._analysis import RATE_POWER, SPDE_RESOLUTION, SyncStudyResult


def _fig_energy(res: SyncStudyResult, paths: list) -> None:
    from matplotlib.figure import Figure

    er = res.energy_result
    fig = Figure(figsize=(12, 4))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    for (beta, att), sub in er.frame.groupby(["beta", "attention"], sort=False):
        idx = sub.index.to_numpy()
        t = er.arrays["t"][idx[0]]
        e = np.stack([er.arrays["energy"][i] for i in idx])
        v = np.stack([er.arrays["variance"][i] for i in idx])
        lab = f"β = {beta:g}" if att else "noise only"
        mean = e.mean(axis=0)
        ax1.semilogy(t, mean / mean[0], label=lab)
        ax2.semilogy(t, v.mean(axis=0), label=lab)
    ax1.set_xlabel("t"), ax1.set_ylabel("E[E_β(μ_t)] / E[E_β(μ_0)]")
    ax1.set_title("gap energy (mean over replicas)")
    ax2.set_xlabel("t"), ax2.set_ylabel("E[1 - |∫x dμ_t|²]")
    ax2.set_title("variance")
    for a in (ax1, ax2):
        a.set_ylim(bottom=1e-12)
        a.legend(fontsize=8)
    r = res.rates
    x = np.arange(len(r))
    labels = [f"β={b:g}" if a else "noise" for b, a in zip(r["beta"], r["attention"])]
    ax3.errorbar(x - 0.1, r["rate_mean"], yerr=[r["rate_mean"] - r["ci_low"], r["ci_high"] - r["rate_mean"]],
                 fmt="o", capsize=3, label="rate of E[E_β] (95 % CI)")
    ax3.errorbar(x + 0.1, r["as_rate"], yerr=1.96 * r["as_se"], fmt="s", capsize=3, label="a.s. rate, one cluster")
    ax3.plot(x + 0.1, r["as_theory"], "k_", ms=14, label="a.s. theory 2(1-λ1) / -2λ1")
    ax3.set_xticks(x, labels)
    ax3.set_ylabel("decay rate")
    ax3.set_title("decay rates vs β")
    ax3.legend(fontsize=7)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)


def _fig_lyapunov(tab: pd.DataFrame, paths: list) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    for a, sub in tab.groupby("activation", sort=False):
        line = ax.plot(sub["d"], sub["lambda_closed"], "-", lw=1)[0]
        ax.errorbar(sub["d"], sub["lambda_sim"], yerr=2 * sub["se"], fmt="o", color=line.get_color(), capsize=3,
                    label=a)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("d"), ax.set_ylabel("λ_1")
    ax.set_title("top Lyapunov exponent: closed form (lines) vs simulation (±2 SE)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)


def write_outputs(res: SyncStudyResult, out_dir, *, extra: Mapping | None = None,
                  settings: Mapping | None = None) -> dict:
    """Write the tables and figures of the parts that ran, ``summary.md`` and ``config.json``.

    Files: ``lyapunov.{csv,md,tex,png,pdf}``, ``energy_rates.{csv,md,tex}``, ``energy.{png,pdf}``,
    ``spde_energy.{csv,md,tex,png,pdf}`` (the SPDE-vs-particles rate table :func:`spde_rates` and its
    figure), ``spde_energy_curves.csv`` (the curves per replica, :func:`spde_table`),
    ``phase.{csv,md,tex,png,pdf}`` (:func:`phase_table`: critical dimension and λ_1 on both sides per
    activation; figure λ_1 vs d), ``summary.md`` (:func:`summary_markdown` with the
    ``extra`` sections) and ``config.json`` (the resolved settings, with the entries of ``settings``).

    Returns
    -------
    dict
        ``{name: [paths]}``.
    """
    from meanfield.rates import export_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    if res.lyapunov is not None:
        files["lyapunov"] = list(export_table(res.lyapunov, out / "lyapunov").values())
        figs = [out / "lyapunov.png", out / "lyapunov.pdf"]
        _fig_lyapunov(res.lyapunov, figs)
        files["lyapunov_fig"] = figs
    if res.rates is not None:
        files["energy_rates"] = list(export_table(res.rates, out / "energy_rates").values())
        figs = [out / "energy.png", out / "energy.pdf"]
        _fig_energy(res, figs)
        files["energy_fig"] = figs
    if res.spde is not None:
        table = res.spde_rates if res.spde_rates is not None else res.spde
        files["spde_energy"] = list(export_table(table, out / "spde_energy").values())
        res.spde.to_csv(out / "spde_energy_curves.csv", index=False)
        files["spde_energy_curves"] = [out / "spde_energy_curves.csv"]
        figs = [out / "spde_energy.png", out / "spde_energy.pdf"]
        _fig_spde(res, figs)
        files["spde_fig"] = figs
    if res.phase is not None:
        from ._phase import fig_phase

        files["phase"] = list(export_table(res.phase, out / "phase").values())
        figs = [out / "phase.png", out / "phase.pdf"]
        fig_phase(res.phase, res.lyapunov, figs)
        files["phase_fig"] = figs
    files.update(write_summary_and_config(out, summary_markdown(res, extra=extra), resolved_config(res), settings))
    return files


def resolved_config(res: SyncStudyResult) -> dict:
    """The settings that produced ``res``: study name, preset, root seed, parts run and their settings."""
    runs = {"lyapunov": res.lyapunov_result, "energy": res.energy_result, "spde": res.spde_result,
            "phase": res.phase_result}
    seed = next((r.study.root_seed for r in runs.values() if r is not None), None)
    return {"study": "sync", "preset": res.preset, "root_seed": seed,
            "parts": [p for p, r in runs.items() if r is not None], "config": res.config}


def console_summary(res: SyncStudyResult) -> str:
    """The text the ``sync`` command prints: the tables of the parts that ran and the run times."""
    lines = []
    if res.lyapunov is not None:
        lines += ["", "## top Lyapunov exponent (closed form vs simulation)", "", res.lyapunov.to_string(index=False)]
    if res.rates is not None:
        lines += ["", f"## decay of the gap energy (closed-form λ_1 of the noise: {res.lambda1:.4f})", "",
                  res.rates.to_string(index=False)]
    if res.spde_rates is not None:
        lines += ["", "## Theorem 1.4 on the SPDE: decay rate of E[E_β] along the SPDE (characteristics) and "
                  "particles on the same paths", "",
                  res.spde_rates[["setting", "rate_spde", "ci_low_spde", "ci_high_spde", "rate_particles",
                                  "ci_low_particles", "ci_high_particles", "diff", "diff_ci_low", "diff_ci_high",
                                  "t_end", "dE_2M_window", "verdict_spde", "verdict_particles", "verdict_agree"]]
                  .to_string(index=False)]
    if res.phase is not None:
        lines += ["", "## phase diagram: critical dimension and λ_1 on both sides", "",
                  res.phase[["activation", "kappa_ratio", "d_c", "d_below", "closed_below", "sim_below", "se_below",
                             "sign_below", "d_above", "closed_above", "sim_above", "se_above", "sign_above",
                             "verdict"]].to_string(index=False)]
    lines += ["", "run time: " + ", ".join(f"{k} {v:.1f} s" for k, v in res.seconds.items())]
    return "\n".join(lines)

def _lyapunov_method(lc: dict) -> str:
    """One paragraph on how the Lyapunov cells were estimated."""
    if lc.get("estimator", "pairs") == "tangent":
        return (f"Simulation: `tangent_lyapunov`, the linearised projected Euler flow (x, v) of one token, "
                "driven by exact Gaussian increments of the field at x (covariance h κ(1) I) and of its "
                "derivative along v (covariance h κ'(1) I, uncorrelated with the former) — no field and no "
                f"random features, so every d is treated alike. {lc['n_replicas']} replicas × "
                f"{lc['n_tokens']} tokens × {lc['n_steps']} steps at each of {lc.get('levels', 3)} step sizes "
                "h, h/2, h/4 (h = 1 / (8 (d+1) max(κ(1), κ'(1))), the coarsest one in the `dt` column), "
                "Richardson-extrapolated in h; SE over replicas.")
    return ("Simulation: `lyapunov_estimate`, two tokens at distance 1e-6 renormalised every time unit, "
            f"t = {lc['t_total']}, {lc['n_replicas']} noise replicas × {lc['n_pairs']} pairs, dt = {lc['dt']:.4g} "
            "for d <= 3 and dt / 2^ceil(log2((d-1)/2)) for d > 3 (the dt of each cell is in the table). d <= 3: "
            f"NoisePath of degree {lc['lmax']} with Richardson extrapolation in dt (closed form of the truncated "
            f"kernel); d >= 4: finite-width random-feature noise (m = {lc['width']}, exact covariance κ, fresh "
            "weights every step; not refinable, so no Richardson and an O(dt) bias remains).")


def summary_markdown(res: SyncStudyResult, *, extra: Mapping | None = None) -> str:
    """Markdown summary of a synchronisation study: the tables of the parts that ran, with verdicts and remarks.

    ``extra`` ({heading: text}) sections are appended (run time, machine...).
    """
    from meanfield.rates import to_markdown

    lc, ec = res.config["lyapunov"], res.config["energy"]
    ly, r = res.lyapunov, res.rates
    lines = [
        f"# Synchronisation by noise and attention — `{res.preset}` preset" if res.preset
        else "# Synchronisation by noise and attention",
        "",
        "Generated by `meanfield sync` (do not edit by hand). Agazzi, Bruno, Mosig García, Saviozzi, Romito, "
        "\"Stochastic Scaling Limits and Synchronization by Noise in Deep Transformer Models\", arXiv 2604.26898, "
        "Thm 1.4, Prop. 1.5. Run time: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in res.seconds.items()) + ".",
    ]
    if ly is not None:
        n_agree = int(ly["agree_3se"].sum())
        verdict_match = ly[ly["sync_sim"] != "unresolved"]
        n_match = int((verdict_match["sync_sim"] == verdict_match["sync_closed"]).sum())
        lines += [
            "",
            "## 1. Top Lyapunov exponent: closed form vs simulation",
            "",
            "λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)] (Agazzi et al., arXiv 2604.26898); noise synchronises iff "
            "λ_1 < 0, i.e. for d > 3 iff κ'(1)/κ(1) < (d-1)/(d-3). " + _lyapunov_method(lc)
            + " Simulated verdict: yes if mean + 2 SE < 0, no if mean - 2 SE > 0.",
            "",
            to_markdown(ly),
            "",
            f"{n_agree} of {len(ly)} cells agree with the closed form within 3 SE; the simulated verdict matches "
            f"the closed-form one in {n_match} of {len(verdict_match)} resolved cells "
            f"({len(ly) - len(verdict_match)} unresolved: |λ_1| < 2 SE). Whole table: Σ z² = "
            f"{ly.attrs.get('chi2', float('nan')):.1f} on {ly.attrs.get('dof', len(ly))} cells, χ² p-value "
            f"{ly.attrs.get('p_value', float('nan')):.3g}, largest |z| = {ly.attrs.get('max_abs_z', float('nan')):.2f}.",
        ]
        bad = ly[~ly["agree_3se"]]
        if len(bad):
            lines.append("Cells outside 3 SE: " + "; ".join(
                f"{a} d={d} (z = {z:.2f})" for a, d, z in zip(bad["activation"], bad["d"], bad["z"]))
                + ". These are not explained by a measurement here; rerun the cell with more replicas and "
                  "another seed before reading anything into it.")
    if r is not None:
        lines += [
            "",
            "## 2. Decay of the gap energy E_β(μ_t) and of the variance 1 - |∫x dμ_t|²",
            "",
            f"d = {ec['d']}, N = {ec['N']} iid uniform tokens, ReLU noise path (l_σ = {ec['lmax']}), T = {ec['T']}, "
            f"dt = {ec['dt']:.4g}, {ec['replicas']} replicas; replica r uses the same path and cloud for every β. "
            f"Closed-form λ_1 of this noise: {res.lambda1:.4f}. `rate_mean`: decay rate of E[E_β(μ_t)] "
            f"(least squares of log of the replica mean on t >= {ec['t_fit']}, above 1e-11 of the initial value), "
            "95 % bootstrap CI over replicas. `as_rate`: per replica the slope of log E_β over the times at which "
            "the cloud is one cluster (single linkage at 0.1 rad), mean ± SE over the `n_as` replicas that got "
            "there; `as_theory` = 2(1 - λ_1) with attention (attention contracts a tight cluster at rate 1 for every "
            "β, the noise at rate -λ_1; E ∝ spread²), -2 λ_1 for the noise only. `rate_var`: same fit as "
            "`rate_mean` on the variance. `decreased`: fraction of replicas with E_β(μ_T) < E_β(μ_0); "
            "`sync_fraction`: fraction with one cluster at T.",
            "",
            to_markdown(r),
            "",
        ]
        for _, row in r.iterrows():
            name = f"β = {row['beta']:g}" if row["attention"] else "noise only (no attention)"
            ok_as = abs(row["as_rate"] - row["as_theory"]) <= 2 * row["as_se"] if row["n_as"] > 1 else False
            lines.append(
                f"- {name}: E[E_β] decays at rate {row['rate_mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] "
                f"(CI {'excludes' if row['ci_excludes_0'] else 'does NOT exclude'} 0); a.s. rate in one cluster "
                f"{row['as_rate']:.3f} ± {row['as_se']:.3f} (n = {row['n_as']}) vs theory {row['as_theory']:.3f} "
                f"({'within' if ok_as else 'NOT within'} 2 SE); {row['sync_fraction']:.0%} of replicas in one cluster at T."
            )
        att = r[r["attention"]]
        noise = r[~r["attention"]]
        if len(att) and len(noise):
            lines += [
                "",
                "Noise vs attention: without attention the mean energy decays at "
                f"{noise['rate_mean'].iloc[0]:.3f} per unit time, with attention at "
                + ", ".join(f"{b:g}: {v:.3f}" for b, v in zip(att["beta"], att["rate_mean"]))
                + " (β: rate). "
                + ("The fitted rate of the mean energy is above the noise-only rate at every β"
                   + (", with disjoint 95 % intervals. " if (att["ci_low"] > noise["ci_high"].iloc[0]).all() else
                      ", but not every pair of 95 % intervals is disjoint. ")
                   if (att["rate_mean"] > noise["rate_mean"].iloc[0]).all() else
                   "At some β the fitted rate of the mean energy is not above the noise-only rate. ")
                + "The a.s. rates inside one cluster are compared above with the theory 2(1 - λ_1), which does not "
                  "depend on β.",
            ]
    if res.spde_rates is not None:
        lines += _spde_section(res)
    if r is not None:
        lines += [
            "",
            "Remarks: the mean E[E_β] is dominated at late times by the replicas that are still split into "
            "several clusters, so its rate is smaller than the a.s. rate and its CI is wide for few replicas. "
            "The a.s. rate is estimated from replicas that reached one cluster before T; those that synchronise "
            "early are those with fast contraction, which can bias it upwards when `n_as` is a small fraction "
            "of the replicas. The replica-mean curve is not a single exponential (see `energy.png`): it is a "
            "mixture of replicas that collapse to one cluster at different times, so `rate_mean` is an effective "
            "rate over the fit window, and its percentile-bootstrap CI can be asymmetric about the point estimate "
            "(resamples that drop the slowest replica decay faster).",
        ]
    if res.phase is not None:
        lines += _phase_section(res)
    for heading, text in (extra or {}).items():
        lines += ["", f"## {heading}", "", str(text).rstrip()]
    return "\n".join(lines) + "\n"



def _spde_section(res: SyncStudyResult) -> list:
    """Section 3 of the summary: Theorem 1.4 on the SPDE solution, rates SPDE vs particles."""
    from meanfield.rates import to_markdown

    c = res.config["spde"]
    sr = res.spde_rates
    sp = res.spde
    m = sp.groupby("setting", sort=False)
    size = f"M = 2·{c['n_lat']}² = {2 * c['n_lat'] ** 2} nodes"
    lines = [
        "",
        "## 3. Theorem 1.4 on the SPDE: decay of E[E_β(μ_t)] along the SPDE solution and along particles",
        "",
        f"SPDE: characteristics scheme (ρ_t carried as the push-forward of ρ_0 on a weighted quadrature cloud "
        f"moved by the particles' step map), {size}, splitting {'on' if c.get('split') else 'off'}; "
        f"ρ_0 = von Mises–Fisher(κ = {c['kappa0']}) on S^{c['d'] - 1}, {c['activation']} noise path of degree "
        f"l_σ = {c['noise_lmax']}, dt = {c['dt']:.4g}, T = {c['T']:g}, {c['replicas']} noise replicas; replica r "
        f"uses the same path for every setting. Particles: N = {c['N']} tokens drawn from ρ_0, same path and step. "
        "`noise only`: attention off, E_0 = ½(1 - |∫x dμ|²). Rates: least squares of log of the replica mean "
        f"on the window t_fit = {c['t_fit']:g} ≤ t ≤ `t_end` (times whose mean is above 1e-11 of its initial "
        "value), 95 % bootstrap CI over replicas, the same window for SPDE and particles; `diff` = rate_spde - "
        "rate_particles with a paired replica bootstrap CI. "
        + ("`t_end`: the last saved time up to which the replica-mean SPDE energy changes by at most "
           f"{SPDE_RESOLUTION:g} (relative) when the node count is doubled (the solver runs to T = {c['T']:g} "
           "either way; later the mean is carried by the last unsynchronised mass, which a fixed node cloud of "
           f"this size no longer samples). `rate_spde_2M`: the same fit on the solution with about 2M = "
           f"{2 * 2 * c['n_lat'] ** 2} nodes; `dE_2M_window`, `dE_2M_T`: the largest relative M-doubling change "
           "of the replica-mean energy inside the window and at T. " if c.get("check") else f"`t_end` = T = {c['T']:g}. ")
        + "Verdicts (three-way): `verdict_spde` / `verdict_particles` — consistent with exponential decay if the "
        f"rate CI lies above 0 with half-width ≤ {RATE_POWER:g} × rate; inconclusive if the CI reaches 0 (plateau), "
        "is wider, or fewer than 3 resolved window times are above the floor; inconsistent if the CI lies below 0. `verdict_agree` (yardstick: the replica spread): "
        "consistent if each rate lies inside the other's CI, inconsistent if the two CIs do not overlap, "
        "inconclusive otherwise (or if a CI is wider than ± "
        f"{RATE_POWER:g} × its rate). The paired CI of `diff` is much narrower than either CI (both curves "
        "share the noise paths) and resolves small systematic SPDE-particle differences; it is reported, "
        "not used for the verdict.",
        "",
        to_markdown(sr),
        "",
    ]
    for row in sr.itertuples(index=False):
        lines.append(
            f"- {row.setting}: SPDE rate {row.rate_spde:.3f} [{row.ci_low_spde:.3f}, {row.ci_high_spde:.3f}] "
            f"({row.verdict_spde}), particles {row.rate_particles:.3f} [{row.ci_low_particles:.3f}, "
            f"{row.ci_high_particles:.3f}] ({row.verdict_particles}); difference {row.diff:.3f} "
            f"[{row.diff_ci_low:.3f}, {row.diff_ci_high:.3f}] ({row.verdict_agree})"
            + f"; window [{row.t_fit:g}, {row.t_end:g}]"
            + (f"; M-doubling: rate {row.rate_spde_2M:.3f}, change of the mean energy ≤ {row.dE_2M_window:.2g} in "
               f"the window, {row.dE_2M_T:.2g} at T" if np.isfinite(row.dE_2M_window) else "") + ".")
    last = m.apply(lambda g: g[g["t"] == g["t"].max()]["rel_diff_energy"].median())
    lines += ["", "Median over replicas of |E_spde - E_particles| / E_spde at T: "
              + ", ".join(f"{k}: {v:.2g}" for k, v in last.items())
              + f" (the particle sampling scale of the initial energy is about N^(-1/2) = {c['N'] ** -0.5:.3g}; "
              "late in the run the energy measures the spread of the last unsynchronised mass, which the "
              "N-particle cloud samples with few tokens). Curves per replica: `spde_energy_curves.csv`."]
    return lines


def _fig_spde(res: SyncStudyResult, paths: list) -> None:
    from matplotlib.figure import Figure

    tab = res.spde
    fig = Figure(figsize=(11, 3.8))
    ax1, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.6, 1]})
    for k, (setting, sub) in enumerate(tab.groupby("setting", sort=False)):
        mean = sub.groupby("t")[["energy_spde", "energy_particles"]].mean()
        line = ax1.semilogy(mean.index, mean["energy_spde"], "-", label=f"SPDE, {setting}")[0]
        ax1.semilogy(mean.index, mean["energy_particles"], "o", ms=3, color=line.get_color(),
                     label=f"particles, {setting}")
    ax1.set_xlabel("t"), ax1.set_ylabel("E[E_β(μ_t)] (mean over replicas)")
    ax1.set_title("gap energy: SPDE (lines) vs particles (dots), same paths")
    ax1.legend(fontsize=6, ncol=2)
    sr = res.spde_rates
    if sr is not None:
        x = np.arange(len(sr))
        for off, name, fmt in ((-0.1, "spde", "o"), (0.1, "particles", "s")):
            r = sr[f"rate_{name}"].to_numpy(float)
            ax2.errorbar(x + off, r, yerr=[r - sr[f"ci_low_{name}"], sr[f"ci_high_{name}"] - r], fmt=fmt,
                         capsize=3, label="SPDE" if name == "spde" else "particles")
        ax2.set_xticks(x, list(sr["setting"]), fontsize=8)
        ax2.set_ylabel("decay rate of E[E_β] (95 % CI)")
        ax2.set_title("rates on the fit window")
        ax2.legend(fontsize=8)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)


def _phase_section(res: SyncStudyResult) -> list:
    """Section 4 of the summary: the synchronisation phase diagram."""
    from meanfield.rates import to_markdown

    c = res.config["phase"]
    ph = res.phase
    lines = [
        "",
        "## 4. Phase diagram: the critical dimension of each activation",
        "",
        "λ_1(d) = ½ [(d-3) κ'(1) - (d-1) κ(1)] is affine in d and changes sign at d_c = (3r - 1)/(r - 1), "
        "r = κ'(1)/κ(1) (`kappa_ratio`), i.e. where κ'(1)/κ(1) = (d-1)/(d-3); for r <= 1 it is negative in every "
        "dimension (no d_c). Simulation: `tangent_lyapunov` (as in section 1: exact Gaussian increments, "
        f"{c['n_replicas']} replicas × {c['n_steps']} steps at {c.get('levels', 3)} step sizes, Richardson) at "
        "the integer dimensions just below (`d_below`) and above (`d_above`) d_c; without a d_c at "
        f"d = {c['d_none']} (in the `below` columns). Near d_c |λ_1| is small, so each cell is sized: a pilot "
        f"with {c['n_tokens']} tokens measures the SE, and a fresh run (independent seed) with "
        f"{c['n_tokens']} · (se_ratio · SE / |λ_1|)² tokens (se_ratio = {c['se_ratio']:g}, at most {c['max_tokens']}; `n_tokens_max`, `capped`) targets "
        "SE ≤ |λ_1| / se_ratio. Sign: negative if mean + 2 SE < 0, positive if mean - 2 SE > 0, else "
        "unresolved. Verdict: consistent if λ_1 is resolved negative below and positive above d_c (negative "
        "at d_none without a d_c), inconsistent if a side is resolved with the wrong sign or a cell is more "
        "than 3 SE from the closed form, inconclusive otherwise. Figure `phase.png`: λ_1 vs d per activation "
        "(closed form, the cells of section 1 and the two phase cells, ±2 SE, d_c dashed; inset: zoom on d_c).",
        "",
        to_markdown(ph),
        "",
    ]
    for row in ph.itertuples(index=False):
        if np.isfinite(row.d_c):
            lines.append(
                f"- {row.activation}: d_c = {row.d_c:.3f}; λ_1(d = {int(row.d_below)}) = {row.sim_below:.4f} ± "
                f"{row.se_below:.4f} (closed {row.closed_below:.4f}, {row.sign_below}), λ_1(d = {int(row.d_above)}) = "
                f"{row.sim_above:.4f} ± {row.se_above:.4f} (closed {row.closed_above:.4f}, {row.sign_above}): "
                f"{row.verdict}" + (" (token cap reached)" if row.capped else "") + ".")
        else:
            lines.append(
                f"- {row.activation}: r = {row.kappa_ratio:.4f} <= 1, no critical dimension; λ_1(d = {int(row.d_below)}) "
                f"= {row.sim_below:.4f} ± {row.se_below:.4f} (closed {row.closed_below:.4f}, {row.sign_below}): "
                f"{row.verdict}.")
    return lines

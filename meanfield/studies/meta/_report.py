"""Outputs of the metastability study: tables, figures, the Markdown summary and the console text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from meanfield.reporting import export_table, to_markdown

from .._common import write_summary_and_config
from ._analysis import FAVOUR_LEVEL, MetaReport, count_bands
from ._survival import kaplan_meier

_SPHERE = {2: "S^1", 3: "S^2"}
CITATION = ("Agazzi, Bruno, Mosig García, Saviozzi, Romito, \"Stochastic Scaling Limits and Synchronization by "
            "Noise in Deep Transformer Models\", arXiv 2604.26898")


def _save(fig, paths) -> None:
    for p in paths:
        fig.savefig(p, dpi=110)


def _fig_counts(res: MetaReport, paths) -> None:
    """Cluster count vs time: median and 10–90 % band; deterministic per β, and per σ at the largest β."""
    from matplotlib.figure import Figure

    cp, cn = res.config["plateaus"], res.config["noise"]
    dims = sorted(res.frames["plateaus"]["d"].unique())
    fig = Figure(figsize=(11, 3.8 * len(dims)))
    axes = np.atleast_2d(fig.subplots(len(dims), 2, squeeze=False))
    det = count_bands(res.frames["plateaus"], cp, "beta")
    bmax = max(cn["betas"])
    noisy = count_bands(res.frames["noise"][res.frames["noise"]["beta"] == bmax], cn, "sigma")
    ref = {k: v for k, v in det.items() if k[1] == bmax}
    for i, d in enumerate(dims):
        ax = axes[i, 0]
        for (dd, b), (t, med, lo, hi) in det.items():
            if dd != d:
                continue
            line = ax.plot(t[1:], med[1:], label=f"β = {b:g}")[0]
            ax.fill_between(t[1:], lo[1:], hi[1:], color=line.get_color(), alpha=0.15, step=None)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("t"), ax.set_ylabel("clusters (single linkage, θ = %g rad)" % cp["theta"])
        ax.set_title(f"{_SPHERE[d]}, N = {cp['N']}, no noise: median and 10–90 % band")
        ax.legend(fontsize=7, ncol=2)
        ax = axes[i, 1]
        for (dd, s), (t, med, lo, hi) in sorted(noisy.items()):
            if dd != d:
                continue
            line = ax.plot(t[1:], med[1:], label=f"σ = {s:g}")[0]
            ax.fill_between(t[1:], lo[1:], hi[1:], color=line.get_color(), alpha=0.15)
        if (d, float(bmax)) in ref:
            t, med, lo, hi = ref[(d, float(bmax))]
            keep = t <= cn["T"]
            ax.plot(t[keep][1:], med[keep][1:], "k--", label="σ = 0")
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("t"), ax.set_title(f"{_SPHERE[d]}, β = {bmax:g}, common noise of strength σ")
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, paths)


def _fig_survival(res: MetaReport, paths) -> None:
    """Kaplan–Meier survival of the time to one cluster (censored at the horizon), per σ, one panel per (d, β)."""
    from matplotlib.figure import Figure

    cn = res.config["noise"]
    frames = pd.concat([res.frames["noise"], res.frames["plateaus"][res.frames["plateaus"]["beta"].isin(cn["betas"])]])
    dims, betas = sorted(frames["d"].unique()), sorted(cn["betas"])
    fig = Figure(figsize=(3.2 * len(betas), 3.0 * len(dims)))
    axes = np.atleast_2d(fig.subplots(len(dims), len(betas), squeeze=False))
    for i, d in enumerate(dims):
        for j, b in enumerate(betas):
            ax = axes[i, j]
            for s, sub in frames[(frames["d"] == d) & (frames["beta"] == b)].groupby("sigma"):
                t = sub["t_one"].to_numpy(float)
                km = kaplan_meier(t, horizon=float(sub["horizon"].iloc[0]))
                tt = np.append(km["time"].to_numpy(), sub["horizon"].iloc[0])
                ss = np.append(km["survival"].to_numpy(), km["survival"].iloc[-1])
                line = ax.step(tt, ss, where="post", label=f"σ = {s:g}" + (" (none)" if s == 0 else ""))[0]
                ax.fill_between(tt, np.append(km["ci_low"], km["ci_low"].iloc[-1]),
                                np.append(km["ci_high"], km["ci_high"].iloc[-1]), step="post",
                                color=line.get_color(), alpha=0.12)
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{_SPHERE[d]}, β = {b:g}", fontsize=9)
            if j == 0:
                ax.set_ylabel("P(not one cluster by t)")
            if i == len(dims) - 1:
                ax.set_xlabel("t")
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    fig.suptitle("time to one cluster: Kaplan–Meier with 95 % band, censored at the horizon", fontsize=10)
    fig.tight_layout()
    _save(fig, paths)


def _fig_phase(res: MetaReport, paths) -> None:
    """(β, σ) map of the median time to one cluster, with the noise timescale and the plateau medians."""
    from matplotlib.figure import Figure

    sync = res.sync
    dims = sorted(sync["d"].unique())
    fig = Figure(figsize=(11, 3.8 * len(dims)))
    axes = np.atleast_2d(fig.subplots(len(dims), 2, squeeze=False))
    n = res.config["noise"]["N"]
    for i, d in enumerate(dims):
        sub = sync[(sync["d"] == d) & (sync["N"] == n) & (sync["sigma"] > 0)]
        betas, sigmas = sorted(sub["beta"].unique()), sorted(sub["sigma"].unique())
        grid = np.full((len(sigmas), len(betas)), np.nan)
        for _, r in sub.iterrows():
            grid[sigmas.index(r["sigma"]), betas.index(r["beta"])] = r["median_t_one"]
        ax = axes[i, 0]
        hz = float(res.config["noise"]["T"])
        im = ax.imshow(np.log10(np.where(np.isfinite(grid), grid, hz)), origin="lower", aspect="auto", cmap="viridis")
        for a in range(len(sigmas)):
            for b in range(len(betas)):
                v = grid[a, b]
                ax.text(b, a, f"{v:.3g}" if math.isfinite(v) else f">{hz:g}", ha="center", va="center", fontsize=8,
                        color="w")
        ax.set_xticks(range(len(betas)), [f"{b:g}" for b in betas])
        ax.set_yticks(range(len(sigmas)), [f"{s:g}" for s in sigmas])
        ax.set_xlabel("β"), ax.set_ylabel("σ")
        ax.set_title(f"{_SPHERE[d]}, N = {n}: median time to one cluster")
        fig.colorbar(im, ax=ax, label="log10 median")
        ax = axes[i, 1]
        for b in betas:
            s = sub[sub["beta"] == b].sort_values("sigma")
            med = s["median_t_one"].to_numpy(float)
            lo, hi = s["ci_low"].to_numpy(float), s["ci_high"].to_numpy(float)
            hi = np.where(np.isfinite(hi), hi, hz)
            ok = np.isfinite(med)
            ax.errorbar(s["sigma"][ok], med[ok], yerr=[med[ok] - lo[ok], hi[ok] - med[ok]], marker="o", capsize=3,
                        label=f"β = {b:g}")
        tau = sub.groupby("sigma")["tau_noise"].mean()
        ax.plot(tau.index, tau.to_numpy(), "k--s", ms=4, label="τ(σ) = log(D0/θ) / |σ² λ1|")
        esc = res.escape
        if len(esc):
            det = esc[(esc["d"] == d) & (esc["sigma"] == 0) & esc["beta"].isin(betas)]
            for _, r in det.iterrows():
                if math.isfinite(r["median_escape"]):
                    ax.axhline(r["median_escape"], color="grey", lw=0.6, ls=":")
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("σ"), ax.set_ylabel("median time to one cluster (95 % CI)")
        ax.set_title("vs the noise timescale (dashed) and the σ = 0 plateau medians (dotted)", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, paths)


def _fig_growth(res: MetaReport, paths) -> None:
    """Deterministic k-cluster plateau medians vs β, with both growth fits."""
    from matplotlib.figure import Figure

    from ._survival import km_median

    plat = res.plateaus[res.plateaus["sigma"] == 0]
    dims = sorted(plat["d"].unique()) or [2]
    fig = Figure(figsize=(5.5 * len(dims), 4))
    axes = np.atleast_1d(fig.subplots(1, len(dims)))
    hz = float(res.config["plateaus"]["T"])
    from matplotlib import colormaps

    kmax = max(2, int(plat["k"].max())) if len(plat) else 2
    cmap = colormaps["viridis"]
    for ax, d in zip(axes, dims):
        g = res.growth[res.growth["d"] == d] if len(res.growth) else pd.DataFrame()
        for k, sub in plat[plat["d"] == d].groupby("k"):
            rows = []
            for b, gb in sub.groupby("beta"):
                if len(gb) >= 3:
                    rows.append((b, *km_median(gb["duration"], ~gb["censored"].to_numpy(), horizon=hz)))
            if not rows:
                continue
            b, med, lo, hi = (np.array(v, dtype=float) for v in zip(*rows))
            ok = np.isfinite(med)
            if not ok.any():
                continue
            hi = np.where(np.isfinite(hi), hi, hz)
            line = ax.errorbar(b[ok], med[ok], yerr=[med[ok] - lo[ok], hi[ok] - med[ok]], marker="o", capsize=3,
                               label=f"k = {k}", color=cmap((k - 2) / max(1, kmax - 2)))
            fit = g[g["k"] == k] if len(g) else g
            if len(fit) and fit["favoured"].iloc[0] != "not fitted":
                r = fit.iloc[0]
                bb = np.linspace(b[ok].min(), b[ok].max(), 50)
                c = line[0].get_color()
                ax.plot(bb, np.exp(r["exponential_a"] + r["exponential_b"] * bb), "-", color=c, lw=0.8)
                ax.plot(bb, np.exp(r["power_a"] + r["power_b"] * np.log(bb)), ":", color=c, lw=1.2)
        ax.axhline(hz, color="k", lw=0.5)
        ax.set_yscale("log")
        ax.set_xlabel("β"), ax.set_ylabel("median plateau duration (95 % CI)")
        ax.set_title(f"{_SPHERE[d]}, no noise: k-cluster plateaus (solid: e^(a+bβ), dotted: a β^b)", fontsize=9)
        ax.legend(fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    _save(fig, paths)


def _display(tab: pd.DataFrame) -> pd.DataFrame:
    """A copy for Markdown/LaTeX: an infinite median or bound (beyond the horizon) reads ``inf``, not ``nan``."""
    out = tab.copy()
    for col in out.columns:
        if out[col].dtype.kind == "f" and np.isinf(out[col]).any():
            out[col] = [("inf" if v > 0 else "-inf") if np.isinf(v) else v for v in out[col]]
    return out


def _table_md(tab: pd.DataFrame) -> str:
    return to_markdown(_display(tab)) if len(tab) else ""


def write_outputs(res: MetaReport, out_dir, *, extra: Mapping | None = None, settings: Mapping | None = None) -> dict:
    """Write tables (CSV, Markdown, LaTeX), figures (PNG, PDF), ``summary.md`` and ``config.json``.

    Tables: ``growth``, ``escape``, ``sync``, ``sizes``, ``spectral``, ``timing`` and the long
    table ``plateaus`` (CSV only). Figures: ``counts``, ``survival``, ``phase``, ``growth``.

    Returns
    -------
    dict
        ``{name: [paths]}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name in ("growth", "escape", "sync", "sizes", "spectral", "timing"):
        tab = getattr(res, name)
        files[name] = list(export_table(tab, out / name, formats=("csv",)).values())
        files[name] += list(export_table(_display(tab), out / name, formats=("md", "tex")).values())
    files["plateaus"] = list(export_table(res.plateaus, out / "plateaus", formats=("csv",)).values())
    for name, fn in (("counts", _fig_counts), ("survival", _fig_survival), ("phase", _fig_phase),
                     ("growth", _fig_growth)):
        paths = [out / f"{name}.png", out / f"{name}.pdf"]
        fn(res, paths)
        files[f"{name}_fig"] = paths
    files.update(write_summary_and_config(out, summary_markdown(res, extra=extra), resolved_config(res), settings))
    return files


def resolved_config(res: MetaReport) -> dict:
    """The settings that produced ``res``: study name, preset, root seed and the settings of every part."""
    return {"study": "meta", "preset": res.preset, "root_seed": res.root_seed, "config": res.config}


def console_summary(res: MetaReport) -> str:
    """The text the ``meta`` command prints: growth fits, escape and synchronisation medians, run times."""
    lines = []
    for name in ("growth", "escape", "sync", "sizes", "spectral", "timing"):
        tab = getattr(res, name)
        lines += ["", f"## {name}", "", tab.to_string(index=False) if len(tab) else "(empty)"]
    lines += ["", "run time: " + ", ".join(f"{k} {v:.1f} s" for k, v in res.seconds.items())]
    return "\n".join(lines)


def _fmt(v: float) -> str:
    return f"{v:.3g}" if math.isfinite(v) else "∞"


def _growth_lines(res: MetaReport) -> list:
    g = res.growth
    if not len(g):
        return ["No deterministic part was run."]
    lines = []
    fitted = g[g["favoured"] != "not fitted"]
    for _, r in fitted.iterrows():
        lines.append(
            f"- {_SPHERE[r['d']]}, "
            + (f"all k together ({r['betas']}, {r['medians']}; one intercept per k, common b): " if r["k"] == 0 else
               f"k = {r['k']} (β = {r['betas']}; medians {r['medians']}): ")
            + f"log T = a + b β with b = {r['exponential_b']:.3g} {r['exponential_b_ci']}, "
            f"log T = a + b log β with b = {r['power_b']:.3g} {r['power_b_ci']}; the exponential law has the "
            f"smaller residual in {100 * r['exp_better_fraction']:.0f} % of the resamples → **{r['favoured']}**.")
    skipped = g[g["favoured"] == "not fitted"]
    if len(skipped):
        lines.append("- Not fitted (fewer than 3 β with >= 3 plateaus and a median below the horizon): "
                     + ", ".join(f"{_SPHERE[r['d']]} k = {r['k']}" for _, r in skipped.iterrows() if r["k"] > 0)
                     + ".")
    return lines


def summary_markdown(res: MetaReport, *, extra: Mapping | None = None) -> str:
    """Markdown summary: what was run, the tables, and only the statements the tables support."""
    cp, cn, cs = res.config["plateaus"], res.config["noise"], res.config["sizes"]
    lines = [
        "# Metastable multi-cluster states and escape by common noise",
        "",
        f"Reference: {CITATION}. The paper places at the centre of the synchronisation analysis the question "
        "whether the common noise overcomes the metastable (saddle) states of the deterministic attention "
        "dynamics; this study measures it on the particle system (softmax attention, Q = K = V = I, "
        f"{cn['activation']} MLP noise of degree {cn['lmax']}, strength σ: κ → σ²κ, λ_1 → σ²λ_1).",
        "",
        "## Set-up",
        "",
        f"- Initial clouds: N iid uniform tokens; replica r of (d, N) starts every β and σ from the same cloud, "
        "and every σ > 0 sees the same noise path times σ.",
        f"- Clusters: single linkage at θ = {cn['theta']} rad. The cloud is *clustered* from the first save where "
        f"the count at θ equals the count at θ/{cn['tight']} and is below N; a *plateau* is a maximal interval "
        "of constant count (k >= 2, ending after clustering); its duration is right-censored when it reaches the "
        "horizon. Time to one cluster: first save from which the count stays 1 (censored at the horizon).",
        f"- Deterministic part: d ∈ {cp['dims']}, N = {cp['N']}, β ∈ {cp['betas']}, {cp['replicas']} replicas, "
        f"horizon {cp['T']:g}. Noise part: β ∈ {cn['betas']}, σ ∈ {cn['sigmas']}, {cn['replicas']} replicas, "
        f"horizon {cn['T']:g}. Sizes: N ∈ {cs['N']}, β ∈ {cs['betas']}, σ ∈ {cs['sigmas']}, {cs['replicas']} "
        f"replicas, horizon {cs['T']:g}.",
        "- Medians and 95 % intervals are Kaplan–Meier (Greenwood, log–log band, Brookmeyer–Crowley median "
        "interval); plateaus of one run are pooled although they are not independent, so their intervals are "
        "indicative.",
        "",
        "## Plateau growth law (no noise)",
        "",
        f"Growth of the k-cluster plateau durations with β, per k (`growth` table; favoured = smaller residual "
        f"in >= {100 * FAVOUR_LEVEL:.0f} % of 1000 bootstrap resamples of the runs, else inconclusive):",
        "",
        *_growth_lines(res),
        "",
        _table_md(res.growth),
        "",
        "## Escape from k-cluster states and time to one cluster",
        "",
        "`escape`: every plateau with k >= 2 after clustering, per (d, β, σ) (σ = 0 from the deterministic "
        "part, longer horizon). `sync`: time to one cluster, with the noise timescale "
        "τ(σ) = log(D0/θ)/|σ²λ1| (D0 the mean initial geodesic distance).",
        "",
        _table_md(res.escape),
        "",
        _table_md(res.sync),
        "",
    ]
    sync = res.sync
    noisy = sync[sync["sigma"] > 0]
    det = sync[sync["sigma"] == 0]
    if len(noisy):
        frac = noisy["synchronised"].sum() / noisy["runs"].sum()
        lines.append(f"- With noise, {noisy['synchronised'].sum()} of {noisy['runs'].sum()} runs "
                     f"({100 * frac:.0f} %) reached one cluster by t = {cn['T']:g}.")
    if len(det):
        lines.append(f"- Without noise, {det['synchronised'].sum()} of {det['runs'].sum()} runs reached one "
                     f"cluster by t = {cp['T']:g}.")
    ratios = noisy["median_over_tau"].replace([np.inf, -np.inf], np.nan).dropna()
    if len(ratios):
        lines.append(f"- Median time to one cluster / τ(σ) over the (β, σ) cells with a finite median: "
                     f"{ratios.min():.3g} to {ratios.max():.3g}.")
    for d in sorted(noisy["d"].unique()):
        for b in sorted(noisy["beta"].unique()):
            s = noisy[(noisy["d"] == d) & (noisy["beta"] == b)].sort_values("sigma")
            lines.append(f"- {_SPHERE[d]}, β = {b:g}: median time to one cluster "
                         + ", ".join(f"σ = {r['sigma']:g}: {_fmt(r['median_t_one'])} "
                                     f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" for _, r in s.iterrows()) + ".")
    lines += ["", "## Number of tokens", "", _table_md(res.sizes) or "(not run)", ""]
    if len(res.spectral):
        sp = res.spectral
        lines += ["## Threshold-free count", "",
                  "Agreement of the eigengap count of the attention kernel (`meanfield.clusters.spectral_cluster_count`, "
                  "with the run's β) with the single-linkage count, over the saves after clustering "
                  f"(N <= {cn['spectral_max_N']}): from {sp['agree'].min():.3f} to {sp['agree'].max():.3f} per "
                  f"(d, β, σ) cell; reported 'no structure' in at most {sp['no_structure'].max():.3f} of the saves.",
                  "", to_markdown(sp), ""]
    lines += ["## Run time", "", to_markdown(res.timing), ""]
    for title, text in (extra or {}).items():
        lines += [f"## {title}", "", str(text), ""]
    lines += ["## Figures", "",
              "- `counts.png`: cluster count vs time (median, 10–90 % band), no noise per β and with noise per σ.",
              "- `survival.png`: Kaplan–Meier survival of the time to one cluster per σ and β.",
              "- `phase.png`: the (β, σ) map of the median time to one cluster, beside τ(σ) and the σ = 0 plateau "
              "medians.",
              "- `growth.png`: deterministic plateau medians vs β per k with both fits.", ""]
    return "\n".join(lines)

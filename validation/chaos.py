"""Regenerate the committed propagation-of-chaos results (SPEC §9) in ``validation/chaos/``.

Runs the ``quick`` preset of :mod:`meanfield.studies.chaos` on S^1 and S^2 twice on a local
process pool — once with 1 worker, once with 2 — checks that both runs give the same
table, and writes from the 2-worker run:

- ``table_s1.{csv,md,tex}``, ``table_s2.{csv,md,tex}``: rate tables;
- ``figure_s1.{png,pdf}``, ``figure_s2.{png,pdf}``: log–log figures with theory lines;
- ``spde_check.{csv,md}``, ``diagnostics.csv``;
- ``summary.md``: fitted exponents with CIs and verdicts, the SPDE-error check, the wall
  time of each run, the 2-vs-1 worker speed-up and the machine.

Usage (from the repository root)::

    python validation/chaos.py                 # both runs, about 5 minutes on 2 cores
    python validation/chaos.py --no-speedup    # the 2-worker run only
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _timed_run(workers: int, preset: str):
    from meanfield.runner import run_study
    from meanfield.studies.chaos import chaos_study

    study = chaos_study(preset, "both")
    start = time.perf_counter()
    result = run_study(study, executor="pool", workers=workers, progress=True, raise_on_failure=True)
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    import numpy as np
    import pandas as pd

    from meanfield import __version__
    from meanfield.rates import to_markdown
    from meanfield.spde import VonMisesFisher
    from meanfield.transport import circle_quadrature
    from meanfield.studies.chaos import analyse_chaos, iid_w2_control, write_chaos_outputs

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="quick", help="study preset (default quick)")
    parser.add_argument("--out", default=str(HERE / "chaos"), help="output directory (default validation/chaos)")
    parser.add_argument("--no-speedup", dest="speedup", action="store_false", help="skip the 1-worker run")
    args = parser.parse_args(argv)

    timings = {}
    if args.speedup:
        result1, timings[1] = _timed_run(1, args.preset)
    result2, timings[2] = _timed_run(2, args.preset)
    report = analyse_chaos(result2)

    lines = [f"Preset `{args.preset}`, S^1 and S^2 together ({len(result2.frame)} tasks: one per sphere and "
             "replica), local process pool (`run_study(executor='pool')`), no result store."]
    lines.append("")
    lines.append("| workers | wall time (s) |")
    lines.append("|---|---|")
    for w, t in sorted(timings.items()):
        lines.append(f"| {w} | {t:.1f} |")
    speed = ""
    if 1 in timings:
        drop = [c for c in result1.frame if c.endswith("_seconds")]
        rel = 0.0
        for e in ("coupling", "w2", "observable"):
            for a, b in zip(result1.arrays[e], result2.arrays[e]):
                ok = np.isfinite(a)
                if not np.array_equal(np.isfinite(a), np.isfinite(b)):
                    rel = np.inf
                elif ok.any():
                    rel = max(rel, float(np.max(np.abs(a[ok] - b[ok]) / np.abs(b[ok]))))
        same_frame = result1.frame.drop(columns=drop).shape == result2.frame.drop(columns=drop).shape
        speed = (f"Speed-up of 2 workers over 1: {timings[1] / timings[2]:.2f}× "
                 f"({timings[1]:.1f} s → {timings[2]:.1f} s). Largest relative difference of any error between "
                 f"the two runs: {rel:.2g}" + ("" if same_frame else " (the tables differ in shape: a bug)")
                 + " (not bit-for-bit: ducc0's multi-threaded transforms sum in a thread-dependent order).")
        lines.append("")
        lines.append(speed)
        stages = ["spde_seconds", "particle_seconds", "coupling_seconds", "w2_seconds"]
        busy1 = float(result1.frame[stages].to_numpy().sum())
        busy2 = float(result2.frame[stages].to_numpy().sum())
        w2_1 = float(result1.frame.loc[result1.frame["sphere"] == 2, "w2_seconds"].mean())
        w2_2 = float(result2.frame.loc[result2.frame["sphere"] == 2, "w2_seconds"].mean())
        lines.append("")
        lines.append(f"Sum over tasks of the timed stages (SPDE, particles, X̄ paths, W_2): {busy1:.1f} s with 1 worker, "
                     f"{busy2:.1f} s with 2 workers; mean S^2 W_2 time per replica {w2_1:.2f} s vs {w2_2:.2f} s. "
                     "Work that grows when two tasks run at once is contention for the two cores and their memory "
                     "(ducc0 and the spectral transforms already start up to 2 threads per process, so a single "
                     "worker is not single-threaded).")
    per = report.diagnostics.set_index("sphere")
    lines.append("")
    lines.append("Mean time per replica (s), from the task records:")
    lines.append("")
    lines.append(to_markdown(pd.DataFrame({
        "sphere": [f"S^{s}" for s in per.index],
        "SPDE (lmax and check)": per["spde_seconds"].values,
        "particles (all N)": per["particle_seconds"].values,
        "X̄ coupling paths": per["coupling_seconds"].values,
        "W_2": per["w2_seconds"].values,
    }), floatfmt=".3g"))
    # control for the W_2 slope: iid sampling of ρ_0 alone on S^1, same N, nodes and replicas
    cfg1 = result2.study.fixed["configs"]["1"]
    ctl, fit = iid_w2_control(1, cfg1["Ns"], replicas=result2.study.replicas, kappa=cfg1["kappa"],
                              density_nodes=cfg1["density_nodes"])
    means = ctl.groupby("N")["w2"].mean()
    rho0_min = float(VonMisesFisher([0.0, 1.0], cfg1["kappa"]).density(circle_quadrature(cfg1["density_nodes"])[0]).min())
    control = (f"W_2 of N iid samples of ρ_0 (vMF κ = {cfg1['kappa']:g}, no dynamics) against ρ_0 on S^1, same N "
               f"({cfg1['Ns'][0]}..{cfg1['Ns'][-1]}), {result2.study.replicas} replicas, {cfg1['density_nodes']} nodes: "
               f"fitted slope {fit.slope:.3f} [{fit.ci_low:.3f}, {fit.ci_high:.3f}] (95 % bootstrap CI); mean W_2 "
               + ", ".join(f"{v:.3g}" for v in means.values) + f" (min ρ_0 = {rho0_min:.3g}). ")
    s1 = report.summaries[1].set_index("error").loc["w2"]
    overlap = s1["slope_ci_low"] <= fit.ci_high and fit.ci_low <= s1["slope_ci_high"]
    control += (f"Study W_2 slope on S^1: {s1['slope']:.3f} [{s1['slope_ci_low']:.3f}, {s1['slope_ci_high']:.3f}], "
                f"verdict against -1/2: {s1['verdict']}; its CI "
                + ("overlaps" if overlap else "does NOT overlap") + " the control's CI. "
                "Pure iid sampling of a density with a low-density region decays pre-asymptotically slower than "
                "N^(-1/2) on the circle (the constant of the N^(-1/2) law involves ∫ F(1-F)/ρ, large where ρ is "
                "small), and ρ_T reaches lower densities than ρ_0 (rho_min in the diagnostics above)"
                + (", so the overlap is consistent with a shallow study slope coming from sampling at these N "
                   "rather than from a failure of propagation of chaos (consistent with, not a proof of)." if overlap else
                   "; with no overlap the difference is NOT explained by sampling alone."))
    machine = (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({_cpu_model()}), "
               f"Python {platform.python_version()}, meanfield {__version__}.")
    extra = {"Control: W_2 of iid sampling on S^1": control, "Run time and speed-up": "\n".join(lines),
             "Machine": machine}
    files = write_chaos_outputs(report, args.out, extra=extra)
    for sphere in report.spheres:
        print(f"S^{sphere}")
        print(report.summaries[sphere].to_string(index=False))
    print(report.spde_check.to_string(index=False))
    if speed:
        print(speed)
    print(f"wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``meanfield chaos``: the propagation-of-chaos rate study of SPEC §9 on S^1 and/or S^2.

Runs :func:`meanfield.studies.chaos.chaos_study` (one task per sphere and replica: the
noise path and the SPDE once, then every N) with :func:`meanfield.runner.run_study`,
prints the fitted exponents with their CIs and verdicts and the SPDE-error check, and
writes into ``--out``:

- ``table_s1.{csv,md,tex}``, ``table_s2.{csv,md,tex}``: rate tables (N, mean, CI, slope,
  theory slope, verdict) of the coupling, W_2 and observable errors;
- ``figure_s1.{png,pdf}``, ``figure_s2.{png,pdf}``: log–log plots with the theory lines;
- ``spde_check.{csv,md}``, ``diagnostics.csv``, ``summary.md``.

Examples::

    meanfield chaos --quick --sphere both --out chaos-out --workers 2
    meanfield chaos --preset tiny --sphere 1 --out /tmp/chaos --executor serial
    meanfield chaos --full --store results/chaos-full      # resumable
"""

from __future__ import annotations

import argparse
import time

from .execution import add_execution_arguments, add_preset_arguments, execution_kwargs, report_location

__all__ = ["register", "main"]


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``chaos`` subcommand to an ``argparse`` subparsers object and return its parser."""
    from meanfield.studies.chaos import PRESETS

    p = subparsers.add_parser(
        "chaos",
        help="propagation of chaos: particles vs SPDE rate tables and figures on S^1 / S^2",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_preset_arguments(p, PRESETS, quick_help="quick preset: N = 2^6..2^12, 8 replicas (default)",
                         full_help="full preset: N up to 2^16 on S^1 and 2^14 on S^2, 32 replicas (hours)")
    p.add_argument("--sphere", choices=("1", "2", "both"), default="both",
                   help="S^1, S^2 or both (default both)")
    p.add_argument("--replicas", type=int, default=None, help="override the preset's number of replicas")
    p.add_argument("--seed", type=int, default=0, help="root seed of the study (default 0)")
    p.add_argument("--out", default="chaos-out", help="output directory (default: chaos-out/)")
    add_execution_arguments(p)
    p.set_defaults(func=main)
    return p


def main(args) -> int:
    """Run the study, write tables/figures/summary, print the results and where they are."""
    from meanfield.studies.chaos import analyse_chaos, chaos_study, write_chaos_outputs
    from meanfield.runner import run_study

    preset = args.preset
    study = chaos_study(preset, args.sphere, replicas=args.replicas, root_seed=args.seed)
    start = time.perf_counter()
    result = run_study(study, **execution_kwargs(args))
    wall = time.perf_counter() - start
    if result.failures:
        report_location(result)
        return 1
    report = analyse_chaos(result)
    extra = {"Run": f"{len(result.frame)} tasks, {result.n_computed} computed, {result.n_resumed} resumed; "
                    f"wall time {wall:.1f} s."}
    files = write_chaos_outputs(report, args.out, extra=extra)
    for sphere in report.spheres:
        summ = report.summaries[sphere]
        print(f"S^{sphere}: fitted exponents (95 % bootstrap CI)")
        print(summ[["error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "theory_slope", "tolerance",
                    "verdict"]].to_string(index=False))
        print()
    print("SPDE discretisation error vs smallest particle error")
    print(report.spde_check[["sphere", "error", "spde_error", "smallest_particle_error", "below"]].to_string(index=False))
    print()
    print(f"wall time {wall:.1f} s; files in {args.out}: {', '.join(sorted(files))}")
    report_location(result)
    return 0

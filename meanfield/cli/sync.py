"""``meanfield sync``: synchronisation by noise and attention (SPEC §5.4, §9; Thm 1.4, Prop. 1.5).

Runs :func:`meanfield.studies.synchronisation.run_sync_study` on a preset (``--quick``,
the default; ``--full``; ``--test``), writes into ``--out`` the Lyapunov table
(activation × d: closed-form λ_1, simulated λ_1 ± SE, synchronises? from both) and the
energy-decay rates per β, and E_β along an SPDE run vs particles on the same path (CSV,
Markdown, LaTeX) with figures (PNG, PDF), prints the
tables and where everything is.
"""

from __future__ import annotations

import argparse

from meanfield.cli.execution import add_execution_arguments, add_preset_arguments, execution_kwargs, report_location


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``sync`` subcommand and return its parser."""
    p = subparsers.add_parser(
        "sync",
        help="Lyapunov exponents (activation x d) and decay of the gap energy vs beta",
        description="Synchronisation by common noise and attention (SPEC §5.4, §9).",
    )
    from meanfield.studies.synchronisation import SYNC_PRESETS

    add_preset_arguments(p, SYNC_PRESETS, quick_help="quick preset (default; a few minutes on 2 cores)",
                         full_help="full preset (long)")
    p.add_argument("--out", default="sync_results", metavar="DIR", help="output directory (default: sync_results)")
    p.add_argument("--seed", type=int, default=0, help="root seed of the studies (default 0)")
    p.add_argument("--only", choices=("lyapunov", "energy", "spde"), default=None, help="run one part only")
    add_execution_arguments(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run the preset, write tables and figures, print them and their location."""
    from meanfield.studies.synchronisation import run_sync_study, write_sync_outputs

    parts = (args.only,) if args.only else ("lyapunov", "energy", "spde")
    res = run_sync_study(args.preset, root_seed=args.seed, parts=parts, **execution_kwargs(args))
    files = write_sync_outputs(res, args.out)
    if res.lyapunov is not None:
        print("\n## top Lyapunov exponent (closed form vs simulation)\n")
        print(res.lyapunov.to_string(index=False))
        report_location(res.lyapunov_result)
    if res.rates is not None:
        print(f"\n## decay of the gap energy (closed-form λ_1 of the noise: {res.lambda1:.4f})\n")
        print(res.rates.to_string(index=False))
        report_location(res.energy_result)
    if res.spde is not None:
        print("\n## E_β and variance along the SPDE (push-forward) and particles on the same path\n")
        print(res.spde.to_string(index=False))
        report_location(res.spde_result)
    print("run time: " + ", ".join(f"{k} {v:.1f} s" for k, v in res.seconds.items()))
    print(f"tables and figures: {args.out}  ({sum(len(v) for v in files.values())} files)")
    return 0

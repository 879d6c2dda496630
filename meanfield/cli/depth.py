"""``meanfield depth``: depth and width convergence of the transformer to the SDE (SPEC §9, Thm 1.1).

Runs :func:`meanfield.studies.depth.run_depth_study` on a preset (``--quick``, the
default, a few minutes on 2 cores; ``--full``; ``--test``, seconds), writes into ``--out``
the tables ``strong_L``, ``width_cells``, ``width_fit``, ``weak_L``, ``limits`` (CSV,
Markdown, LaTeX) and the figures ``strong_L`` and ``width`` (PNG, PDF), prints the tables
and where everything is.
"""

from __future__ import annotations

import argparse

from meanfield.cli.execution import add_execution_arguments, add_preset_arguments, execution_kwargs, report_location


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``depth`` subcommand and return its parser."""
    p = subparsers.add_parser(
        "depth",
        help="strong error in depth L, error in law in width m, (L, m) iterated limits",
        description="Depth/width convergence of the discrete transformer to the limiting SDE (SPEC §9, Thm 1.1).",
    )
    from meanfield.studies.depth import DEPTH_PRESETS

    add_preset_arguments(p, DEPTH_PRESETS, quick_help="quick preset (default; a few minutes on 2 cores)",
                         full_help="full preset (long)")
    p.add_argument("--out", default="depth_results", metavar="DIR", help="output directory (default: depth_results)")
    p.add_argument("--seed", type=int, default=0, help="root seed of the studies (default 0)")
    add_execution_arguments(p)
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Run the preset, write tables and figures, print them and their location."""
    from meanfield.rates import slope_summary, to_markdown
    from meanfield.studies.depth import run_depth_study, write_depth_outputs

    res = run_depth_study(args.preset, root_seed=args.seed, **execution_kwargs(args))
    files = write_depth_outputs(res, args.out)
    print("\n## strong error in L (theory slope -1/2, one coupled path)\n")
    print(to_markdown(res.strong_table))
    print(slope_summary(res.strong_table).to_string(index=False))
    for name in ("cells", "width_fit", "weak_L", "limits"):
        print(f"\n## {name}\n")
        print(res.width[name].to_string(index=False))
    print(f"\nrun time: strong {res.seconds['strong']:.1f} s, width {res.seconds['width']:.1f} s")
    report_location(res.strong)
    report_location(res.width_result)
    print(f"tables and figures: {args.out}  ({sum(len(v) for v in files.values())} files)")
    return 0

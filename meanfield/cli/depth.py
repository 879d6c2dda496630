"""``meanfield depth``: depth and width convergence of the transformer to the SDE.

Runs :mod:`meanfield.studies.depth` on a preset (``--quick``, the default, a few minutes on
2 cores; ``--full``; ``--test``, seconds), writes into ``--out`` the tables ``strong_L``,
``width_cells``, ``width_fit``, ``weak_L``, ``limits`` (CSV, Markdown, LaTeX), the figures
``strong_L`` and ``width`` (PNG, PDF), ``summary.md`` and ``config.json``, and prints the
tables and where everything is.
"""

from __future__ import annotations

import argparse

from meanfield.studies import depth

from . import SUMMARIES
from ._common import CITATION
from ._study import run_study_command, study_parser

__all__ = ["register", "main"]

DESCRIPTION = f"""\
Depth/width convergence of the discrete transformer to the limiting SDE: strong error in
the depth L on one coupled noise path, error in law in the width m, and the two iterated
limits on an (L, m) grid.

Reference: {CITATION}, Thm 1.1.

Writes into --out: strong_L, width_cells, width_fit, weak_L, limits (.csv, .md, .tex),
the figures strong_L and width (.png, .pdf), summary.md and config.json.
With --store DIR the two parts keep the sub-stores DIR/strong and DIR/width."""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``depth`` subcommand and return its parser."""
    p = study_parser(subparsers, "depth", help=SUMMARIES["depth"], description=DESCRIPTION,
                     presets=depth.PRESETS, out_default="depth_results",
                     quick_help="quick preset (the default; a few minutes on 2 cores)", full_help="full preset (long)")
    p.set_defaults(func=main)
    return p


def main(args) -> int:
    """Run the preset, write tables, figures, summary and config, print them and their location."""
    cfg = depth.config(args.preset)
    return run_study_command(args, depth, cfg, analyse_kwargs={"preset": args.preset})


#: Former name of :func:`main`.
run = main

"""``meanfield meta``: metastable multi-cluster states and their escape under common noise.

Runs :mod:`meanfield.studies.meta` on a preset (``--quick``, the default, under 10 minutes on
2 cores; ``--full``; ``--test``, seconds), writes into ``--out`` the tables ``growth``,
``escape``, ``sync``, ``sizes``, ``spectral``, ``timing`` (CSV, Markdown, LaTeX) and
``plateaus`` (CSV), the figures ``counts``, ``survival``, ``phase``, ``growth`` (PNG, PDF),
``summary.md`` and ``config.json``, and prints the tables and where everything is.
"""

from __future__ import annotations

import argparse

from meanfield.studies import meta

from . import SUMMARIES
from ._common import CITATION
from ._study import run_study_command, study_parser

__all__ = ["register", "main"]

DESCRIPTION = f"""\
Metastability and escape: plateaus of the cluster count of the deterministic attention
dynamics at large beta (growth law of their duration, exponential vs power law in beta), and
the same initial clouds with a common noise of strength sigma: escape times from k-cluster
states and the time to one cluster over (beta, sigma), beside the timescale of the noise's
Lyapunov exponent sigma^2 lambda_1. S^1 and S^2.

Reference: {CITATION}.

Writes into --out: growth, escape, sync, sizes, spectral, timing (.csv, .md, .tex),
plateaus (.csv), the figures counts, survival, phase, growth (.png, .pdf), summary.md and
config.json. With --store DIR the three parts keep the sub-stores DIR/plateaus, DIR/noise
and DIR/sizes."""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``meta`` subcommand and return its parser."""
    p = study_parser(subparsers, "meta", help=SUMMARIES["meta"], description=DESCRIPTION, presets=meta.PRESETS,
                     out_default="meta_results", quick_help="quick preset (the default; under 10 minutes on 2 cores)",
                     full_help="full preset (hours)")
    p.set_defaults(func=main)
    return p


def main(args) -> int:
    """Run the preset, write tables, figures, summary and config, print them and their location."""
    cfg = meta.config(args.preset)
    return run_study_command(args, meta, cfg, analyse_kwargs={"preset": args.preset})

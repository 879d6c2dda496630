"""``meanfield sync``: synchronisation by noise and attention.

Runs :mod:`meanfield.studies.synchronisation` on a preset (``--quick``, the default;
``--full``; ``--test``), writes into ``--out`` the Lyapunov table (activation × d:
closed-form λ_1, simulated λ_1 ± SE, synchronises? from both), the energy-decay rates per
β and E_β along an SPDE run vs particles on the same path (CSV, Markdown, LaTeX) with
figures (PNG, PDF), the phase diagram (critical dimension per activation and λ_1 on both
sides of it), ``summary.md`` and ``config.json``, and prints the tables and where
everything is.
"""

from __future__ import annotations

import argparse

from meanfield.studies import synchronisation

from . import SUMMARIES
from ._common import CITATION
from ._study import run_study_command, study_parser

__all__ = ["register", "main"]

DESCRIPTION = f"""\
Synchronisation by common noise and attention: top Lyapunov exponents (activation x d,
closed form vs simulation), decay of the gap energy vs beta, the gap energy along an
SPDE run vs particles on the same noise path, and the phase diagram (the critical
dimension of each activation, lambda_1 simulated on both sides of it).

Reference: {CITATION}, Thm 1.4, Prop. 1.5.

Writes into --out: lyapunov, energy_rates, spde_energy, phase (.csv, .md, .tex), the figures
lyapunov, energy, spde_energy, phase (.png, .pdf), summary.md and config.json.
With --store DIR each part keeps a sub-store: DIR/lyapunov, DIR/energy, DIR/spde, DIR/phase."""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``sync`` subcommand and return its parser."""
    p = study_parser(subparsers, "sync", help=SUMMARIES["sync"], description=DESCRIPTION,
                     presets=synchronisation.PRESETS, out_default="sync_results",
                     quick_help="quick preset (the default; about 12 minutes on 2 cores)", full_help="full preset (long)")
    p.add_argument("--only", choices=("lyapunov", "energy", "spde", "phase"), default=None,
                   help="run one part only (default: all four)")
    p.set_defaults(func=main)
    return p


def main(args) -> int:
    """Run the preset, write tables, figures, summary and config, print them and their location."""
    cfg = synchronisation.config(args.preset)
    parts = (args.only,) if args.only else None
    return run_study_command(args, synchronisation, cfg, parts=parts, analyse_kwargs={"preset": args.preset})


#: Former name of :func:`main`.
run = main

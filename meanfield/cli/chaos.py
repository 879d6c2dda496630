"""``meanfield chaos``: the propagation-of-chaos rate study on S^1 and/or S^2.

Runs :mod:`meanfield.studies.chaos` (one task per sphere and replica: the noise path and
the SPDE once, then every N) with :func:`meanfield.runner.run_study`, prints the fitted
exponents with their CIs and verdicts and the SPDE-error check, and writes into ``--out``
the rate tables ``table_s{1,2}.{csv,md,tex}``, the figures ``figure_s{1,2}.{png,pdf}``,
``spde_check.{csv,md}``, ``diagnostics.csv``, ``summary.md`` and ``config.json``.
"""

from __future__ import annotations

import argparse

from meanfield.studies import chaos

from . import SUMMARIES
from ._common import CITATION
from ._study import run_study_command, study_parser

__all__ = ["register", "main"]

DESCRIPTION = f"""\
Propagation of chaos (Prop. 1.2): N particles against the McKean-Vlasov SPDE on one common
noise path, on S^1 and/or S^2.

Reference: {CITATION}, Prop. 1.2.

Writes into --out: table_s1.{{csv,md,tex}} and table_s2.{{csv,md,tex}} (rate tables: N, mean,
CI, slope with its studentized and delta-method intervals, theory slope and a verdict -
consistent, inconsistent or inconclusive - of the coupling, W_2 and observable errors and
of the iid control of W_2), figure_s1.{{png,pdf}} and figure_s2.{{png,pdf}} (log-log plots,
fits with their confidence bands, theory lines),
spde_check.{{csv,md}}, diagnostics.csv, summary.md and config.json (resolved settings).
Long-horizon part (unless --no-long; reference: the characteristics solution, T = 2 and 8):
long_s{{1,2}}_T{{T}}.{{csv,md,tex}}, long_rates.{{csv,md}}, long_figure_s{{1,2}}_T{{T}}.{{png,pdf}},
long_spde_check.{{csv,md}}, long_diagnostics.csv.

examples:
  meanfield chaos --quick --sphere both --out chaos-out --workers 2
  meanfield chaos --preset tiny --sphere 1 --out /tmp/chaos --executor serial
  meanfield chaos --full --store results/chaos-full      # resumable"""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``chaos`` subcommand to an ``argparse`` subparsers object and return its parser."""
    p = study_parser(subparsers, "chaos", help=SUMMARIES["chaos"], description=DESCRIPTION,
                     presets=chaos.PRESETS, out_default="chaos-out",
                     quick_help="quick preset: N = 2^6..2^12, 8 replicas (the default)",
                     full_help="full preset: N up to 2^16 on S^1 and 2^14 on S^2, 32 replicas (hours)")
    p.add_argument("--sphere", choices=("1", "2", "both"), default="both", help="S^1, S^2 or both")
    p.add_argument("--replicas", type=int, default=None, help="override the preset's number of replicas (default: the preset's)")
    p.add_argument("--no-long", action="store_true",
                   help="skip the long-horizon part (T = 2 and 8, characteristics scheme as the reference); with it, "
                        "--store keeps the sub-stores DIR/chaos and DIR/long")
    p.set_defaults(func=main)
    return p


def main(args) -> int:
    """Run the study, write tables/figures/summary/config, print the results and where they are."""
    cfg = chaos.config(args.preset, args.sphere, replicas=args.replicas, long=not args.no_long)
    return run_study_command(args, chaos, cfg, substores="long" in cfg, analyse_kwargs={"control": True})

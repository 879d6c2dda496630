"""The ``meanfield`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: Subcommand modules, in the order ``meanfield --help`` lists them.
SUBCOMMANDS: tuple[str, ...] = ("demo", "spde", "chaos", "depth", "sync")


def build_parser() -> argparse.ArgumentParser:
    from meanfield import __version__

    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Stochastic mean-field theory of deep transformers.",
    )
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"meanfield.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        # No subcommand: run the demo on its defaults, so `meanfield` alone does something useful.
        args = parser.parse_args(["demo", *(argv or [])])
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError) as exc:
        print(f"meanfield {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

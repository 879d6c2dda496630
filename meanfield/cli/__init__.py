"""The ``meanfield`` command line.

Each subcommand lives in its own module of this package and exposes the same two entry
points: ``register(subparsers)``, which adds its parser (and sets ``func``), and
``main(args) -> int``, which runs it and returns the exit code. :func:`main` turns the
errors of a subcommand into one line on stderr and a documented exit code
(:data:`~meanfield.cli._common.EXIT_CODES_HELP`): 0 success, 1 failed study tasks,
2 usage or invalid input, 3 unresolved SPDE solver, 4 file-system error, 5 unreachable
Dask scheduler, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import meanfield

from ._common import (
    EXIT_CODES_HELP,
    EXIT_FILESYSTEM,
    EXIT_INTERRUPTED,
    EXIT_UNRESOLVED,
    EXIT_USAGE,
    CommandError,
    HelpFormatter,
    fs_error,
)

#: Subcommand modules, in the order ``meanfield --help`` lists them.
SUBCOMMANDS: tuple[str, ...] = ("demo", "spde", "chaos", "depth", "sync", "meta")

#: One-line summary of each subcommand (its ``help`` in ``meanfield --help``).
SUMMARIES: dict[str, str] = {
    "demo": "transformer vs SDE on one noise path (S^2 defaults), summary + trajectory plot",
    "spde": "solve the McKean-Vlasov SPDE on S^1 / S^2 and save coefficients and a figure",
    "chaos": "propagation of chaos: particles vs SPDE rate tables and figures on S^1 / S^2",
    "depth": "strong error in depth L, error in law in width m, (L, m) iterated limits",
    "sync": "Lyapunov exponents (activation x d) and decay of the gap energy vs beta",
    "meta": "metastable cluster plateaus, escape by common noise, time to one cluster over (beta, sigma)",
}


def build_parser(commands=None) -> argparse.ArgumentParser:
    """The ``meanfield`` parser with the subcommands in ``commands`` (default: all) fully registered.

    The others get only their name and summary, so that ``meanfield --help`` and one
    subcommand do not import the modules (and the study packages) of all the others.
    """
    parser = argparse.ArgumentParser(
        prog="meanfield",
        description="Stochastic mean-field theory of deep transformers. Run 'meanfield COMMAND --help' for the "
                    "options of a command; without a command, runs the demo.",
        epilog=EXIT_CODES_HELP,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"meanfield {meanfield.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        if commands is None or name in commands:
            importlib.import_module(f"meanfield.cli.{name}").register(sub)
        else:
            sub.add_parser(name, help=SUMMARIES[name], add_help=False)
    return parser


def _commands(argv: list[str]) -> set[str]:
    """Subcommands ``argv`` may run: the first word that is not an option, else the demo (the
    default); none when the top-level ``--help`` or ``--version`` comes first."""
    for word in argv:
        if word in ("-h", "--help", "--version"):
            return set()
        if not word.startswith("-"):
            return {word} if word in SUBCOMMANDS else {"demo"}
    return {"demo"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_commands(argv))
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        # No subcommand: run the demo on its defaults, so `meanfield` alone does something useful.
        args = parser.parse_args(["demo", *(argv or [])])
    prefix = f"meanfield {args.command}: error:"
    try:
        return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return exc.code
    except (ValueError, TypeError) as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:
        hint = " (the Dask executor needs: pip install 'meanfield[distributed]')" if "dask" in str(exc).lower() else ""
        print(f"{prefix} {exc}{hint}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        err = fs_error("file-system error on", exc.filename or "?", exc)
        print(f"{prefix} {err}", file=sys.stderr)
        return EXIT_FILESYSTEM
    except KeyboardInterrupt:
        print(f"\nmeanfield {args.command}: interrupted (finished study tasks are kept in --store, if given)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - an unresolved SPDE, or a bug: one line, not a traceback
        from meanfield.spde import SPDEResolutionError

        if isinstance(exc, SPDEResolutionError):
            print(f"{prefix} {exc}", file=sys.stderr)
            return EXIT_UNRESOLVED
        raise


__all__ = ["SUBCOMMANDS", "build_parser", "main"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

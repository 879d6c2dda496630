"""Shared execution options of the CLI subcommands that run studies.

A subcommand adds the options with :func:`add_execution_arguments`, passes
``**execution_kwargs(args)`` to :func:`meanfield.runner.run_study` and ends
with :func:`report_location`::

    def register(subparsers):
        parser = subparsers.add_parser("chaos", help="propagation of chaos rates")
        add_execution_arguments(parser)
        parser.set_defaults(func=main)

    def main(args):
        result = run_study(make_study(args), **execution_kwargs(args))
        report_location(result)
        return 1 if result.failures else 0

This module is a helper, not a subcommand (it has no ``register``).
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_execution_arguments", "execution_kwargs", "report_location"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_preset_arguments(parser: argparse.ArgumentParser, presets, *, quick_help: str, full_help: str,
                         default: str = "quick") -> argparse.ArgumentParser:
    """Add the mutually exclusive preset choice of a study subcommand.

    ``--quick`` and ``--full`` select those presets, ``--test`` the ``"test"`` preset when
    the study has one, and ``--preset NAME`` any preset by name; ``args.preset`` defaults
    to ``default``.

    Examples
    --------
    >>> p = add_preset_arguments(argparse.ArgumentParser(), ["quick", "full"],
    ...                          quick_help="quick", full_help="full")
    >>> p.parse_args([]).preset, p.parse_args(["--full"]).preset
    ('quick', 'full')
    """
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="preset", action="store_const", const="quick", help=quick_help)
    size.add_argument("--full", dest="preset", action="store_const", const="full", help=full_help)
    if "test" in presets:
        size.add_argument("--test", dest="preset", action="store_const", const="test",
                          help="test preset (seconds)")
    size.add_argument("--preset", dest="preset", choices=sorted(presets), help="any preset by name")
    parser.set_defaults(preset=default)
    return parser


def add_execution_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the study execution options to a subcommand's parser.

    Options: ``--executor {serial,pool,dask}``, ``--workers N``,
    ``--scheduler ADDRESS``, ``--store DIR``, ``--resume/--no-resume``
    (default: resume) and ``--no-progress``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser.

    Returns
    -------
    argparse.ArgumentParser
        ``parser``, for chaining.

    Examples
    --------
    >>> parser = add_execution_arguments(argparse.ArgumentParser())
    >>> parser.parse_args(["--workers", "2", "--no-resume"]).resume
    False
    """
    group = parser.add_argument_group("execution")
    group.add_argument(
        "--executor",
        choices=("serial", "pool", "dask"),
        default=None,
        help="where tasks run: serial (this process), pool (local worker processes; the default) "
        "or dask (a Dask cluster; the default when --scheduler is given)",
    )
    group.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="worker processes of the local pool or local Dask cluster (default: all CPU cores)",
    )
    group.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run on the Dask cluster at ADDRESS, e.g. tcp://10.0.0.5:8786 (needs meanfield[distributed])",
    )
    group.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="result store directory: every finished task is saved there, and a rerun resumes from it "
        "(default: results are not saved)",
    )
    group.add_argument(
        "--resume",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reuse finished tasks found in --store (default: on); --no-resume computes every task again",
    )
    group.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        default=True,
        help="do not show the progress bar",
    )
    return parser


def execution_kwargs(args: argparse.Namespace) -> dict:
    """Turn parsed execution options into keyword arguments of ``run_study``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments of a parser set up by :func:`add_execution_arguments`.

    Returns
    -------
    dict
        ``executor``, ``workers``, ``scheduler``, ``store``, ``resume`` and
        ``progress``.

    Examples
    --------
    >>> parser = add_execution_arguments(argparse.ArgumentParser())
    >>> execution_kwargs(parser.parse_args(["--store", "out/chaos"]))["store"]
    'out/chaos'
    """
    return {
        "executor": args.executor,
        "workers": args.workers,
        "scheduler": args.scheduler,
        "store": args.store,
        "resume": args.resume,
        "progress": args.progress,
    }


def report_location(result, file=None) -> str:
    """Print (and return) where a study's results are and how to read them.

    Parameters
    ----------
    result : meanfield.runner.StudyResult
        The result of ``run_study``.
    file : file-like or None
        Where to print; default ``sys.stdout``.

    Returns
    -------
    str
        The printed text.

    Examples
    --------
    >>> report_location(result)  # doctest: +SKIP
    study 'chaos': 40 tasks done (12 resumed from the store, 28 computed), 0 failed
    results: out/chaos  (read with meanfield.store.load_store('out/chaos'))
    """
    done = len(result.frame)
    lines = [
        f"study {result.study.name!r}: {done} tasks done ({result.n_resumed} resumed from the store, "
        f"{result.n_computed} computed), {len(result.failures)} failed"
    ]
    if result.store is None:
        lines.append("results: not saved (pass --store DIR to keep them and to resume an interrupted run)")
    else:
        lines.append(f"results: {result.store}  (read with meanfield.store.load_store({str(result.store)!r}))")
    if result.failures:
        lines.append("failed tasks (rerun with the same --store to retry only these):")
        lines.extend(f"  {f.params}: {f.error}" for f in result.failures)
    text = "\n".join(lines)
    print(text, file=file if file is not None else sys.stdout)
    return text

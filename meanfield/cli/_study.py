"""The body shared by the study subcommands (``chaos``, ``depth``, ``sync``): check, run, analyse, write, print.

A study subcommand builds its parser with :func:`study_parser` and its ``main(args)`` calls
:func:`run_study_command` with the study package (which follows the convention of
:mod:`meanfield.studies._common`) and the resolved configuration.
"""

from __future__ import annotations

import os
import platform
import sys
import time

import meanfield
from meanfield.studies import _common as study_common

from ._common import (
    EXIT_CODES_HELP,
    EXIT_FAILED_TASKS,
    EXIT_FILESYSTEM,
    EXIT_SCHEDULER,
    CommandError,
    HelpFormatter,
    check_output_dir,
    check_scheduler,
    fs_error,
    save_fallback,
)
from .execution import add_execution_arguments, add_preset_arguments, execution_kwargs, report_location

__all__ = ["study_parser", "run_study_command"]


def study_parser(subparsers, name: str, *, help: str, description: str, presets, out_default: str,
                 quick_help: str, full_help: str, seed_help: str = "root seed of the study"):
    """Add a study subcommand with the preset choice, ``--out``, ``--seed`` and the execution options;
    the caller adds its own options to the returned parser and sets ``func``."""
    p = subparsers.add_parser(name, help=help, description=description, epilog=EXIT_CODES_HELP,
                              formatter_class=HelpFormatter)
    add_preset_arguments(p, presets, quick_help=quick_help, full_help=full_help)
    p.add_argument("--out", default=out_default, metavar="DIR",
                   help="output directory (created; tables, figures, summary.md and config.json)")
    p.add_argument("--seed", type=int, default=0, help=seed_help)
    add_execution_arguments(p)
    return p


def _machine() -> str:
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, meanfield {meanfield.__version__}")


def run_study_command(args, study, cfg: dict, *, parts=None, substores: bool = True,
                      analyse_kwargs: dict | None = None) -> int:
    """Check the outputs, run ``study.build(cfg)``'s parts, analyse, write the outputs and print the summary.

    Returns the exit code: 0, or 1 when tasks failed (finished ones are in ``--store``).
    Raises :class:`~meanfield.cli._common.CommandError` for file-system (4) and scheduler (5)
    failures; if the outputs cannot be written after computing, the report is pickled to a
    fallback file named in the message.
    """
    out = check_output_dir(args.out)
    if args.store is not None:
        check_output_dir(args.store, "cannot create the result store")
    check_scheduler(args.scheduler)
    studies = study.build(cfg, args.seed, parts)
    execution = execution_kwargs(args)
    store = execution.pop("store")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    start = time.perf_counter()
    try:
        # looked up when called, so that a test can stand in for the computation
        results, seconds = study_common.run_parts(studies, store=store, substores=substores, raise_on_failure=False, **execution)
    except OSError as exc:
        if args.scheduler is not None and not getattr(exc, "filename", None):
            raise CommandError(f"lost the Dask scheduler {args.scheduler!r}: {exc}", EXIT_SCHEDULER) from None
        raise fs_error("file-system error on", getattr(exc, "filename", None) or store, exc) from None
    wall = time.perf_counter() - start
    if any(r.failures for r in results.values()):
        for r in results.values():
            report_location(r)
        return EXIT_FAILED_TASKS
    report = study.analyse(results, cfg, seconds=seconds, **(analyse_kwargs or {}))
    n_tasks = sum(len(r.frame) for r in results.values())
    n_comp = sum(r.n_computed for r in results.values())
    extra = {"Run": f"{n_tasks} tasks, {n_comp} computed, {n_tasks - n_comp} resumed from the store; wall time "
                    f"{wall:.1f} s (load average {load:.1f} at the start); executor {args.executor or ('dask' if args.scheduler else 'pool')}"
                    + (f", {args.workers} workers" if args.workers else "") + f". Machine: {_machine()}."}
    settings = {"command": ["meanfield", *sys.argv[1:]] if sys.argv and "meanfield" in sys.argv[0] else None,
                "seed": args.seed, "store": None if store is None else str(store)}
    try:
        files = study.write_outputs(report, out, extra=extra, settings=settings)
    except OSError as exc:
        saved = save_fallback(report, getattr(args, "command", None) or "study")
        raise CommandError(f"cannot write the outputs to {str(out)!r}: {exc.strerror or exc}; the computed "
                           f"results were saved to {saved} (read them with pickle.load)", EXIT_FILESYSTEM) from None
    print(study.console_summary(report))
    print()
    for r in results.values():
        report_location(r)
    n_files = sum(len(v) if isinstance(v, list) else 1 for v in files.values())
    print(f"wall time {wall:.1f} s; {n_files} files (tables, figures, summary.md, config.json) in {out}")
    return 0

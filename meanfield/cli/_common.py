"""Helpers shared by the subcommands: help formatting, exit codes, checks made before computing, fallbacks.

Every check turns a failure into :class:`CommandError`, which :func:`meanfield.cli.main`
prints as one line ``meanfield COMMAND: error: ...`` on stderr and turns into its exit code.
"""

from __future__ import annotations

import argparse
import os
import pickle
import socket
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "EXIT_OK", "EXIT_FAILED_TASKS", "EXIT_USAGE", "EXIT_UNRESOLVED", "EXIT_FILESYSTEM", "EXIT_SCHEDULER",
    "EXIT_INTERRUPTED", "EXIT_CODES_HELP", "CITATION", "CommandError", "HelpFormatter", "check_output_dir",
    "check_output_file", "check_scheduler", "fs_error", "save_fallback",
]

EXIT_OK = 0
EXIT_FAILED_TASKS = 1
EXIT_USAGE = 2
EXIT_UNRESOLVED = 3
EXIT_FILESYSTEM = 4
EXIT_SCHEDULER = 5
EXIT_INTERRUPTED = 130

#: The exit-code table printed at the end of every ``--help``.
EXIT_CODES_HELP = """exit codes:
  0    success
  1    some study tasks failed (finished ones are in --store; rerun to retry the others)
  2    usage error or invalid input (bad option or parameter value, unparseable --config)
  3    the SPDE solver lost resolution (a partial solution is saved)
  4    file-system error: an output, --store or --config path cannot be created, written or read
  5    the Dask scheduler given by --scheduler cannot be reached
  130  interrupted (Ctrl-C)"""

CITATION = ("Agazzi, Bruno, Mosig García, Saviozzi, Romito, \"Stochastic Scaling Limits\n"
            "and Synchronization by Noise in Deep Transformer Models\", arXiv 2604.26898")


class CommandError(Exception):
    """A failure a subcommand reports as one line on stderr, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks and appends ``(default: X)`` to options that have a default."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        # identity, not ``in``: a default of 0 equals False and must still be shown
        if ("default" in text or default is None or default is False or default is argparse.SUPPRESS
                or not action.option_strings
                or isinstance(action, (argparse._StoreConstAction, argparse._HelpAction))):
            return text
        if isinstance(default, (list, tuple)):
            default = " ".join(map(str, default))
        return f"{text} (default: {default})"


def fs_error(what: str, path, exc: BaseException) -> CommandError:
    """A file-system :class:`CommandError` naming ``path`` and the cause."""
    cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return CommandError(f"{what} {str(path)!r}: {cause}", EXIT_FILESYSTEM)


def check_output_dir(path, what: str = "cannot write the output directory") -> Path:
    """Create directory ``path`` (with parents) and write and delete a probe file in it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".meanfield-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise fs_error(what, path, exc) from None
    return path


def check_output_file(path, what: str = "cannot write the output file") -> Path:
    """Check that file ``path`` can be written: its directory is created and probed, an existing
    file must be writable and not a directory."""
    path = Path(path)
    if path.is_dir():
        raise CommandError(f"{what} {str(path)!r}: it is a directory", EXIT_FILESYSTEM)
    check_output_dir(path.parent if str(path.parent) else Path("."), what)
    if path.exists() and not os.access(path, os.W_OK):
        raise CommandError(f"{what} {str(path)!r}: permission denied", EXIT_FILESYSTEM)
    return path


def check_scheduler(address, timeout: float = 3.0) -> None:
    """Check that a Dask scheduler at ``address`` (``tcp://host:port``) accepts a connection within ``timeout`` s."""
    if address is None or not isinstance(address, str):
        return
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls", "ws", "wss"):
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise CommandError(f"bad --scheduler address {address!r}: expected e.g. tcp://host:8786", EXIT_USAGE) from None
    if not host:
        raise CommandError(f"bad --scheduler address {address!r}: expected e.g. tcp://host:8786", EXIT_USAGE)
    try:
        with socket.create_connection((host, port or 8786), timeout=timeout):
            pass
    except OSError as exc:
        cause = exc.strerror or str(exc) or type(exc).__name__
        raise CommandError(f"cannot reach the Dask scheduler {address!r} within {timeout:g} s: {cause}",
                           EXIT_SCHEDULER) from None


def save_fallback(obj, command: str, suffix: str = ".pkl") -> Path:
    """Pickle ``obj`` into the current directory, or the temporary directory if that fails; return the path."""
    name = f"meanfield-{command}-results-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{suffix}"
    last = None
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        try:
            path = folder / name
            with open(path, "wb") as f:
                pickle.dump(obj, f)
            return path
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
            last = exc
    raise CommandError(f"could not save the computed results anywhere: {last}", EXIT_FILESYSTEM)

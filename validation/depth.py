"""Regenerate the committed depth/width convergence results in ``validation/depth/``.

Runs ``meanfield depth --quick`` on a local pool of 2 workers into ``validation/depth``; the
tables, figures, ``summary.md`` and ``config.json`` are written by the command itself.
Extra options are passed on to it (a preset option replaces ``--quick``), e.g. ``python validation/depth.py --workers 1``.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from meanfield.cli import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    preset = [] if {"--quick", "--full", "--test", "--preset"} & set(argv) else ["--quick"]
    sys.exit(main(["depth", *preset, "--workers", "2", "--out", str(HERE / "depth"), *argv]))

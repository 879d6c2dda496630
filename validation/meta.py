"""Regenerate the committed metastability results in ``validation/meta/``.

Runs ``meanfield meta --quick`` on a local pool of 2 workers into ``validation/meta``; the
tables, figures, ``summary.md`` and ``config.json`` are written by the command itself.
Extra options are passed on to it (a preset option replaces ``--quick``), e.g. ``python validation/meta.py --workers 1``.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from meanfield.cli import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    preset = [] if {"--quick", "--full", "--test", "--preset"} & set(argv) else ["--quick"]
    sys.exit(main(["meta", *preset, "--workers", "2", "--out", str(HERE / "meta"), *argv]))

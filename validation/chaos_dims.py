"""Regenerate the committed cross-dimension propagation-of-chaos results (d = 2, 3, 4, 5) in ``validation/chaos/``.

Runs ``meanfield chaos --quick --parts dims`` on a local pool of 2 workers into
``validation/chaos``; the table ``dims_table``, the figure ``dims_figure``, ``dims_summary.md`` and
``dims_config.json`` are written by the command itself (the files of the other parts are left as
they are). Extra options are passed on to it, e.g. ``python validation/chaos_dims.py --workers 1``.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from meanfield.cli import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    preset = [] if {"--quick", "--full", "--preset"} & set(argv) else ["--quick"]
    sys.exit(main(["chaos", *preset, "--parts", "dims", "--workers", "2", "--out", str(HERE / "chaos"), *argv]))

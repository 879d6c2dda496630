"""Regenerate the circle results (reproduction of arXiv 2507.22857) in ``validation/meta/circle_*``.

Runs the three circle parts of the metastability study (:mod:`meanfield.studies.circle`:
thresholds of k equally spaced clusters, eigenvalues against perturbation runs, fraction of
random starts that synchronise) on a local pool of 2 workers and writes their tables, figures,
``circle_summary.md`` and ``circle_config.json`` into ``validation/meta``. The committed files are
from ``--full`` (N = 16 ... 256, 40 starts per point); ``--quick`` (the default, about 2 minutes
on 2 cores) is the quick preset of the study. Example: ``python validation/circle.py --full``.
"""

import argparse
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import meanfield  # noqa: E402
from meanfield.studies import circle  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    for name in circle.PRESETS:
        group.add_argument(f"--{name}", dest="preset", action="store_const", const=name, help=f"{name} preset")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(HERE / "meta"))
    args = parser.parse_args(argv)
    preset = args.preset or "quick"
    load = os.getloadavg()[0]
    start = time.perf_counter()
    report = circle.run(preset, root_seed=args.seed, executor="pool", workers=args.workers, progress=False)
    wall = time.perf_counter() - start
    machine = (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python "
               f"{platform.python_version()}, meanfield {meanfield.__version__}")
    extra = {"Run": f"`python validation/circle.py --{preset}`: wall time {wall:.1f} s on {args.workers} workers, "
                    f"load average {load:.1f} at the start. Machine: {machine}."}
    files = circle.write_outputs(report, args.out, extra=extra, settings={"seed": args.seed, "workers": args.workers})
    print(circle.console_summary(report))
    print(f"wall time {wall:.1f} s; {sum(len(v) for v in files.values())} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

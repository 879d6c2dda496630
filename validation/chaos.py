"""Regenerate the committed propagation-of-chaos results (SPEC §9) in ``validation/chaos/``.

Runs the ``quick`` preset of :mod:`meanfield.studies.chaos` on S^1 and S^2 twice on a local
process pool — once with 1 worker, once with 2 — checks that both runs give the same
table, and writes from the 2-worker run:

- ``table_s1.{csv,md,tex}``, ``table_s2.{csv,md,tex}``: rate tables;
- ``figure_s1.{png,pdf}``, ``figure_s2.{png,pdf}``: log–log figures with theory lines;
- ``spde_check.{csv,md}``, ``diagnostics.csv``;
- ``summary.md``: fitted exponents with CIs and verdicts, the SPDE-error check, the wall
  time of each run, the 2-vs-1 worker speed-up and the machine.

Usage (from the repository root)::

    python validation/chaos.py                 # both runs, about 5 minutes on 2 cores
    python validation/chaos.py --no-speedup    # the 2-worker run only
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _timed_run(workers: int, preset: str):
    from meanfield.runner import run_study
    from meanfield.studies.chaos import chaos_study

    study = chaos_study(preset, "both")
    start = time.perf_counter()
    result = run_study(study, executor="pool", workers=workers, progress=True, raise_on_failure=True)
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    import numpy as np
    import pandas as pd

    from meanfield import __version__
    from meanfield.rates import to_markdown
    from meanfield.studies.chaos import analyse_chaos, write_chaos_outputs

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="quick", help="study preset (default quick)")
    parser.add_argument("--out", default=str(HERE / "chaos"), help="output directory (default validation/chaos)")
    parser.add_argument("--no-speedup", dest="speedup", action="store_false", help="skip the 1-worker run")
    args = parser.parse_args(argv)

    timings = {}
    if args.speedup:
        result1, timings[1] = _timed_run(1, args.preset)
    result2, timings[2] = _timed_run(2, args.preset)
    report = analyse_chaos(result2)

    lines = [f"Preset `{args.preset}`, S^1 and S^2 together ({len(result2.frame)} tasks: one per sphere and "
             "replica), local process pool (`run_study(executor='pool')`), no result store."]
    lines.append("")
    lines.append("| workers | wall time (s) |")
    lines.append("|---|---|")
    for w, t in sorted(timings.items()):
        lines.append(f"| {w} | {t:.1f} |")
    speed = ""
    if 1 in timings:
        same = result1.frame.drop(columns=[c for c in result1.frame if c.endswith("_seconds")]).equals(
            result2.frame.drop(columns=[c for c in result2.frame if c.endswith("_seconds")]))
        same = same and all(np.array_equal(a, b, equal_nan=True)
                            for e in ("coupling", "w2", "observable")
                            for a, b in zip(result1.arrays[e], result2.arrays[e]))
        speed = (f"Speed-up of 2 workers over 1: {timings[1] / timings[2]:.2f}× "
                 f"({timings[1]:.1f} s → {timings[2]:.1f} s). The two runs give "
                 + ("identical results (all errors bit-for-bit)." if same else "DIFFERENT results (a bug)."))
        lines.append("")
        lines.append(speed)
        lines.append("ducc0 and the spectral transforms use up to 2 threads per process, so the 1-worker run "
                     "already uses part of the second core; the speed-up is below 2 for that reason and because "
                     "the S^2 replicas (W_2 by the network simplex) take several times longer than the S^1 ones.")
    per = report.diagnostics.set_index("sphere")
    lines.append("")
    lines.append("Mean time per replica (s), from the task records:")
    lines.append("")
    lines.append(to_markdown(pd.DataFrame({
        "sphere": [f"S^{s}" for s in per.index],
        "SPDE (lmax and check)": per["spde_seconds"].values,
        "particles (all N)": per["particle_seconds"].values,
        "X̄ coupling paths": per["coupling_seconds"].values,
        "W_2": per["w2_seconds"].values,
    }), floatfmt=".3g"))
    machine = (f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({_cpu_model()}), "
               f"Python {platform.python_version()}, meanfield {__version__}.")
    extra = {"Run time and speed-up": "\n".join(lines), "Machine": machine}
    files = write_chaos_outputs(report, args.out, extra=extra)
    for sphere in report.spheres:
        print(f"S^{sphere}")
        print(report.summaries[sphere].to_string(index=False))
    print(report.spde_check.to_string(index=False))
    if speed:
        print(speed)
    print(f"wrote {len(files)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cost of the characteristics scheme per node per step on S^{d-1}, d = 3, 4, 5.

vMF(κ = 1, mean e_d), ReLU random-feature noise of width 256 (fresh weights every step),
β = 1, h = 2^-5, 8 steps, no splitting. Per (d, M): wall time, µs per node per step with
attention (S^2: spectral; d >= 4: the blocked direct sum, O(M) per node) and without it
(noise field, its Jacobian and the step map only), and their ratio. The direct sum makes the
cost per node grow linearly with M; the ratios come from one run (load noted per row).

Usage: ``python benchmarks/characteristics_anyd.py [--out FILE]`` (writes
``benchmarks/results_characteristics_anyd.md``).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from meanfield.kernels import ActivationKernel
from meanfield.noise import RandomFeatureNoise
from meanfield.spde import VonMisesFisher, solve_characteristics

CASES = [(3, 2048), (3, 8192), (4, 2000), (4, 8192), (5, 2592), (5, 8192)]


def _load() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def one(d: int, M: int, attention: bool, steps: int = 8, dt: float = 2.0**-5):
    mu = np.zeros(d)
    mu[-1] = 1.0
    noise = RandomFeatureNoise(ActivationKernel("relu"), d=d, width=256, seed=1, t_max=steps * dt)
    t0 = time.perf_counter()
    sol = solve_characteristics(VonMisesFisher(mu, 1.0), noise, 1.0, [0.0, steps * dt], dt, M=M,
                                attention=attention, split=False, tol=None)
    wall = time.perf_counter() - t0
    return sol.meta["M"], wall, sol.meta["timing"]["us_per_node_step"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results_characteristics_anyd.md"))
    args = ap.parse_args()
    lines = ["# Characteristics scheme: cost per node per step on S^{d-1}", "",
             "vMF(κ=1, e_d), ReLU random-feature noise (width 256), β = 1, h = 2^-5, 8 steps, no splitting. "
             f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs); load average "
             "(1, 5, 15 min) before each row.", "",
             "| d | M | attention | wall [s] | µs/node/step | µs/node/step without attention | ratio | load |",
             "|---|---|---|---|---|---|---|---|"]
    for d, M in CASES:
        load = _load()
        m, wall, us = one(d, M, True)
        _, _, us0 = one(d, M, False)
        method = "spectral" if d <= 3 else "direct"
        row = f"| {d} | {m} | {method} | {wall:.2f} | {us:.1f} | {us0:.1f} | {us / us0:.1f} | {load} |"
        print(row, flush=True)
        lines.append(row)
    text = "\n".join(lines) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

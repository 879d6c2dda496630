"""Benchmark of the characteristics scheme on S^2 to the synchronised regime.

vMF(κ = 4, mean e_z), ReLU noise of degree 8 (one NoisePath, t_max = T), h = 2^-6, T = 8,
β = 1 and β = 4, M ≈ 10^5 nodes (n_lat = 224) against 2M (n_lat = 317), with and without
adaptive splitting. Prints a table and writes ``benchmarks/results_characteristics.md``:
time to T, µs per node per step, M-doubling changes of the degree <= 4 moments at t = 1, 2, 8,
and variance / gap energy E_β at t = 8 at both resolutions.

Usage: ``python benchmarks/characteristics.py [--n-lat 224] [--betas 1,4] [--seed 1] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

from meanfield.spde import solve_characteristics
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath
from meanfield.spde import VonMisesFisher

T_EVAL = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]


def _load() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def run(beta: float, n_lat: int, split: bool, seed: int, T: float, dt: float):
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=8, seed=seed, t_max=T)
    te = [t for t in T_EVAL if t <= T]
    load0 = _load()
    t0 = time.perf_counter()
    sol = solve_characteristics(VonMisesFisher([0, 0, 1.0], 4.0), noise, beta, te, dt, n_lat=n_lat, split=split,
                                tol=None)
    wall = time.perf_counter() - t0
    return sol, wall, load0, _load()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-lat", type=int, default=224)
    ap.add_argument("--betas", default="1,4")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--T", type=float, default=8.0)
    ap.add_argument("--dt", type=float, default=2.0**-6)
    ap.add_argument("--splits", default="0,1", help="which of split=False (0) / True (1) to run")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results_characteristics.md"))
    args = ap.parse_args()
    n1 = args.n_lat
    n2 = int(round(n1 * math.sqrt(2)))
    lines = []

    def emit(s=""):
        print(s, flush=True)
        lines.append(s)

    emit("# Characteristics scheme: long-horizon benchmark on S^2")
    emit()
    emit(f"vMF(κ=4, e_z), ReLU noise l_σ=8 (NoisePath seed {args.seed}, t_max=T), h = {args.dt:g}, "
         f"T = {args.T:g}; "
         f"M = 2 n_lat² with n_lat = {n1} (M = {2 * n1 * n1}) and {n2} (M = {2 * n2 * n2}).")
    emit(f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs); "
         f"load average (1, 5, 15 min) given per run. Python {platform.python_version()}.")
    emit()
    emit("| β | split | M | wall to T [s] | µs/node/step | final nodes | splits | var(T) | E_β(T) | load before / after |")
    emit("|---|---|---|---|---|---|---|---|---|---|")
    results = {}
    for beta in [float(b) for b in args.betas.split(",")]:
        for split in [s == "1" for s in args.splits.split(",")]:
            for nl in (n1, n2):
                sol, wall, la, lb = run(beta, nl, split, args.seed, args.T, args.dt)
                results[(beta, split, nl)] = sol
                d = sol.diagnostics(-1)
                emit(f"| {beta:g} | {split} | {sol.meta['M']} | {wall:.1f} | "
                     f"{sol.meta['timing']['us_per_node_step']:.2f} | {d['n_nodes']} | {d['n_splits']} | "
                     f"{sol.variance(-1):.4e} | {sol.energy(-1):.4e} | {la} / {lb} |")
    emit()
    emit("M-doubling: max over the real harmonic coefficients of degree <= 4 of |c(M) - c(2M)|, "
         "and relative change of the variance 1 - |E x|² and of E_β.")
    emit()
    emit("| β | split | t | max Δ moments (deg ≤ 4) | var(M) | var(2M) | rel Δ var | E_β(M) | E_β(2M) | rel Δ E_β | "
         "area defect (M / 2M) | unresolved mass (M / 2M) |")
    emit("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (beta, split, nl), a in results.items():
        if nl != n1 or (beta, split, n2) not in results:
            continue
        b = results[(beta, split, n2)]
        for i, t in enumerate(a.times):
            if t not in (1.0, 2.0, 4.0, 8.0):
                continue
            dm = np.abs(a.moments(i, 4) - b.moments(i, 4)).max()
            va, vb = a.variance(i), b.variance(i)
            ea, eb = a.energy(i), b.energy(i)
            da, db = a.diagnostics(i), b.diagnostics(i)
            emit(f"| {beta:g} | {split} | {t:g} | {dm:.2e} | {va:.4e} | {vb:.4e} | {abs(va - vb) / vb:.2e} | "
                 f"{ea:.4e} | {eb:.4e} | {abs(ea - eb) / eb:.2e} | {da['area_defect']:.2e} / {db['area_defect']:.2e} | "
                 f"{da['unresolved_mass']:.2e} / {db['unresolved_mass']:.2e} |")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

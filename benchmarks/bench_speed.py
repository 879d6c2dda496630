"""Speed benchmark of the hot paths: attention drift, particle step, SPDE steps, studies.

Run from the repository root:

    python benchmarks/bench_speed.py            # every row (a few minutes)
    python benchmarks/bench_speed.py --quick    # smaller sizes, no chaos study / exact W_2 rows
    python benchmarks/bench_speed.py --root OTHER_CHECKOUT   # time another checkout's package

Method: every timing is the minimum over ``--repeat`` (>= 3) runs; rows that are compared
(e.g. an SPDE step and the transform pair it is measured against) are timed interleaved in
the same loop, so that the load of a shared machine affects both alike. The load averages
are printed with every row.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load() -> str:
    try:
        return "load %.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover
        return "load n/a"


def interleaved(fns: dict, repeat: int) -> dict:
    """Minimum wall time (s) of each callable over ``repeat`` rounds, calls interleaved round by round."""
    best = {k: math.inf for k in fns}
    for f in fns.values():  # warm-up (plans, caches, thread pools)
        f()
    for _ in range(repeat):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def row(name: str, value: str) -> None:
    print(f"{name:<58s} {value:<48s} [{load()}]", flush=True)


def unit(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ----------------------------------------------------------------------------- attention
def bench_attention(args) -> None:
    from meanfield.attention import attention_velocity
    from meanfield.attention_spectral import SpectralAttention

    rng = np.random.default_rng(0)
    beta = 0.1
    Ns = [10**4, 10**5, 10**6] if not args.quick else [10**4, 10**5, 3 * 10**5]
    for tol in (1e-10, 1e-6):
        sa = SpectralAttention(3, beta, tol=tol)
        times = []
        for N in Ns:
            x = unit(rng, N, 3)
            t = interleaved({"v": lambda: sa.velocity(x, check=False)}, args.repeat)["v"]
            times.append(t)
            row(f"attention drift S^2 beta=0.1 tol={tol:g} N={N:.0e}", f"{t * 1e3:9.2f} ms  (L={sa.last_lmax})")
        slope = np.polyfit(np.log(Ns), np.log(times), 1)[0]
        row(f"  cost exponent N={Ns[0]:.0e}..{Ns[-1]:.0e} tol={tol:g}", f"{slope:.2f}")
    # ratio to the package's direct O(N^2) path
    Nd = 4000 if args.quick else 20000
    x = unit(rng, Nd, 3)
    sa = SpectralAttention(3, beta, tol=1e-10)
    # the direct sum takes seconds: warm-up + 2 runs for it, the usual repeats for the spectral path
    t = interleaved({"direct": lambda: attention_velocity(x, beta)}, 2)
    t.update(interleaved({"spectral": lambda: sa.velocity(x, check=False)}, args.repeat))
    err = float(np.abs(sa.velocity(x) - attention_velocity(x, beta)).max())
    row(f"attention direct vs spectral N={Nd} (tol 1e-10)",
        f"direct {t['direct']:.3f} s, spectral {t['spectral'] * 1e3:.2f} ms, x{t['direct'] / t['spectral']:.0f}, err {err:.1e}")
    row("  peer dense step at N=2e4 (authors' figure, not measured)",
        f"20-38 s: x{20 / t['spectral']:.0f}-{38 / t['spectral']:.0f} vs spectral" if Nd == 20000 else "n/a in --quick")


# ----------------------------------------------------------------------------- particles
def bench_particles(args) -> None:
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.particles import solve_particles

    rng = np.random.default_rng(1)
    N = 10**5
    x = unit(rng, N, 3)
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=6, seed=0, t_max=1.0)
    dt, k = 2.0**-6, 8
    meta = {}

    def run():
        sol = solve_particles(x, noise, 0.1, dt, [k * dt])
        meta.update(sol.meta)

    t = interleaved({"p": run}, args.repeat)["p"] / k
    acc = meta.get("accuracy", {"attention_tol": "1e-10 (fixed)", "noise_epsilon": "1e-12 (fixed)"})
    row(f"particle Euler step S^2 N=1e5 noise l=6 beta=0.1 dt=2^-6",
        f"{t * 1e3:8.2f} ms  (attention {meta.get('attention')}, tol {acc['attention_tol']}, noise eps {acc['noise_epsilon']})")


# ----------------------------------------------------------------------------- SPDE
def bench_spde(args) -> None:
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.sphere import basis

    for d, lmaxes in ((3, (64, 128) if args.quick else (64, 128, 256)), (2, (128, 512))):
        noise = NoisePath(ActivationKernel("relu"), d=d, lmax=6, seed=0, t_max=1.0)
        mu = [0.0] * (d - 1) + [1.0]
        for L in lmaxes:
            b = basis(d, L)
            g = b.grid()
            c = b.zeros()
            c[0] = 1.0
            dt = 2.0**-12

            def spde(scheme, n):
                return lambda: solve_spde(VonMisesFisher(mu, 2.0), noise, beta=1.0, lmax=L, dt=dt,
                                          t_eval=[0.0, n * dt], scheme=scheme, tail_tol=1.0, neg_tol=10.0)

            fns = {"pair": lambda: g.analysis(g.synth(c))}
            for s in ("exponential", "pushforward"):
                fns[s + "1"] = spde(s, 1)
                fns[s + "5"] = spde(s, 5)
            t = interleaved(fns, args.repeat)
            pair = t["pair"]
            what = "ducc0 GL synthesis+analysis" if d == 3 else "grid synthesis+analysis"
            if d == 2:
                M = g.M
                f = np.random.default_rng(0).normal(size=M)
                fft = interleaved({"fft": lambda: np.fft.irfft(np.fft.rfft(f), n=M)}, args.repeat)["fft"]
                row(f"S^1 lmax={L}: FFT pair (rfft+irfft, M={M})", f"{fft * 1e6:8.1f} us; grid pair {pair * 1e6:.1f} us")
                pair_ref, ref_name = fft, "FFT pair"
            else:
                row(f"S^2 lmax={L}: {what}", f"{pair * 1e3:8.3f} ms")
                pair_ref, ref_name = pair, "pair"
            for s in ("exponential", "pushforward"):
                step = (t[s + "5"] - t[s + "1"]) / 4
                if step <= 0:
                    row(f"  SPDE step S^{d - 1} lmax={L} {s}", "below the timing resolution (rerun with --repeat 10)")
                    continue
                row(f"  SPDE step S^{d - 1} lmax={L} {s}", f"{step * 1e3:8.3f} ms = {step / pair_ref:6.1f} x {ref_name}")
    # setup at lmax 256 (fresh basis and grid: clear the basis cache)
    import importlib

    bmod = importlib.import_module("meanfield.sphere.basis")
    qmod = importlib.import_module("meanfield.sphere._quadrature")
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=6, seed=0, t_max=1.0)
    best = math.inf
    for _ in range(args.repeat):
        bmod._cached.cache_clear()
        qmod._leggauss.cache_clear()
        t0 = time.perf_counter()
        solve_spde(VonMisesFisher([0, 0, 1.0], 2.0), noise, beta=1.0, lmax=256, dt=2.0**-12, t_eval=[0.0],
                   tail_tol=1.0, neg_tol=10.0)
        best = min(best, time.perf_counter() - t0)
    row("SPDE setup S^2 lmax=256 (basis, grid, initial state)", f"{best:8.3f} s")


# ----------------------------------------------------------------------------- CLI and W_2
def bench_cli(args) -> None:
    import tempfile

    env = dict(os.environ, PYTHONPATH=args.root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        start = time.perf_counter() - t0
        best = math.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "meanfield", "demo", "--out", os.path.join(tmp, "demo")],
                           check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            best = min(best, time.perf_counter() - t0)
        row("meanfield demo (wall, minus interpreter start-up)", f"{best - start:8.2f} s (start-up {start:.2f} s)")
        if not args.quick:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "meanfield", "chaos", "--quick", "--no-progress", "--workers", "2",
                            "--out", os.path.join(tmp, "chaos")], check=True, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            row("meanfield chaos --quick --workers 2 (wall, one run)", f"{time.perf_counter() - t0:8.1f} s")


def bench_w2(args) -> None:
    if args.quick:
        return
    import ot

    from meanfield.transport import cost_matrix, wasserstein

    rng = np.random.default_rng(3)
    n = 5000
    x, y = unit(rng, n, 3), unit(rng, n, 3)
    a = np.full(n, 1.0 / n)

    def pot():
        return ot.emd2(a, a, cost_matrix(x, y, p=2), numItermax=10**7)

    t = interleaved({"meanfield": lambda: wasserstein(x, y, p=2), "pot": pot}, 1)
    row("exact W_2 S^2 5000 x 5000", f"meanfield {t['meanfield']:.2f} s, POT direct {t['pot']:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--root", default=ROOT, help="checkout whose meanfield package is timed")
    ap.add_argument("--only", default="attention,particles,spde,cli,w2")
    args = ap.parse_args()
    args.root = os.path.abspath(args.root)
    args.repeat = max(3, args.repeat)
    sys.path.insert(0, args.root)
    import ducc0

    import meanfield

    commit = subprocess.run(["git", "-C", args.root, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# bench_speed: commit {commit or '?'}, {platform.machine()}, {os.cpu_count()} CPUs "
          f"(affinity {len(os.sched_getaffinity(0))}), Python {platform.python_version()}, NumPy {np.__version__}, "
          f"ducc0 {ducc0.__version__}, package at {os.path.relpath(os.path.dirname(meanfield.__file__), os.getcwd())}")
    parts = {"attention": bench_attention, "particles": bench_particles, "spde": bench_spde, "cli": bench_cli,
             "w2": bench_w2}
    for name in args.only.split(","):
        parts[name](args)


if __name__ == "__main__":
    main()

"""Speed benchmark of the hot paths: every row of the speed targets, with its reference in the same run.

Run from the repository root:

    python benchmarks/bench_speed.py            # every row (several minutes)
    python benchmarks/bench_speed.py --quick    # smaller sizes, no chaos study / exact W_2 rows
    python benchmarks/bench_speed.py --root OTHER_CHECKOUT   # time another checkout's package
    python benchmarks/bench_speed.py --base BASE_CHECKOUT    # before/after table against another checkout

With ``--base`` every part runs for the base checkout and for this one, alternately in fresh
processes (so both see the same load), and the run ends with a Markdown table of every row:
the headline number before and after and their ratio.

Method: every timing is the minimum over ``--repeat`` (>= 3) runs; a row and the reference it
is divided by (the transforms it cannot avoid, an FFT pair, the direct sum) are timed
interleaved in the same loop, so that the load of a shared machine affects both alike. The
load averages (1, 5, 15 min) are printed with every row; a row that misses its target says
``MISSED``.

Rows (targets):

* attention drift S^2, N = 10^6, at the particle solver's accuracy for dt = 2^-6 (tol 1e-6)
  and at tol 1e-10: <= 150 ms; ratio to its three ducc0 transforms (below N = 2^16 at degree
  <= 7 the evaluator takes exact O(N L^2) transforms instead, which can beat them: the row
  names the backend); cost exponent from
  10^4 to 10^6 <= 1.0; >= 1000x the package's direct O(N^2) sum at N = 2·10^4 (the stand-in
  for the peer dense step, whose authors report 20-38 s at that N);
* particle Euler step with noise, S^2, N = 10^5: <= 25 ms; ratio to its transforms; at the chaos
  study's sizes the step at N = 2048 and the noise field alone at 256 and 2048 points against
  the transforms they need;
* SPDE step on S^2, exponential and push-forward: <= 3x one synthesis + analysis pair at
  lmax 64-256 (the pair timed between the solves like every reference; also against the
  same pair timed ten times back to back into a kept map, its best case); on S^1 <= 10x an
  FFT pair (ducc0's r2c + c2r of the grid's size, the FFT of the S^1 grid, timed ten times back
  to back; NumPy's pair also, back to back and between the solves); setup at lmax 256 <= 0.1 s;
  the push-forward step also as a multiple of its own transform limit (the synthesis of ρ and
  one adjoint non-uniform transform at the Q moved nodes);
* characteristics scheme: <= 0.2 us per node per step at M = 10^5; ratio to its transforms
  (for the noise, values and gradients of its three components: ducc0's, or the exact
  polynomial evaluation where the timed package has it, ``Basis.polynomial``);
* ``meanfield --help`` and ``meanfield demo`` (<= 2 s) minus interpreter start-up;
  ``meanfield chaos --quick`` (<= 30 s), its timed task time, and the same preset without its
  long-horizon part (``--no-long``);
* exact W_2 5000 x 5000: as fast as POT called directly; and the chaos study's case, 1024
  particles against ρ_T on 8192 quadrature nodes, against POT on the problem as given.
"""

from __future__ import annotations

import argparse
import inspect
import json
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


def settle(max_s: float = 1.0) -> None:
    """Wait (at most ``max_s``) until the threads of this process stop burning CPU.

    After a product that OpenBLAS runs on several threads (the direct attention path), its
    threads spin for about 0.1 s on the cores that the next timed call would use: a call
    timed then is measured on one core and a half.
    """
    end = time.perf_counter() + max_s
    while time.perf_counter() < end:
        c0 = time.process_time()
        time.sleep(0.02)
        if time.process_time() - c0 < 0.002:
            return


#: Every row printed by this run: name, headline number and its unit (for ``--json`` / ``--base``).
RECORDS: list[dict] = []


def row(name: str, value: str, target: str = "", ok: bool | None = None, num: float | None = None,
        unit: str = "", higher_is_better: bool = False, rel: str = "") -> None:
    """Print one row; ``num``/``unit`` is its headline number (compared by ``--base``), ``rel`` the
    same as a multiple of its reference, as printed in the before/after table."""
    verdict = "" if ok is None else ("met" if ok else "MISSED")
    print(f"{name:<52s} {value:<56s} {target:<14s} {verdict:<6s} [{load()}]", flush=True)
    RECORDS.append({"name": name.strip(), "num": num, "unit": unit, "target": target, "ok": ok, "load": load(),
                    "higher": higher_is_better, "rel": rel})


def unit(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _loc(x):
    """ducc0 locations (colatitude, longitude) of unit vectors (N, 3)."""
    loc = np.empty((x.shape[0], 2))
    loc[:, 0] = np.arctan2(np.hypot(x[:, 0], x[:, 1]), x[:, 2])
    loc[:, 1] = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * math.pi)
    return loc


def _threads(n, lmax=0):
    """Threads the timed package gives a transform at n points to degree lmax (its point policy where
    it has one), so that a transform reference runs as the package would run it."""
    try:
        from meanfield._threads import point_threads
    except ImportError:  # a checkout before the point policy
        from meanfield._threads import default_threads

        return default_threads()
    return point_threads(n, lmax)


def _adjoint(w, loc, L, eps, nthreads):
    """ducc0's adjoint as the checkout under test calls it (its own ``adjoint_at`` where it has one)."""
    import ducc0

    try:
        from meanfield.sphere._s2 import adjoint_at
    except ImportError:  # a checkout from before adjoint_at
        return ducc0.sht.experimental.adjoint_synthesis_general(map=w[None], spin=0, lmax=L, loc=loc, epsilon=eps,
                                                                nthreads=nthreads)
    return adjoint_at(w, L, loc, epsilon=eps, nthreads=nthreads)[None]


def _synthesis_at(alm, L, loc, *, spin=0, mode="STANDARD", epsilon, nthreads):
    """ducc0's point synthesis as the checkout under test calls it (its own ``synthesis_at`` where it
    has one; before that, ``synthesis_general`` with one spin-0 field per call)."""
    import ducc0

    try:
        from meanfield.sphere._s2 import synthesis_at
    except ImportError:  # a checkout from before synthesis_at
        if spin == 0:
            return np.stack([ducc0.sht.synthesis_general(alm=a[None], spin=0, lmax=L, loc=loc, epsilon=epsilon,
                                                         nthreads=nthreads)[0] for a in alm])
        return ducc0.sht.synthesis_general(alm=alm, spin=spin, lmax=L, loc=loc, epsilon=epsilon, nthreads=nthreads,
                                           mode=mode)
    return synthesis_at(alm, L, loc, spin=spin, mode=mode, epsilon=epsilon, nthreads=nthreads)


def _attention_transforms(loc, L, eps, nthreads):
    """The three ducc0 transforms of one spectral attention evaluation at the same points."""
    import ducc0

    w = np.full(loc.shape[0], 1.0 / loc.shape[0])

    def run():
        alm = _adjoint(w, loc, L, eps, nthreads)
        ducc0.sht.synthesis_general(alm=alm, spin=0, lmax=L, loc=loc, epsilon=eps, nthreads=nthreads)
        ducc0.sht.synthesis_general(alm=alm, spin=1, lmax=L, loc=loc, epsilon=eps, nthreads=nthreads,
                                    mode="DERIV1")

    return run


def _noise_transforms(loc, lmax, eps, nthreads, grad):
    """ducc0 syntheses of the three components of a degree-lmax noise field (and their gradients)."""
    import ducc0

    alm = np.zeros((1, (lmax + 1) * (lmax + 2) // 2), dtype=np.complex128)
    alm[0, 1:] = 0.1

    def run():
        for _ in range(3):
            ducc0.sht.synthesis_general(alm=alm, spin=0, lmax=lmax, loc=loc, epsilon=eps, nthreads=nthreads)
            if grad:
                ducc0.sht.synthesis_general(alm=alm, spin=1, lmax=lmax, loc=loc, epsilon=eps, nthreads=nthreads,
                                            mode="DERIV1")

    return run


# ----------------------------------------------------------------------------- attention
def bench_attention(args) -> None:
    from meanfield.attention import attention_velocity
    from meanfield.attention_spectral import SpectralAttention

    rng = np.random.default_rng(0)
    beta = 0.1
    Ns = [10**4, 10**5, 10**6] if not args.quick else [10**4, 10**5, 3 * 10**5]
    clouds = {N: unit(rng, N, 3) for N in Ns}
    for tol, why in ((1e-6, "particle solver at dt=2^-6"), (1e-10, "")):
        sa = SpectralAttention(3, beta, tol=tol)
        times = []
        for N in Ns:
            x = clouds[N]
            sa.velocity(x, check=False)
            tr = _attention_transforms(_loc(x), sa.last_lmax, sa.last_epsilon, _threads(len(x), sa.last_lmax))
            t = interleaved({"v": lambda: sa.velocity(x, check=False), "tr": tr}, args.repeat)
            times.append(t["v"])
            big = N == Ns[-1] and not args.quick
            row(f"attention drift S^2 b=0.1 tol={tol:g} N={N:.0e}",
                f"{t['v'] * 1e3:8.2f} ms = {t['v'] / t['tr']:4.2f} x transforms ({t['tr'] * 1e3:.2f} ms), L={sa.last_lmax}"
                f" {getattr(sa, 'last_backend', 'nufft')}",
                "<= 150 ms" if big else "", (t["v"] <= 0.150) if big else None, num=t["v"] * 1e3, unit="ms",
                rel=f"{t['v'] / t['tr']:.2f} x its transforms")
        slope = float(np.polyfit(np.log(Ns), np.log(times), 1)[0])
        row(f"  cost exponent N={Ns[0]:.0e}..{Ns[-1]:.0e} tol={tol:g}" + (f" ({why})" if why else ""),
            f"{slope:.2f}", "<= 1.0", slope <= 1.0, num=slope)
    # ratio to the package's direct O(N^2) path (the stand-in for the peer dense step)
    Nd = 4000 if args.quick else 20000
    x = unit(rng, Nd, 3)
    t = interleaved({"direct": lambda: attention_velocity(x, beta)}, 2)  # seconds per call: warm-up + 2
    ref = attention_velocity(x, beta)
    for tol in (1e-10, 1e-6):
        sa = SpectralAttention(3, beta, tol=tol)
        sa.velocity(x, check=False)
        tr = _attention_transforms(_loc(x), sa.last_lmax, sa.last_epsilon, _threads(len(x), sa.last_lmax))
        settle()  # the direct path's BLAS threads would otherwise spin through the spectral timings
        tt = interleaved({"spectral": lambda: sa.velocity(x, check=False), "tr": tr}, max(args.repeat, 5))
        ts = tt["spectral"]
        err = float(np.abs(sa.velocity(x) - ref).max())
        ratio = t["direct"] / ts
        row(f"attention direct / spectral N={Nd} tol={tol:g}",
            f"{t['direct']:.3f} s / {ts * 1e3:.2f} ms = x{ratio:.0f} (x{t['direct'] / tt['tr']:.0f} for ducc0's 3 "
            f"transforms alone), L={sa.last_lmax} {getattr(sa, 'last_backend', 'nufft')}, max err {err:.1e}",
            ">= 1000x" if Nd == 20000 else "", (ratio >= 1000) if Nd == 20000 else None, num=ratio, unit="x", higher_is_better=True)
        if Nd == 20000 and tol == 1e-10:
            row("  peer dense step at N=2e4 (authors' 20-38 s)", f"x{20 / ts:.0f}-{38 / ts:.0f} vs spectral",
                num=20 / ts, unit="x (low end)", higher_is_better=True)


# ----------------------------------------------------------------------------- particles
def bench_particles(args) -> None:
    from meanfield.attention_spectral import SpectralAttention
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.particles import solve_particles

    rng = np.random.default_rng(1)
    N = 10**5
    x = unit(rng, N, 3)
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=6, seed=0, t_max=1.0)
    dt = 2.0**-6
    meta = {}

    def step_row(xp, k, name, limit_ms=None):
        def run():
            sol = solve_particles(xp, noise, 0.1, dt, [k * dt])
            meta.update(sol.meta)

        run()
        acc = meta.get("accuracy", {"attention_tol": 1e-10, "noise_epsilon": 1e-12})
        sa = SpectralAttention(3, 0.1, tol=float(acc["attention_tol"]))
        sa.velocity(xp, check=False)
        loc = _loc(xp)
        att = _attention_transforms(loc, sa.last_lmax, sa.last_epsilon, _threads(len(loc), sa.last_lmax))
        noi = _noise_transforms(loc, 6, float(acc["noise_epsilon"]), _threads(len(loc), 6), grad=False)
        t = interleaved({"p": run, "tr": lambda: (att(), noi())}, args.repeat)
        step = t["p"] / k
        ok = None if limit_ms is None else step * 1e3 <= limit_ms
        row(name, f"{step * 1e3:7.3f} ms = {step / t['tr']:4.2f} x transforms ({t['tr'] * 1e3:.3f} ms), tol "
            f"{acc['attention_tol']:g}, eps {acc['noise_epsilon']:g}", "" if limit_ms is None else f"<= {limit_ms} ms",
            ok, num=step * 1e3, unit="ms", rel=f"{step / t['tr']:.2f} x its transforms")

    step_row(x, 8, "particle Euler step S^2 N=1e5 noise l=6 b=0.1", 25)
    # the chaos study's particle sizes: the step at N = 2048, and a noise evaluation at 256 and
    # 2048 points against the three ducc0 syntheses it would need
    step_row(x[:2048], 64, "particle Euler step S^2 N=2048 noise l=6 b=0.1")
    f = noise.field(0.0, dt)
    for n in (256, 2048):
        xs = x[:n]
        tr = _noise_transforms(_loc(xs), 6, 1e-12, _threads(n, 6), grad=False)
        t = interleaved({"f": lambda: f(xs), "tr": tr}, max(args.repeat, 5) * 4)
        row(f"noise field S^2 l=6 N={n}",
            f"{t['f'] * 1e3:7.3f} ms = {t['f'] / t['tr']:4.2f} x its 3 syntheses ({t['tr'] * 1e3:.3f} ms)",
            num=t["f"] * 1e3, unit="ms", rel=f"{t['f'] / t['tr']:.2f} x its 3 syntheses")


# ----------------------------------------------------------------------------- SPDE
def bench_spde(args) -> None:
    import ducc0

    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.sphere import NUFFT_EPS, basis

    for d, lmaxes in ((3, (64, 128) if args.quick else (64, 128, 256)), (2, (128, 512))):
        noise = NoisePath(ActivationKernel("relu"), d=d, lmax=6, seed=0, t_max=1.0)
        mu = [0.0] * (d - 1) + [1.0]
        for L in lmaxes:
            b = basis(d, L)
            g = b.grid()
            c = b.zeros()
            c[0] = 1.0
            dt = 2.0**-12
            k = 8 if (d == 3 and L >= 256) else (16 if d == 3 and L >= 128 else 64)
            # the push-forward's own transform limit: ρ on the grid and one adjoint non-uniform
            # transform at the moved nodes (at the scheme's accuracy)
            rng = np.random.default_rng(0)
            y = g.points + 0.01 * rng.normal(size=g.points.shape)
            y /= np.linalg.norm(y, axis=1)[:, None]
            vals = np.abs(g.synth(c))

            def spde(scheme, n):
                return lambda: solve_spde(VonMisesFisher(mu, 2.0), noise, beta=1.0, lmax=L, dt=dt,
                                          t_eval=[0.0, n * dt], scheme=scheme, tail_tol=1.0, neg_tol=10.0)

            buf = np.empty(g.Q)
            # a checkout from before Grid.synth(out=) synthesises into a fresh map
            kept = {"out": buf} if "out" in inspect.signature(g.synth).parameters else {}
            fns = {"pair": lambda: g.analysis(g.synth(c)),
                   # the same pair ten times back to back into a kept map: its best case (caches and
                   # the second core warm), a stricter reference than one pair between the solves
                   "pair10": lambda: [g.analysis(g.synth(c, **kept)) for _ in range(10)],
                   "pf_limit": lambda: (g.synth(c), b.adjoint(vals, y, epsilon=NUFFT_EPS))}
            if d == 2:
                M = g.M
                f = np.random.default_rng(0).normal(size=M)
                # the S^1 reference: ducc0's FFT pair (the FFT of the S^1 grid) ten times back to back.
                # A pair of a few hundred nodes takes a few microseconds, and timed once right after a
                # solve it ran at 1.5-4x its time back to back, the less the more the solve had just used
                # the same FFT library (NumPy's pair at M = 392: 20-27 us after solves on NumPy's FFT,
                # 52-61 us after solves on ducc0's, 12-14 us back to back): that reference measured the
                # cache, not the transform. NumPy's pair is also printed, both ways.
                r2c, c2r = ducc0.fft.r2c, ducc0.fft.c2r
                fns["dfft10"] = lambda: [c2r(r2c(f, axes=(0,)), axes=(0,), lastsize=M, forward=False) for _ in range(10)]
                fns["fft10"] = lambda: [np.fft.irfft(np.fft.rfft(f), n=M) for _ in range(10)]
                fns["fft"] = lambda: np.fft.irfft(np.fft.rfft(f), n=M)
            for s in ("exponential", "pushforward"):
                fns[s + "1"] = spde(s, 1)
                fns[s + "k"] = spde(s, 1 + k)
            t = interleaved(fns, args.repeat)
            if d == 2:
                row(f"S^1 lmax={L}: FFT pair (r2c+c2r, M={g.M}, ducc0, back to back)", f"{t['dfft10'] * 1e5:8.1f} us; "
                    f"NumPy's rfft+irfft {t['fft10'] * 1e5:.1f} us back to back, {t['fft'] * 1e6:.1f} us between the "
                    f"solves; grid pair {t['pair'] * 1e6:.1f} us")
                ref, ref_name, target = t["dfft10"] / 10, "FFT pair", 10.0
            else:
                row(f"S^2 lmax={L}: GL synthesis+analysis pair", f"{t['pair'] * 1e3:8.3f} ms (grid {g.nlat} x {g.nphi}); "
                    f"back to back {t['pair10'] * 100:.3f} ms")
                ref, ref_name, target = t["pair"], "pair", 3.0
            for s in ("exponential", "pushforward"):
                step = (t[s + "k"] - t[s + "1"]) / k
                if step <= 0:
                    row(f"  SPDE step S^{d - 1} lmax={L} {s}", "below the timing resolution (rerun with --repeat 10)")
                    continue
                extra = f" = {step / t['pf_limit']:4.2f} x synth + adjoint NUFFT" if s == "pushforward" else ""
                row(f"  SPDE step S^{d - 1} lmax={L} {s}",
                    f"{step * 1e3:8.3f} ms = {step / ref:6.2f} x {ref_name}{extra}",
                    f"<= {target:g}x", step / ref <= target, num=step * 1e3, unit="ms",
                    rel=f"{step / ref:.2f} x {ref_name}")
                if d == 3:
                    hot = step / (t["pair10"] / 10)
                    row(f"    SPDE step S^2 lmax={L} {s} / a pair back to back", f"{hot:6.2f} x", f"<= {target:g}x",
                        hot <= target, num=hot, unit="x")
                else:
                    row(f"    SPDE step S^1 lmax={L} {s} / NumPy's FFT pair", f"{step / (t['fft10'] / 10):6.2f} x back to "
                        f"back, {step / t['fft']:6.2f} x between the solves", num=step / (t["fft10"] / 10), unit="x")
            row(f"  push-forward transform limit S^{d - 1} lmax={L}",
                f"{t['pf_limit'] * 1e3:8.3f} ms = {t['pf_limit'] / ref:6.2f} x {ref_name} (synth + adjoint NUFFT, "
                f"eps {NUFFT_EPS:g})", num=t["pf_limit"] * 1e3, unit="ms", rel=f"{t['pf_limit'] / ref:.2f} x {ref_name}")
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
    row("SPDE setup S^2 lmax=256 (basis, grid, initial state)", f"{best:8.3f} s", "<= 0.1 s", best <= 0.1,
        num=best, unit="s")


# ----------------------------------------------------------------------------- characteristics
def bench_characteristics(args) -> None:
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.attention_spectral import SpectralAttention

    M = 10**5 if not args.quick else 2 * 10**4
    dt = 2.0**-6
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=6, seed=0, t_max=1.0)
    meta = {}

    def run(beta=1.0):
        sol = solve_spde(VonMisesFisher([0, 0, 1.0], 2.0), noise, beta=beta, lmax=16, dt=dt, t_eval=[0.0, 4 * dt],
                         scheme="characteristics", M=M, split=False, tol=None)
        tm = sol.meta["timing"]
        meta["us"] = min(meta.get("us", math.inf), tm["steps_s"] / tm["node_steps"] * 1e6)
        meta["M"] = sol.meta["M"]

    # the transforms of one step at the same nodes, as the checkout under test calls them: attention
    # (one adjoint; value and Laplacian, gradient, and the spin-2 part of the Hessian) and the noise
    # (values and gradients of three components)
    run()
    x = unit(np.random.default_rng(2), meta["M"], 3)
    loc = _loc(x)
    sa = SpectralAttention(3, 1.0, tol=1e-10)
    L, eps = sa.lmax, sa.epsilon
    nt = _threads(len(loc), L)
    w = np.full(len(loc), 1.0 / len(loc))
    alm = np.zeros((1, (L + 1) * (L + 2) // 2), dtype=np.complex128)
    alm[0, 1:] = 0.1

    def att():
        _adjoint(w, loc, L, eps, nt)
        _synthesis_at(np.concatenate([alm, alm]), L, loc, epsilon=eps, nthreads=nt)
        _synthesis_at(alm, L, loc, spin=1, mode="DERIV1", epsilon=eps, nthreads=nt)

    def hess():
        _synthesis_at(np.concatenate([alm, alm * 0]), L, loc, spin=2, epsilon=eps, nthreads=nt)

    noi = _noise_transforms(loc, 6, 1e-12, _threads(len(loc), 6), grad=True)
    form = getattr(noise.basis, "polynomial", None)
    if form is not None:  # the package evaluates the noise exactly as polynomials: that is its limit
        c = np.random.default_rng(3).normal(size=(3, noise.basis.n_real))

        def noi():
            form.synth_rows(c, x, grad=True)
    meta.pop("us")
    t = interleaved({"run": run, "tr": lambda: (att(), hess(), noi())}, args.repeat)
    us = meta["us"]
    tr_us = t["tr"] / meta["M"] * 1e6
    row(f"characteristics step S^2 M={meta['M']}", f"{us:6.3f} us/node/step = {us / tr_us:4.2f} x transforms "
        f"({tr_us:.3f} us)", "<= 0.2 us", us <= 0.2, num=us, unit="us",
        rel=f"{us / tr_us:.2f} x its transforms")
    # the same step at β = 0.1 (attention degree 7 at tol 1e-10, where the package may evaluate the
    # attention's Hessian by its exact low-degree transforms): no target, compared across checkouts
    meta.pop("us")
    interleaved({"run": lambda: run(0.1)}, args.repeat)
    row(f"  characteristics step S^2 M={meta['M']} beta=0.1", f"{meta['us']:6.3f} us/node/step",
        num=meta["us"], unit="us")


# ----------------------------------------------------------------------------- CLI and W_2
def bench_cli(args) -> None:
    import tempfile

    env = dict(os.environ, PYTHONPATH=args.root + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def call(argv, out=None):
        def f():
            subprocess.run([sys.executable, *argv], check=True, env=env, cwd=out or args.root,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return f

    with tempfile.TemporaryDirectory() as tmp:
        t = interleaved({"start": call(["-c", "pass"]), "help": call(["-m", "meanfield", "--help"]),
                         "demo": call(["-m", "meanfield", "demo", "--out", os.path.join(tmp, "demo")])},
                        args.repeat)
        row("meanfield --help (wall, minus interpreter start-up)", f"{t['help'] - t['start']:8.2f} s "
            f"(start-up {t['start']:.2f} s)")
        demo = t["demo"] - t["start"]
        row("meanfield demo (wall, minus interpreter start-up)", f"{demo:8.2f} s", "<= 2 s", demo <= 2.0, num=demo,
            unit="s")


def bench_chaos(args) -> None:
    import tempfile

    # run from an empty directory: ``python -m`` puts the working directory ahead of PYTHONPATH,
    # so from a checkout's root the command would time that checkout, not ``args.root``

    env = dict(os.environ, PYTHONPATH=args.root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        if not args.quick:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "meanfield", "chaos", "--quick", "--no-progress", "--workers", "2",
                            "--out", os.path.join(tmp, "chaos")], check=True, env=env, cwd=tmp,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - t0
            row("meanfield chaos --quick --workers 2 (wall, one run)", f"{wall:8.1f} s", "<= 30 s", wall <= 30,
                num=wall, unit="s")
            parts = _chaos_task_time(os.path.join(tmp, "chaos"))
            if parts:
                total = sum(n * t for _, n, t in parts)
                row("  chaos --quick: timed task time (replicas x mean replica)",
                    f"{total:8.1f} s = " + ", ".join(f"{name} {n} x {t:.2f} s" for name, n, t in parts),
                    num=total, unit="s")
            # the preset without its long-horizon part (T = 2 and 8, characteristics reference): the
            # short-horizon study alone, whose share of the wall time tells which part the target misses by
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "meanfield", "chaos", "--quick", "--no-long", "--no-progress",
                            "--workers", "2", "--out", os.path.join(tmp, "short")], check=True, env=env, cwd=tmp,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - t0
            row("  meanfield chaos --quick --no-long --workers 2 (the short-horizon part alone, wall)",
                f"{wall:8.1f} s", num=wall, unit="s")


def _chaos_task_time(out: str) -> list:
    """(part, replicas, mean timed seconds of a replica) per sphere and part from the study's diagnostics
    tables (the ``*_seconds`` columns a replica reports; empty where a checkout writes none): tells a
    slower machine (every part longer) from a slower study (one part, or the time between tasks)."""
    import pandas as pd

    parts = []
    for name, kind in (("diagnostics.csv", "short"), ("long_diagnostics.csv", "long")):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        table = pd.read_csv(path).groupby("sphere").first()  # the long part repeats a sphere per horizon
        cols = [c for c in table.columns if c.endswith("_seconds")]
        if not cols or "replicas" not in table.columns:
            continue
        for sphere, r in table.iterrows():
            parts.append((f"S^{sphere} {kind}", int(r["replicas"]), float(r[cols].sum())))
    return parts


def bench_w2(args) -> None:
    if args.quick:
        return
    import ot

    from meanfield.transport import cost_matrix, wasserstein

    # a checkout from before the candidate-edge solver (``--base``) times its only, dense, solver twice
    dense_kw = {"solver": "dense"} if "solver" in inspect.signature(wasserstein).parameters else {}
    rng = np.random.default_rng(3)
    n = 5000
    x, y = unit(rng, n, 3), unit(rng, n, 3)
    a = np.full(n, 1.0 / n)

    def pot():
        return ot.emd2(a, a, cost_matrix(x, y, p=2), numItermax=10**7)

    t = interleaved({"meanfield": lambda: wasserstein(x, y, p=2),
                     "dense": lambda: wasserstein(x, y, p=2, **dense_kw), "pot": pot}, 1)
    row("exact W_2 S^2 5000 x 5000", f"meanfield {t['meanfield']:.2f} s (dense {t['dense']:.2f} s), "
        f"POT direct {t['pot']:.2f} s", "<= POT", t["meanfield"] <= t["pot"], num=t["meanfield"] / t["pot"],
        unit="x POT")

    # the chaos study's W_2 on S^2: N = 1024 particles against ρ_T on 64 x 128 quadrature nodes
    # (quick preset's settings, T = 0.125), POT called on the (n, m) problem as given
    from meanfield import deterministic
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.particles import solve_particles
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.transport import density_to_cloud, sphere_quadrature

    T, dt = 0.125, 2.0**-6
    noise = NoisePath(ActivationKernel("relu"), d=3, lmax=6, seed=7, t_max=T)
    rho0 = VonMisesFisher(np.array([0.0, 0.0, 1.0]), 4.0)
    sol = solve_spde(rho0, noise, beta=1.0, lmax=96, dt=dt, t_eval=[0.0, T], scheme="pushforward")
    nodes, weights = sphere_quadrature(64)
    cloud = density_to_cloud(sol.evaluate(1, nodes), nodes, weights, clip_negative=True)
    keep = cloud.weights > 0
    yq, b = cloud.points[keep], cloud.weights[keep] / cloud.weights[keep].sum()

    def chaos_row(name, x1, w1, x2, w2):
        def pot_nm():
            return ot.emd2(w1, w2, cost_matrix(x1, x2, p=2), numItermax=10**7)

        t = interleaved({"meanfield": lambda: wasserstein(x1, x2, w1, w2, p=2),
                         "dense": lambda: wasserstein(x1, x2, w1, w2, p=2, **dense_kw), "pot": pot_nm}, 1)
        row(name, f"meanfield {t['meanfield']:.2f} s (dense {t['dense']:.2f} s), POT direct (n, m) {t['pot']:.2f} s",
            "", num=t["meanfield"] / t["pot"], unit="x POT")

    for N in (1024, 256):
        xN = solve_particles(rho0.sample(N, seed=8), noise, 1.0, dt, [T]).final
        chaos_row(f"exact W_2 S^2 {N} particles x {yq.shape[0]} nodes (chaos study)", xN, np.full(N, 1.0 / N), yq, b)
    # the study's bound of the SPDE's own W_2 error: the positive against the negative part of
    # the difference of the solutions at lmax 96 and 192 on the same nodes; one-thread transforms,
    # so that both checkouts get the same problem (multithreaded ones differ in the last bits, and
    # a node where the two solutions agree to 1e-14 may change sides)
    with deterministic():
        sol1 = solve_spde(rho0, noise, beta=1.0, lmax=96, dt=dt, t_eval=[0.0, T], scheme="pushforward")
        ref = solve_spde(rho0, noise, beta=1.0, lmax=192, dt=dt, t_eval=[0.0, T], scheme="pushforward")
        diff = (density_to_cloud(sol1.evaluate(1, nodes), nodes, weights, clip_negative=True).weights
                - density_to_cloud(ref.evaluate(1, nodes), nodes, weights, clip_negative=True).weights)
    pos, neg = diff > 0, diff < 0
    chaos_row(f"exact W_2 S^2 SPDE-error bound {pos.sum()} x {neg.sum()} nodes (chaos study)",
              nodes[pos], diff[pos] / diff[pos].sum(), nodes[neg], diff[neg] / diff[neg].sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--root", default=ROOT, help="checkout whose meanfield package is timed")
    ap.add_argument("--only", default="attention,particles,spde,characteristics,cli,chaos,w2")
    ap.add_argument("--rounds", type=int, default=2, help="with --base: alternating rounds per part (best kept)")
    ap.add_argument("--json", default=None, help="also write the rows (name, number, unit) to this JSON file")
    ap.add_argument("--base", default=None,
                    help="checkout of the version to compare with: every part is run for it and for --root, "
                         "alternately in fresh processes, and a before/after table is printed at the end")
    args = ap.parse_args()
    args.root = os.path.abspath(args.root)
    args.repeat = max(3, args.repeat)
    if args.base:
        return compare(args)
    sys.path.insert(0, args.root)
    import ducc0

    import meanfield  # noqa: F401  (fails early when --root has no package)

    commit = subprocess.run(["git", "-C", args.root, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# bench_speed: commit {commit or '?'}, {platform.machine()}, {os.cpu_count()} CPUs "
          f"(affinity {len(os.sched_getaffinity(0))}), Python {platform.python_version()}, NumPy {np.__version__}, "
          f"ducc0 {ducc0.__version__}, package of {'this checkout' if args.root == ROOT else 'the --root checkout'}",
          flush=True)
    parts = {"attention": bench_attention, "particles": bench_particles, "spde": bench_spde,
             "characteristics": bench_characteristics, "cli": bench_cli, "chaos": bench_chaos, "w2": bench_w2}
    for name in args.only.split(","):
        parts[name](args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(RECORDS, fh)


def compare(args) -> None:
    """Run every part for the base checkout and for --root, alternately (``--rounds`` times), and print a
    before/after table: the best time of every row, its ratio to its reference as the median over the
    rounds, and in how many rounds the new version met the target."""
    import tempfile

    rounds: dict[str, dict[str, list[dict]]] = {"base": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for part in args.only.split(","):
            for rnd in range(args.rounds):
                for tag, root in (("base", os.path.abspath(args.base)), ("new", args.root)):
                    out = os.path.join(tmp, f"{tag}-{part}-{rnd}.json")
                    cmd = [sys.executable, os.path.abspath(__file__), "--root", root, "--only", part, "--repeat",
                           str(args.repeat), "--json", out] + (["--quick"] if args.quick else [])
                    print(f"## {tag}: {part} (round {rnd + 1})", flush=True)
                    subprocess.run(cmd, check=True)
                    with open(out) as fh:
                        for r in json.load(fh):
                            if r["num"] is not None:
                                rounds[tag].setdefault(r["name"], []).append(r)

    def best(rs):
        return (max if rs[0]["higher"] else min)(r["num"] for r in rs)

    print("\n| row | target | base | new | speed-up | new, relative (median) | new meets target |\n"
          "|---|---|---|---|---|---|---|")
    for name, rs in rounds["new"].items():
        r = rs[0]
        bnum = best(rounds["base"][name]) if name in rounds["base"] else None
        num = best(rs)
        up = "" if not (bnum and num) else (f"{num / bnum:.2f}" if r["higher"] else f"{bnum / num:.2f}")
        rel = ""
        if r["rel"]:
            vals = sorted(float(x["rel"].split()[0]) for x in rs)
            rel = f"{float(np.median(vals)):.2f} {r['rel'].split(' ', 1)[1]} ({vals[0]:.2f}-{vals[-1]:.2f})"
        oks = [x["ok"] for x in rs if x["ok"] is not None]
        met = f"{sum(oks)} of {len(oks)} rounds" if oks else ""
        fmt = (lambda v: "" if v is None else f"{v:.4g} {r['unit']}".strip())
        print(f"| {name} | {r['target']} | {fmt(bnum)} | {fmt(num)} | {up} | {rel} | {met} |")
    print(f"\n(best time of {args.rounds} alternating rounds per checkout, relative cost as the median and range "
          f"over the rounds; loads at the end: {load()})")


if __name__ == "__main__":
    main()

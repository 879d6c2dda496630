"""Measured numbers of the SPDE checks of the test suite (theory §5.2, §5.5, §5.6, §6).

The tests in ``tests/spde/test_spde.py`` assert tolerances; this script runs the same
configurations and prints the measured values quoted in the validation report
(``docs/validation.rst``). Run from the repository root:

    python benchmarks/spde_checks.py

About one minute on two cores.
"""

from __future__ import annotations

import math
import time

import numpy as np

from meanfield.harmonics import real_basis
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath, RotationNoise
from meanfield.spde import Mixture, SPDESolution, VonMisesFisher, coefficient_degrees, solve_spde

RELU = ActivationKernel("relu")
MU3 = np.array([0.3, -0.2, 0.9]) / np.linalg.norm([0.3, -0.2, 0.9])


def slope(h, e):
    return float(np.polyfit(np.log(h), np.log(e), 1)[0])


def euler_zyz(R):
    """(psi, theta, phi) with R = Rz(phi) Ry(theta) Rz(psi), ducc0.sht.rotate_alm's convention."""
    theta = math.acos(max(-1.0, min(1.0, R[2, 2])))
    phi = math.atan2(R[1, 2], R[0, 2])
    psi = math.atan2(R[2, 1], -R[2, 0])
    return psi, theta, phi


def mass():
    worst = 0.0
    for d, mu in ((3, MU3), (2, [0.6, 0.8])):
        noise = NoisePath(RELU, d=d, lmax=6, seed=4, t_max=0.2)
        for scheme in ("exponential", "pushforward"):
            sol = solve_spde(VonMisesFisher(mu, 2.0), noise, beta=1.0, lmax=32, dt=0.004,
                             t_eval=np.linspace(0, 0.2, 6), scheme=scheme, tail_tol=1e-2, neg_tol=1e-2)
            worst = max(worst, max(abs(sol.mass(i) - 1.0) for i in range(len(sol))))
    print(f"§5.6 mass, both schemes, S^1 and S^2, lmax 32, 50 steps with attention and noise: "
          f"max |mass - 1| = {worst:.1e}")


def rotation():
    import ducc0

    rho0 = Mixture([VonMisesFisher([0, 0, 1.0], 4.0), VonMisesFisher([1.0, 0, 0], 8.0)], [0.6, 0.4])
    L, h, T = 32, 0.01, 0.3
    noise = RotationNoise(3, 1.0, seed=3, t_max=T)
    sol = solve_spde(rho0, noise, beta=0.0, lmax=L, dt=h, t_eval=[0.0, T], attention=False, noise_map="flow")
    R = noise.flow(T, int(round(T / h)))
    ref = ducc0.sht.rotate_alm(rho0.coefficients(L), L, *euler_zyz(R))
    print(f"§5.5 rotation noise, push-forward with exact rotation steps, S^2 lmax 32: "
          f"max coefficient error vs rotate_alm = {np.abs(sol.coeffs[-1] - ref).max():.1e}")
    noise2 = RotationNoise(2, 1.0, seed=8, t_max=0.4)
    rho1 = VonMisesFisher([1.0, 0.0], 5.0)
    sol2 = solve_spde(rho1, noise2, beta=0.0, lmax=48, dt=0.02, t_eval=[0.0, 0.4], attention=False, noise_map="flow")
    ref2 = VonMisesFisher(noise2.rotation(0.4) @ rho1.mu, 5.0).coefficients(48)
    print(f"§5.5 rotation noise, S^1 lmax 48: max coefficient error = {np.abs(sol2.coeffs[-1] - ref2).max():.1e}")


def mean_decay():
    rho0 = VonMisesFisher(MU3, 3.0)
    L, T, h, n_seeds = 8, 1.0, 0.02, 24
    lr = np.repeat(np.arange(L + 1), 2 * np.arange(L + 1) + 1)
    sel = (lr >= 1) & (lr <= 3)
    c0 = SPDESolution(3, L, [0.0], rho0.coefficients(L)[None], 0.0).real_coefficients(0)
    for scheme in ("exponential", "pushforward"):
        out = []
        for seed in range(n_seeds):
            noise = NoisePath(RELU, d=3, lmax=4, seed=1000 + seed, t_max=T)
            s = solve_spde(rho0, noise, beta=0.0, lmax=L, dt=h, t_eval=[0.0, T], attention=False, scheme=scheme,
                           tail_tol=1.0, neg_tol=10.0)
            out.append(SPDESolution(3, L, s.times, s.coeffs, 0.0).real_coefficients(1))
        out = np.array(out)
        theory = np.exp(-0.5 * noise.kappa1 * lr * (lr + 1) * T) * c0
        se = out.std(axis=0, ddof=1) / math.sqrt(n_seeds)
        z = (out.mean(axis=0) - theory)[sel] / se[sel]
        print(f"§5.2 mean decay, {scheme}, 24 paths, l = 1..3 (15 coefficients): max |z| = {np.abs(z).max():.2f}")


def pushforward_vs_particles(N=50_000, L=32):
    T, h = 0.5, 2e-3
    n = int(round(T / h))
    noise = NoisePath(RELU, d=3, lmax=8, seed=11, t_max=T)
    rho0 = VonMisesFisher(MU3, 4.0)
    kw = dict(beta=0.0, lmax=L, dt=h, t_eval=[0.0, T], attention=False, tail_tol=1.0, neg_tol=1.0)
    b = solve_spde(rho0, noise, **kw).real_coefficients(1)[:16]
    a = solve_spde(rho0, noise, scheme="exponential", **kw).real_coefficients(1)[:16]
    x = rho0.sample(N, seed=5)
    for i in range(n):
        x = x + noise.field(i * h, (i + 1) * h)(x)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    B = real_basis(3, 3, x)
    emp, se = B.mean(axis=0), B.std(axis=0) / math.sqrt(N)
    print(f"§6(b) {N} particles vs SPDE on one path (vMF κ=4, ReLU l_σ=8, T=0.5, h=2e-3, degrees 1..3): "
          f"push-forward max diff {np.abs(emp - b)[1:].max():.1e} (max |z| {np.abs((emp - b)[1:] / se[1:]).max():.2f}, "
          f"sampling scale {se[1:].max():.1e}); exponential Euler max diff {np.abs(emp - a)[1:].max():.1e}")


def orders():
    rho0 = VonMisesFisher(MU3, 3.0)
    T, L = 0.25, 24
    hs = [T / 2**k for k in range(5, 9)]
    for d in (2, 3):
        r0 = rho0 if d == 3 else VonMisesFisher([0.6, 0.8], 3.0)
        kw = dict(beta=1.0, lmax=L, t_eval=[0.0, T], d=d)
        out = []
        res = {}
        for s in ("pushforward", "exponential"):
            ref = solve_spde(r0, None, dt=T / 1024, scheme=s, **kw).coeffs[-1]
            res[s] = [solve_spde(r0, None, dt=h, scheme=s, **kw).coeffs[-1] for h in hs]
            out.append(f"{s} {slope(hs, [np.abs(c - ref).max() for c in res[s]]):.2f}")
        dab = [np.abs(a - b).max() for a, b in zip(res["exponential"], res["pushforward"])]
        out.append(f"(a) - (b) {slope(hs, dab):.2f}")
        print(f"time order without noise, S^{d - 1}, h = T/32 .. T/256, slope of the error: " + ", ".join(out))
    hs = [0.25 / 2**k for k in range(3, 7)]
    ell, _ = coefficient_degrees(3, 16)
    low = ell <= 4
    diffs = []
    for seed in (100, 101, 102):
        noise = NoisePath(RELU, d=3, lmax=4, seed=seed, t_max=0.25)
        row = []
        for h in hs:
            kw = dict(beta=1.0, lmax=16, dt=h, t_eval=[0.0, 0.25], tail_tol=1.0, neg_tol=1.0)
            ca = solve_spde(rho0, noise, scheme="exponential", **kw).coeffs[-1]
            cb = solve_spde(rho0, noise, scheme="pushforward", **kw).coeffs[-1]
            row.append(np.sqrt(np.sum(np.abs(ca - cb)[low] ** 2)))
        diffs.append(row)
    e = np.sqrt(np.mean(np.array(diffs) ** 2, axis=0))
    print(f"with noise, RMS over 3 paths of |(a) - (b)| on degrees <= 4, h = T/8 .. T/64: "
          f"{', '.join(f'{v:.1e}' for v in e)}, slope {slope(hs, e):.2f}")


def lmax_convergence():
    for d in (2, 3):
        mu = MU3 if d == 3 else [0.6, 0.8]
        rho0 = VonMisesFisher(mu, 4.0)
        kw = dict(beta=1.0, dt=0.02, t_eval=[0.0, 0.2], d=d, attention_tol=1e-4, tail_tol=1.0, neg_tol=1.0)
        ref = solve_spde(rho0, None, lmax=48, **kw)
        x = rho0.sample(200, seed=1)
        err = [np.abs(solve_spde(rho0, None, lmax=L, **kw).evaluate(1, x) - ref.evaluate(1, x)).max()
               for L in (8, 12, 16, 20)]
        print(f"spectral convergence without noise, S^{d - 1}, lmax 8, 12, 16, 20 vs 48: "
              + ", ".join(f"{v:.1e}" for v in err))


if __name__ == "__main__":
    start = time.perf_counter()
    for check in (mass, rotation, mean_decay, pushforward_vs_particles, orders, lmax_convergence):
        check()
    print(f"total {time.perf_counter() - start:.0f} s")

"""Tests of the spectral McKean–Vlasov SPDE solver (theory §4, §5, §6).

Tolerances are derived in the comment next to each assertion: Monte Carlo standard
errors (z-tests), sampling scales 1/sqrt(4πN), truncation/round-off levels, and the
theoretical orders of the schemes (deterministic: 1; strong with noise: 1/2).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from meanfield.attention import convolution_velocity, required_degree, softmax_attention, tangent_project
from meanfield.harmonics import real_basis
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath, RotationNoise
from meanfield.sphere import basis
from meanfield.spde import (
    Mixture,
    SPDEResolutionError,
    SPDESolution,
    Uniform,
    VonMisesFisher,
    Velocity,
    coefficient_degrees,
    exponential_euler_growth,
    solve_spde,
)

RELU = ActivationKernel("relu")
MU3 = np.array([0.3, -0.2, 0.9]) / np.linalg.norm([0.3, -0.2, 0.9])


def _slope(h, e):
    return float(np.polyfit(np.log(h), np.log(e), 1)[0])


def _euler_zyz(R):
    """(psi, theta, phi) with R = Rz(phi) Ry(theta) Rz(psi), ducc0.sht.rotate_alm's convention."""
    theta = math.acos(min(1.0, max(-1.0, R[2, 2])))
    return math.atan2(R[2, 1], -R[2, 0]), theta, math.atan2(R[1, 2], R[0, 2])


# --------------------------------------------------------------------------------------
# building blocks
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_vmf_coefficients_density_and_sampling(d):
    mu = MU3 if d == 3 else np.array([0.6, 0.8])
    v = VonMisesFisher(mu, 4.0)
    L = 40
    g = basis(d, L).grid()
    c = v.coefficients(L)
    # exact Funk–Hecke coefficients reproduce the density on the grid; truncation error of a
    # κ = 4 vMF at degree 40 is ~ 4^40/40! ~ 1e-24, so only round-off remains
    assert np.abs(g.synth(c) - v.density(g.points)).max() < 1e-12
    assert np.abs(g.analysis(v.density(g.points)) - c).max() < 1e-12
    assert abs(g.weights @ v.density(g.points) - 1.0) < 1e-13
    # sampling: E[x] = A_d(κ) μ with A_3 = coth κ - 1/κ, A_2 = I_1/I_0; 4 standard errors
    from scipy import special

    n = 40000
    x = v.sample(n, seed=1)
    A = 1 / math.tanh(4.0) - 0.25 if d == 3 else special.i1(4.0) / special.i0(4.0)
    se = x.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(x.mean(axis=0) - A * mu) < 4 * se + 1e-12)
    # the samples' empirical coefficients agree with the exact ones (z-test, 4 SE)
    B = real_basis(d, 3, x)
    cr = SPDESolution(d, L, [0.0], c[None], 1.0).real_coefficients(0)[: B.shape[1]]
    z = (B.mean(0) - cr)[1:] / (B.std(0)[1:] / math.sqrt(n))
    assert np.abs(z).max() < 4.5


def test_mixture_and_uniform():
    m = Mixture([VonMisesFisher([0, 0, 1], 5.0), VonMisesFisher([0, 0, -1], 5.0), Uniform(3)], [0.4, 0.4, 0.2])
    g = basis(3, 48).grid()
    assert np.abs(g.synth(m.coefficients(48)) - m.density(g.points)).max() < 1e-12
    x = m.sample(20000, seed=3)
    assert x.shape == (20000, 3)
    # fraction in the upper hemisphere: 0.4 + 0.1 (+ tiny vMF leak); binomial SE ~ 3.5e-3
    assert abs(np.mean(x[:, 2] > 0) - 0.5) < 0.02
    with pytest.raises(ValueError, match="sum to 1"):
        Mixture([Uniform(3), Uniform(3)], [0.5, 0.6])
    with pytest.raises(ValueError, match="same sphere"):
        Mixture([Uniform(3), Uniform(2)], [0.5, 0.5])


@pytest.mark.parametrize("d", [2, 3])
def test_grid_calculus_identities(d):
    """div ∇f = Δf = -l(l+d-2) f exactly on the 3/2 grid; push-forward adjoint = direct sum."""
    L = 12
    g = basis(d, L).grid()
    rng = np.random.default_rng(0)
    ell, _ = coefficient_degrees(d, L)
    c = rng.standard_normal(ell.size) + (1j * rng.standard_normal(ell.size) if d == 3 else 0)
    if d == 3:
        c[: L + 1] = c[: L + 1].real  # m = 0 coefficients of a real field are real
    lap = g.divergence(g.gradient(c))
    assert np.abs(lap + ell * (ell + d - 2) * c).max() < 1e-10 * ell.max() ** 2
    # adjoint non-uniform transform at arbitrary points vs the explicit real basis
    pts = rng.standard_normal((300, d))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    vals = rng.standard_normal(300)
    got = basis(d, L).adjoint(vals, pts)
    direct_real = vals @ real_basis(d, L, pts)
    got_real = SPDESolution(d, L, [0.0], got[None], 1.0).real_coefficients(0)
    assert np.abs(got_real - direct_real).max() < 1e-9


@pytest.mark.parametrize("d", [2, 3])
def test_velocity_matches_direct_softmax(d):
    mu = MU3 if d == 3 else np.array([0.6, 0.8])
    rho0 = Mixture([VonMisesFisher(mu, 3.0), VonMisesFisher(-mu, 1.0)], [0.7, 0.3])
    sol = solve_spde(rho0, None, beta=2.0, lmax=32, dt=0.01, t_eval=[0.0], d=d)
    x = rho0.sample(50, seed=2)
    nodes, w = sol.quadrature_cloud(0)
    assert abs(w.sum() - 1.0) < 1e-13
    # the quadrature cloud integrates e^{β<x,y>} y ρ(y) exactly up to the degree-32
    # truncation of a β = 2 exponential (~1e-20): the direct softmax sum is a reference
    ref = tangent_project(x, softmax_attention(x, 2.0, y=nodes, weights=w))
    assert np.abs(sol.velocity(0, x) - ref).max() < 1e-12
    assert np.abs(sol.velocity(0, x) - convolution_velocity(sol.coeffs[0], 2.0, x, d=d, lmax=32)[0]).max() < 1e-12
    # general value matrix V: ambient-gradient formula of theory §4
    V = np.random.default_rng(4).standard_normal((d, d))
    solv = solve_spde(rho0, None, beta=2.0, lmax=32, dt=0.01, t_eval=[0.0], d=d, V=V)
    refv = tangent_project(x, softmax_attention(x, 2.0, y=nodes, weights=w, V=V))
    assert np.abs(solv.velocity(0, x) - refv).max() < 1e-12
    # the on-grid evaluator used by the time steppers (frame components)
    pass

    g = basis(d, 32).grid()
    for Vm in (None, V):
        comps = Velocity(d, 32, 2.0, Vm).on_grid(g, sol.coeffs[0])[0]
        ref_g = tangent_project(g.points, softmax_attention(g.points, 2.0, y=nodes, weights=w, V=Vm))
        assert np.abs(g.ambient(comps) - ref_g).max() < 1e-12


# --------------------------------------------------------------------------------------
# theory §5.5: rotation noise
# --------------------------------------------------------------------------------------


def test_rotation_noise_flow_is_not_exp_omega_in_3d():
    """RotationNoise.rotation(t) = exp(Ω(t)) is the Stratonovich flow only for d = 2.

    The geometric-Euler products converge (strong order 1/2), and their limit differs from
    exp(Ω(t)) by the Lévy-area term of the Magnus expansion, an O(t) effect.
    """
    n3 = RotationNoise(3, 2.0, seed=1, t_max=0.5)
    fine, finer = n3.flow(0.5, 256), n3.flow(0.5, 1024)
    # strong error ~ scale sqrt(h) ~ 2 sqrt(0.5/256) = 0.09; measured 0.01-0.09 over 4 seeds
    assert np.abs(fine - finer).max() < 0.15
    # the Lévy-area term is O(scale² t) = O(1): measured 0.44-0.71 over 4 seeds (0.57 here)
    assert np.abs(n3.rotation(0.5) - finer).max() > 0.3
    n2 = RotationNoise(2, 1.0, seed=3, t_max=0.5)
    assert np.abs(n2.flow(0.5, 64) - n2.rotation(0.5)).max() < 1e-13


def test_rotation_pushforward_flow_exact():
    """theory §5.5 exactly: push-forward with exact rotation steps = rotated ρ_0 (ducc0.sht.rotate_alm).

    Rotations preserve each degree and the 3/2 grid integrates products of two degree-L
    functions exactly, so the only error is round-off (NUFFT eps 1e-12).
    """
    import ducc0

    rho0 = Mixture([VonMisesFisher([0, 0, 1.0], 4.0), VonMisesFisher([1.0, 0, 0], 8.0)], [0.6, 0.4])
    L, h, T = 32, 0.01, 0.3
    noise = RotationNoise(3, 1.0, seed=3, t_max=T)
    sol = solve_spde(rho0, noise, beta=0.0, lmax=L, dt=h, t_eval=[0.0, T], attention=False, noise_map="flow")
    R = noise.flow(T, int(round(T / h)))
    psi, theta, phi = _euler_zyz(R)
    ref = ducc0.sht.rotate_alm(rho0.coefficients(L), L, psi, theta, phi)
    assert np.abs(sol.coeffs[-1] - ref).max() < 1e-10
    # ... and the same as the exact coefficients of the rotated mixture
    rot = Mixture([VonMisesFisher(R @ [0, 0, 1.0], 4.0), VonMisesFisher(R @ [1.0, 0, 0], 8.0)], [0.6, 0.4])
    assert np.abs(sol.coeffs[-1] - rot.coefficients(L)).max() < 1e-10
    x = rot.sample(100, seed=0)
    assert np.abs(sol.evaluate(1, x) - rot.density(x)).max() < 1e-9


def test_rotation_pushforward_flow_exact_circle():
    """On S^1 the increments commute: push-forward with rotation steps = ρ_0 rotated by exp(Ω(T))."""
    T = 0.4
    noise = RotationNoise(2, 1.0, seed=8, t_max=T)
    rho0 = VonMisesFisher([1.0, 0.0], 5.0)
    sol = solve_spde(rho0, noise, beta=0.0, lmax=48, dt=0.02, t_eval=[0.0, T], attention=False, noise_map="flow")
    ref = VonMisesFisher(noise.rotation(T) @ rho0.mu, 5.0).coefficients(48)
    assert np.abs(sol.coeffs[-1] - ref).max() < 1e-12


def test_rotation_projected_schemes_converge_to_flow():
    """Π((I + ΔΩ)x) (scheme b) and exponential Euler (scheme a) converge to the rotated density.

    The reference is the exactly rotated density ρ_0 ∘ (R^h)^T of the same steps (the
    ``noise_map="flow"`` push-forward, exact by the test above); R^h -> R_t as h -> 0.
    Per step Π((I + ΔΩ)x) - exp(ΔΩ)x is O(h) and mean-zero tangentially, so it accumulates
    to O(h^1/2); scheme (a) is strong order 1/2. RMS over 3 paths, h = T/8 .. T/128:
    accept slopes in [0.3, 1.1] and a > 2.5x drop.
    """
    rho0 = VonMisesFisher(MU3, 3.0)
    L, T = 16, 0.25
    hs = [T / 2**k for k in range(3, 8)]
    errs = {"pushforward": [], "exponential": []}
    for seed in (5, 6, 7):
        noise = RotationNoise(3, 1.0, seed=seed, t_max=T)
        kw = dict(beta=0.0, lmax=L, t_eval=[0.0, T], attention=False, tail_tol=1.0, neg_tol=1.0)
        rows = {k: [] for k in errs}
        for h in hs:
            ref = solve_spde(rho0, noise, dt=h, noise_map="flow", **kw).coeffs[-1]
            for scheme in errs:
                c = solve_spde(rho0, noise, dt=h, scheme=scheme, **kw).coeffs[-1]
                rows[scheme].append(np.sqrt(np.sum(np.abs(c - ref) ** 2)))
        for k in errs:
            errs[k].append(rows[k])
    for scheme, e in errs.items():
        e = np.sqrt(np.mean(np.array(e) ** 2, axis=0))
        s = _slope(hs, e)
        assert 0.3 < s < 1.1, (scheme, e, s)
        assert e[-1] < e[0] / 2.5, (scheme, e)


# --------------------------------------------------------------------------------------
# theory §5.2 and §5.6
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["exponential", "pushforward"])
def test_mean_decay_no_attention(scheme):
    """E[ρ_lm(t)] = exp(-½ κ_σ(1) l(l+1) t) ρ_lm(0) (theory §5.2) within 4 Monte Carlo SE.

    Scheme (a) satisfies it exactly at every h (the noise term has zero conditional mean and
    E_h is the exact factor), for any truncation. Scheme (b) has a weak O(h) bias: by isotropy
    its one-step mean operator is diagonal with eigenvalue μ_l = 1 - a h + O(h²), a = ½κ l(l+1),
    so E[ρ_lm(t)] = μ_l^{t/h} ρ_lm(0) differs from e^{-a t} ρ_lm(0) by about a² h t / 2 relative:
    <= 0.09 for l = 3 (a = 3, h = 0.02, t = 1), i.e. <= 1e-3 absolute on the decayed l = 3
    coefficients, far below the Monte Carlo SE (~2e-2 with 24 paths).
    """
    rho0 = VonMisesFisher(MU3, 3.0)
    L, T, h, n_seeds = 8, 1.0, 0.02, 24
    ell, _ = coefficient_degrees(3, L)
    out = []
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d=3, lmax=4, seed=1000 + seed, t_max=T)
        s = solve_spde(rho0, noise, beta=0.0, lmax=L, dt=h, t_eval=[0.0, T], attention=False, scheme=scheme,
                       tail_tol=1.0, neg_tol=10.0)
        out.append(SPDESolution(3, L, s.times, s.coeffs, 0.0).real_coefficients(1))
    out = np.array(out)
    kappa1 = noise.kappa1
    c0 = SPDESolution(3, L, [0.0], rho0.coefficients(L)[None], 0.0).real_coefficients(0)
    lr = np.repeat(np.arange(L + 1), 2 * np.arange(L + 1) + 1)
    theory = np.exp(-0.5 * kappa1 * lr * (lr + 1) * T) * c0
    sel = (lr >= 1) & (lr <= 3)
    se = out.std(axis=0, ddof=1) / math.sqrt(n_seeds)
    z = (out.mean(axis=0) - theory)[sel] / se[sel]
    assert np.abs(z).max() < 4.0, z


@pytest.mark.parametrize("scheme", ["exponential", "pushforward"])
@pytest.mark.parametrize("d", [2, 3])
def test_mass_conserved(scheme, d):
    """∫ρ_t = 1 to 1e-12 with attention and noise (theory §5.6)."""
    mu = MU3 if d == 3 else [0.6, 0.8]
    noise = NoisePath(RELU, d=d, lmax=6, seed=4, t_max=0.2)
    sol = solve_spde(VonMisesFisher(mu, 2.0), noise, beta=1.0, lmax=32, dt=0.004, t_eval=np.linspace(0, 0.2, 6),
                     scheme=scheme, tail_tol=1e-2, neg_tol=1e-2)
    masses = np.array([sol.mass(i) for i in range(len(sol))])
    assert np.abs(masses - 1.0).max() < 1e-12
    nodes, w = sol.quadrature_cloud(len(sol) - 1)
    assert abs(w.sum() - 1.0) < 1e-12


# --------------------------------------------------------------------------------------
# theory §5.7: deterministic limit vs particles, energy
# --------------------------------------------------------------------------------------


def _particles_attention(x, beta, h, n_steps):
    for _ in range(n_steps):
        v = tangent_project(x, softmax_attention(x, beta))
        x = x + h * v
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _deterministic_vs_particles(N):
    rho0 = Mixture([VonMisesFisher(MU3, 3.0), VonMisesFisher(-MU3, 2.0)], [0.6, 0.4])
    beta, h, n, L = 2.0, 0.05, 10, 32
    sol = solve_spde(rho0, None, beta=beta, lmax=L, dt=h, t_eval=h * np.arange(n + 1), d=3)
    x = _particles_attention(rho0.sample(N, seed=11), beta, h, n)
    B = real_basis(3, 3, x)
    emp, se = B.mean(axis=0), B.std(axis=0) / math.sqrt(N)
    c = sol.real_coefficients(n)[:16]
    # interacting particles are not independent, but their fluctuations are O(N^-1/2) with an
    # iid-like constant at these short times: accept 4.5 SE on the 15 coefficients l = 1..3
    z = (emp - c)[1:] / se[1:]
    assert np.abs(z).max() < 4.5, z
    # the dynamics moved the coefficients by many SE, so the comparison has power
    c0 = sol.real_coefficients(0)[:16]
    assert np.abs((c - c0)[1:] / se[1:]).max() > 6
    # E_β^+ = (1/2β) Σ λ_l |ρ_lm|² is non-decreasing (gradient ascent, theory §5.7)
    e = np.array([sol.attention_energy(i) for i in range(len(sol))])
    assert np.all(np.diff(e) >= -1e-12 * e[0]), np.diff(e)
    assert e[-1] > e[0] * (1 + 1e-4)
    # ... and matches the direct double sum over the quadrature cloud
    from meanfield.attention import attention_energy

    nodes, w = sol.quadrature_cloud(n)
    assert abs(attention_energy(nodes, beta, np.maximum(w, 0)) - e[-1]) < 1e-10 * e[-1]


def test_deterministic_vs_particles():
    _deterministic_vs_particles(4000)


@pytest.mark.slow
def test_deterministic_vs_particles_large():
    _deterministic_vs_particles(20000)


def test_energy_nondecreasing_exponential_scheme():
    rho0 = Mixture([VonMisesFisher(MU3, 3.0), VonMisesFisher(-MU3, 2.0)], [0.6, 0.4])
    sol = solve_spde(rho0, None, beta=2.0, lmax=24, dt=0.005, t_eval=0.05 * np.arange(6), d=3, scheme="exponential")
    e = np.array([sol.attention_energy(i) for i in range(len(sol))])
    assert np.all(np.diff(e) > 0)


# --------------------------------------------------------------------------------------
# With noise: push-forward vs particles on one path, scheme (a) vs (b)
# --------------------------------------------------------------------------------------


def _noise_vs_particles(N, L):
    """theory §6(b) check: vMF κ = 4, ReLU noise l_σ = 8, no attention, T = 0.5, h = 2e-3.

    Given the noise path, particles without attention are iid with law exactly the
    push-forward that scheme (b) computes, so each low-degree coefficient difference is a
    N(0, SE²) variable: 15 coefficients l = 1..3, accept max |z| < 4 (P(fail) ~ 1e-3).
    The solution develops fine scales (tail ~1e-3 at T = 0.5, lmax 48); the low-degree
    coefficients are insensitive to that (lmax 32 vs 64 differ by ~1e-4), so the health
    checks are relaxed here explicitly.
    """
    T, h = 0.5, 2e-3
    n = int(round(T / h))
    noise = NoisePath(RELU, d=3, lmax=8, seed=11, t_max=T)
    rho0 = VonMisesFisher(MU3, 4.0)
    sol = solve_spde(rho0, noise, beta=0.0, lmax=L, dt=h, t_eval=[0.0, T], attention=False, tail_tol=1.0,
                     neg_tol=1.0)
    x = rho0.sample(N, seed=5)
    for i in range(n):
        x = x + noise.field(i * h, (i + 1) * h)(x)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    B = real_basis(3, 3, x)
    emp, se = B.mean(axis=0), B.std(axis=0) / math.sqrt(N)
    c = sol.real_coefficients(1)[:16]
    z = (emp - c)[1:] / se[1:]
    assert np.abs(z).max() < 4.0, z
    assert np.abs(emp - c).max() < 2.5 / math.sqrt(4 * math.pi * N)
    return np.abs(emp - c).max()


def test_noise_pushforward_vs_particles():
    _noise_vs_particles(50_000, 32)


@pytest.mark.slow
def test_noise_pushforward_vs_particles_large():
    _noise_vs_particles(200_000, 48)


def _a_vs_b(seeds, hs, L=16, T=0.25):
    rho0 = VonMisesFisher(MU3, 3.0)
    ell, _ = coefficient_degrees(3, L)
    low = ell <= 4
    diffs = []
    for seed in seeds:
        noise = NoisePath(RELU, d=3, lmax=4, seed=seed, t_max=T)
        row = []
        for h in hs:
            kw = dict(beta=1.0, lmax=L, dt=h, t_eval=[0.0, T], tail_tol=1.0, neg_tol=1.0)
            ca = solve_spde(rho0, noise, scheme="exponential", **kw).coeffs[-1]
            cb = solve_spde(rho0, noise, scheme="pushforward", **kw).coeffs[-1]
            row.append(np.sqrt(np.sum(np.abs(ca - cb)[low] ** 2)))
        diffs.append(row)
    return np.sqrt(np.mean(np.array(diffs) ** 2, axis=0))


def test_schemes_converge_to_each_other_with_noise():
    """RMS over 3 paths of |ρ^(a) - ρ^(b)| on degrees <= 4 vs h: strong order 1/2 each.

    Measured slope 0.69 (4 paths, h = T/8 .. T/128); accept [0.35, 1.1] and a > 3x drop.
    """
    hs = [0.25 / 2**k for k in range(3, 7)]
    e = _a_vs_b([100, 101, 102], hs)
    s = _slope(hs, e)
    assert 0.35 < s < 1.1, (e, s)
    assert e[-1] < e[0] / 2


# --------------------------------------------------------------------------------------
# orders and spectral convergence
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_time_order_deterministic(d):
    """Noise off: both schemes are first order in h (measured slopes 1.07 / 1.12 vs a fine
    reference, 1.00 for (a) - (b)); accept [0.85, 1.25]."""
    mu = MU3 if d == 3 else [0.6, 0.8]
    rho0 = VonMisesFisher(mu, 3.0)
    T, L = 0.25, 24
    kw = dict(beta=1.0, lmax=L, t_eval=[0.0, T], d=d)
    hs = [T / 2**k for k in range(5, 9)]
    ref = {s: solve_spde(rho0, None, dt=T / 1024, scheme=s, **kw).coeffs[-1] for s in ("pushforward", "exponential")}
    res = {}
    for s in ("pushforward", "exponential"):
        res[s] = [solve_spde(rho0, None, dt=h, scheme=s, **kw).coeffs[-1] for h in hs]
        err = [np.abs(c - ref[s]).max() for c in res[s]]
        assert 0.85 < _slope(hs, err) < 1.25, (s, err)
    dab = [np.abs(a - b).max() for a, b in zip(res["exponential"], res["pushforward"])]
    assert 0.85 < _slope(hs, dab) < 1.25, dab


@pytest.mark.slow
def test_strong_order_with_noise():
    """Strong error vs a fine reference (h = T/512) on the same paths, RMS over 4 paths, degrees <= 4.

    Measured: (b) slope 0.49, (a) 0.67 (h = T/8 .. T/128). Theory 1/2; accept [0.3, 1.0].
    """
    rho0 = VonMisesFisher(MU3, 3.0)
    L, T = 24, 0.25
    ell, _ = coefficient_degrees(3, L)
    low = ell <= 4
    hs = [T / 2**k for k in range(3, 8)]
    for scheme in ("pushforward", "exponential"):
        errs = []
        for seed in range(4):
            noise = NoisePath(RELU, d=3, lmax=4, seed=100 + seed, t_max=T)
            kw = dict(beta=1.0, lmax=L, t_eval=[0.0, T], tail_tol=1.0, neg_tol=1.0, scheme=scheme)
            ref = solve_spde(rho0, noise, dt=T / 512, **kw).coeffs[-1]
            errs.append([np.sqrt(np.sum(np.abs(solve_spde(rho0, noise, dt=h, **kw).coeffs[-1] - ref)[low] ** 2))
                         for h in hs])
        e = np.sqrt(np.mean(np.array(errs) ** 2, axis=0))
        assert 0.3 < _slope(hs, e) < 1.0, (scheme, e)


@pytest.mark.parametrize("d", [2, 3])
def test_spectral_convergence_in_lmax(d):
    """Smooth deterministic case: the error vs lmax decays geometrically.

    The solution stays entire (vMF-like), its coefficients decay like (κ/2)^l / l!, faster
    than geometric; we require every increase of lmax by 4 to cut the error by > 10x until
    round-off (1e-13), and a negative log-linear slope."""
    mu = MU3 if d == 3 else [0.6, 0.8]
    rho0 = VonMisesFisher(mu, 4.0)
    kw = dict(beta=1.0, dt=0.02, t_eval=[0.0, 0.2], d=d, attention_tol=1e-4, tail_tol=1.0, neg_tol=1.0)
    ref = solve_spde(rho0, None, lmax=48, **kw)
    Ls = [8, 12, 16, 20]
    err = []
    for L in Ls:
        c = solve_spde(rho0, None, lmax=L, **kw)
        x = rho0.sample(200, seed=1)
        err.append(np.abs(c.evaluate(1, x) - ref.evaluate(1, x)).max())
    err = np.array(err)
    assert np.all((err[1:] < err[:-1] / 10) | (err[1:] < 1e-13)), err
    assert np.polyfit(Ls, np.log(err), 1)[0] < -0.5


# --------------------------------------------------------------------------------------
# health monitoring, filter, bad input
# --------------------------------------------------------------------------------------


def test_resolution_error_carries_partial_solution():
    noise = NoisePath(RELU, d=3, lmax=8, seed=11, t_max=0.5)
    with pytest.raises(SPDEResolutionError, match="raise lmax") as info:
        solve_spde(VonMisesFisher(MU3, 4.0), noise, beta=0.0, lmax=16, dt=0.01, t_eval=np.linspace(0, 0.5, 11),
                   attention=False)
    err = info.value
    assert err.reason in ("tail", "negative")
    assert 0 < err.time < 0.5
    sol = err.solution
    assert isinstance(sol, SPDESolution) and len(sol) >= 2
    assert sol.times[-1] == pytest.approx(err.time)
    assert sol.meta["completed"] is False


def test_tail_fraction_is_the_energy_fraction_and_flags_non_finite_states():
    """tail_fraction = Σ_{l > 3L/4} mult |c|² / Σ mult |c|², and inf for a NaN, an infinite or an
    overflowing coefficient (the solver's check for a non-finite state)."""
    from meanfield.spde import tail_fraction

    rng = np.random.default_rng(4)
    for d, L in ((2, 40), (3, 24), (4, 8)):
        b = basis(d, L)
        c = b.from_real(rng.normal(size=b.n_real))
        e = b.energy(c)
        # both sides sum n positive terms twice (n real entries); a sum of positive terms is exact to
        # n eps relative in any order, so the two ratios differ by at most 4 n eps (measured: <= 1e-15)
        n = e.size * (2 if np.iscomplexobj(c) else 1)
        assert tail_fraction(b, c) == pytest.approx(e[b.ell > (3 * L) // 4].sum() / e.sum(),
                                                    rel=4 * n * np.finfo(float).eps)
        assert tail_fraction(b, b.zeros()) == 0.0
        for bad in (np.nan, np.inf, 1e200):
            c2 = c.copy()
            c2[-1] = bad
            assert tail_fraction(b, c2) == math.inf


@pytest.mark.parametrize("bad", [np.nan, 1e200])
def test_a_non_finite_state_stops_the_run_at_its_time(monkeypatch, bad):
    """A step that returns a NaN or an overflowing coefficient stops the run at the next check,
    with the time and reason 'nonfinite'; nothing non-finite is returned."""
    from meanfield.spde._exponential import ExponentialEuler

    step, calls = ExponentialEuler.step, []

    def broken(self, c, rho_g, vel, t0, t1):
        c = step(self, c, rho_g, vel, t0, t1)
        calls.append(t1)
        if len(calls) == 3:
            c = c.copy()
            c[5] = bad
        return c

    monkeypatch.setattr(ExponentialEuler, "step", broken)
    noise = NoisePath(RELU, d=3, lmax=4, seed=1, t_max=0.1)
    with pytest.raises(SPDEResolutionError, match="became non-finite at t = 0.03") as info:
        solve_spde(VonMisesFisher(MU3, 4.0), noise, beta=1.0, lmax=16, dt=0.01, t_eval=[0.0, 0.1],
                   scheme="exponential")
    assert info.value.reason == "nonfinite"


@pytest.mark.parametrize("d", [2, 3])
def test_weighted_displacement_is_the_flux_with_the_quadrature_weights(d):
    """displacement_on_grid(scale=ρ, weighted=True) = ρ w (h v + ΔW): on the fused route (V = I, the
    weights folded into F's ring coefficients) and on the separate one (a value matrix V), with
    and without ``scale``; round-off only (a few roundings of each factor)."""
    from meanfield.spde import displacement_on_grid

    L, dt = 24, 0.01
    noise = NoisePath(RELU, d=d, lmax=4, seed=2, t_max=1.0)
    b = basis(d, L)
    g = b.grid()
    mu = MU3 if d == 3 else np.array([0.6, 0.8])
    c = VonMisesFisher(mu, 4.0).coefficients(L)
    rho = g.synth(c)
    field = noise.field(0.0, dt)
    for V in (None, np.diag(np.linspace(0.5, 1.5, d))):
        vel = Velocity(d, L, 1.0, V)
        ref = displacement_on_grid(g, vel, c, dt, field, scale=rho * g.weights)
        new = displacement_on_grid(g, vel, c, dt, field, scale=rho, weighted=True)
        assert np.abs(new - ref).max() < 1e-14 * np.abs(ref).max()
        ref = displacement_on_grid(g, vel, c, dt, field) * g.weights
        new = displacement_on_grid(g, vel, c, dt, field, weighted=True)
        assert np.abs(new - ref).max() < 1e-14 * np.abs(ref).max()


def test_filter_keeps_mass_and_damps_tail():
    noise = NoisePath(RELU, d=3, lmax=8, seed=11, t_max=0.3)
    kw = dict(beta=0.0, lmax=24, dt=0.01, t_eval=[0.0, 0.3], attention=False, tail_tol=1.0, neg_tol=10.0)
    plain = solve_spde(VonMisesFisher(MU3, 4.0), noise, **kw)
    filt = solve_spde(VonMisesFisher(MU3, 4.0), noise, filter=8, **kw)
    assert abs(filt.mass(1) - 1.0) < 1e-13
    assert filt.tail_energy(1) < plain.tail_energy(1) / 10
    assert filt.meta["filter"] == 8


def test_bad_inputs():
    noise3 = NoisePath(RELU, d=3, lmax=4, seed=0)
    noise2 = NoisePath(RELU, d=2, lmax=4, seed=0)
    vmf = VonMisesFisher(MU3, 2.0)
    base = dict(beta=1.0, lmax=16, dt=0.01, t_eval=[0.0, 0.02])
    with pytest.raises(ValueError, match="non-negative"):
        solve_spde(lambda x: x[:, 2] / (2 * np.pi) + 1 / (4 * np.pi) - 0.1, noise3, **base)
    with pytest.raises(ValueError, match="integral is 2"):
        solve_spde(lambda x: 2 * vmf.density(x), noise3, **base)
    c = vmf.coefficients(16)
    with pytest.raises(ValueError, match="integral"):
        solve_spde(0.5 * c, noise3, **base)
    bad = c.copy()
    bad[1] += 0.8  # a strong l = 1 mode makes the density negative on one side
    with pytest.raises(ValueError, match="non-negative"):
        solve_spde(bad, noise3, **base)
    need = required_degree(3, 20.0, 1e-8)
    with pytest.raises(ValueError, match=f"degree >= {need}"):
        solve_spde(vmf, noise3, beta=20.0, lmax=16, dt=0.01, t_eval=[0.0, 0.02])
    with pytest.raises(ValueError, match="step-size condition.*use dt <="):
        solve_spde(vmf, None, beta=1.0, lmax=64, dt=0.05, t_eval=[0.0, 5.0], d=3, scheme="exponential")
    with pytest.raises(ValueError, match="dimension d = 2"):
        solve_spde(vmf, noise2, d=3, **base)
    with pytest.raises(ValueError, match="S\\^2 but the solver runs on S\\^1"):
        solve_spde(vmf, noise2, **base)
    with pytest.raises(ValueError, match="multiple of dt"):
        solve_spde(vmf, noise3, beta=1.0, lmax=16, dt=0.01, t_eval=[0.0, 0.015])
    with pytest.raises(ValueError, match="d must be given"):
        solve_spde(vmf, None, **base)
    with pytest.raises(ValueError, match="scheme"):
        solve_spde(vmf, noise3, scheme="heun", **base)
    with pytest.raises(ValueError, match="rotation noise"):
        solve_spde(vmf, noise3, noise_map="flow", **base)
    with pytest.raises(ValueError, match="t_max"):
        solve_spde(vmf, noise3, beta=1.0, lmax=16, dt=0.5, t_eval=[0.0, 2.0])


def test_cfl_criterion_values():
    # no noise: growth ≈ exp(T h |v|² L(L+1) / 2)
    g = exponential_euler_growth(3, 32, 1e-3, 1.0, kappa1=0.0, vmax=1.0)
    assert g == pytest.approx(math.exp(0.5 * 1000 * math.log1p(1e-6 * 32 * 33)), rel=1e-12)
    # pure noise: mean-square stable for every h
    assert exponential_euler_growth(3, 64, 0.1, 10.0, kappa1=0.5, vmax=0.0) == 1.0


@pytest.mark.parametrize("d", [2, 3])
def test_solution_accessors_and_inputs(d, tmp_path):
    mu = MU3 if d == 3 else np.array([0.6, 0.8])
    v = VonMisesFisher(mu, 3.0)
    L = 24
    # the same initial state from an object, a callable, complex/real coefficients
    s_obj = solve_spde(v, None, beta=1.0, lmax=L, dt=0.01, t_eval=[0.0, 0.03], d=d)
    s_fun = solve_spde(v.density, None, beta=1.0, lmax=L, dt=0.01, t_eval=[0.0, 0.03], d=d)
    assert np.abs(s_obj.coeffs - s_fun.coeffs).max() < 1e-12
    real = s_obj.real_coefficients(0)
    s_real = solve_spde(real, None, beta=1.0, lmax=L, dt=0.01, t_eval=[0.0, 0.03], d=d)
    assert np.abs(s_obj.coeffs - s_real.coeffs).max() < 1e-12
    s_uni = solve_spde("uniform", None, beta=1.0, lmax=L, dt=0.01, t_eval=[0.0, 0.03], d=d)
    assert np.abs(s_uni.coeffs[-1, 1:]).max() < 1e-12  # the uniform density is stationary (round-off)
    x = v.sample(64, seed=0)
    assert np.abs(s_obj.evaluate(0, x) - v.density(x)).max() < 1e-12
    grid = s_obj.density_on_grid(0)
    if d == 3:
        colat, lon, vals = grid
        assert vals.shape == (colat.size, lon.size)
        pts = np.stack([np.sin(colat[5]) * np.cos(lon), np.sin(colat[5]) * np.sin(lon),
                        np.full(lon.size, np.cos(colat[5]))], axis=1)
    else:
        th, vals = grid
        pts = np.stack([np.cos(th), np.sin(th)], axis=1)
        vals = vals[None]
    assert np.abs(vals[5 if d == 3 else 0] - v.density(pts)).max() < 1e-12
    assert s_obj.min_density(0) > 0 and s_obj.negative_mass(0) == 0.0
    assert s_obj.tail_energy(0) < 1e-20
    assert s_obj.spectrum(0).shape == (L + 1,)
    path = s_obj.save(tmp_path / "run.npz")
    back = SPDESolution.load(path)
    assert np.array_equal(back.coeffs, s_obj.coeffs) and back.meta["scheme"] == "pushforward"
    assert back.meta["version"] and back.meta["rho0"]["kind"] == "vmf"
    assert np.abs(back.velocity(1, x) - s_obj.velocity(1, x)).max() == 0.0


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_cli_tiny_config(tmp_path, capsys, d):
    from meanfield.cli import spde as cli

    cfg = tmp_path / "tiny.toml"
    mu = "[0.0, 0.0, 1.0]" if d == 3 else "[1.0, 0.0]"
    cfg.write_text(
        f'd = {d}\nscheme = "pushforward"\nbeta = 1.0\nlmax = 24\ndt = 0.01\nT = 0.03\nn_save = 2\n'
        f'noise = "relu"\nnoise_lmax = 4\nseed = 3\ninit = "vmf"\nkappa = 2.0\nmu = {mu}\n'
        f'output = "{(tmp_path / "out").as_posix()}"\n'
    )
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli.register(sub)
    args = parser.parse_args(["spde", "--config", str(cfg), "--scheme", "exponential"])
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert str(tmp_path / "out.npz") in printed and str(tmp_path / "out.png") in printed
    sol = SPDESolution.load(tmp_path / "out.npz")
    assert sol.meta["scheme"] == "exponential" and sol.meta["noise"]["seed"] == 3
    assert len(sol) == 2 and abs(sol.mass(1) - 1) < 1e-12
    assert (tmp_path / "out.png").stat().st_size > 1000


@pytest.mark.parametrize("d", [2, 3])
def test_restart_continues_on_the_same_noise_path(d, monkeypatch):
    """A run restarted at t0 from its own saved state equals the uninterrupted run bit for bit
    (single-threaded transforms, which sum in a fixed order); restarted at a higher degree it
    carries on from the zero-padded state."""
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "1")
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath

    noise = NoisePath(ActivationKernel("relu"), d=d, lmax=6, seed=11, t_max=0.25)
    mu = MU3 if d == 3 else np.array([0.6, 0.8])
    rho0 = VonMisesFisher(mu, 2.0)
    kw = dict(beta=1.0, dt=2**-6)
    lo, hi = (32, 48) if d == 2 else (64, 96)
    full = solve_spde(rho0, noise, lmax=lo, t_eval=[0.125, 0.25], **kw)
    first = solve_spde(rho0, noise, lmax=lo, t_eval=[0.125], **kw)
    second = solve_spde(first.coeffs[-1], noise, lmax=lo, t_eval=[0.125, 0.25], t0=0.125, **kw)
    assert np.array_equal(second.coeffs[-1], full.coeffs[-1])
    assert second.times.tolist() == [0.125, 0.25] and second.meta["t0"] == 0.125
    finer = solve_spde(first.coeffs[-1], noise, lmax=hi, t_eval=[0.25], t0=0.125, **kw)
    low = basis(d, lo).to_real(full.coeffs[-1])
    high = basis(d, hi).to_real(finer.coeffs[-1])[: low.size]
    # the same solution at two degrees, both passing the resolution check (energy beyond degree
    # 3 lo / 4 at most tail_tol = 1e-4 of the total): the common coefficients differ by the
    # truncation, of relative L2 size at most sqrt(tail_tol)
    rel = np.linalg.norm(high - low) / np.linalg.norm(low)
    assert rel < math.sqrt(1e-4), rel
    assert abs(finer.mass(-1) - 1.0) < 1e-12
    with pytest.raises(ValueError, match="t0"):
        solve_spde(rho0, noise, lmax=lo, t_eval=[0.1], t0=0.125, **kw)


def test_eulerian_schemes_in_d4_agree_to_first_order():
    """S^3 (d = 4, hyperspherical basis): both Eulerian schemes run (the exponential one through the
    weighted divergence of the hypersphere grid), conserve mass exactly, and, without noise, differ
    by O(h): halving h halves their difference (measured ratio 1.983 at h = T/4 -> T/8; an order-1/2
    gap would give 1.41, an order-2 one 4)."""
    T = 0.1
    diffs = []
    for h in (T / 4, T / 8):
        sol = {s: solve_spde(VonMisesFisher([0, 0, 0, 1.0], 2.0), None, beta=1.0, lmax=10, dt=h, t_eval=[0, T],
                             scheme=s, d=4, tail_tol=1.0, neg_tol=10.0) for s in ("exponential", "pushforward")}
        for s in sol.values():
            assert abs(s.mass(1) - s.mass(0)) < 1e-12
        diffs.append(np.abs(sol["exponential"].coeffs[-1] - sol["pushforward"].coeffs[-1]).max())
    assert 1.8 < diffs[0] / diffs[1] < 2.2, diffs

"""Attention with β < 0 (weights favouring distant tokens): eigenvalues, spectral evaluator against the direct sum, solvers.

For β < 0 the convolution g = e^{-|β|} K_β * μ can be as small as e^{-2|β|} (a tight cluster)
while Σ_l |e^{-|β|} λ_l| Z_l(1) = 1, so the spectral evaluator has a round-off floor
u e^{2|β|}; it must meet its ``tol`` wherever it accepts one and refuse where it cannot.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from meanfield.attention import (
    attention_eigenvalues,
    attention_energy,
    attention_velocity,
    convolution_velocity,
    gap_energy,
    required_degree,
)
from meanfield.attention_spectral import SpectralAttention, empirical_coefficients, select_velocity
from meanfield.harmonics import harmonic_dimension, sphere_area
from meanfield.particles import solve_particles
from meanfield.sphere._s2_exact import MAX_LMAX as LOW_DEGREE_MAX_LMAX
from meanfield.sphere._zonal import legendre_d
from meanfield.spde._velocity import attention_eigen_derivative

BETAS = (-0.5, -2.0, -5.0, -10.0)
#: the tolerance asked of the evaluator at each β: 1e-10 where the round-off floor u e^{2|β|}
#: allows it (|β| <= 6.2), 1e-6 at β = -10 (floor 1.1e-7)
TOLS = {-0.5: 1e-10, -2.0: 1e-10, -5.0: 1e-10, -10.0: 1e-6}


def _unit(v):
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _cloud(kind, d, n, rng):
    if kind == "uniform":
        return _unit(rng.normal(size=(n, d)))
    if kind == "tight":  # one cluster of angular width ~0.01: g ~ e^{-2|β|} at every token (worst case)
        return _unit(np.ones((n, d)) + 0.01 * rng.normal(size=(n, d)))
    centres = _unit(rng.normal(size=(3, d)))
    return _unit(centres[rng.integers(0, 3, n)] + 0.03 * rng.normal(size=(n, d)))


@pytest.mark.parametrize("d", [2, 3])
def test_eigenvalues_parity_and_funk_hecke(d):
    b, L = 3.0, 60
    lp, lm = attention_eigenvalues(d, b, L), attention_eigenvalues(d, -b, L)
    np.testing.assert_array_equal(lm, lp * (-1.0) ** np.arange(L + 1))
    # Funk–Hecke: Σ_l λ_l (dim_l / |S|) P_l(t) = e^{βt}, here scaled by e^{-|β|}
    t = np.linspace(-1, 1, 41)
    series = (lm * harmonic_dimension(d, L) / sphere_area(d)) @ legendre_d(d, L, t)
    np.testing.assert_allclose(series, np.exp(-b * t - b), rtol=1e-13, atol=1e-15)
    # the scaling normalises Σ |λ_l| Z_l(1) to the kernel's maximum, 1
    assert abs(np.sum(np.abs(lm) * harmonic_dimension(d, L) / sphere_area(d)) - 1.0) < 1e-13


@pytest.mark.parametrize("d", [2, 3])
def test_eigen_derivative_negative_beta_by_finite_difference(d):
    beta, h, L = -2.5, 1e-5, 12
    exact = attention_eigen_derivative(d, beta, L)  # e^{-|β|} dλ_l/dβ

    def unscaled(b):
        return attention_eigenvalues(d, b, L) * math.exp(abs(b))

    fd = (unscaled(beta + h) - unscaled(beta - h)) / (2 * h) * math.exp(-abs(beta))
    np.testing.assert_allclose(exact, fd, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("kind", ["tight", "three", "uniform"])
def test_spectral_negative_beta_against_direct(d, beta, kind):
    rng = np.random.default_rng(abs(int(10 * beta)) + d)
    x = _cloud(kind, d, 600, rng)
    tol = TOLS[beta]
    ref = attention_velocity(x, beta)
    backends = ("nufft", "direct") if d == 2 else ("nufft", "direct", "auto")
    for backend in backends:
        if d == 3 and backend == "direct" and SpectralAttention(d, beta, tol=tol).lmax > LOW_DEGREE_MAX_LMAX:
            continue  # beyond the exact low-degree transforms (refused, tested in test_fast_attention)
        key = "s1_backend" if d == 2 else "s2_backend"
        sa = SpectralAttention(d, beta, tol=tol, **{key: backend})
        assert sa.predicted_error <= tol
        err = np.abs(sa.velocity(x) - ref).max()
        assert err <= tol, (backend, err)


@pytest.mark.parametrize("d", [2, 3])
def test_negative_beta_refused_below_roundoff_floor(d):
    # u e^{20} = 1.1e-7 > tol / 2: refused with a pointer to the direct sum
    with pytest.raises(ValueError, match="direct"):
        SpectralAttention(d, -10.0, tol=1e-10)
    _, info = select_velocity("auto", d, -10.0, N=100_000, tol=1e-10)
    assert info["method"] == "direct"
    with pytest.raises(ValueError, match="direct"):
        select_velocity("spectral", d, -10.0, tol=1e-10)
    _, info = select_velocity("auto", d, -2.0, N=100_000, tol=1e-10)
    assert info["method"] == "spectral"


def test_negative_beta_roundoff_floor_is_the_stated_one():
    # the refusal threshold is tol/2 = u e^{2|β|}: |β| = ½ log(tol / 2u)
    u = np.finfo(float).eps
    b_star = 0.5 * math.log(1e-8 / (2 * u))
    SpectralAttention(3, -(b_star - 0.01), tol=1e-8)
    with pytest.raises(ValueError, match="round-off"):
        SpectralAttention(3, -(b_star + 0.01), tol=1e-8)


def test_convolution_velocity_negative_beta_s2():
    rng = np.random.default_rng(5)
    x = _cloud("three", 3, 300, rng)
    beta = -2.0
    L = required_degree(3, beta, 1e-11)
    coeffs = empirical_coefficients(x, L, epsilon=2e-13)
    v, _ = convolution_velocity(coeffs, beta, x, d=3, lmax=L, epsilon=2e-13)
    assert np.abs(v - attention_velocity(x, beta)).max() < 1e-10


def test_gap_energy_negative_beta_closed_form():
    # three equally spaced tokens on S^1: <x_i, x_j> = -1/2 off the diagonal
    th = 2 * np.pi * np.arange(3) / 3
    x = np.stack([np.cos(th), np.sin(th)], axis=1)
    for beta in (-3.0, -0.2, 0.7):
        expect = (math.exp(beta) - (math.exp(beta) + 2 * math.exp(-beta / 2)) / 3) / (2 * beta)
        assert abs(gap_energy(x, beta) - expect) < 1e-14 * max(1.0, abs(expect))
        assert abs(attention_energy(x, beta) - (math.exp(beta) + 2 * math.exp(-beta / 2)) / 3 / (2 * beta)) < 1e-13


@pytest.mark.parametrize("d", [2, 3])
def test_negative_beta_particles_spectral_matches_direct_and_energy_ascends(d):
    rng = np.random.default_rng(11)
    x0 = _unit(np.ones((200, d)) + 0.5 * rng.normal(size=(200, d)))
    beta, dt, ts = -2.0, 2.0**-7, np.linspace(0.0, 1.0, 9)
    a = solve_particles(x0, None, beta, dt, ts, attention="direct", scheme="heun")
    b = solve_particles(x0, None, beta, dt, ts, attention="spectral", attention_tol=1e-10, scheme="heun")
    # the velocities differ by <= 1e-10; over T = 1 with Lipschitz constant O(|β|) the paths stay close
    assert np.abs(a.final - b.final).max() < 1e-8
    # E^+_β is non-decreasing along the deterministic flow for either sign of β (dE/dt = Σ w Z |v|²)
    e = np.array([attention_energy(x, beta) for x in a.x])
    assert np.all(np.diff(e) > 0)


def test_spde_negative_beta_mass_and_energy():
    from meanfield.spde import VonMisesFisher, solve_spde

    sol = solve_spde(VonMisesFisher([0.0, 1.0], 3.0), None, beta=-1.5, lmax=32, dt=2.0**-10,
                     t_eval=[0.0, 0.25, 0.5], d=2, scheme="exponential")
    e = [sol.attention_energy(i) for i in range(3)]
    assert np.all(np.diff(e) > 0)
    assert abs(sol.coeffs[-1][0] - sol.coeffs[0][0]) < 1e-12  # mass (the l = 0 coefficient) is conserved


def test_bessel_reflection_used_by_the_eigenvalues():
    # I_k(-b) = (-1)^k I_k(b) and i_l(-b) = (-1)^l i_l(b), the facts behind the parity
    b = 2.3
    for k in range(6):
        assert abs(special.iv(k, -b) - (-1) ** k * special.iv(k, b)) < 1e-14 * special.iv(k, b) + 1e-300
        assert abs(special.spherical_in(k, -b) - (-1) ** k * special.spherical_in(k, b)) < 1e-14


def test_characteristics_negative_beta_energy_ascends():
    from meanfield.spde import VonMisesFisher, solve_characteristics

    sol = solve_characteristics(VonMisesFisher([0.0, 0.0, 1.0], 4.0), None, beta=-2.0, t_eval=[0.0, 0.25, 0.5],
                                dt=2.0**-5, d=3, n_lat=12, split=False)
    e = [sol.energy(i, kind="attention") for i in range(3)]
    assert np.all(np.diff(e) > 0)
    assert abs(sol.mass(-1) - 1.0) < 1e-12

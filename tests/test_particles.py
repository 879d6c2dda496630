"""Particle solver: geometry, strong order, deterministic limit, evaluators, bad input (theory §3, §5.7, §7)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from _reference import unit_points
from meanfield.attention import attention_energy, softmax_attention, tangent_project
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath, RandomFeatureNoise, RotationNoise
from meanfield.particles import (
    NonFiniteError,
    ParticleSolution,
    Velocity,
    make_velocity,
    register_velocity,
    solve_particles,
    step_grid,
    velocity_methods,
)

RELU = ActivationKernel("relu")


@pytest.fixture(scope="module")
def noise3():
    return NoisePath(RELU, 3, 8, seed=11, t_max=2.0)


@pytest.fixture(scope="module")
def x0_3():
    return unit_points(40, 3, np.random.default_rng(1))


# --------------------------------------------------------------------------------------
# geometry and bookkeeping
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["euler", "heun"])
@pytest.mark.parametrize("attention", ["direct", "off"])
def test_tokens_stay_on_sphere(noise3, x0_3, scheme, attention):
    sol = solve_particles(x0_3, noise3, 2.0, 2.0**-5, np.linspace(0, 2.0, 9), scheme=scheme, attention=attention)
    assert isinstance(sol, ParticleSolution)
    assert sol.x.shape == (9, 40, 3) and sol.t.shape == (9,)
    assert np.max(np.abs(np.linalg.norm(sol.x, axis=2) - 1.0)) < 1e-12
    assert sol.meta["scheme"] == scheme and sol.meta["attention"] == attention
    assert sol.meta["n_steps"] == 64 and sol.meta["dt"] == 2.0**-5
    np.testing.assert_array_equal(sol.x[0], x0_3)


@pytest.mark.parametrize("scheme", ["euler", "heun"])
def test_sphere_other_noise_sources(scheme):
    """S^1 NoisePath, finite-width random features in d = 6, rotation noise: all stay on the sphere."""
    rng = np.random.default_rng(2)
    cases = [
        (NoisePath(RELU, 2, 12, seed=3, t_max=1.0), 2),
        (RandomFeatureNoise(RELU, 6, width=32, seed=4), 6),
        (RotationNoise(4, 1.0, seed=5), 4),
    ]
    for noise, d in cases:
        x0 = unit_points(25, d, rng)
        sol = solve_particles(x0, noise, 1.0, 2.0**-4, [0.5, 1.0], scheme=scheme)
        assert np.max(np.abs(np.linalg.norm(sol.x, axis=2) - 1.0)) < 1e-12


def test_euler_step_is_the_layer_normalised_map(noise3, x0_3):
    """One Euler step equals Π(x + h P_x A(x) + ΔW(x)) (the map T_n of theory §6(b)), to round-off."""
    h, beta = 2.0**-4, 1.5
    sol = solve_particles(x0_3, noise3, beta, h, [h])
    v = tangent_project(x0_3, softmax_attention(x0_3, beta))
    z = x0_3 + h * v + noise3.field(0.0, h)(x0_3)
    np.testing.assert_allclose(sol.final, z / np.linalg.norm(z, axis=1, keepdims=True), atol=1e-15)


def test_heun_step_formula(noise3, x0_3):
    """One Heun step equals the predictor–corrector of the docstring with one shared ΔW."""
    h, beta = 2.0**-4, 0.7
    sol = solve_particles(x0_3, noise3, beta, h, [h], scheme="heun")
    dW = noise3.field(0.0, h)

    def vel(x):
        return tangent_project(x, softmax_attention(x, beta))

    def proj(z):
        return z / np.linalg.norm(z, axis=1, keepdims=True)

    x = x0_3
    pdw = tangent_project(x, dW(x))
    xt = proj(x + h * vel(x) + pdw)
    expect = proj(x + 0.5 * h * (vel(x) + vel(xt)) + 0.5 * (pdw + tangent_project(xt, dW(xt))))
    np.testing.assert_allclose(sol.final, expect, atol=1e-15)


def test_save_times_and_t0(noise3, x0_3):
    """Saving on the grid; starting at t0 > 0 reads the same path as a run from 0."""
    h = 2.0**-5
    full = solve_particles(x0_3, noise3, 1.0, h, [0.5, 1.0])
    second = solve_particles(full.x[0], noise3, 1.0, h, [1.0], t0=0.5)
    np.testing.assert_allclose(second.final, full.final, atol=1e-14)
    np.testing.assert_allclose(full.t, [0.5, 1.0])
    # repeated save times are allowed and return the same state
    rep = solve_particles(x0_3, noise3, 1.0, h, [0.5, 0.5])
    np.testing.assert_array_equal(rep.x[0], rep.x[1])


def test_progress_bar_runs(noise3, x0_3, capsys):
    sol = solve_particles(x0_3, noise3, 1.0, 0.25, [1.0], progress=True)
    assert sol.x.shape == (1, 40, 3)


def test_blocked_direct_attention_matches_unblocked(noise3):
    """The direct evaluator's block size changes nothing but memory (O(N · block))."""
    x0 = unit_points(300, 3, np.random.default_rng(3))
    a = solve_particles(x0, noise3, 3.0, 2.0**-4, [0.5], block=7)
    b = solve_particles(x0, noise3, 3.0, 2.0**-4, [0.5], block=1000)
    np.testing.assert_allclose(a.final, b.final, atol=1e-13)


def test_general_qkv(noise3, x0_3):
    rng = np.random.default_rng(9)
    Q, K, V = (np.eye(3) + 0.3 * rng.standard_normal((3, 3)) for _ in range(3))
    sol = solve_particles(x0_3, noise3, 1.0, 2.0**-5, [1.0], Q=Q, K=K, V=V)
    ident = solve_particles(x0_3, noise3, 1.0, 2.0**-5, [1.0])
    assert np.max(np.abs(np.linalg.norm(sol.final, axis=1) - 1)) < 1e-12
    assert np.max(np.abs(sol.final - ident.final)) > 1e-3
    # one step with Q, K, V against the formula
    one = solve_particles(x0_3, noise3, 1.0, 0.125, [0.125], Q=Q, K=K, V=V)
    z = x0_3 + 0.125 * tangent_project(x0_3, softmax_attention(x0_3, 1.0, Q=Q, K=K, V=V)) + noise3.field(0, 0.125)(x0_3)
    np.testing.assert_allclose(one.final, z / np.linalg.norm(z, axis=1, keepdims=True), atol=1e-15)


def test_velocity_registry_is_pluggable(noise3, x0_3):
    """A new evaluator plugs in by name without touching the steppers."""
    assert {"direct", "off"} <= set(velocity_methods())

    @register_velocity("test-direct-copy")
    def _copy(d, beta, Q, K, V, block, **options):
        inner = make_velocity("direct", d, beta, Q=Q, K=K, V=V, block=block)
        return Velocity(inner.fn, "test-direct-copy", {"wraps": "direct"})

    a = solve_particles(x0_3, noise3, 1.0, 2.0**-4, [0.5], attention="test-direct-copy")
    b = solve_particles(x0_3, noise3, 1.0, 2.0**-4, [0.5], attention="direct")
    assert a.meta["attention"] == "test-direct-copy"
    np.testing.assert_array_equal(a.final, b.final)
    # a ready Velocity object is accepted too
    c = solve_particles(x0_3, noise3, 1.0, 2.0**-4, [0.5], attention=make_velocity("direct", 3, 1.0))
    np.testing.assert_array_equal(c.final, b.final)


def test_no_noise_and_zero_scale_noise_agree(x0_3):
    zero = NoisePath(ActivationKernel("relu", scale=0.0), 3, 4, seed=0, t_max=1.0)
    a = solve_particles(x0_3, None, 2.0, 2.0**-5, [1.0])
    b = solve_particles(x0_3, zero, 2.0, 2.0**-5, [1.0])
    np.testing.assert_allclose(a.final, b.final, atol=1e-15)


def test_non_finite_raises_with_time_and_remedy(x0_3):
    bad = make_velocity("direct", 3, 1.0)
    nan_vel = Velocity(lambda x: np.full_like(x, np.nan), "nan", {})
    with pytest.raises(NonFiniteError, match=r"t = 0\.25.*reduce dt"):
        solve_particles(x0_3, None, 1.0, 0.25, [1.0], attention=nan_vel)
    assert bad.method == "direct"


# --------------------------------------------------------------------------------------
# theory §5.7: deterministic limit, energy ascent
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["euler", "heun"])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_attention_energy_non_decreasing(scheme, d):
    """σ = 0, Q = K = V = I: E_β^+ increases along the discrete flow (theory §5.7).

    Continuous time: dE/dt = N^{-2} Σ_i Z_i |v_i|² >= 0 with Z_i = Σ_j e^{β<x_i,x_j>}.
    The discrete step adds O(h²) terms; at h = 2^-5 with β = 4 (Lipschitz constant of v
    about β) the first-order gain dominates, so every step must increase E up to
    round-off (relative 1e-13).
    """
    beta = 4.0
    x0 = unit_points(60, d, np.random.default_rng(d))
    zero = NoisePath(ActivationKernel("relu", scale=0.0), d, 4, seed=0, t_max=4.0) if d <= 3 else None
    t = np.arange(0, 129) * 2.0**-5
    sol = solve_particles(x0, zero, beta, 2.0**-5, t, scheme=scheme)
    energy = np.array([attention_energy(x, beta) for x in sol.x])
    steps = np.diff(energy)
    assert np.all(steps >= -1e-13 * energy[1:]), steps.min()
    assert energy[-1] > energy[0] * 1.05  # and it really moved


# --------------------------------------------------------------------------------------
# strong order 1/2 of projected Euler
# --------------------------------------------------------------------------------------


def test_strong_order_half():
    """RMS error at T = 1 against a fine solution on the same path (dt_fine = 2^-11), S^2, β = 1.

    ReLU noise with output scale σ = 1/2 (κ(1) = 1/8): with σ = 1 the coarsest steps
    (noise of size 0.25 per step) are outside the asymptotic regime and bend the fit
    (slope 0.41 measured), with σ = 1/2 the fit is 0.48. Theory: strong order 1/2 for this multiplicative, non-commutative noise (the Lévy
    areas of the field are not resolved). The slope of log RMS error (pooled over 12
    seeds × 16 tokens) against log dt over dt = 2^-3..2^-7 must lie in [0.35, 0.75]:
    order 1 (a Milstein-type scheme, or an error dominated by the drift) or an
    inconsistent noise term (slope ~0) fails. The per-seed slopes scatter with a standard
    deviation of about 0.2 (measured), so the pooled slope over 12 seeds has a standard
    error of about 0.06 and the window is ±0.2 ≈ 3 SE around 1/2; a bootstrap over
    seeds is printed. The fine solution's own error (dt 16× smaller, ~1/4 of the
    smallest error) lowers the slope by at most ~0.03.
    """
    d, beta, T = 3, 1.0, 1.0
    dts = 2.0 ** -np.arange(3, 8)
    fine_dt = 2.0**-11
    n_seeds = 12
    kern = ActivationKernel("relu", scale=0.5)
    errs = np.zeros((n_seeds, dts.size))
    for seed in range(n_seeds):
        noise = NoisePath(kern, d, 8, seed=600 + seed, t_max=T)
        x0 = unit_points(16, d, np.random.default_rng(seed))
        ref = solve_particles(x0, noise, beta, fine_dt, [T]).final
        for j, dt in enumerate(dts):
            x = solve_particles(x0, noise, beta, dt, [T]).final
            errs[seed, j] = np.mean(np.sum((x - ref) ** 2, axis=1))
    rms = np.sqrt(errs.mean(axis=0))
    slope = np.polyfit(np.log(dts), np.log(rms), 1)[0]
    boot_rng = np.random.default_rng(0)
    boot = [np.polyfit(np.log(dts), 0.5 * np.log(errs[boot_rng.integers(0, n_seeds, n_seeds)].mean(axis=0)), 1)[0]
            for _ in range(400)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    print(f"\nstrong order: dt {dts} RMS error {rms} slope {slope:.3f} (bootstrap 95% CI [{lo:.3f}, {hi:.3f}])")
    assert 0.35 <= slope <= 0.75, (slope, rms)
    assert np.all(np.diff(rms) < 0)


# --------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------


def test_bad_input(noise3, x0_3):
    ok = dict(beta=1.0, dt=0.25, t_eval=[1.0])
    with pytest.raises(ValueError, match="x0"):
        solve_particles(x0_3[:, :2] * 2, noise3, **ok)
    with pytest.raises(ValueError, match="x0"):
        solve_particles(np.ones(3), noise3, **ok)
    with pytest.raises(ValueError, match="x0"):
        solve_particles(np.array([[1.0]]), None, **ok)  # d < 2
    x_nan = x0_3.copy()
    x_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="x0"):
        solve_particles(x_nan, noise3, **ok)
    with pytest.raises(ValueError, match="noise"):
        solve_particles(unit_points(4, 2, np.random.default_rng(0)), noise3, **ok)  # dimension mismatch
    with pytest.raises(TypeError, match="noise"):
        solve_particles(x0_3, "noise", **ok)
    with pytest.raises(ValueError, match="beta"):
        solve_particles(x0_3, noise3, beta=float("inf"), dt=0.25, t_eval=[1.0])
    with pytest.raises(ValueError, match="beta"):
        solve_particles(x0_3, noise3, beta=float("nan"), dt=0.25, t_eval=[1.0])
    with pytest.raises(ValueError, match="dt"):
        solve_particles(x0_3, noise3, beta=1.0, dt=0.0, t_eval=[1.0])
    with pytest.raises(ValueError, match="t_eval"):
        solve_particles(x0_3, noise3, beta=1.0, dt=0.25, t_eval=[3.0])  # outside the noise window
    with pytest.raises(ValueError, match="t_eval"):
        solve_particles(x0_3, noise3, beta=1.0, dt=0.25, t_eval=[0.3])  # off the step grid
    with pytest.raises(ValueError, match="t_eval"):
        solve_particles(x0_3, noise3, beta=1.0, dt=0.25, t_eval=[1.0, 0.5])  # decreasing
    with pytest.raises(ValueError, match="scheme"):
        solve_particles(x0_3, noise3, scheme="rk4", **ok)
    with pytest.raises(ValueError, match="attention"):
        solve_particles(x0_3, noise3, attention="fmm", **ok)
    with pytest.raises(TypeError, match="attention"):
        solve_particles(x0_3, noise3, attention=3, **ok)
    with pytest.raises(ValueError, match="Q"):
        solve_particles(x0_3, noise3, Q=np.eye(2), **ok)
    with pytest.raises(ValueError, match="V"):
        solve_particles(x0_3, noise3, V=np.full((3, 3), np.inf), **ok)
    with pytest.raises(ValueError, match="step grid"):
        step_grid(0.0, 0.1, [0.15])


def test_auto_attention_uses_spectral_path_and_matches_direct():
    # theory §7: the O(N) spectral sum is chosen for Q = K = V = I above the crossover and
    # agrees with the blocked direct sum to its tolerance (1e-10 per step, amplified over
    # 16 Lipschitz steps by at most e^{16 h (1+2β)} ~ 3)
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath

    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((1500, 3))
    x0 /= np.linalg.norm(x0, axis=1, keepdims=True)
    noise = NoisePath(ActivationKernel("relu"), 3, 6, seed=2, t_max=0.25)
    fast = solve_particles(x0, noise, 2.0, 1 / 64, [0.25])
    slow = solve_particles(x0, noise, 2.0, 1 / 64, [0.25], attention="direct")
    assert fast.meta["attention"] == "spectral" and slow.meta["attention"] == "direct"
    assert np.abs(fast.final - slow.final).max() < 1e-9
    general = solve_particles(x0[:50], noise, 2.0, 1 / 64, [1 / 64], Q=2 * np.eye(3))
    assert general.meta["attention"] == "direct"
    with pytest.raises(ValueError, match="Q"):
        solve_particles(x0[:50], noise, 2.0, 1 / 64, [1 / 64], attention="spectral", Q=2 * np.eye(3))

"""Noise strength σ on every noise source: field σ ΔW, κ -> σ²κ, λ_1 -> σ²λ_1, Itô correction σ²κ_σ(1).

Statistical checks follow tests/test_identities.py: independent noise paths are the
replicas, the tolerance is a multiple of the measured standard error plus a computed bias.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from _reference import euler_one_step_moments, unit_points

from meanfield.harmonics import legendre_d
from meanfield.kernels import ActivationKernel, lyapunov_exponent
from meanfield.noise import BrownianTree, NoiseField, NoisePath, NoiseSource, RandomFeatureNoise, RotationNoise
from meanfield.particles import solve_particles
from meanfield.studies.synchronisation import lyapunov_estimate, tangent_lyapunov

RELU = ActivationKernel("relu")


class _Shift(NoiseField):
    def __init__(self, t0, t1, b):
        self.t0, self.t1, self.b = t0, t1, b

    def __call__(self, x):
        return np.broadcast_to(self.b, np.shape(x)).copy()


class ShiftNoise(NoiseSource):
    """A user-written source (public interface only): W(t, x) = B(t), κ ≡ 1."""

    refinable = True

    def __init__(self, d, seed=0, t_max=1.0):
        self.d, self.kappa1, self.seed = d, 1.0, seed
        self.tree = BrownianTree((d,), seed, t_max=t_max)
        self.t_max = self.tree.t_max

    def field(self, t0, t1):
        return _Shift(t0, t1, self.tree.increment(t0, t1))


def _sources(sigma):
    kw = {} if sigma is None else {"sigma": sigma}
    return {
        "NoisePath S^1": NoisePath(RELU, 2, 12, seed=3, **kw),
        "NoisePath S^2": NoisePath(RELU, 3, 8, seed=3, **kw),
        "RandomFeatureNoise d=5": RandomFeatureNoise(RELU, 5, 64, seed=3, **kw),
        "RotationNoise d=3": RotationNoise(3, 0.8, seed=3, **kw),
        "user ShiftNoise": ShiftNoise(3, seed=3, **kw),
    }


@pytest.mark.parametrize("sigma", [0.0, 0.37, 2.5])
def test_field_is_sigma_times_the_unit_field(sigma):
    unit, scaled = _sources(None), _sources(sigma)
    for name in unit:
        u, s = unit[name], scaled[name]
        x = unit_points(40, u.d, np.random.default_rng(1))
        fu, fs = u.field(0.25, 0.5), s.field(0.25, 0.5)
        # same seed: σ field = σ × unit field up to round-off (1 ulp of the values)
        np.testing.assert_allclose(fs(x), sigma * fu(x), rtol=2e-15, atol=2e-15 * np.abs(fu(x)).max(), err_msg=name)
        if fu.coeffs is not None:
            np.testing.assert_array_equal(fs.coeffs, sigma * fu.coeffs)
        if fu.omega is not None:
            np.testing.assert_array_equal(fs.omega, sigma * fu.omega)
        assert s.kappa1 == pytest.approx(sigma**2 * u.kappa1, rel=1e-15, abs=0), name
        assert s.sigma == sigma and u.sigma == 1.0
        assert s.describe()["sigma"] == sigma and s.describe()["kappa1"] == s.kappa1
    # the rotation generator used by the SPDE's flow map carries σ too
    np.testing.assert_array_equal(scaled["RotationNoise d=3"].omega(0, 1), sigma * unit["RotationNoise d=3"].omega(0, 1))


def test_refinement_and_fast_path_survive_scaling():
    noise = NoisePath(RELU, 3, 6, seed=2, sigma=0.5)
    coarse = noise.field(0.0, 0.5).coeffs
    fine = noise.field(0.0, 0.25).coeffs + noise.field(0.25, 0.5).coeffs
    np.testing.assert_allclose(coarse, fine, rtol=0, atol=1e-15)
    from meanfield.noise import FieldIncrement

    assert isinstance(noise.field(0.0, 0.1), FieldIncrement)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_lyapunov_closed_form_scales_exactly(d):
    if d in (2, 3):
        unit, scaled = NoisePath(RELU, d, 10, seed=0), NoisePath(RELU, d, 10, seed=0, sigma=0.6)
    else:
        tanh = ActivationKernel("tanh")
        unit, scaled = RandomFeatureNoise(tanh, d, 8, seed=0), RandomFeatureNoise(tanh, d, 8, seed=0, sigma=0.6)
    lam1 = lyapunov_exponent(unit.kernel, d)
    assert lyapunov_exponent(scaled.kernel, d) == pytest.approx(0.36 * lam1, rel=1e-14)
    assert scaled.kernel.kappa1 == pytest.approx(scaled.kappa1, rel=1e-14)


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_tangent_flow_lyapunov_at_sigma(sigma):
    """Tangent-flow estimate of λ_1 from the σ-scaled kernel vs σ² λ_1 (3 SE)."""
    d = 3
    kern = NoisePath(RELU, d, 8, seed=0, sigma=sigma).kernel
    est = tangent_lyapunov(kern, d, n_tokens=2048, n_steps=32, n_replicas=8, seed=11)
    unit = lyapunov_exponent(NoisePath(RELU, d, 8, seed=0).kernel, d)
    print(f"\nσ = {sigma}: tangent-flow λ_1 = {est.mean:.5f} ± {est.se:.5f}, σ² λ_1 = {sigma**2 * unit:.5f}")
    assert est.closed_form == pytest.approx(sigma**2 * unit, rel=1e-14)
    assert abs(est.mean - sigma**2 * unit) <= 3 * est.se


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_pair_monte_carlo_lyapunov_at_sigma(sigma):
    """Pairs of tokens driven by NoisePath(sigma=σ) itself: λ_1 estimate vs σ² λ_1 (3 SE, Richardson).

    Time is rescaled with σ² (dt, chunk and horizon / σ²), so each run covers the same
    number of e-foldings as the σ = 1 check of tests/test_identities.py.
    """
    d, s2 = 3, sigma**2

    def make(ss):
        return NoisePath(RELU, d, 8, seed=ss, t_max=8.0 / s2, sigma=sigma)

    est = lyapunov_estimate(make, d, dt=2.0**-5 / s2, t_total=8.0 / s2, chunk=1.0 / s2, n_replicas=16,
                            n_pairs=64, richardson=True, seed=7100 + int(10 * sigma))
    truth = s2 * lyapunov_exponent(NoisePath(RELU, d, 8, seed=0).kernel, d)
    print(f"\nσ = {sigma}: pair MC λ_1 = {est.mean:.4f} ± {est.se:.4f}, σ² λ_1 = {truth:.4f}")
    assert est.closed_form == pytest.approx(truth, rel=1e-14)
    assert abs(est.mean - truth) <= 3 * est.se


@pytest.mark.parametrize("d", [2, 3])
def test_one_token_identity_with_sigma(d):
    """Theory §5.1 with σ: E[P_l(<x0, X_t>)] = exp(-½ σ² κ_σ(1) l(l+d-2) t) for projected Euler.

    The Euler chain's exact discrete expectation (Funk–Hecke, step variance σ² κ_σ(1) h) is
    the reference at 4 SE; the continuous identity at 4 SE + the computed O(h) bias. A
    solver that ignored σ in the Itô correction (κ_σ(1) instead of σ² κ_σ(1) in the
    projection drift) would be off by (1 - σ²)/σ² of the decay exponent.
    """
    sigma, T, h, lmax = 0.6, 2.0, 2.0**-5, 3
    n_seeds, n_tok = 160, 32
    stats = []
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d, 8, seed=2000 + seed, t_max=T, sigma=sigma)
        x0 = unit_points(n_tok, d, np.random.default_rng(seed))
        xt = solve_particles(x0, noise, 0.0, h, [T], attention="off").final
        c = np.einsum("ij,ij->i", x0, xt)
        stats.append(legendre_d(d, lmax, c)[1:].mean(axis=1))
    stats = np.asarray(stats)
    est, se = stats.mean(axis=0), stats.std(axis=0, ddof=1) / math.sqrt(n_seeds)
    k1 = NoisePath(RELU, d, 8, seed=0, sigma=sigma).kappa1
    ls = np.arange(1, lmax + 1)
    exact = np.exp(-0.5 * k1 * ls * (ls + d - 2) * T)
    discrete = euler_one_step_moments(d, k1 * h, lmax)[1:] ** round(T / h)
    bias = np.abs(discrete - exact)
    wrong = np.exp(-0.5 * (k1 / sigma**2) * ls * (ls + d - 2) * T)  # σ missing from the Itô rate
    print(f"\n§5.1 σ = {sigma} d = {d}: est {est} ± {se}, discrete {discrete}, exact {exact}")
    assert np.all(np.abs(est - discrete) <= 4 * se)
    assert np.all(np.abs(est - exact) <= 4 * se + bias)
    assert np.abs(est - wrong)[0] > 10 * se[0]


def test_sigma_equals_scaling_the_kernel():
    """NoisePath(κ, sigma=σ) and NoisePath(σ²κ) carry the same field: the particle paths agree to round-off.

    σ²κ is given by its exact coefficients σ² a_l (a quadrature of the scaled ReLU kernel would
    give its vanishing odd a_l as ~1e-17, whose square roots are ~3e-9).
    """
    from meanfield.kernels import SpectralKernel

    s = 0.7
    a = NoisePath(RELU, 3, 6, seed=9, sigma=s)
    b = NoisePath(SpectralKernel(3, s**2 * a.a), 3, 6, seed=9)
    x0 = unit_points(20, 3, np.random.default_rng(0))
    xa = solve_particles(x0, a, 2.0, 2.0**-6, [1.0]).final
    xb = solve_particles(x0, b, 2.0, 2.0**-6, [1.0]).final
    assert np.abs(xa - xb).max() < 1e-13
    assert a.kappa1 == pytest.approx(b.kappa1, rel=1e-13)


def test_sigma_input_checks():
    with pytest.raises(ValueError, match="sigma"):
        NoisePath(RELU, 3, 4, sigma=-1.0)
    with pytest.raises(TypeError, match="sigma"):
        RotationNoise(3, sigma="big")
    with pytest.raises(ValueError, match="sigma"):
        ShiftNoise(3, sigma=float("nan"))
    with pytest.raises(TypeError, match="sigma"):
        class Clash(NoiseSource):  # noqa: F841 - the class statement itself must fail
            def __init__(self, d, sigma):
                self.d = d

            def field(self, t0, t1):
                raise AssertionError
    import inspect

    assert "sigma" in inspect.signature(NoisePath).parameters

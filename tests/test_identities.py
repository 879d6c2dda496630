"""Exact identities of theory §5 against the particle solver and the transformer.

Statistical tolerances: every Monte Carlo comparison uses independent noise paths
(seeds) as replicas. Tokens of one run share the noise and are *not* independent, so a
run contributes one number (the average over its tokens) and the standard error (SE) is
the sample standard deviation across seeds / sqrt(n_seeds). A comparison passes if
|estimate - truth| <= 4 SE + bias bound, where the bias bound is computed, not guessed:

* projected Euler without attention has an exactly computable discrete expectation
  (Funk–Hecke, see ``_reference.euler_one_step_moments``), so the MC estimate is compared
  with it at 4 SE, and the discrete expectation is compared with the identity of theory §5
  separately (weak order 1: the gap must be O(h));
* for Heun and for the two-point motion we use Richardson extrapolation
  2 E_{h/2} - E_h on the *same* refinable noise paths (bias O(h²)); |E_h - E_{h/2}| is the
  first-order bias estimate and enters the tolerance once.

With 4 SE a correct implementation fails a single check with probability ~6e-5 (the
seeds are fixed, so the tests are deterministic anyway), while a wrong Itô correction
(e.g. a missing or doubled -½(d-1)κ(1) drift) moves E[X_t] by tens of SE.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from _reference import (
    euler_one_step_moments,
    lyapunov_from_two_point,
    two_point_moments,
    unit_points,
)
from meanfield.harmonics import legendre_d
from meanfield.kernels import ActivationKernel, lyapunov_exponent
from meanfield.noise import NoisePath, RandomFeatureNoise
from meanfield.particles import Velocity, make_velocity, solve_particles
from meanfield.sync import lyapunov_estimate
from meanfield.transformer import Transformer

RELU = ActivationKernel("relu")
N_SIGMA = 4.0


def _mean_se(samples):
    samples = np.asarray(samples, dtype=float)
    return samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(samples.shape[0])


def _legendre_stats(x0, xt, d, lmax):
    """Per-run statistic mean_i P_l(<x_i(0), x_i(t)>), l = 1..lmax.

    Σ_m Y_lm(x0) Y_lm(X_t) = Z_l(<x0, X_t>), so theory §5.1 for all m at once reads
    E[P_l(<x0, X_t>)] = exp(-½ κ(1) l(l+d-2) t) (rotation-invariant form of the identity).
    """
    c = np.einsum("ij,ij->i", x0, xt)
    return legendre_d(d, lmax, c)[1:].mean(axis=1)


# --------------------------------------------------------------------------------------
# theory §5.1: one token, no attention
# --------------------------------------------------------------------------------------

LMAX_ID = 3
T_ID = 1.0
# Euler is compared with its exact discrete expectation, so h only has to make the
# discrete-vs-continuous gap small (< 7e-3 at h = 2^-5, computed exactly in the test)
H_ID = 2.0**-5


def _exact(kappa1, d, t):
    ls = np.arange(1, LMAX_ID + 1)
    return np.exp(-0.5 * kappa1 * ls * (ls + d - 2) * t)


@pytest.mark.parametrize("d", [2, 3])
def test_one_token_euler_matches_discrete_and_continuous_identity(d):
    """E[P_l(<x0, X_t>)] for projected Euler: MC vs exact discrete value vs theory §5.1."""
    n_seeds, n_tok = 200, 32
    stats, tangential, kappa1 = [], [], None
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d, 8, seed=1000 + seed, t_max=T_ID)
        kappa1 = noise.kappa1
        rng = np.random.default_rng(seed)
        x0 = unit_points(n_tok, d, rng)
        sol = solve_particles(x0, noise, 0.0, H_ID, [T_ID], attention="off")
        stats.append(_legendre_stats(x0, sol.final, d, LMAX_ID))
        # the components of E[X_t] orthogonal to x0 vanish: <e, X_t> for a unit e ⊥ x0
        e = rng.standard_normal((n_tok, d))
        e -= np.einsum("ij,ij->i", x0, e)[:, None] * x0
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        tangential.append(np.einsum("ij,ij->i", e, sol.final).mean())
    est, se = _mean_se(stats)
    tan_mean, tan_se = _mean_se(tangential)
    assert abs(tan_mean) <= N_SIGMA * tan_se, (tan_mean, tan_se)
    n_steps = round(T_ID / H_ID)
    discrete = euler_one_step_moments(d, kappa1 * H_ID, LMAX_ID)[1:] ** n_steps
    exact = _exact(kappa1, d, T_ID)
    # weak order 1: the exactly computed bias is O(h) and below 7e-3 here
    bias = np.abs(discrete - exact)
    print(f"\n§5.1 Euler d={d}: est {est} discrete {discrete} exact {exact} SE {se} bias {bias}")
    assert np.all(bias < 7e-3), bias
    assert np.all(np.abs(est - discrete) <= N_SIGMA * se), (est, discrete, se)
    assert np.all(np.abs(est - exact) <= N_SIGMA * se + bias), (est, exact, se)
    # the mean vector itself: E[X_t] = exp(-½(d-1)κ t) x0 is the l = 1 case (P_1(c) = c)
    assert abs(est[0] - math.exp(-0.5 * (d - 1) * kappa1 * T_ID)) <= N_SIGMA * se[0] + bias[0]


def test_one_token_euler_bias_is_first_order():
    """The exact discrete expectation converges to theory §5.1 at rate h (weak order 1)."""
    d, kappa1 = 3, 0.5
    gaps = []
    for h in (2.0**-5, 2.0**-6, 2.0**-7, 2.0**-8):
        m = euler_one_step_moments(d, kappa1 * h, LMAX_ID)[1:] ** round(T_ID / h)
        gaps.append(np.abs(m - _exact(kappa1, d, T_ID)))
    ratios = np.array(gaps[:-1]) / np.array(gaps[1:])
    # halving h halves the bias for a first-order weak scheme: ratio -> 2 as h -> 0
    # (the O(h²) remainder shows at the coarse end for l = 3: ratio 1.88 at h = 2^-5)
    assert np.all(np.abs(ratios - 2.0) < 0.15), ratios
    assert np.all(np.abs(ratios[-1] - 2.0) < 0.03), ratios


@pytest.mark.parametrize("d", [2, 3])
def test_one_token_heun_matches_identity(d):
    """Stratonovich Heun: Richardson-extrapolated E[P_l(<x0, X_t>)] vs theory §5.1."""
    n_seeds, n_tok = 100, 32
    h = 2.0**-5
    ext, first_order, kappa1 = [], [], None
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d, 8, seed=2000 + seed, t_max=T_ID)
        kappa1 = noise.kappa1
        x0 = unit_points(n_tok, d, np.random.default_rng(seed))
        coarse = solve_particles(x0, noise, 0.0, h, [T_ID], scheme="heun", attention="off").final
        fine = solve_particles(x0, noise, 0.0, h / 2, [T_ID], scheme="heun", attention="off").final
        sc, sf = _legendre_stats(x0, coarse, d, LMAX_ID), _legendre_stats(x0, fine, d, LMAX_ID)
        ext.append(2 * sf - sc)
        first_order.append(sf - sc)
    est, se = _mean_se(ext)
    bias1, _ = _mean_se(first_order)
    exact = _exact(kappa1, d, T_ID)
    print(f"\n§5.1 Heun d={d}: est {est} exact {exact} SE {se} first-order bias {bias1}")
    assert np.all(np.abs(est - exact) <= N_SIGMA * se + np.abs(bias1)), (est, exact, se, bias1)
    # and the Heun bias itself is small at h/2 (weak order 1)
    assert np.all(np.abs(bias1) < 2e-2), bias1


@pytest.mark.parametrize("d", [2, 3])
def test_one_token_gaussian_transformer_matches_identity(d):
    """Gaussian-field transformer, V = 0 (no attention), L = 64 layers: theory §5.1."""
    n_seeds, n_tok, L = 150, 32, 64
    zero = np.zeros((d, d))
    stats, kappa1 = [], None
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d, 8, seed=3000 + seed, t_max=T_ID)
        kappa1 = noise.kappa1
        x0 = unit_points(n_tok, d, np.random.default_rng(seed))
        res = Transformer(d, L, None, T_ID, 1.0, RELU, V=zero, noise=noise).run(x0)
        stats.append(_legendre_stats(x0, res.final, d, LMAX_ID))
    est, se = _mean_se(stats)
    discrete = euler_one_step_moments(d, kappa1 * T_ID / L, LMAX_ID)[1:] ** L
    exact = _exact(kappa1, d, T_ID)
    print(f"\n§5.1 transformer d={d}: est {est} discrete {discrete} exact {exact} SE {se}")
    assert np.all(np.abs(est - discrete) <= N_SIGMA * se)
    assert np.all(np.abs(est - exact) <= N_SIGMA * se + np.abs(discrete - exact))


# --------------------------------------------------------------------------------------
# theory §5.3: two-point motion
# --------------------------------------------------------------------------------------


def _pair_velocity(beta):
    """Attention where tokens (2i, 2i+1) form isolated pairs, each token attending to both.

    Lets one run carry many two-token systems (they still share the noise). For a pair,
    A(x) = (e^β x + e^{βc} y)/(e^β + e^{βc}) and v(x) = P_x A(x) = (y - c x)/(1 + e^{β(1-c)}).
    ``test_pair_velocity_equals_direct_for_one_pair`` checks it against the direct evaluator.
    """

    def fn(x):
        p = x.reshape(-1, 2, x.shape[1])
        a, b = p[:, 0], p[:, 1]
        c = np.einsum("ij,ij->i", a, b)[:, None]
        w = 1.0 / (1.0 + np.exp(beta * (1.0 - c)))
        return np.stack([w * (b - c * a), w * (a - c * b)], axis=1).reshape(x.shape)

    return Velocity(fn, "pairs", {"beta": beta})


def test_pair_velocity_equals_direct_for_one_pair():
    rng = np.random.default_rng(5)
    for beta in (0.0, 1.0, 7.5):
        x = unit_points(2, 3, rng)
        np.testing.assert_allclose(_pair_velocity(beta)(x), make_velocity("direct", 3, beta)(x), atol=1e-14)


def _orthogonal_pairs(n_pairs, d, rng):
    a = unit_points(n_pairs, d, rng)
    b = rng.standard_normal((n_pairs, d))
    b -= np.einsum("ij,ij->i", a, b)[:, None] * a
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return np.stack([a, b], axis=1).reshape(-1, d)


@pytest.mark.parametrize("d,beta,scheme", [(3, None, "euler"), (3, 1.0, "euler"), (2, None, "euler"),
                                           (2, 2.0, "euler"), (3, 1.0, "heun")])
def test_two_point_motion_law(d, beta, scheme):
    """E[c_t], E[c_t²] of c = <X, Y> (Richardson in h) vs the 1-D backward equation (theory §5.3)."""
    n_seeds, n_pairs = 100, 16
    h, times = 2.0**-5, [0.5, 1.0]
    ext, first_order, noise = [], [], None
    vel = "off" if beta is None else _pair_velocity(beta)
    for seed in range(n_seeds):
        noise = NoisePath(RELU, d, 8, seed=4000 + seed, t_max=1.0)
        x0 = _orthogonal_pairs(n_pairs, d, np.random.default_rng(seed))
        stats = []
        for dt in (h, h / 2):
            sol = solve_particles(x0, noise, 0.0 if beta is None else beta, dt, times, attention=vel, scheme=scheme)
            p = sol.x.reshape(len(times), n_pairs, 2, d)
            c = np.einsum("tpi,tpi->tp", p[:, :, 0], p[:, :, 1])
            stats.append(np.stack([c.mean(axis=1), (c * c).mean(axis=1)], axis=1))
        ext.append(2 * stats[1] - stats[0])
        first_order.append(stats[1] - stats[0])
    est, se = _mean_se(ext)
    bias1, _ = _mean_se(first_order)
    k = noise.kernel
    ref = two_point_moments(k.kappa, k.kappa1, d, beta, 0.0, times)
    ref2 = two_point_moments(k.kappa, k.kappa1, d, beta, 0.0, times, n=64)
    assert np.max(np.abs(ref - ref2)) < 1e-5  # the 1-D solution is converged in n
    print(f"\n§5.3 d={d} beta={beta} {scheme}: est {est.ravel()} ref {ref.ravel()} SE {se.ravel()} bias {bias1.ravel()}")
    assert np.all(np.abs(est - ref) <= N_SIGMA * se + np.abs(bias1)), (est, ref, se, bias1)


# --------------------------------------------------------------------------------------
# theory §5.4: top Lyapunov exponent
# --------------------------------------------------------------------------------------


def test_lyapunov_relu_s2():
    """ReLU noise on S^2 (λ_1 = -κ_σ(1) < 0): simulation vs closed form vs the 1-D two-point limit.

    The rate estimate has an O(h) discretisation bias (about +0.03 per halving at
    h = 2^-5, i.e. comparable to one SE), so it is removed by Richardson extrapolation
    2 λ_{h/2} - λ_h on the same refinable paths and the same pairs; the check is then 3 SE.
    """
    d = 3
    est = lyapunov_estimate(RELU, d, dt=2.0**-5, t_total=8.0, chunk=1.0, n_replicas=16, n_pairs=64,
                            richardson=True, lmax=8, seed=5000)
    mean, se, closed = est.mean, est.se, est.closed_form
    k = NoisePath(RELU, d, 8, seed=0).kernel
    one_d = lyapunov_from_two_point(k.kappa, k.kappa1, d)
    print(f"\n§5.4 ReLU d=3: h, h/2 {est.raw.mean(axis=0)}, extrapolated {mean:.4f} ± {se:.4f}, "
          f"closed {closed:.4f}, 1-D {one_d:.6f}")
    assert abs(closed - one_d) < 1e-6
    assert abs(mean - closed) <= 3 * se, (mean, se, closed)
    assert mean < 0


def test_lyapunov_erf_d8_positive():
    """erf, σ_w = 2 in d = 8: κ'(1)/κ(1) = 1.77 > (d-1)/(d-3) = 1.4, so λ_1 = +0.648 > 0
    (noise does not synchronise, theory §5.4). Finite-width random-feature noise (any d),
    width 256. RandomFeatureNoise is not refinable, so no Richardson: at h = 2^-5 and 2^-6
    the estimates were 0.60 ± 0.08 and 0.69 ± 0.04 (16 seeds), no bias above one SE."""
    d = 8
    kern = ActivationKernel("erf", sigma_w=2.0)
    est = lyapunov_estimate(kern, d, dt=2.0**-6, t_total=4.0, chunk=1.0, n_replicas=16, n_pairs=64,
                            width=256, seed=6000)
    assert not est.richardson
    mean, se = est.mean, est.se
    closed = lyapunov_exponent(kern, d)
    one_d = lyapunov_from_two_point(kern.kappa, kern.kappa1, d)
    print(f"\n§5.4 erf d=8: estimate {mean:.4f} ± {se:.4f} closed {closed:.4f} 1-D {one_d:.6f}")
    assert closed > 0.6 and abs(closed - one_d) < 1e-3
    assert abs(mean - closed) <= 3 * se, (mean, se, closed)
    assert mean > 3 * se  # a significantly positive exponent: the sign is resolved

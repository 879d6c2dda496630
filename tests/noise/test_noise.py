"""The common noise path (theory §3, §8): refinement, covariance, reproducibility."""

import math

import numpy as np
import pytest

from meanfield.harmonics import real_basis
from meanfield.kernels import ActivationKernel
from meanfield.noise import BrownianTree, NoisePath, RandomFeatureNoise, RotationNoise

RELU = ActivationKernel("relu")


def _unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d", [2, 3])
def test_refinement_is_exact(d):
    noise = NoisePath(RELU, d, 6, seed=3, t_max=2.0)
    coarse = noise.increment(0.25, 1.75)
    for grid in (np.linspace(0.25, 1.75, 9), np.array([0.25, 0.3, 0.61, 1.0, 1.2345, 1.75])):
        fine = noise.increments(grid)
        total = np.zeros_like(coarse)
        for inc in fine:  # a user summing step by step
            total = total + inc
        assert np.array_equal(total, coarse)


def test_transformer_layer_grid_sees_the_same_path_as_a_finer_grid():
    noise = NoisePath(RELU, 3, 4, seed=1, t_max=1.0)
    L, k = 10, 4  # non-dyadic layer times T l / L, refined by 4
    fine = noise.increments(np.arange(L * k + 1) / (L * k))
    coarse = noise.increments(np.arange(L + 1) / L)
    assert np.array_equal(fine.reshape(L, k, *fine.shape[1:]).sum(axis=1), coarse)


def test_query_order_does_not_change_the_path():
    a = BrownianTree((5,), seed=11, t_max=1.0)
    b = BrownianTree((5,), seed=11, t_max=1.0)
    times = [0.7, 0.1, 0.33, 0.9, 0.5]
    va = [a.value(t) for t in times]
    vb = [b.value(t) for t in reversed(times)][::-1]
    assert all(np.array_equal(x, y) for x, y in zip(va, vb))
    c = BrownianTree((5,), seed=12, t_max=1.0)
    assert not np.array_equal(c.value(0.5), a.value(0.5))


def test_a_used_tree_gives_the_values_of_a_fresh_one():
    """A tree's values do not depend on what it was asked before or on what its cache still holds
    (cache_bytes=0 keeps only 16 nodes): bit for bit those of a fresh tree, for stepper sequences at
    dyadic and non-dyadic steps, times on interval ends, random orders, and a shallow max_depth
    (linear interpolation below it)."""
    rng = np.random.default_rng(4)
    h = 2.0**-7
    times = np.concatenate([
        np.arange(0, 1 + h / 2, h),                # a stepper at a dyadic step, then back to the start
        0.1 + 2.0**-12 * np.arange(40),            # steps from a non-dyadic time
        [0.5, 0.25, 0.75, 0.5 - 2.0**-40, 0.5 + 2.0**-40, 2.0**-40, 1 - 2.0**-40],
        rng.random(60),
        np.sort(rng.random(60)),
    ])
    for depth, t_max in ((40, 1.0), (5, 2.0)):
        tree = BrownianTree((3,), seed=3, t_max=t_max, max_depth=depth, cache_bytes=0)  # LRU evicts
        for t in times * t_max:
            fresh = BrownianTree((3,), seed=3, t_max=t_max, max_depth=depth)
            assert np.array_equal(tree.value(t), fresh.value(t)), t


def test_smaller_lmax_path_is_a_truncation():
    big = NoisePath(RELU, 3, 8, seed=5)
    small = NoisePath(RELU, 3, 4, seed=5)
    assert np.array_equal(big.increment(0, 0.5)[:, : small.n_coeffs], small.increment(0, 0.5))


def test_brownian_covariance_min_s_t():
    # 2000 independent components of one tree: Cov(B(s), B(t)) = min(s, t), B(t) - B(s) ⟂ B(s)
    tree = BrownianTree((2000,), seed=2, t_max=1.0)
    s, t = 0.3, 0.8  # non-dyadic: exercises the finest-level interpolation too
    bs, bt = tree.value(s), tree.value(t)
    n = bs.size
    for est, exact, var in (
        (np.mean(bs * bs), s, 2 * s * s),
        (np.mean(bs * bt), s, s * t + s * s),
        (np.mean(bs * (bt - bs)), 0.0, s * (t - s)),
    ):
        assert abs(est - exact) < 4 * math.sqrt(var / n)  # 4 Monte Carlo standard errors


@pytest.mark.parametrize("d", [2, 3])
def test_field_covariance_matches_truncated_kernel(d):
    # disjoint steps of one path are independent: E[ΔW(x) ΔW(y)^T] = h κ_σ(<x,y>) I
    lmax, n, h = 6, 4096, 1.0 / 4096
    noise = NoisePath(RELU, d, lmax, seed=7, t_max=1.0)
    rng = np.random.default_rng(0)
    pts = _unit(rng, 4, d)
    inc = noise.increments(np.linspace(0.0, 1.0, n + 1))  # (n, d, ncoef)
    basis = real_basis(d, lmax, pts)  # (4, ncoef)
    vals = np.einsum("pc,sac->spa", basis * noise.sqrt_a, inc)  # (n, 4 points, d)
    for i in range(4):
        for j in range(i, 4):
            prod = vals[:, i, :, None] * vals[:, j, None, :]  # (n, d, d)
            est = prod.mean(axis=0)
            se = prod.std(axis=0) / math.sqrt(n)
            expected = h * noise.kernel.kappa(pts[i] @ pts[j]) * np.eye(d)
            assert np.all(np.abs(est - expected) < 4.5 * se + 1e-15)


def test_truncation_is_reported():
    noise = NoisePath(RELU, 3, 8, seed=0)
    assert 0.99 < noise.kept_fraction < 1.0
    assert noise.kappa1 == pytest.approx(noise.kept_fraction * RELU.kappa1, rel=1e-12)
    assert noise.kappa1 == pytest.approx(float(noise.kernel.kappa(1.0)), rel=1e-12)


def test_direct_and_nonuniform_transform_evaluations_agree(monkeypatch):
    noise = NoisePath(RELU, 3, 10, seed=4)
    f = noise.field(0.0, 0.25)
    b = noise.basis
    x = _unit(np.random.default_rng(1), 3000, 3)
    exact = b.real_basis(x) @ f.coeffs.T
    # 121 harmonics: 200 points are below the matrix/transform crossover, 3000 above
    assert b.prefers_direct(200) and not b.prefers_direct(3000)
    calls = []
    synth_rows = type(b).synth_rows
    monkeypatch.setattr(type(b), "synth_rows", lambda *a, **k: calls.append(a[2].shape[0]) or synth_rows(*a, **k))
    big, small = f(x), f(x[:200])
    assert calls == [3000]
    assert np.abs(big - exact).max() < 1e-11
    assert np.abs(small - exact[:200]).max() < 1e-14 * np.abs(exact).max()


def test_direct_evaluation_policy_follows_the_basis_size():
    from meanfield.sphere import basis

    for lmax in (1, 6, 16):
        b = basis(3, lmax)
        n_max = b.direct_max_entries // b.n_real
        assert b.prefers_direct(n_max) and not b.prefers_direct(n_max + 1)
    assert basis(2, 64).prefers_direct(10**7) and basis(4, 4).prefers_direct(10**7)


def test_random_feature_noise_covariance_and_reproducibility():
    k = ActivationKernel("tanh", sigma_b=0.3)
    src = RandomFeatureNoise(k, d=5, width=8, seed=1)
    rng = np.random.default_rng(3)
    x, y = _unit(rng, 1, 5), _unit(rng, 1, 5)
    n, h = 4000, 0.01
    fx = np.empty((n, 5))
    fy = np.empty((n, 5))
    for s in range(n):
        f = src.field(s * h, (s + 1) * h)
        fx[s], fy[s] = f(x)[0], f(y)[0]
    prod = fx[:, :, None] * fy[:, None, :]
    est, se = prod.mean(0), prod.std(0) / math.sqrt(n)
    expected = h * k.kappa(float(x[0] @ y[0])) * np.eye(5)
    assert np.all(np.abs(est - expected) < 4.5 * se)
    again = RandomFeatureNoise(k, d=5, width=8, seed=1).field(0.3, 0.31)(x)
    assert np.array_equal(again, src.field(0.3, 0.31)(x))


def test_rotation_noise_is_skew_and_rotates():
    rot = RotationNoise(3, scale=0.5, seed=2)
    om = rot.omega(0.0, 0.5)
    assert np.allclose(om, -om.T, atol=0)
    R = rot.rotation(0.5)
    assert np.abs(R @ R.T - np.eye(3)).max() < 1e-13
    assert rot.kappa1 == pytest.approx(0.25)


def test_bad_noise_input():
    with pytest.raises(ValueError, match="d must be >= 2"):
        NoisePath(RELU, 1, 4)
    with pytest.raises(ValueError, match="lmax"):
        NoisePath(RELU, 3, -1)
    with pytest.raises(TypeError, match="kernel"):
        NoisePath("relu", 3, 4)
    with pytest.raises(TypeError, match="seed"):
        NoisePath(RELU, 3, 4, seed=-3)
    noise = NoisePath(RELU, 3, 4, t_max=1.0)
    with pytest.raises(ValueError, match="t_max"):
        noise.increment(0.5, 1.5)
    with pytest.raises(ValueError, match="t1 must be >= t0"):
        noise.increment(0.5, 0.25)
    with pytest.raises(ValueError, match=r"shape \(N, 3\)"):
        noise.field(0, 0.1)(np.ones((3, 2)))
    with pytest.raises(ValueError, match="width"):
        RandomFeatureNoise(RELU, 3, 0)

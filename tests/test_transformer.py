"""The discrete transformer of theory §1: layer formulas, field covariance, SDE consistency, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from _reference import unit_points
from meanfield.attention import softmax_attention
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath, RandomFeatureNoise
from meanfield.particles import solve_particles
from meanfield.transformer import Transformer, TransformerResult

RELU = ActivationKernel("relu")


def _proj(z):
    return z / np.linalg.norm(z, axis=1, keepdims=True)


@pytest.mark.parametrize("variant", ["sequential", "parallel"])
@pytest.mark.parametrize("width", [1, 7, 300, None])
def test_tokens_stay_on_sphere(variant, width):
    x0 = unit_points(50, 3, np.random.default_rng(0))
    res = Transformer(3, 16, width, 2.0, 1.5, RELU, variant=variant, lmax=8).run(x0, seed=3)
    assert isinstance(res, TransformerResult)
    assert res.x.shape == (17, 50, 3)
    np.testing.assert_allclose(res.t, np.linspace(0, 2.0, 17))
    assert np.max(np.abs(np.linalg.norm(res.x, axis=2) - 1.0)) < 1e-12
    assert res.meta["max_norm_error"] < 1e-12
    np.testing.assert_array_equal(res.x[0], x0)


def test_one_layer_formula_finite_width():
    """L = 1, sequential and parallel, general Q, K, V: the layer maps of theory §1, same weights."""
    rng = np.random.default_rng(4)
    d, m, T, beta = 4, 33, 0.7, 2.0
    Q, K, V = (np.eye(d) + 0.4 * rng.standard_normal((d, d)) for _ in range(3))
    kern = ActivationKernel("tanh", sigma_w=1.3, sigma_b=0.4, scale=0.9)
    x0 = unit_points(20, d, rng)
    for variant in ("sequential", "parallel"):
        model = Transformer(d, 1, m, T, beta, kern, variant=variant, Q=Q, K=K, V=V, block=3)
        res = model.run(x0, seed=np.random.SeedSequence(77))
        w = np.random.default_rng(np.random.SeedSequence(77))
        A = w.standard_normal((d, m))
        W = 1.3 * w.standard_normal((m, d))
        b = 0.4 * w.standard_normal(m)

        def mlp(y):
            return math.sqrt(T) * 0.9 / math.sqrt(m) * np.tanh(y @ W.T + b) @ A.T

        att = softmax_attention(x0, beta, Q=Q, K=K, V=V)
        if variant == "sequential":
            y = _proj(x0 + T * att)
            expect = _proj(y + mlp(y))
        else:
            expect = _proj(x0 + T * att + mlp(x0))
        np.testing.assert_allclose(res.final, expect, atol=1e-13)


def test_seed_reproducibility():
    x0 = unit_points(10, 3, np.random.default_rng(0))
    model = Transformer(3, 5, 16, 1.0, 1.0)
    a, b, c = model.run(x0, seed=5), model.run(x0, seed=5), model.run(x0, seed=6)
    np.testing.assert_array_equal(a.x, b.x)
    assert np.max(np.abs(a.x - c.x)) > 1e-3
    g = model.run(x0, seed=np.random.default_rng(5))
    np.testing.assert_array_equal(g.x, a.x)  # an int seed and default_rng(int) give the same weights


def test_mlp_field_covariance():
    """Over weight draws, α2 σ MLP_l has covariance α2² κ(<x,y>) δ_ab at every width (theory §2).

    R = 4000 independent layers at width m = 5 (strongly non-Gaussian), 4 points on S^2.
    For each pair (x, y) and components (a, b) the sample mean of F_a(x) F_b(y) is
    compared with α2² κ(<x,y>) δ_ab within 4.5 standard errors of that sample mean
    (4.5 rather than 4 because 4·5/2·9 + ... = 90 correlated entries are checked at once;
    Bonferroni over 90 at 4.5 SE keeps the family-wise false-alarm rate below 1e-3).
    """
    d, m, T, L = 3, 5, 1.0, 4
    model = Transformer(d, L, m, T, 0.0, RELU)
    pts = unit_points(4, d, np.random.default_rng(8))
    rng = np.random.default_rng(9)
    R = 4000
    F = np.empty((R, 4, d))
    for r in range(R):
        F[r] = model.mlp_field(pts, *model.draw_layer(rng))
    prod = np.einsum("ria,rjb->rijab", F, F)
    mean = prod.mean(axis=0)
    se = prod.std(axis=0, ddof=1) / math.sqrt(R)
    gram = np.clip(pts @ pts.T, -1, 1)
    expect = model.alpha2**2 * RELU.kappa(gram)[:, :, None, None] * np.eye(d)[None, None]
    z = np.abs(mean - expect) / np.maximum(se, 1e-300)
    iu = np.triu_indices(4)
    assert np.all(z[iu] <= 4.5), z[iu].max()
    # and it can fail: a wrong kernel (κ of tanh instead of ReLU) is far outside
    wrong = model.alpha2**2 * ActivationKernel("tanh").kappa(gram)[:, :, None, None] * np.eye(d)[None, None]
    assert np.max((np.abs(mean - wrong) / se)[iu]) > 10


def test_gaussian_transformer_equals_euler_without_attention():
    """V = 0 switches attention off; then the Gaussian-field transformer with L layers *is* projected
    Euler with dt = T/L on the same path (same scheme), to round-off."""
    for d, L, T in ((3, 64, 2.0), (2, 48, 1.5)):  # dyadic and non-dyadic layer times
        noise = NoisePath(RELU, d, 8, seed=21, t_max=T)
        x0 = unit_points(30, d, np.random.default_rng(d))
        res = Transformer(d, L, None, T, 1.0, RELU, V=np.zeros((d, d)), noise=noise).run(x0)
        sol = solve_particles(x0, noise, 1.0, T / L, res.t, attention="off")
        assert np.max(np.abs(res.x - sol.x)) < 1e-12


def test_gaussian_transformer_converges_to_sde_with_attention():
    """With attention on, the transformer (L layers) and the particle solver on a fine grid see the
    same path; the strong error decreases with L (both variants) — the depth limit of theory §3."""
    d, T, beta = 3, 1.0, 2.0
    noise = NoisePath(RELU, d, 8, seed=31, t_max=T)
    x0 = unit_points(24, d, np.random.default_rng(5))
    ref = solve_particles(x0, noise, beta, 2.0**-10, [T], scheme="heun").final
    for variant in ("sequential", "parallel"):
        errs = []
        for L in (16, 64, 256):
            xL = Transformer(d, L, None, T, beta, RELU, variant=variant, noise=noise).run(x0).final
            errs.append(np.sqrt(np.mean(np.sum((xL - ref) ** 2, axis=1))))
        assert errs[2] < errs[1] < errs[0], errs
        # strong order 1/2: a factor 16 in L gives a factor ~4; demand at least 2.5
        assert errs[0] / errs[2] > 2.5, errs


def test_default_noise_path_from_seed():
    x0 = unit_points(8, 3, np.random.default_rng(0))
    model = Transformer(3, 8, None, 1.0, 1.0, lmax=6)
    a, b, c = model.run(x0, seed=1), model.run(x0, seed=1), model.run(x0, seed=2)
    np.testing.assert_array_equal(a.x, b.x)
    assert np.max(np.abs(a.x - c.x)) > 1e-3
    assert a.meta["width"] is None and 0.99 < a.meta["kept_fraction"] <= 1.0
    assert Transformer(3, 8, math.inf, 1.0, 1.0).width is None


def test_random_feature_noise_as_layer_field_in_d5():
    """Gaussian-field mode in d >= 4 takes any noise source with the right d and window."""
    noise = RandomFeatureNoise(RELU, 5, width=64, seed=1, t_max=1.0)
    x0 = unit_points(12, 5, np.random.default_rng(1))
    res = Transformer(5, 8, None, 1.0, 1.0, noise=noise).run(x0)
    assert np.max(np.abs(np.linalg.norm(res.x, axis=2) - 1)) < 1e-12


def test_large_width_blockwise_memory():
    """m = 20000 hidden units with 600 tokens: evaluated in blocks of rows (no N × m array)."""
    x0 = unit_points(600, 3, np.random.default_rng(2))
    res = Transformer(3, 2, 20000, 1.0, 1.0, block=64).run(x0, seed=0)
    assert np.max(np.abs(np.linalg.norm(res.x, axis=2) - 1)) < 1e-12


def test_bad_input():
    x0 = unit_points(5, 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="L"):
        Transformer(3, 0, 8, 1.0, 1.0)
    with pytest.raises(ValueError, match="width"):
        Transformer(3, 4, 0, 1.0, 1.0)
    with pytest.raises(TypeError, match="width"):
        Transformer(3, 4, 2.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="d"):
        Transformer(1, 4, 8, 1.0, 1.0)
    with pytest.raises(ValueError, match="beta"):
        Transformer(3, 4, 8, 1.0, float("nan"))  # any finite β is valid
    with pytest.raises(ValueError, match="T"):
        Transformer(3, 4, 8, 0.0, 1.0)
    with pytest.raises(ValueError, match="T"):
        Transformer(3, 4, 8, float("nan"), 1.0)
    with pytest.raises(ValueError, match="variant"):
        Transformer(3, 4, 8, 1.0, 1.0, variant="series")
    with pytest.raises(TypeError, match="kernel"):
        Transformer(3, 4, 8, 1.0, 1.0, kernel="relu")
    with pytest.raises(ValueError, match="Q"):
        Transformer(3, 4, 8, 1.0, 1.0, Q=np.eye(4))
    with pytest.raises(ValueError, match="noise"):
        Transformer(3, 4, None, 1.0, 1.0, noise=NoisePath(RELU, 2, 4, t_max=1.0))  # dimension mismatch
    with pytest.raises(ValueError, match="noise"):
        Transformer(3, 4, None, 2.0, 1.0, noise=NoisePath(RELU, 3, 4, t_max=1.0))  # window too short
    with pytest.raises(ValueError, match="noise"):
        Transformer(3, 4, 16, 1.0, 1.0, noise=NoisePath(RELU, 3, 4, t_max=1.0))  # finite width ignores noise
    # every d has a NoisePath now (hyperspherical harmonics for d >= 4): d = 5 builds its default field
    assert Transformer(5, 4, None, 1.0, 1.0).width is None
    model = Transformer(3, 4, 8, 1.0, 1.0)
    with pytest.raises(ValueError, match="x0"):
        model.run(x0[:, :2])
    with pytest.raises(ValueError, match="x0"):
        model.run(2 * x0)
    bad = x0.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="x0"):
        model.run(bad)
    with pytest.raises(TypeError, match="seed"):
        model.run(x0, seed="abc")

"""NoisePath on S^{d-1} for d >= 4: covariance by Monte Carlo, exact refinement, the mean identity, cost refusal."""

import math

import numpy as np
import pytest

from meanfield.kernels import ActivationKernel, SpectralKernel
from meanfield.noise import NoisePath, noise_path_cost, noise_path_sizes
from meanfield.particles import solve_particles
from meanfield.sphere import harmonic_dimension, project, sample_uniform
from meanfield.transformer import Transformer

ERF = ActivationKernel("erf", sigma_w=2.0)
RELU = ActivationKernel("relu")

#: (d, l_σ): a few hundred coefficients per component.
COV_CASES = [(4, 6), (6, 4), (8, 3)]


def _pairs(d, t, n, rng):
    """n pairs (x, y) of unit vectors with <x, y> = t exactly."""
    x = sample_uniform(n, d, rng)
    u = rng.standard_normal((n, d))
    u -= np.einsum("ij,ij->i", u, x)[:, None] * x
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return x, t * x + math.sqrt(1 - t * t) * u


@pytest.mark.parametrize("d, lmax", COV_CASES)
def test_covariance_is_the_truncated_kernel(d, lmax):
    """E[ΔW_a(x) ΔW_b(y)] / h = δ_ab κ_σ(<x, y>) by Monte Carlo over 4096 independent increments.

    Per <x, y> = t: the mean over draws of the component-averaged product at 16 pairs (diagonal,
    a = b) and of the mean off-diagonal product (a != b, expectation 0), each within 4 standard
    errors measured from the draws (the SE is about 2 % of κ_σ(1)).
    """
    K = 4096
    noise = NoisePath(ERF, d, lmax, seed=100 + d, t_max=1.0)
    h = 1.0 / K
    inc = noise.increments(np.arange(K + 1) * h)  # (K, d, n): independent N(0, h) entries
    coeffs = noise.sqrt_a * inc / math.sqrt(h)
    rng = np.random.default_rng(d)
    zs, zs_full = [], []
    for t in (1.0, 0.8, 0.3, -0.5):
        x, y = _pairs(d, t, 16, rng)
        Wx = np.einsum("kan,pn->kap", coeffs, noise.basis.real_basis(x))
        Wy = np.einsum("kan,pn->kap", coeffs, noise.basis.real_basis(y))
        diag = np.einsum("kap,kap->k", Wx, Wy) / (d * 16)
        off = (np.einsum("kap,kbp->k", Wx, Wy) - np.einsum("kap,kap->k", Wx, Wy)) / (d * (d - 1) * 16)
        se_d, se_o = diag.std(ddof=1) / math.sqrt(K), off.std(ddof=1) / math.sqrt(K)
        target = float(noise.kernel.kappa(t))
        zs += [(diag.mean() - target) / se_d, off.mean() / se_o]
        zs_full.append((diag.mean() - float(ERF.kappa(t))) / se_d)
        assert se_d < 0.03 * noise.kappa1
    print(f"d = {d}: max |z| = {np.max(np.abs(zs)):.2f}, z against the untruncated kernel at t = 1: {zs_full[0]:.1f}")
    assert np.max(np.abs(zs)) < 4, zs
    # the truncation is resolved: against the untruncated κ the same estimates are off at t = 1
    assert abs(zs_full[0]) > 4 or d == 4


@pytest.mark.parametrize("d, lmax", COV_CASES)
def test_refinement_is_exact(d, lmax):
    """The increment over [t0, t1] equals the sum of the increments over a partition, as arrays."""
    noise = NoisePath(RELU, d, lmax, seed=7, t_max=1.0)
    times = np.array([0.1, 0.13, 0.25, 0.4, 0.4125, 0.7])
    whole = noise.increment(0.1, 0.7)
    parts = [noise.increment(a, b) for a, b in zip(times[:-1], times[1:])]
    assert np.array_equal(whole, np.sum(parts, axis=0))
    assert np.array_equal(noise.increments(times).sum(axis=0), whole)
    assert whole.shape == (d, int(harmonic_dimension(d, lmax).sum()))
    # a path of lower degree is the truncation of this one (basis-major tree layout)
    small = NoisePath(RELU, d, lmax - 1, seed=7, t_max=1.0)
    assert np.array_equal(small.increment(0.1, 0.7), whole[:, : small.n_coeffs])


def test_field_gradient_is_the_tangential_derivative():
    """FieldIncrement.gradient: rows ∇_S ΔW_a, tangent, equal to centred differences along the sphere."""
    d = 5
    dw = NoisePath(ERF, d, 5, seed=3).field(0.0, 0.25)
    rng = np.random.default_rng(0)
    x = sample_uniform(40, d, rng)
    J = dw.gradient(x)
    assert J.shape == (40, d, d) and np.abs(np.einsum("nab,nb->na", J, x)).max() < 1e-12
    e = rng.standard_normal((40, d))
    e -= np.einsum("ij,ij->i", e, x)[:, None] * x
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    h = 1e-6
    fd = (dw(project(x + h * e)) - dw(project(x - h * e))) / (2 * h)
    assert np.abs(fd - np.einsum("nab,nb->na", J, e)).max() < 1e-7 * np.abs(J).max()


def test_characteristics_noise_step_differentiates_the_field_exactly():
    """The characteristics scheme's NoiseStep sees a spectral field in d = 5 and differentiates it exactly."""
    from meanfield.spde._char_maps import NoiseStep

    d = 5
    dw = NoisePath(RELU, d, 4, seed=11).field(0.0, 0.1)
    ns = NoiseStep(dw, d, 1e-12)
    assert ns.kind == "spectral"
    x = sample_uniform(30, d, np.random.default_rng(1))
    w, D = ns.evaluate(x)
    assert np.abs(w - dw(x)).max() < 1e-13 and np.abs(D - dw.gradient(x)).max() < 1e-13


@pytest.mark.slow
def test_mean_identity_in_d4_with_richardson():
    """Theory §5.1: E[X_t] = exp(-½ (d-1) κ_σ(1) t) x_0 for particles on the NoisePath in d = 4.

    64 independent paths, 256 tokens each; per path the mean of <X_t, x_0> over its tokens
    (correlated through the common noise, so the SE is over paths), Richardson-extrapolated
    over dt = 1/32 and 1/64 on the same (refinable) path. Measured: z = -1.3 at t = 0.5 and -0.9
    at t = 1 with SE 0.011 and 0.018 (40-50 s on two cores at load 8-10).
    """
    d, T = 4, 1.0
    est = {0.5: [], 1.0: []}
    kappa1 = None
    for r in range(64):
        noise = NoisePath(RELU, d, 4, seed=500 + r, t_max=T)
        kappa1 = noise.kappa1
        x0 = sample_uniform(256, d, np.random.default_rng(900 + r))
        m = {}
        for h in (1 / 32, 1 / 64):
            sol = solve_particles(x0, noise, 0.0, h, [0.5, 1.0], attention="off")
            m[h] = [np.einsum("ij,ij->i", xt, x0).mean() for xt in sol.x]
        for k, t in enumerate((0.5, 1.0)):
            est[t].append(2 * m[1 / 64][k] - m[1 / 32][k])
    for t, vals in est.items():
        vals = np.asarray(vals)
        se = vals.std(ddof=1) / math.sqrt(vals.size)
        exact = math.exp(-0.5 * (d - 1) * kappa1 * t)
        assert abs(vals.mean() - exact) < 3 * se, (t, vals.mean(), exact, se)
        assert se < 0.03  # resolution: 6 % of the exact value at t = 1


def test_default_noise_of_transformer_and_particles_in_d5():
    """The field works unchanged in the Transformer (default NoisePath) and in solve_particles, d = 5."""
    d = 5
    x0 = sample_uniform(16, d, np.random.default_rng(2))
    model = Transformer(d, 8, None, 0.5, 1.0, lmax=3)
    out = model.run(x0, seed=4).final
    assert np.all(np.isfinite(out)) and np.abs(np.linalg.norm(out, axis=1) - 1).max() < 1e-12
    noise = NoisePath(RELU, d, 3, seed=4, t_max=0.5)
    sol = solve_particles(x0, noise, 1.0, 1 / 16, [0.5], attention="direct")
    assert np.abs(np.linalg.norm(sol.final, axis=1) - 1).max() < 1e-12


def test_refuses_too_large_a_basis_with_an_estimate():
    secs, mem = noise_path_cost(8, 30)
    assert secs > 60
    with pytest.raises(ValueError, match=r"NoisePath: lmax = 30 is too large: the estimated cost is about .* the "
                                         r"largest accepted lmax here is 15"):
        NoisePath(RELU, 8, 30)
    with pytest.raises(ValueError, match="d = 6"):
        NoisePath(SpectralKernel(5, [1.0]), 6, 2)


def test_size_table():
    """n_coeffs = Σ N(d, l), kept fractions increasing to 1 and equal to the path's, refusals marked."""
    t = noise_path_sizes(ERF, dims=[4, 6], lmaxes=[0, 2, 5, 40], measure=True, n_points=64)
    for _, r in t.iterrows():
        d, L = int(r["d"]), int(r["lmax"])
        n = sum((2 * l + d - 2) * math.factorial(l + d - 3) // (math.factorial(l) * math.factorial(d - 2))
                for l in range(L + 1))
        assert r["n_coeffs"] == n and r["n_total"] == d * n
    ok = t[t["accepted"]]
    for d, sub in ok.groupby("d"):
        assert np.all(np.diff(sub["kept_fraction"]) > 0) and sub["kept_fraction"].max() < 1
    row = ok[(ok["d"] == 6) & (ok["lmax"] == 5)].iloc[0]
    assert row["kept_fraction"] == pytest.approx(NoisePath(ERF, 6, 5).kept_fraction, rel=1e-12)
    assert row["eval_seconds"] > 0 and row["jacobian_seconds"] > 0
    refused = t[~t["accepted"]]
    assert list(refused["d"]) == [6] and refused["build_seconds"].isna().all()
    assert t.attrs["largest_lmax"][6] < 40 <= t.attrs["largest_lmax"][4]

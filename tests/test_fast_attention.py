"""Fast (spectral, O(N)) attention against the direct O(N^2) sum (theory §4, §7)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

from meanfield import attention_spectral as asp
from meanfield.attention import attention_eigenvalues, attention_velocity, convolution_velocity, softmax_attention
from meanfield.attention_spectral import (
    SpectralAttention,
    empirical_coefficients,
    select_velocity,
    spectral_attention_velocity,
)
from meanfield.harmonics import cart_to_angles, real_basis, real_to_alm, tangent_frame


# ----------------------------------------------------------------------------- clouds
def _unit(v):
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _vmf_s2(n, mu, kappa, rng):
    """von Mises–Fisher sample on S^2 (Wood's exact inversion for d = 3)."""
    u = rng.random(n)
    w = 1.0 + np.log(u + (1.0 - u) * np.exp(-2.0 * kappa)) / kappa
    t = rng.normal(size=(n, 3))
    t -= (t @ mu)[:, None] * mu
    t = _unit(t)
    return w[:, None] * mu + np.sqrt(np.maximum(0.0, 1.0 - w * w))[:, None] * t


def cloud(kind, d, n, rng):
    """'uniform' or 'clustered' (3 tight vMF clusters, concentrations 50, 200, 500)."""
    if kind == "uniform":
        return _unit(rng.normal(size=(n, d)))
    kappas = (50.0, 200.0, 500.0)
    sizes = [n // 3, n // 3, n - 2 * (n // 3)]
    if d == 2:
        th = np.concatenate([rng.vonmises(rng.uniform(-np.pi, np.pi), k, s) for k, s in zip(kappas, sizes)])
        return np.stack([np.cos(th), np.sin(th)], axis=1)
    mus = _unit(rng.normal(size=(3, 3)))
    return np.concatenate([_vmf_s2(s, m, k, rng) for m, k, s in zip(mus, kappas, sizes)])


# ----------------------------------------------------------------------------- coefficients
@pytest.mark.parametrize("weighted", [False, True])
def test_adjoint_coefficients_match_real_basis_s2(weighted):
    rng = np.random.default_rng(1)
    x = cloud("clustered", 3, 400, rng)
    w = rng.random(400) if weighted else None
    lmax = 12
    a = empirical_coefficients(x, lmax, w, epsilon=1e-12)
    wn = np.full(400, 1 / 400) if w is None else w / w.sum()
    ref = real_to_alm(real_basis(3, lmax, x).T @ wn, lmax)
    # the adjoint of ducc0's synthesis is exactly mu_lm = sum_j w_j conj(Y_lm(x_j)): no factor 2 for m > 0
    assert np.abs(a - ref).max() < 1e-11
    assert np.abs(a - ref).max() < 1e-3 * np.abs(ref[lmax + 1 :]).max()


def test_adjoint_coefficients_match_real_basis_s1():
    rng = np.random.default_rng(2)
    x = cloud("clustered", 2, 300, rng)
    w = rng.random(300)
    a = empirical_coefficients(x, 9, w, epsilon=1e-12)
    ref = real_basis(2, 9, x).T @ (w / w.sum())
    assert np.abs(a - ref).max() < 1e-11


def test_s2_geometry_matches_harmonics_helpers():
    rng = np.random.default_rng(3)
    x = np.concatenate([_unit(rng.normal(size=(50, 3))), [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [-1.0, 0.0, 0.0]]])
    loc, r = asp._s2_loc(x)
    loc_ref = cart_to_angles(x)
    np.testing.assert_allclose(loc, loc_ref, atol=1e-14)
    et_ref, ep_ref = tangent_frame(loc_ref)
    a, b = rng.normal(size=x.shape[0]), rng.normal(size=x.shape[0])
    np.testing.assert_allclose(asp._s2_tangent(x, r, a, b), a[:, None] * et_ref + b[:, None] * ep_ref, atol=1e-14)


def test_s2_path_equals_convolution_velocity():
    """The evaluator's fused synthesis is the same map as attention.convolution_velocity."""
    rng = np.random.default_rng(4)
    x = cloud("clustered", 3, 600, rng)
    sa = SpectralAttention(3, 5.0, tol=1e-12)
    v = sa.velocity(x)
    L = sa.last_lmax
    coeffs = empirical_coefficients(x, L, epsilon=sa.last_epsilon)
    v_ref, _ = convolution_velocity(coeffs, 5.0, x, d=3, lmax=L, epsilon=sa.last_epsilon)
    assert np.abs(v - v_ref).max() < 1e-12


# ----------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
@pytest.mark.parametrize("beta", [0.5, 1.0, 5.0, 10.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_agrees_with_direct_sum(d, kind, beta, weighted):
    rng = np.random.default_rng(10 * d + int(beta * 2) + (kind == "clustered") * 100 + weighted * 1000)
    n = 1500
    x = cloud(kind, d, n, rng)
    w = rng.random(n) ** 2 if weighted else None
    tol = 1e-10
    ref = attention_velocity(x, beta, weights=w)
    sa = SpectralAttention(d, beta, tol=tol)
    v = sa.velocity(x, w)
    assert v.shape == (n, d)
    scale = np.abs(ref).max()
    assert scale > 1e-3
    assert np.abs(v - ref).max() <= tol * scale
    # tangent to the sphere
    assert np.abs(np.einsum("ij,ij->i", v, x)).max() < 1e-13


@pytest.mark.parametrize("backend", ["nufft", "direct"])
@pytest.mark.parametrize("beta", [1.0, 10.0])
def test_s1_backends_agree_with_direct_sum(backend, beta):
    rng = np.random.default_rng(20)
    x = cloud("clustered", 2, 2500, rng)
    ref = attention_velocity(x, beta)
    v = SpectralAttention(2, beta, tol=1e-10, s1_backend=backend).velocity(x)
    assert np.abs(v - ref).max() <= 1e-10 * np.abs(ref).max()


def test_s1_power_sum_blocks_give_the_one_block_sum():
    """The power sum in blocks (powers formed again for the synthesis) against one block (powers
    reused) and against the direct softmax sum, with non-uniform weights."""
    from meanfield._attention_transforms import _s1_direct

    rng = np.random.default_rng(23)
    x = cloud("clustered", 2, 2500, rng)
    w = rng.random(2500)
    w /= w.sum()
    beta = 3.0
    sa = SpectralAttention(2, beta, tol=1e-10, s1_backend="direct")
    L = sa.lmax
    z = x[:, 0] + 1j * x[:, 1]
    z /= np.abs(z)
    lam = attention_eigenvalues(2, beta, L) / (2 * np.pi)
    one = _s1_direct(w, z, lam, 4096)
    for block in (1, 97, 1000):
        # only the order of the block sums differs: measured 1.2-4.4 u of the largest value
        assert np.abs(_s1_direct(w, z, lam, block) - one).max() <= 32 * np.finfo(float).eps * np.abs(one).max()
    s = one.imag / (beta * one.real)
    v = np.stack([-x[:, 1] * s, x[:, 0] * s], axis=1)
    ref = attention_velocity(x, beta, weights=w)
    assert np.abs(v - ref).max() <= 1e-10 * np.abs(ref).max()


@pytest.mark.parametrize("backend", ["nufft", "direct"])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
@pytest.mark.parametrize("beta", [0.1, 1.0, 3.0])
def test_s2_backends_agree_with_direct_sum(backend, kind, beta):
    rng = np.random.default_rng(30 + int(10 * beta))
    x = cloud(kind, 3, 2500, rng)
    w = rng.random(2500) ** 2
    ref = attention_velocity(x, beta, weights=w)
    sa = SpectralAttention(3, beta, tol=1e-10, s2_backend=backend)
    v = sa.velocity(x, w)
    assert sa.last_backend == backend
    assert np.abs(v - ref).max() <= 1e-10 * np.abs(ref).max()


def test_s2_auto_backend_follows_degree_and_size():
    from meanfield.attention_spectral import (S2_DIRECT_ANY_N_EPS, S2_DIRECT_ANY_N_LMAX, S2_DIRECT_MAX_LMAX,
                                              S2_DIRECT_MAX_POINTS, S2_DIRECT_SMALL_N, S2_DIRECT_SMALL_N_FINE_LMAX,
                                              S2_DIRECT_SMALL_N_LMAX)

    rng = np.random.default_rng(31)
    # up to S2_DIRECT_SMALL_N tokens: exact to degree 8 at a coarse ducc0 accuracy, 12 at a fine one
    assert S2_DIRECT_SMALL_N_LMAX == 8 and S2_DIRECT_SMALL_N_FINE_LMAX == 12
    x = cloud("uniform", 3, 2000, rng)
    for beta, tol, degree, backend in ((0.1, 1e-10, 6, "direct"), (1.0, 1e-10, 12, "direct"), (3.0, 1e-10, 18, "nufft"),
                                       (1.0, 1e-6, 8, "direct"), (2.0, 1e-6, 12, "nufft")):
        sa = SpectralAttention(3, beta, tol=tol)
        sa.velocity(x)
        assert (sa.last_lmax, sa.last_backend) == (degree, backend)
    # above it, ducc0's from degree 8 (β = 1: degree 12 at tol 1e-10, 9 at tol 1e-6)
    mid = cloud("uniform", 3, S2_DIRECT_SMALL_N + 1, rng)
    for tol in (1e-10, 1e-6):
        sa = SpectralAttention(3, 1.0, tol=tol)
        sa.velocity(mid, check=False)
        assert sa.last_lmax > S2_DIRECT_MAX_LMAX and sa.last_backend == "nufft"
    assert S2_DIRECT_MAX_POINTS < 300_000
    big = cloud("uniform", 3, 300_000, rng)
    # beyond the size bound at a coarse ducc0 accuracy: ducc0's transforms from exact degree 6 ...
    sa = SpectralAttention(3, 0.3, tol=1e-6)
    sa.velocity(big, check=False)
    assert S2_DIRECT_ANY_N_LMAX < sa.last_lmax <= S2_DIRECT_MAX_LMAX and sa.last_backend == "nufft"
    assert sa.last_epsilon > S2_DIRECT_ANY_N_EPS
    # ... the exact ones up to degree 5 (β = 0.1, tol 1e-6: degree 4 against ducc0's 5)
    sa = SpectralAttention(3, 0.1, tol=1e-6)
    v = sa.velocity(big, check=False)
    assert sa.last_lmax <= S2_DIRECT_ANY_N_LMAX and sa.last_backend == "direct"
    assert sa.last_epsilon > S2_DIRECT_ANY_N_EPS and sa.last_predicted_error <= 1e-6
    ref = SpectralAttention(3, 0.1, tol=1e-6, s2_backend="nufft").velocity(big, check=False)
    assert np.abs(v - ref).max() <= 2e-6  # each within tol of the exact velocity
    # at a finer ducc0 accuracy the exact transforms are taken at any N (their cost has no ε)
    sa = SpectralAttention(3, 0.1, tol=1e-10)
    v = sa.velocity(big, check=False)
    assert sa.last_lmax <= S2_DIRECT_MAX_LMAX and sa.last_epsilon <= S2_DIRECT_ANY_N_EPS
    assert sa.last_backend == "direct"
    ref = SpectralAttention(3, 0.1, tol=1e-10, s2_backend="nufft").velocity(big, check=False)
    assert np.abs(v - ref).max() <= 1e-10
    with pytest.raises(ValueError, match="s2_backend"):
        SpectralAttention(3, 40.0, tol=1e-10, s2_backend="direct")  # needs a degree beyond the exact transforms


def test_s1_power_sum_is_insensitive_to_near_unit_norms():
    """Inputs are unit only to 1e-8; the power sum must not amplify |x| - 1 through z^k."""
    rng = np.random.default_rng(21)
    x = cloud("clustered", 2, 600, rng) * (1 + 4e-9)
    v1 = SpectralAttention(2, 10.0, tol=1e-10, s1_backend="direct").velocity(x)
    v2 = SpectralAttention(2, 10.0, tol=1e-10, s1_backend="nufft").velocity(x)
    assert np.abs(v1 - v2).max() < 1e-10


@pytest.mark.parametrize("d", [2, 3])
def test_large_n_against_direct_rows(d):
    """N = 3·10^4 tokens (NUFFT paths), direct sum for a few hundred query rows."""
    rng = np.random.default_rng(30 + d)
    x = cloud("clustered", d, 30_000, rng)
    beta = 10.0
    v = SpectralAttention(d, beta, tol=1e-10).velocity(x)
    rows = rng.choice(x.shape[0], 300, replace=False)
    a = softmax_attention(x[rows], beta, y=x)
    ref = a - np.einsum("ij,ij->i", a, x[rows])[:, None] * x[rows]
    assert np.abs(v[rows] - ref).max() <= 1e-10 * np.abs(ref).max()


@pytest.mark.parametrize("d", [2, 3])
def test_isolated_token_and_zero_weights(d):
    """Worst case for the softmax denominator: a token far from a tight cluster, and weight-0 tokens."""
    rng = np.random.default_rng(40 + d)
    x = cloud("clustered", d, 1200, rng)
    x[0] = -x[1]  # antipodal to a cluster member: g(x_0) is dominated by its own weight
    w = np.ones(1200)
    w[2:50] = 0.0
    for beta in (10.0, 25.0):
        for weights in (None, w):
            ref = attention_velocity(x, beta, weights=weights)
            v = SpectralAttention(d, beta, tol=1e-10).velocity(x, weights)
            assert np.abs(v - ref).max() <= 1e-10


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_agrees_at_the_largest_auto_beta(d, kind):
    beta = asp.AUTO_MAX_BETA
    rng = np.random.default_rng(60 + d)
    x = cloud(kind, d, 1500, rng)
    ref = attention_velocity(x, beta)
    assert select_velocity("auto", d, beta, N=1500)[1]["method"] == "spectral"
    v = SpectralAttention(d, beta, tol=1e-10).velocity(x)
    assert np.abs(v - ref).max() <= 1e-10 * np.abs(ref).max()


@pytest.mark.parametrize("d", [2, 3])
def test_poles_and_single_token(d):
    x = np.eye(d)[[0, 1]] if d == 2 else np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.0, 0.6, 0.8]])
    for beta in (0.5, 2.0):
        np.testing.assert_allclose(SpectralAttention(d, beta).velocity(x), attention_velocity(x, beta), atol=1e-10)
        np.testing.assert_allclose(SpectralAttention(d, beta).velocity(x[:1]), 0.0, atol=1e-12)


def test_beta_zero_is_the_mean():
    rng = np.random.default_rng(5)
    x = cloud("uniform", 3, 200, rng)
    w = rng.random(200)
    ref = attention_velocity(x, 0.0, weights=w)
    np.testing.assert_allclose(SpectralAttention(3, 0.0).velocity(x, w), ref, atol=1e-14)


def test_one_shot_function_matches_class():
    rng = np.random.default_rng(6)
    x = cloud("clustered", 3, 500, rng)
    # equal up to the thread-order round-off of ducc0's multithreaded transforms
    np.testing.assert_allclose(spectral_attention_velocity(x, 2.0, tol=1e-8),
                               SpectralAttention(3, 2.0, tol=1e-8).velocity(x), rtol=0, atol=1e-14)


# ----------------------------------------------------------------------------- degree selection
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("tol", [1e-6, 1e-10])
@pytest.mark.parametrize("beta", [1.0, 10.0])
def test_automatic_degree_meets_tolerance(d, tol, beta):
    rng = np.random.default_rng(50 + d)
    x = cloud("clustered", d, 1000, rng)
    ref = attention_velocity(x, beta)
    sa = SpectralAttention(d, beta, tol=tol)
    err = np.abs(sa.velocity(x) - ref).max()
    assert err <= tol
    L = sa.last_lmax
    assert 0 < L <= sa.lmax
    # truncation takes half of tol beside the non-uniform transforms, what ε leaves beside the exact ones
    budget = tol / 2 if sa.last_backend == "nufft" else tol - sa.last_epsilon
    assert sa.truncation_bound(L, max(1.0 / 1000, math.exp(-2 * beta))) <= budget
    assert sa.last_predicted_error <= tol
    assert sa.epsilon == pytest.approx(max(asp.DUCC_EPS_MIN, 0.1 * tol))
    # the test can fail: a degree well below the selected one misses the tolerance
    low = SpectralAttention(d, beta, tol=tol, lmax=max(1, L // 3), epsilon=sa.epsilon)
    assert np.abs(low.velocity(x) - ref).max() > tol


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-10])
@pytest.mark.parametrize("beta", [0.1, 0.3, -0.5])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_exact_transforms_take_the_lowest_degree_their_budget_allows(d, tol, beta, kind):
    """The exact backends make only round-off, so their degree is the smallest whose whole error model
    (truncation + ε + round-off) fits tol; the velocity then still meets tol against the direct sum."""
    rng = np.random.default_rng(60 + d + 7 * (kind == "clustered"))
    n = 1000
    x = cloud(kind, d, n, rng)
    exact = SpectralAttention(d, beta, tol=tol, **{"s1_backend" if d == 2 else "s2_backend": "direct"})
    nufft = SpectralAttention(d, beta, tol=tol, **{"s1_backend" if d == 2 else "s2_backend": "nufft"})
    ref = attention_velocity(x, beta)
    assert np.abs(exact.velocity(x) - ref).max() <= tol
    assert np.abs(nufft.velocity(x) - ref).max() <= tol
    L, L_nufft = exact.last_lmax, nufft.last_lmax
    assert exact.last_backend == "direct" and nufft.last_backend == "nufft"
    assert L <= L_nufft
    gmin = exact._model.gmin(1.0 / n)
    room = tol - exact.last_epsilon - exact._model.roundoff()
    assert exact.truncation_bound(L, gmin) <= room
    assert L == 0 or exact.truncation_bound(L - 1, gmin) > room  # the smallest degree that fits
    assert exact.last_predicted_error <= exact.predicted_error <= tol
    assert nufft.last_predicted_error <= nufft.predicted_error <= tol


def test_exact_degree_is_lower_where_the_budget_allows():
    """β = 0.1 (the particle solver's accuracies): one degree less with the exact S^2 transforms."""
    x = cloud("uniform", 3, 2000, np.random.default_rng(61))
    for tol, (lx, ln) in ((1e-10, (6, 7)), (1e-6, (4, 5))):
        sa = SpectralAttention(3, 0.1, tol=tol)
        sa.velocity(x)
        nufft = SpectralAttention(3, 0.1, tol=tol, s2_backend="nufft")
        nufft.velocity(x)
        assert (sa.last_backend, sa.last_lmax, nufft.last_lmax) == ("direct", lx, ln)
    fixed = SpectralAttention(3, 0.1, tol=1e-10, lmax=7)  # a fixed degree is kept by either backend
    fixed.velocity(x)
    assert (fixed.last_backend, fixed.last_lmax) == ("direct", 7)


@pytest.mark.parametrize("d", [2, 3])
def test_kept_call_plans_give_what_a_fresh_evaluator_gives(d):
    """A call's plan (backend, degree, ε, eigenvalues) is kept per (N, g_min); calls that differ in
    N, in their smallest weight or in the backend each size takes must still get their own (a table
    keyed on g_min alone gives the large cloud the small one's backend and fails the plan check)."""
    rng = np.random.default_rng(62)
    # g_min is the floor e^{-2β} for both sizes, but the sizes take different backends (and degrees)
    beta, tol, big = (0.3, 1e-10, 40_000) if d == 2 else (0.1, 1e-6, 200_000)
    sa = SpectralAttention(d, beta, tol=tol)
    clouds = [cloud("uniform", d, n, rng) for n in (300, big, 300)]
    weights = [None, None, rng.uniform(0.01, 1.0, 300)]
    for x, w in zip(clouds + clouds, weights + weights):  # each case twice: the second from the table
        fresh = SpectralAttention(d, beta, tol=tol)
        expected = fresh.velocity(x, w)
        got = sa.velocity(x, w)
        assert (sa.last_backend, sa.last_lmax, sa.last_predicted_error) == (
            fresh.last_backend, fresh.last_lmax, fresh.last_predicted_error)
        if sa.last_backend == "direct":
            assert np.array_equal(got, expected)  # exact transforms: the same bits
        else:  # ducc0's threaded transforms repeat only to round-off: measured <= 16.4 u max|v| over 15 runs
            assert np.abs(got - expected).max() <= 64 * np.finfo(float).eps * np.abs(expected).max()


def test_truncation_bound_is_an_upper_bound_and_decreases():
    sa = SpectralAttention(3, 10.0, tol=1e-10)
    b = [sa.truncation_bound(L, 1e-3) for L in range(5, 60)]
    assert all(b1 <= b0 for b0, b1 in zip(b, b[1:]))
    # exact truncation error (ducc at its floor accuracy) stays below the bound
    rng = np.random.default_rng(7)
    x = cloud("clustered", 3, 1000, rng)
    ref = attention_velocity(x, 10.0)
    for L in (15, 20, 25):
        v = SpectralAttention(3, 10.0, lmax=L, epsilon=asp.DUCC_EPS_MIN).velocity(x)
        assert np.abs(v - ref).max() <= sa.truncation_bound(L, 1e-3)


def test_degree_grows_with_beta_and_accuracy():
    assert SpectralAttention(3, 1.0, 1e-6).lmax < SpectralAttention(3, 1.0, 1e-10).lmax
    assert SpectralAttention(3, 1.0, 1e-10).lmax < SpectralAttention(3, 10.0, 1e-10).lmax
    assert SpectralAttention(3, 10.0, 1e-10).predicted_error <= 1e-10


# ----------------------------------------------------------------------------- dispatch
def test_auto_picks_spectral_only_when_allowed():
    rng = np.random.default_rng(8)
    G = rng.normal(size=(3, 3))
    assert select_velocity("auto", 3, 1.0, N=10_000)[1]["method"] == "spectral"
    assert select_velocity("auto", 2, 1.0, N=10_000)[1]["method"] == "spectral"
    assert select_velocity("auto", 3, 1.0, N=None)[1]["method"] == "spectral"
    assert select_velocity("auto", 3, 1.0, Q=np.eye(3), K=np.eye(3), V=np.eye(3), N=10_000)[1]["method"] == "spectral"
    for kw in ({"Q": G}, {"K": G}, {"V": G}, {"Q": 2 * np.eye(3)}):
        _, info = select_velocity("auto", 3, 1.0, N=10_000, **kw)
        assert info["method"] == "direct"
        assert next(iter(kw)) in info["reason"]
    for d in (4, 5, 8):
        assert select_velocity("auto", d, 1.0, N=10_000)[1]["method"] == "direct"
    assert select_velocity("auto", 3, 1.0, N=10)[1]["method"] == "direct"
    assert select_velocity("auto", 3, 200.0, N=10_000)[1]["method"] == "direct"
    assert select_velocity("auto", 3, 1.0, N=10_000, tol=1e-14)[1]["method"] == "direct"


def test_dispatch_info_and_callables():
    rng = np.random.default_rng(9)
    x = cloud("clustered", 3, 800, rng)
    ref = attention_velocity(x, 3.0)
    f, info = select_velocity("spectral", 3, 3.0, tol=1e-9)
    assert info["method"] == "spectral" and info["lmax"] > 0 and info["tol"] == 1e-9
    assert all(isinstance(info[k], float) for k in ("tol", "epsilon", "predicted_error"))
    assert set(info) >= {"method", "requested", "lmax", "tol", "epsilon", "predicted_error", "reason"}
    assert np.abs(f(x) - ref).max() <= 1e-9
    g, info = select_velocity("direct", 3, 3.0)
    assert info["method"] == "direct" and info["lmax"] is None
    np.testing.assert_array_equal(g(x), ref)
    h, info = select_velocity("off", 3, 3.0)
    assert info["method"] == "off"
    np.testing.assert_array_equal(h(x), np.zeros_like(x))
    G = rng.normal(size=(3, 3))
    k, info = select_velocity("auto", 3, 3.0, Q=G, K=G.T, N=800)
    np.testing.assert_allclose(k(x), attention_velocity(x, 3.0, Q=G, K=G.T), atol=0)


def test_spectral_refuses_general_matrices_and_dimensions():
    G = np.arange(9.0).reshape(3, 3)
    for name in ("Q", "K", "V"):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            select_velocity("spectral", 3, 1.0, **{name: G})
    with pytest.raises(ValueError, match="d = 4"):
        select_velocity("spectral", 4, 1.0)
    with pytest.raises(ValueError, match="d = 2 or 3"):
        SpectralAttention(5, 1.0)


# ----------------------------------------------------------------------------- bad input
def test_bad_input():
    rng = np.random.default_rng(11)
    x = cloud("uniform", 3, 50, rng)
    sa = SpectralAttention(3, 1.0)
    with pytest.raises(ValueError, match="unit"):
        sa.velocity(2 * x)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sa.velocity(bad)
    with pytest.raises(ValueError, match="shape"):
        sa.velocity(x[:, :2] / np.linalg.norm(x[:, :2], axis=1, keepdims=True))
    with pytest.raises(ValueError, match="shape"):
        sa.velocity(x[0])
    with pytest.raises(ValueError, match="weights"):
        sa.velocity(x, np.ones(49))
    with pytest.raises(ValueError, match="weights"):
        sa.velocity(x, -np.ones(50))
    with pytest.raises(ValueError, match="beta"):
        SpectralAttention(3, float("inf"))  # β < 0 is valid input (tests/test_negative_beta.py); inf is not
    with pytest.raises(ValueError, match="tol"):
        SpectralAttention(3, 1.0, tol=0.0)
    with pytest.raises(ValueError, match="tol"):
        SpectralAttention(3, 1.0, tol=-1e-8)
    with pytest.raises(ValueError, match="lmax"):
        SpectralAttention(3, 1.0, lmax=-1)
    with pytest.raises(ValueError, match="epsilon"):
        SpectralAttention(3, 1.0, epsilon=1e-15)
    with pytest.raises(ValueError, match="s1_backend"):
        SpectralAttention(2, 1.0, s1_backend="fft")
    with pytest.raises(ValueError, match="s2_backend"):
        SpectralAttention(3, 1.0, s2_backend="exact")
    with pytest.raises(ValueError, match="method"):
        select_velocity("fast", 3, 1.0)
    with pytest.raises(ValueError, match="beta"):
        select_velocity("auto", 3, float("nan"))  # β < 0 is valid; NaN is not
    with pytest.raises(ValueError, match="tol"):
        select_velocity("auto", 3, 1.0, tol=0)
    with pytest.raises(ValueError, match="Q"):
        select_velocity("auto", 3, 1.0, Q=np.eye(2))
    with pytest.raises(ValueError, match="unit"):
        spectral_attention_velocity(1.5 * x, 1.0)
    with pytest.raises(ValueError, match="d = 2 or 3"):
        empirical_coefficients(_unit(rng.normal(size=(5, 4))), 3)


def test_module_doctests():
    res = doctest.testmod(asp, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("backend", ["nufft", "direct"])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_s2_uniform_weights_left_out_give_the_weighted_velocity(backend, kind, beta):
    """weights=None: the exact transforms sum unit weights (v = ∇g / (β g) does not change when μ is
    scaled), ducc0's take 1/N. Against weights 1/N given explicitly (normalised again) and against the
    direct sum. Difference of the two calls, relative to max |v|, measured (seed 7, N = 2500): 18-52 u
    with the exact transforms at degrees 6 and 12, 3.6-9.3 u with ducc0's; asserted 128 u."""
    rng = np.random.default_rng(7)
    x = cloud(kind, 3, 2500, rng)
    n = x.shape[0]
    ref = attention_velocity(x, beta)
    sa = SpectralAttention(3, beta, tol=1e-10, s2_backend=backend)
    v = sa.velocity(x)
    assert sa.last_backend == backend
    scale = np.abs(ref).max()
    assert np.abs(v - sa.velocity(x, np.full(n, 1.0 / n))).max() <= 128 * np.finfo(float).eps * scale
    assert np.abs(v - ref).max() <= 1e-10 * scale

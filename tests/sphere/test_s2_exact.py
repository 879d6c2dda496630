"""The exact low-degree point transforms on S^2 against independent evaluations."""

import math

import numpy as np
import pytest

from meanfield.sphere import LowDegreeS2, alm_to_real, n_alm, real_to_alm
from meanfield.sphere._s2 import real_basis_s2
from meanfield.sphere._s2_exact import MAX_LMAX
from meanfield.sphere._polynomial import HomogeneousForm
from meanfield.sphere import basis

EPS = np.finfo(float).eps


def _cloud(rng, n):
    x = rng.normal(size=(n, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[:4] = [[0, 0, 1], [0, 0, -1], [1, 0, 0], [0, -1, 0]]  # poles and the equator
    return x


def _alm(rng, K, L):
    a = rng.normal(size=(K, n_alm(L))) + 1j * rng.normal(size=(K, n_alm(L)))
    a[:, : L + 1] = a[:, : L + 1].real  # m = 0 coefficients of a real field
    return a


@pytest.mark.parametrize("L", [0, 1, 2, 5, 7, 10, 16])
def test_adjoint_is_the_real_basis_sum(L):
    # μ_lm = Σ_j w_j conj(Y_lm(x_j)) = real_to_alm(Σ_j w_j R(x_j)) with the recursion in l of real_basis_s2
    rng = np.random.default_rng(L)
    x = _cloud(rng, 9000)  # three blocks of points
    w = rng.random(9000)
    ref = real_to_alm(w @ real_basis_s2(L, x), L)
    mu = LowDegreeS2(L).adjoint(x, w)
    # both sums are exact up to rounding; measured max |Δμ| / (u Σ w) = 0.5-3.9 for L <= 16 (20 at L = 20)
    assert np.abs(mu - ref).max() <= 16 * EPS * w.sum()


@pytest.mark.parametrize("L", [1, 4, 8, 12, 16])
def test_values_are_the_real_basis_expansion(L):
    rng = np.random.default_rng(100 + L)
    x = _cloud(rng, 5000)
    a = _alm(rng, 3, L)
    vals, grads = LowDegreeS2(L).synthesis(a, x, grad=False)
    assert grads is None and vals.shape == (3, 5000)
    b = alm_to_real(a, L)
    ref = b @ real_basis_s2(L, x).T
    # relative to Σ |b| (the scale of ducc0's accuracy): measured 0.5-2.5 u for L <= 10, 19.5 u at L = 16
    assert np.abs(vals - ref).max() <= 64 * EPS * np.abs(b).sum(axis=1).max()


@pytest.mark.parametrize("L", [1, 3, 6, 9])
def test_gradients_match_the_homogeneous_form(L):
    # an independent exact method: monomial coefficients solved from the real basis
    rng = np.random.default_rng(200 + L)
    x = _cloud(rng, 3000)
    a = _alm(rng, 2, L)
    vals, grads = LowDegreeS2(L).synthesis(a, x)
    form = HomogeneousForm.from_basis(basis(3, L))
    rv, rg = form.synth_rows(alm_to_real(a, L), x)
    # in units of u Σ |b| (values) and u Σ |b| (L + 1) (gradients, |∇Y_l| ~ l |Y_l|), measured at
    # L = 1-9: values 0.9-8.1, gradients 0.7-2.0, radial part of the gradients 0.3-0.5
    scale = EPS * np.abs(alm_to_real(a, L)).sum(axis=1).max()
    assert np.abs(vals - rv).max() <= 32 * scale
    assert np.abs(grads - rg).max() <= 8 * scale * (L + 1)
    assert np.abs(np.einsum("knd,nd->kn", grads, x)).max() <= 4 * scale * (L + 1)  # tangent


@pytest.mark.parametrize("L", [0, 1, 2, 5, 8, 12, 20])
def test_hessian_against_ducc0_and_the_laplacian(L):
    """LowDegreeS2.hessian against the four ducc0 syntheses of S2Basis (value and Laplacian,
    gradient, spin 2) at ε = 2e-13, poles included; its trace is the Laplace–Beltrami operator,
    trace Hess f = Δf = Σ -l (l + 1) f_l (ducc0's synthesis of -l (l + 1) a_lm); symmetric, zero
    on the normal x. The comparisons with ducc0 are bounded by its accuracy ε = 2e-13 (about 900 u)
    relative to Σ |b| (L + 1)^k for the k-th derivative: measured at most 0.15 ε (values, L = 0),
    0.094 ε (gradients), 0.048 ε (Hessians), 0.060 ε (the trace identity), asserted ε; H x, on
    the exact side alone, at most 5.2 u Σ |b| (L + 1) (L = 20), asserted 16."""
    from meanfield.sphere import S2Basis, _sphere2

    rng = np.random.default_rng(300 + L)
    x = _cloud(rng, 3000)
    a = _alm(rng, 1, L)[0]
    val, grad, H = LowDegreeS2(L).hessian(a, x)
    assert val.shape == (3000,) and grad.shape == (3000, 3) and H.shape == (3000, 3, 3)
    scale = EPS * np.abs(alm_to_real(a, L)).sum()
    tol = 2e-13 * np.abs(alm_to_real(a, L)).sum()
    b = S2Basis(max(L, 2))
    c = S2Basis(L).resize(a, b.lmax)  # ducc0's spin-2 synthesis needs lmax >= 2
    with pytest.MonkeyPatch.context() as mp:  # the ducc0 route at every degree
        mp.setattr(_sphere2, "_HESS_EXACT_MAX_LMAX", -1)
        assert not b.exact_hessian
        rv, rg, rH = b.hessian_at(c, x, epsilon=2e-13)
    assert np.abs(val - rv).max() <= tol
    assert np.abs(grad - rg).max() <= tol * (L + 1)
    assert np.abs(H - rH).max() <= tol * (L + 1) ** 2
    lap = b.evaluate(-b.ell * (b.ell + 1.0) * c, x, epsilon=2e-13)
    assert np.abs(np.trace(H, axis1=1, axis2=2) - lap).max() <= tol * (L + 1) ** 2
    assert np.array_equal(H, np.transpose(H, (0, 2, 1)))
    assert np.abs(np.einsum("nij,nj->ni", H, x)).max() <= 16 * scale * (L + 1)


def test_hessian_is_the_derivative_of_the_gradient():
    """An independent check without ducc0: Hess f ξ is the tangent part of the derivative of the
    exact gradient along ξ (centred differences of step h = 1e-5: error O(h² |∇³f|) + O(u |∇f| / h);
    measured 1.3e-9 of max abs(H) in three directions, asserted 1e-8)."""
    rng = np.random.default_rng(9)
    L = 9
    x = _cloud(rng, 2000)
    a = _alm(rng, 1, L)[0]
    t = LowDegreeS2(L)
    _, grad, H = t.hessian(a, x)
    assert np.array_equal(grad, t.synthesis(a[None], x)[1][0])  # the same products and emit formula
    h = 1e-5
    for _ in range(3):
        e = rng.normal(size=x.shape)
        e -= np.einsum("ij,ij->i", e, x)[:, None] * x
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        dg = (t.synthesis(a[None], x + h * e)[1][0] - t.synthesis(a[None], x - h * e)[1][0]) / (2 * h)
        dg -= np.einsum("ij,ij->i", dg, x)[:, None] * x
        assert np.abs(dg - np.einsum("nij,nj->ni", H, e)).max() < 1e-8 * np.abs(H).max()


def test_adjoint_is_the_transpose_of_the_synthesis():
    # Σ_j w_j f(x_j) = Σ_l a_l0 μ_l0 + 2 Re Σ_{m>0} a_lm conj(μ_lm)
    rng = np.random.default_rng(3)
    L = 7
    x, w, a = _cloud(rng, 700), rng.normal(size=700), _alm(rng, 1, L)[0]
    t = LowDegreeS2(L)
    lhs = w @ t.synthesis(a, x, grad=False)[0][0]
    mu = t.adjoint(x, w)
    twice = np.where(np.concatenate([np.full(L + 1 - m, m) for m in range(L + 1)]) > 0, 2.0, 1.0)
    rhs = np.real(np.sum(twice * a * np.conj(mu)))
    assert abs(lhs - rhs) <= 1e-12 * np.abs(w).sum() * np.abs(a).sum()


def test_points_are_read_as_directions_and_tables_reused():
    rng = np.random.default_rng(4)
    L = 6
    x = _cloud(rng, 10000)
    scaled = x * rng.uniform(0.5, 3.0, size=(10000, 1))
    t = LowDegreeS2(L)
    w = rng.random(10000)
    mu, tables = t.adjoint(x, w, keep=True)
    assert tables is not None
    np.testing.assert_allclose(t.adjoint(scaled, w), mu, rtol=0, atol=1e-14 * w.sum())
    a = _alm(rng, 1, L)[0]
    fresh = t.log_gradient(a, x, 0.5)
    assert np.array_equal(t.log_gradient(a, x, 0.5, tables=tables), fresh)  # same numbers from kept tables
    vals, grads = t.synthesis(a[None], x, tables=tables)
    ref = grads[0] / (0.5 * vals[0])[:, None]  # the projection rounded in another order
    np.testing.assert_allclose(fresh, ref, rtol=0, atol=4 * EPS * (L + 1) * np.abs(ref).max())
    np.testing.assert_allclose(t.synthesis(a[None], scaled)[1], grads, rtol=0, atol=1e-12 * np.abs(a).sum())


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="lmax"):
        LowDegreeS2(-1)
    with pytest.raises(ValueError, match="lmax"):
        LowDegreeS2(MAX_LMAX + 1)
    t = LowDegreeS2(3)
    x = _cloud(np.random.default_rng(5), 10)
    with pytest.raises(ValueError, match="x"):
        t.adjoint(x[:, :2], np.ones(10))
    with pytest.raises(ValueError, match="w"):
        t.adjoint(x, np.ones(9))
    with pytest.raises(ValueError, match="alm"):
        t.synthesis(np.ones((1, 5), dtype=complex), x)
    _, tables = t.adjoint(x, np.ones(10), keep=True)
    with pytest.raises(ValueError, match="tables"):
        t.log_gradient(np.ones(n_alm(3), dtype=complex), x[:5], tables=tables)


def test_same_numbers_whatever_the_thread_setting(monkeypatch):
    from meanfield import deterministic

    rng = np.random.default_rng(6)
    x, w, L = _cloud(rng, 20000), rng.random(20000), 7
    t = LowDegreeS2(L)
    a = _alm(rng, 1, L)[0]
    ref = t.adjoint(x, w), t.log_gradient(a, x, 2.0), *t.hessian(a, x)
    with deterministic():
        one = t.adjoint(x, w), t.log_gradient(a, x, 2.0), *t.hessian(a, x)
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "1")
    env = t.adjoint(x, w), t.log_gradient(a, x, 2.0), *t.hessian(a, x)
    monkeypatch.setenv("MEANFIELD_NUM_THREADS", "3")  # three equal blocks of the split synthesis
    three = t.adjoint(x, w), t.log_gradient(a, x, 2.0), *t.hessian(a, x)
    for got in (one, env, three):
        assert all(np.array_equal(g, r) for g, r in zip(got, ref))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_synthesis_blocks_split_over_threads_only_for_large_products(monkeypatch, threads):
    """The synthesis' blocks go to the thread pool only when points x weight entries reach
    _SPLIT_WORK and there are threads: at N = 2·10^4 the log-gradient at L = 5 stays on one thread in
    three equal blocks of at most 8192 points, and at L = 7 it is split into equal blocks, as many
    as the threads (at most four times 8192 points each); the numbers are those of one thread
    either way (previous test)."""
    from meanfield.sphere import _s2_exact

    calls = []
    real = _s2_exact.parallel_rows
    monkeypatch.setattr(_s2_exact, "default_threads", lambda: threads)
    monkeypatch.setattr(_s2_exact, "parallel_rows",
                        lambda fn, n, **kw: calls.append((n, kw["min_rows"])) or real(fn, n, **kw))
    rng = np.random.default_rng(8)
    x = _cloud(rng, 20000)
    for L in (5, 7):
        LowDegreeS2(L).log_gradient(_alm(rng, 1, L)[0], x)
    nb = -(-20000 // _s2_exact._BLOCK)
    assert 20000 * 4 * 6 * 11 < _s2_exact._SPLIT_WORK <= 20000 * 4 * 8 * 15
    assert 20000 <= _s2_exact._SPLIT_SCALE * _s2_exact._BLOCK
    assert calls == [(nb, nb + 1), (nb, nb + 1) if threads == 1 else (threads, 2)]


def test_nonfinite_input_and_stale_tables_are_refused():
    t = LowDegreeS2(4)
    rng = np.random.default_rng(7)
    x = _cloud(rng, 50)
    bad = x.copy()
    bad[3] = 0.0
    with pytest.raises(ValueError, match="x"):
        t.adjoint(bad, np.ones(50))
    bad[3] = np.nan
    with pytest.raises(ValueError, match="x"):
        t.synthesis(np.ones((1, n_alm(4)), dtype=complex), bad)
    w = np.ones(50)
    w[0] = np.inf
    with pytest.raises(ValueError, match="w"):
        t.adjoint(x, w)
    with pytest.raises(ValueError, match="alm"):
        t.log_gradient(np.full(n_alm(4), np.nan, dtype=complex), x)
    _, old = t.adjoint(x, np.ones(50), keep=True)
    _, new = t.adjoint(x[::-1], np.ones(50), keep=True)  # same size, other points: overwrites the kept tables
    with pytest.raises(ValueError, match="overwritten"):
        t.log_gradient(np.ones(n_alm(4), dtype=complex), x, tables=old)
    t.log_gradient(np.ones(n_alm(4), dtype=complex), x[::-1], tables=new)


@pytest.mark.parametrize("L", [1, 2, 5, 7, 12, 20])
def test_weight_groups_drop_only_zero_weights(L):
    """The synthesis multiplies each group of Chebyshev degrees k >= k0 by the first 2 (L - k0) + 1
    C rows only: every weight it leaves out is exactly zero (k + m > L), for values and gradients,
    and the groups cover every degree once."""
    rng = np.random.default_rng(300 + L)
    t = LowDegreeS2(L)
    ks = [k for a, b, _ in t._groups for k in range(a, b)]
    assert ks == list(range(L + 1))
    W = t._dense_weights(_alm(rng, 2, L), grad=True)  # [field, quantity, k, C row]
    assert np.count_nonzero(W) > 0
    for a, b, c in t._groups:
        assert c == 2 * (L - a) + 1
        assert not np.any(W[:, :, a:b, c:])
        # the bound is tight: the group's lowest degree meets its last C row
        assert np.any(W[:, :, a, c - 1])


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= EPS, reason="needs an extended-precision long double")
@pytest.mark.parametrize("L", [2, 7, 20])
def test_powers_of_x1_plus_i_x2_to_a_few_units_per_factor(L):
    """The C rows (Re, Im of C^m, C = x_1 + i x_2 at the normalised points) against extended
    precision: at most 2.5 m u for C^m (measured 1.43 m u; the real recurrence
    C^m = 2 x_1 C^{m-1} - |C|² C^{m-2} reached 4.98 m u at m = 20, 2.93 m u at m = 12)."""
    rng = np.random.default_rng(9)
    n = 20000
    x = rng.normal(size=(n, 3))
    t = LowDegreeS2(L)
    tab = np.empty((3 * L + 5, n))
    t._tables(x, 0, n, tab)
    xl = x.astype(np.longdouble)
    xl /= np.sqrt((xl**2).sum(axis=1))[:, None]
    c = xl[:, 0] + 1j * xl[:, 1]
    p = np.ones(n, dtype=np.clongdouble)
    assert np.all(tab[L + 4] == 1.0)
    for m in range(1, L + 1):
        p = p * c
        err = max(np.abs(tab[L + 3 + 2 * m] - p.real).max(), np.abs(tab[L + 4 + 2 * m] - p.imag).max())
        assert float(err) <= 2.5 * m * EPS, (m, float(err) / (m * EPS))


@pytest.mark.parametrize("L", [0, 3, 6])
def test_unit_weights_are_the_counting_measure(L):
    # w = None: μ_lm = Σ_j conj(Y_lm(x_j)), the weights not multiplied in
    rng = np.random.default_rng(400 + L)
    x = _cloud(rng, 9000)
    t = LowDegreeS2(L)
    # the reference summed exactly (math.fsum): a BLAS dot of 9000 equal terms was off by 23 u n in μ_00
    ref = real_to_alm(np.array([math.fsum(col) for col in real_basis_s2(L, x).T]), L)
    mu = t.adjoint(x, None)
    assert np.abs(mu - ref).max() <= 4 * EPS * 9000  # measured 0, 0.02 and 0.34 u n
    assert np.array_equal(mu, t.adjoint(x, np.ones(9000)))  # multiplying by 1.0 is exact


@pytest.mark.parametrize("n", [0, 1, 63, 64, 8192, 8193, 20000, 100001])
def test_blocks_are_equal_aligned_and_cover_the_points(n):
    from meanfield.sphere._s2_exact import _ALIGN, _BLOCK, _equal_blocks

    nb, blk = _equal_blocks(n, _BLOCK)
    assert nb == -(-n // _BLOCK)
    assert blk <= _BLOCK and blk % _ALIGN == 0
    assert nb * blk >= n and (nb == 0 or (nb - 1) * blk < n)


@pytest.mark.parametrize("L", [0, 1, 6, 13])
def test_weight_map_gives_the_dense_weights(L):
    # the weights of the synthesis by one product with a map built once, against the direct construction
    rng = np.random.default_rng(500 + L)
    t = LowDegreeS2(L)
    for K in (1, 3):
        a = _alm(rng, K, L)
        for grad, hess in ((False, False), (True, False), (True, True)):
            W = t._dense_weights(a, grad, hess)
            got = t._weights(a, grad, hess)
            for (k0, k1, c), g in zip(t._groups, got):
                ref = W[:, :, k0:k1, :c].transpose(2, 0, 1, 3).reshape(-1, c)
                assert np.abs(g - ref).max() <= 8 * EPS * (L + 1) * np.abs(W).max()


@pytest.mark.parametrize("L, n, grad, eps, exact", [
    (6, 100, True, None, False),        # the polynomial form's degrees keep their own route
    (7, 10**6, True, 1e-7, True),       # to degree 8 at any N and ε
    (8, 10**6, True, None, True),
    (9, 1 << 15, True, 1e-7, True),     # to degree 10 for at most 2^15 points
    (10, (1 << 15) + 1, True, 1e-11, False),
    (12, 8128, True, 1e-8, True),       # to degree 12 there at ε <= 1e-8
    (12, 8128, True, 1e-7, False),
    (12, 8128, True, None, True),       # the default ε (NUFFT_EPS = 1e-12)
    (13, 100, True, 1e-12, False),
    (8, 100, False, 1e-12, False),      # values alone stay with ducc0
])
def test_exact_synthesis_rule(L, n, grad, eps, exact):
    assert basis(3, L).exact_synthesis(n, grad, eps) is exact


@pytest.mark.parametrize("L", [7, 9, 12])
def test_synth_rows_routes_agree(L):
    """S2Basis.synth_rows with gradients takes the exact transforms where ``exact_synthesis`` says
    (bit for bit LowDegreeS2.synthesis, also for S2Points, whose Cartesian vectors it reads) and
    ducc0's otherwise (ε = 1e-7 at degree 12, or more than 2^15 points at degrees 9 and 12, are
    forced here by a smaller bound); the two agree within ducc0's ε = 1e-12 relative to Σ abs(a_lm)
    per field (gradients: times L + 1). Measured at most 0.06 ε (values) and 0.05 ε (gradients)
    over the three degrees; asserted ε."""
    from meanfield.sphere import _sphere2
    from meanfield.sphere._points import s2_points

    rng = np.random.default_rng(40 + L)
    x = _cloud(rng, 3000)
    a = _alm(rng, 3, L)
    b = basis(3, L)
    assert b.exact_synthesis(len(x), True, 1e-12)
    vals, grads = b.synth_rows(a, x, epsilon=1e-12)
    rv, rg = LowDegreeS2(L).synthesis(a, x)
    assert np.array_equal(vals, rv) and np.array_equal(grads, rg)
    pv, pg = b.synth_rows(a, s2_points(x), epsilon=1e-12)
    assert np.array_equal(pv, rv) and np.array_equal(pg, rg)
    with pytest.MonkeyPatch.context() as mp:  # the ducc0 route at this degree
        mp.setattr(_sphere2, "_SYNTH_EXACT_MAX_LMAX", 6)
        mp.setattr(_sphere2, "_SYNTH_EXACT_SMALL_N", 100)
        assert not b.exact_synthesis(len(x), True, 1e-12)
        dv, dg = b.synth_rows(a, x, epsilon=1e-12)
    scale = 1e-12 * np.abs(alm_to_real(a, L)).sum(axis=1)
    assert np.all(np.abs(vals - dv).max(axis=1) <= scale)
    assert np.all(np.abs(grads - dg).max(axis=(1, 2)) <= scale * (L + 1))

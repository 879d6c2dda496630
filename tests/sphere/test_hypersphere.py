"""Hyperspherical harmonics on S^{d-1}, d >= 4, and the product Gauss rule: exact identities only."""

import math
from itertools import product

import numpy as np
import pytest
from scipy.special import gammaln

from meanfield.sphere import (
    CircleBasis,
    HypersphereBasis,
    S2Basis,
    basis,
    chain_labels,
    gauss_gegenbauer,
    harmonic_dimension,
    householder_frame,
    n_functions,
    product_quadrature,
    project,
    sample_uniform,
    sphere_area,
    zonal,
)

CASES = [(4, 8), (5, 6), (6, 4), (8, 3)]


def _monomial_integral(alpha, d):
    """∫_{S^{d-1}} x^α dσ = 2 Π Γ((α_i + 1)/2) / Γ((|α| + d)/2) for even α, 0 otherwise."""
    alpha = np.asarray(alpha)
    if np.any(alpha % 2):
        return 0.0
    return 2.0 * math.exp(np.sum(gammaln((alpha + 1) / 2.0)) - gammaln((alpha.sum() + d) / 2.0))


@pytest.mark.parametrize("d", [2, 3, 4, 5, 6])
def test_product_quadrature_is_exact_to_its_degree(d):
    """Every monomial of degree <= D integrates exactly; one of degree D + 1 (S^1: the angle rule) or D + 2
    (the Gauss levels, exact to 2n - 1 = D + 1) does not, so the stated degree is sharp."""
    D = 8 if d <= 4 else 6
    x, w = product_quadrature(d, D)
    assert x.shape[0] == (D + 1) * (D // 2 + 1) ** (d - 2)
    assert np.all(w > 0) and abs(w.sum() - sphere_area(d)) < 1e-13 * sphere_area(d)
    assert np.abs(np.linalg.norm(x, axis=1) - 1).max() < 1e-15
    worst = 0.0
    for alpha in product(range(D + 1), repeat=d):
        if sum(alpha) > D:
            continue
        approx = w @ np.prod(x ** np.asarray(alpha), axis=1)
        worst = max(worst, abs(approx - _monomial_integral(alpha, d)))
    assert worst < 1e-13
    alpha = [D + 1, 0] if d == 2 else [0] * (d - 1) + [D + 2]
    miss = abs(w @ np.prod(x ** np.asarray(alpha), axis=1) - _monomial_integral(alpha, d))
    assert miss > 1e-6


def test_gauss_gegenbauer_weight():
    """n nodes integrate t^k (1 - t²)^{(d-3)/2} exactly up to k = 2n - 1, not at 2n."""
    for d in (3, 4, 5, 7):
        t, w = gauss_gegenbauer(4, d)
        a = (d - 3) / 2
        for k in range(0, 9):
            exact = 0.0 if k % 2 else math.exp(gammaln((k + 1) / 2) + gammaln(a + 1) - gammaln(a + 1 + (k + 1) / 2))
            err = abs(w @ t**k - exact)
            assert (err < 1e-14) if k <= 7 else (err > 1e-6)


@pytest.mark.parametrize("d, lmax", CASES)
def test_orthonormal_by_product_quadrature(d, lmax):
    """Gram matrix ∫ Y_i Y_j = δ_ij by the product rule of degree 2 lmax (exact for these products)."""
    b = basis(d, lmax)
    assert isinstance(b, HypersphereBasis) and b.n_real == int(harmonic_dimension(d, lmax).sum()) == n_functions(d, lmax)
    x, w = product_quadrature(d, 2 * lmax)
    B = b.real_basis(x)
    assert np.abs(B.T @ (w[:, None] * B) - np.eye(b.n_real)).max() < 1e-12


@pytest.mark.parametrize("d, lmax", CASES)
def test_addition_theorem(d, lmax):
    """Σ_m Y_lm(x) Y_lm(y) = Z_l(<x, y>) = N(d, l) P_l^{(d)}(<x, y>) / |S^{d-1}| degree by degree."""
    b = basis(d, lmax)
    rng = np.random.default_rng(d)
    x, y = sample_uniform(20, d, rng), sample_uniform(20, d, rng)
    Bx, By = b.real_basis(x), b.real_basis(y)
    z = zonal(d, lmax, np.einsum("ij,ij->i", x, y))
    deg = b.real_degrees()
    for ell in range(lmax + 1):
        sel = deg == ell
        assert sel.sum() == harmonic_dimension(d, lmax)[ell]
        assert np.abs((Bx[:, sel] * By[:, sel]).sum(1) - z[ell]).max() < 1e-12
    # at x = y: Σ_m Y_lm(x)² = N(d, l) / |S^{d-1}| (pointwise, from any orthonormal basis)
    assert np.abs((Bx**2).sum(1) - harmonic_dimension(d, lmax).sum() / sphere_area(d)).max() < 1e-12


@pytest.mark.parametrize("d, lmax", CASES)
def test_laplacian_eigenvalues(d, lmax):
    """Δ_S Y = -l(l + d - 2) Y twice: trace of the covariant Hessian at points, div ∇ on the grid."""
    b = basis(d, min(lmax, 4))
    rng = np.random.default_rng(10 + d)
    c = rng.standard_normal(b.n_real)
    x = sample_uniform(30, d, rng)
    _, _, H = b.hessian_at(c, x)
    lap_ref = b.evaluate(-b.ell * (b.ell + d - 2.0) * c, x)
    assert np.abs(np.trace(H, axis1=1, axis2=2) - lap_ref).max() < 1e-10 * np.abs(lap_ref).max()
    g = b.grid(b.lmax + 1)  # exact for ∇Y · ∇Y' (degree <= 2 lmax)
    assert np.abs(g.divergence(g.gradient(c)) + b.laplacian * c).max() < 1e-11 * np.abs(b.laplacian * c).max()
    assert np.abs(g.analysis(g.synth(c)) - c).max() < 1e-12


@pytest.mark.parametrize("d, lmax", CASES)
def test_gradient_and_hessian_match_finite_differences(d, lmax):
    b = basis(d, lmax)
    rng = np.random.default_rng(20 + d)
    C = rng.standard_normal((3, b.n_real))
    x = sample_uniform(25, d, rng)
    vals, grads = b.synth_rows(C, x)
    assert np.abs(vals - C @ b.real_basis(x).T).max() < 1e-12
    assert np.abs(np.einsum("knd,nd->kn", grads, x)).max() < 1e-12
    e = rng.standard_normal((25, d))
    e -= np.einsum("ij,ij->i", e, x)[:, None] * x
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    h = 1e-6
    scale = np.abs(grads).max()
    for k in range(3):
        fd = (b.evaluate(C[k], project(x + h * e)) - b.evaluate(C[k], project(x - h * e))) / (2 * h)
        # centred difference: error h² |f'''| / 6 + eps |f| / h, about 1e-9 relative here
        assert np.abs(fd - np.einsum("ij,ij->i", grads[k], e)).max() < 1e-7 * scale
    val, grad, H = b.hessian_at(C[0], x)
    assert np.abs(val - vals[0]).max() < 1e-12 and np.abs(grad - grads[0]).max() < 1e-11 * scale
    assert np.abs(H - np.transpose(H, (0, 2, 1))).max() < 1e-10 * np.abs(H).max()
    h = 1e-5
    dg = (b.gradient_at(C[0], project(x + h * e)) - b.gradient_at(C[0], project(x - h * e))) / (2 * h)
    dg -= np.einsum("ij,ij->i", dg, x)[:, None] * x
    assert np.abs(dg - np.einsum("nij,nj->ni", H, e)).max() < 1e-6 * np.abs(H).max()


def test_adjoint_is_the_transpose_and_keeps_the_mass():
    b = basis(5, 5)
    rng = np.random.default_rng(3)
    x = sample_uniform(700, 5, rng)
    v = rng.standard_normal(700)
    c = b.adjoint(v, x)
    assert np.abs(c - v @ b.real_basis(x)).max() < 1e-12
    assert c[0] * math.sqrt(sphere_area(5)) == pytest.approx(v.sum(), abs=1e-12)
    assert np.abs(b.dirac(x[:3]) - b.real_basis(x[:3])).max() == 0
    # Σ_q F_q · ∇Y(x_q) is the transpose of the gradient: <gradient_adjoint(F), c> = Σ_q F_q · ∇f(x_q)
    F = rng.standard_normal((700, 5))
    F -= np.einsum("ij,ij->i", F, x)[:, None] * x
    c = rng.standard_normal(b.n_real)
    lhs = b.gradient_adjoint(F, x) @ c
    assert lhs == pytest.approx(np.einsum("ij,ij->", F, b.gradient_at(c, x)), rel=1e-12)


def test_same_construction_reproduces_the_circle_and_spans_s2():
    """d = 2: the Fourier basis itself; d = 3: an orthogonal change of basis of S2Basis within each degree."""
    rng = np.random.default_rng(4)
    x2 = sample_uniform(50, 2, rng)
    H2 = HypersphereBasis.for_dimension(2)(6)
    assert np.abs(H2.real_basis(x2) - CircleBasis(6).real_basis(x2)).max() < 1e-13
    H3 = HypersphereBasis.for_dimension(3)(6)
    x, w = product_quadrature(3, 12)
    A, B = H3.real_basis(x), S2Basis(6).real_basis(x)
    M = A.T @ (w[:, None] * B)
    assert np.abs(M @ M.T - np.eye(49)).max() < 1e-12
    same_degree = H3.real_degrees()[:, None] == S2Basis(6).real_degrees()[None, :]
    assert np.abs(M[~same_degree]).max() < 1e-13


def test_smooth_at_coordinate_singularities():
    """The recurrences never divide by r_j: values and gradients at e_k (r_j = 0 for j < k) are the limits."""
    b = basis(6, 5)
    rng = np.random.default_rng(5)
    c = rng.standard_normal(b.n_real)
    E = np.eye(6)
    near = project(E + 1e-9 * rng.standard_normal((6, 6)))
    assert np.all(np.isfinite(b.gradient_at(c, E)))
    assert np.abs(b.evaluate(c, E) - b.evaluate(c, near)).max() < 1e-6
    assert np.abs(b.gradient_at(c, E) - b.gradient_at(c, near)).max() < 1e-6


def test_layout_labels_and_limits():
    b = basis(4, 3)
    lab = b.labels()
    assert lab.shape == (b.n_real, 4) and np.array_equal(lab[:, 0], b.ell)
    assert np.all(lab[:, :-2] >= lab[:, 1:-1]) and np.all(np.abs(lab[:, -1]) == lab[:, -2])
    assert np.array_equal(chain_labels(4, 3), lab)
    assert type(b).lmax_from_size(b.n_real, np.float64) == 3 and type(b).lmax_from_size(b.n_real + 1, np.float64) is None
    assert np.array_equal(basis(4, 5).resize(b.resize(np.arange(30.0), 5), 3), np.arange(30.0))
    # degree-0 and the mass
    c = np.zeros(b.n_real)
    c[0] = 1.0 / math.sqrt(sphere_area(4))
    assert b.mass(c) == pytest.approx(1.0)
    F = householder_frame(sample_uniform(40, 7, rng := np.random.default_rng(6)))
    assert len(F) == 6
    with pytest.raises(ValueError, match="lmax must be <= "):
        basis(8, 40)
    with pytest.raises(ValueError, match="product_quadrature: degree = 4000 is too large"):
        product_quadrature(6, 4000)
    del rng

"""Hyperspherical coordinates, the product Gauss–Gegenbauer rule, oriented frames and cell charts on S^{d-1}.

References: closed-form monomial integrals on the sphere, ∫ x^{2β} dσ = 2 Π_i Γ(β_i + ½) / Γ(|β| + d/2)
(odd powers integrate to 0), finite differences of the coordinate maps, and determinants.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from meanfield.sphere import (
    cart_to_hyperspherical,
    cell_chart,
    polar_rule,
    gegenbauer_mass,
    gegenbauer_mass_inverse,
    hypersphere_quadrature,
    hyperspherical_frame,
    hyperspherical_to_cart,
    monomial_exponents,
    monomials,
    oriented_frame,
    sample_uniform,
    sphere_area,
    sphere_quadrature,
    tangent_volume,
)


def _monomial_integral(alpha: np.ndarray) -> np.ndarray:
    """∫_{S^{d-1}} x^α dσ for exponents α (n, d), in closed form."""
    out = np.zeros(alpha.shape[0])
    even = np.all(alpha % 2 == 0, axis=1)
    for i in np.nonzero(even)[0]:
        b = alpha[i] / 2
        out[i] = 2 * math.exp(sum(math.lgamma(bi + 0.5) for bi in b) - math.lgamma(b.sum() + alpha.shape[1] / 2))
    return out


@pytest.mark.parametrize("a", [0.0, 0.5, 1.0, 2.5])
def test_polar_rule_exact_to_degree_2n_minus_1(a):
    """∫ u^k (1-u²)^a du = B((k+1)/2, a+1) (k even) for k <= 2n-1; the mass function inverts."""
    n = 6
    x, w = polar_rule(n, a)
    for k in range(2 * n):
        exact = 0.0 if k % 2 else math.exp(math.lgamma((k + 1) / 2) + math.lgamma(a + 1) - math.lgamma((k + 1) / 2 + a + 1))
        assert abs(w @ x**k - exact) < 1e-14
    # the cumulative weights separate the nodes (Chebyshev–Markov–Stieltjes) and invert exactly
    cuts = gegenbauer_mass_inverse(np.cumsum(w)[:-1], a)
    assert np.all(cuts > x[:-1]) and np.all(cuts < x[1:])
    u = np.linspace(-0.99, 0.99, 11)
    assert np.abs(gegenbauer_mass_inverse(gegenbauer_mass(u, a), a) - u).max() < 1e-12


@pytest.mark.parametrize("d", [4, 5, 6])
def test_hypersphere_quadrature_integrates_monomials_exactly(d):
    """The product rule with n nodes per polar angle is exact for monomials of degree <= 2n - 1 (module claim)."""
    n = 4
    x, w = hypersphere_quadrature(d, n)
    assert x.shape == (2 * n ** (d - 1), d) and np.all(w > 0)
    assert np.abs(np.linalg.norm(x, axis=1) - 1).max() < 1e-15
    assert abs(w.sum() - sphere_area(d)) < 1e-13 * sphere_area(d)
    alpha = monomial_exponents(d, 2 * n - 1)
    err = np.abs(w @ monomials(x, 2 * n - 1) - _monomial_integral(alpha))
    assert err.max() < 1e-13
    # and not beyond: the degree-2n moment x_d^{2n} is missed (so the claim is sharp, not vacuous)
    top = np.zeros((1, d), dtype=int)
    top[0, -1] = 2 * n
    assert abs(w @ x[:, -1] ** (2 * n) - _monomial_integral(top)[0]) > 1e-6


def test_d3_is_the_s2_product_rule():
    """d = 3 reproduces sphere_quadrature (Gauss–Legendre rings × uniform longitudes)."""
    x, w = hypersphere_quadrature(3, 5)
    y, v = sphere_quadrature(5)
    assert np.abs(x - y).max() < 1e-15 and np.abs(w - v).max() < 1e-15


@pytest.mark.parametrize("d", [3, 4, 6])
def test_coordinates_round_trip_and_frame_is_the_coordinate_derivative(d):
    """cart ∘ hyperspherical = id; frame columns = unit ∂x/∂θ_k, ∂x/∂φ (central differences, error ~1e-10)."""
    rng = np.random.default_rng(0)
    x = sample_uniform(50, d, rng)
    th, ph = cart_to_hyperspherical(x)
    assert np.abs(hyperspherical_to_cart(th, ph) - x).max() < 1e-14
    E = hyperspherical_frame(th, ph)
    assert np.abs(np.einsum("nai,naj->nij", E, E) - np.eye(d - 1)).max() < 1e-14
    assert np.abs(np.einsum("na,nai->ni", x, E)).max() < 1e-14
    h = 1e-6
    for k in range(d - 1):
        tp, tm, pp, pm = th.copy(), th.copy(), ph.copy(), ph.copy()
        if k < d - 2:
            tp[:, k] += h
            tm[:, k] -= h
        else:
            pp += h
            pm -= h
        g = (hyperspherical_to_cart(tp, pp) - hyperspherical_to_cart(tm, pm)) / (2 * h)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        assert np.abs(g - E[:, :, k]).max() < 1e-8


@pytest.mark.parametrize("d", [2, 4, 5, 7])
def test_oriented_frame(d):
    """Orthonormal, tangent, det[E, x] = +1 everywhere (both signs of x_d, and at ±e_d)."""
    rng = np.random.default_rng(1)
    x = np.concatenate([sample_uniform(40, d, rng), np.eye(d)[[-1]], -np.eye(d)[[-1]]])
    E = oriented_frame(x)
    assert np.abs(np.einsum("nai,naj->nij", E, E) - np.eye(d - 1)).max() < 1e-14
    assert np.abs(np.einsum("na,nai->ni", x, E)).max() < 1e-14
    assert np.abs(tangent_volume(E, x) - 1.0).max() < 1e-13
    # a reflected column flips the orientation
    F = E.copy()
    F[:, :, 0] *= -1
    assert np.abs(tangent_volume(F, x) + 1.0).max() < 1e-13


@pytest.mark.parametrize("d", [2, 3, 4, 5])
def test_cell_chart_cells_tile_the_sphere(d):
    """Cell measures = weights = products of exact 1-D measures; children tile their parents; nodes lie in their cells."""
    chart = cell_chart(d)
    lo, hi, node, w = chart.initial(4)
    assert abs(w.sum() - sphere_area(d)) < 1e-13 * sphere_area(d)
    assert np.all(lo <= node) and np.all(node <= hi)
    if d >= 3:
        meas = np.full(w.size, 1.0)
        for k, a in enumerate(chart.a):
            meas *= gegenbauer_mass(hi[:, k], a) - gegenbauer_mass(lo[:, k], a)
        meas *= hi[:, -1] - lo[:, -1]
        assert np.abs(meas - w).max() < 1e-14
        x, v = hypersphere_quadrature(d, 4, offset=0.0)
        assert np.abs(chart.points(node) - x).max() < 1e-15 and np.abs(w - v).max() < 1e-15
    for k in range(d - 1):
        clo, chi, cn, cw = chart.children(k, lo[:, k], hi[:, k], 3)
        one = hi[:, k] - lo[:, k] if d == 2 else _one_d(chart, k, lo, hi)
        assert np.abs(cw.reshape(-1, 3).sum(axis=1) - one).max() < 1e-13
        assert np.abs(clo.reshape(-1, 3)[:, 0] - lo[:, k]).max() < 1e-12
        assert np.abs(chi.reshape(-1, 3)[:, -1] - hi[:, k]).max() < 1e-12
        assert np.all((clo <= cn) & (cn <= chi))


def _one_d(chart, k, lo, hi):
    if k == chart.d - 2:
        return hi[:, k] - lo[:, k]
    a = chart.a[k]
    return gegenbauer_mass(hi[:, k], a) - gegenbauer_mass(lo[:, k], a)

"""Softmax attention (theory §1, §4): direct sum, Funk–Hecke eigenvalues, spectral velocity, energies."""

import math

import numpy as np
import pytest
from scipy import integrate

from meanfield.attention import (
    attention_eigenvalues,
    attention_energy,
    convolution_velocity,
    gap_energy,
    required_degree,
    softmax_attention,
    tangent_project,
)
from meanfield.harmonics import legendre_d, real_basis, real_to_alm, sphere_area, zonal


def _unit(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _naive(x, y, w, beta, Q, K, V):
    logits = beta * (x @ Q.T) @ (y @ K.T).T
    e = np.exp(logits) * w
    return (e @ (y @ V.T)) / e.sum(axis=1, keepdims=True)


def test_direct_sum_matches_naive_formula_blocked_weighted_general_qkv():
    rng = np.random.default_rng(0)
    x, y = _unit(rng, 37, 4), _unit(rng, 23, 4)
    Q, K, V = (rng.standard_normal((4, 4)) for _ in range(3))
    w = rng.random(23)
    ref = _naive(x, y, w, 1.7, Q, K, V)
    for block in (1, 5, 512):
        got = softmax_attention(x, 1.7, y=y, weights=w, Q=Q, K=K, V=V, block=block)
        assert np.abs(got - ref).max() < 1e-13


def test_beta_zero_is_the_mean_and_large_beta_is_finite():
    rng = np.random.default_rng(1)
    x = _unit(rng, 50, 3)
    assert np.abs(softmax_attention(x, 0.0) - x.mean(0)).max() < 1e-15
    a = softmax_attention(x, 1e4)  # exp(1e4) overflows; the log-sum-exp shift must not
    assert np.all(np.isfinite(a))
    assert np.abs(a - x).max() < 1e-12  # each token attends to itself only


@pytest.mark.parametrize("d", [2, 3, 4, 5])
@pytest.mark.parametrize("beta", [0.3, 2.0, 15.0])
def test_eigenvalues_match_funk_hecke_integral(d, beta):
    lmax = 8
    lam = attention_eigenvalues(d, beta, lmax)
    area = sphere_area(d - 1) if d > 2 else 2.0
    for ell in range(lmax + 1):
        f = lambda th: math.exp(beta * (math.cos(th) - 1)) * legendre_d(d, ell, math.cos(th))[ell] * math.sin(th) ** (d - 2)
        ref = area * integrate.quad(f, 0, math.pi, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
        assert abs(lam[ell] - ref) < 1e-11 * max(1.0, abs(lam[0]))


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("beta", [0.5, 4.0, 10.0])
def test_spectral_velocity_matches_direct_sum(d, beta):
    rng = np.random.default_rng(2)
    # clustered cloud: the worst case for the degree bound
    centres = _unit(rng, 3, d)
    y = centres[rng.integers(0, 3, 300)] + 0.05 * rng.standard_normal((300, d))
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    x = _unit(rng, 60, d)
    tol = 1e-10
    L = required_degree(d, beta, tol)
    b = real_basis(d, L, y).mean(0)
    coeffs = real_to_alm(b, L) if d == 3 else b
    v, conv = convolution_velocity(coeffs, beta, x, d=d, lmax=L)
    ref = tangent_project(x, softmax_attention(x, beta, y=y))
    # truncation: tol (absolute, |v| <= 1). Round-off: the synthesis sums terms of size up to
    # S = Σ_l e^{-β}λ_l Z_l(1)(l+β)/β, so the velocity carries about ε S / conv(x), which is
    # large where conv is small (far from the clusters, conv >= e^{-2β})
    ls = np.arange(L + 1)
    S = np.sum(attention_eigenvalues(d, beta, L) * zonal(d, L, 1.0) * (ls + beta) / beta)
    bound = tol + 8 * np.finfo(float).eps * S / conv
    assert np.all(np.abs(v - ref).max(axis=1) <= bound)


def test_required_degree_grows_with_beta_and_meets_the_bound():
    degs = [required_degree(3, b, 1e-10) for b in (0.5, 1, 5, 10, 30)]
    assert degs == sorted(degs) and degs[0] >= 1
    # a looser tolerance needs a lower degree
    assert required_degree(3, 10.0, 1e-7) < degs[3]


def test_gap_energy_zero_iff_dirac_and_beta_limit():
    rng = np.random.default_rng(3)
    x = _unit(rng, 200, 3)
    dirac = np.tile(x[:1], (10, 1))
    assert gap_energy(dirac, 2.0) == pytest.approx(0.0, abs=1e-15)
    assert gap_energy(x, 2.0) > 0.1
    m = x.mean(0)
    assert gap_energy(x, 0.0) == pytest.approx(0.5 * (1 - m @ m), rel=1e-12)
    assert gap_energy(x, 1e-7) == pytest.approx(gap_energy(x, 0.0), rel=1e-6)
    # E^+ + E = e^β / 2β for a probability measure
    assert attention_energy(x, 2.0) + gap_energy(x, 2.0) == pytest.approx(math.exp(2.0) / 4.0, rel=1e-13)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda x: softmax_attention(x, float("inf")), "beta"),  # any finite β is valid, inf is not
        (lambda x: softmax_attention(x[:, :2], 1.0), "unit"),
        (lambda x: softmax_attention(np.full((3, 3), np.nan), 1.0), "NaN"),
        (lambda x: softmax_attention(x, 1.0, Q=np.eye(2)), "Q"),
        (lambda x: softmax_attention(x, 1.0, weights=-np.ones(len(x))), "weights"),
        (lambda x: softmax_attention(x[0], 1.0), "shape"),
        (lambda x: required_degree(3, 1.0, 0.0), "tol"),
    ],
)
def test_bad_attention_input(call, match):
    x = _unit(np.random.default_rng(4), 5, 3)
    with pytest.raises((ValueError, TypeError), match=match):
        call(x)

"""Covariance kernels (theory §2) and the Lyapunov exponent closed form (theory §5.4)."""

import math

import numpy as np
import pytest

from meanfield.harmonics import sphere_area, zonal
from meanfield.kernels import ActivationKernel, SpectralKernel, lyapunov_exponent, synchronises

T = np.linspace(-1.0, 1.0, 41)


def test_relu_defaults_kappa_and_derivative_at_one():
    k = ActivationKernel("relu")
    assert k.kappa(1.0) == pytest.approx(0.5, abs=1e-15)
    assert k.dkappa(1.0) == pytest.approx(0.5, abs=1e-15)
    # the quadrature route of kappa1 / dkappa1 is independent of the closed form
    assert k.kappa1 == pytest.approx(0.5, abs=1e-12)
    assert k.dkappa1 == pytest.approx(0.5, abs=1e-12)


@pytest.mark.parametrize("sigma_b", [0.0, 0.7])
def test_relu_closed_form_matches_mehler_series_within_reported_bound(sigma_b):
    k = ActivationKernel("relu", sigma_w=1.3, sigma_b=sigma_b, scale=0.8)
    err = np.abs(k.kappa(T) - k.kappa_hermite(T))
    # |κ - κ_N| <= σ² Σ_{n>N} q_n |r|^n <= hermite_error for all |r| <= 1
    assert err.max() <= k.hermite_error + 1e-13
    assert k.hermite_error < 1e-3


def test_relu_closed_form_matches_conditional_gaussian_integral():
    # independent route: condition on Z1; E[relu(a + bZ)] = a Φ(a/b) + b φ(a/b), then
    # one adaptive quadrature over Z1 (split at the kink)
    from scipy import integrate, stats

    k = ActivationKernel("relu", sigma_w=1.0, sigma_b=0.4)
    for t in (-0.9, -0.3, 0.2, 0.8):
        r = k._r(t)
        b = k.s * math.sqrt(1 - r * r)

        def f(z):
            a = k.s * r * z
            inner = a * stats.norm.cdf(a / b) + b * stats.norm.pdf(a / b)
            return max(k.s * z, 0.0) * inner * stats.norm.pdf(z)

        val = integrate.quad(f, 0.0, 40.0, epsabs=1e-14, epsrel=1e-13)[0]
        assert abs(val - k.kappa(t)) < 1e-11


@pytest.mark.parametrize("name", ["erf", "linear"])
def test_closed_forms_match_mehler_series(name):
    k = ActivationKernel(name, sigma_w=1.1, sigma_b=0.3)
    assert np.abs(k.kappa(T) - k.kappa_hermite(T)).max() <= k.hermite_error + 1e-12
    assert np.abs(k.dkappa(T[2:-2]) - k.dkappa_hermite(T[2:-2])).max() < 1e-9


def test_callable_activation_matches_named_one():
    named = ActivationKernel("tanh", sigma_b=0.2)
    anon = ActivationKernel(lambda u: np.tanh(u), sigma_b=0.2)
    assert np.abs(named.kappa(T) - anon.kappa(T)).max() < 1e-13
    # without a derivative κ'(1) comes from the series; tanh's series converges fast
    assert anon.dkappa1 == pytest.approx(named.dkappa1, abs=1e-9)


@pytest.mark.parametrize("name", ["relu", "tanh", "gelu", "erf", "linear"])
def test_dkappa_matches_finite_differences(name):
    k = ActivationKernel(name, sigma_b=0.3)
    t = np.linspace(-0.95, 0.95, 17)
    h = 1e-5
    fd = (k.kappa(t + h) - k.kappa(t - h)) / (2 * h)
    assert np.abs(fd - k.dkappa(t)).max() < 1e-7
    # κ'(1) by Gaussian integration by parts vs a one-sided difference of κ
    fd1 = (3 * k.kappa(1.0) - 4 * k.kappa(1 - h) + k.kappa(1 - 2 * h)) / (2 * h)
    # relu: κ has a (1-t)^{3/2} term at t = 1, so the one-sided difference is only O(h^{1/2}) ~ 3e-3·C
    assert k.dkappa1 == pytest.approx(fd1, abs=1e-3 if name == "relu" else 1e-8)


@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("name", ["relu", "tanh", "gelu", "erf"])
def test_funk_hecke_coefficients_reconstruct_kappa(name, d):
    k = ActivationKernel(name, sigma_b=0.2)
    lmax = 256 if name == "relu" else 64
    hc = k.harmonic_coefficients(d, lmax)
    assert np.all(hc.a >= 0)
    z1 = zonal(d, lmax, 1.0)
    # Σ a_l Z_l(1) = κ(1) up to the tail beyond lmax, which for |t| <= 1 also bounds the
    # reconstruction error (|Z_l(t)| <= Z_l(1), a_l >= 0), plus the quadrature error
    budget = hc.truncation + hc.quadrature_error * z1.sum() + 1e-12
    assert abs(hc.a @ z1 - k.kappa1) <= budget
    recon = hc.a @ zonal(d, lmax, T)
    assert np.abs(recon - k.kappa(T)).max() <= budget
    if name == "relu":
        assert hc.truncation < 1e-5  # the relu tail decays like lmax^-2
    else:
        assert hc.truncation < 1e-9


@pytest.mark.parametrize("d", [2, 3, 4, 5])
def test_linear_kernel_has_only_degree_one(d):
    hc = ActivationKernel("linear").harmonic_coefficients(d, 6)
    expected = np.zeros(7)
    expected[1] = sphere_area(d) / d  # a_1 Z_1(t) = t
    assert np.abs(hc.a - expected).max() < 1e-12


def test_relu_truncation_decays_like_a_power():
    k = ActivationKernel("relu")
    tails = [k.harmonic_coefficients(3, L).truncation for L in (16, 32, 64, 128)]
    slopes = np.diff(np.log(tails)) / math.log(2)
    # κ ~ (1-t)^{3/2} at t = 1 gives Legendre coefficients a_l ~ l^{-2·3/2-2} = l^-5, so the
    # tail Σ_{l>L} a_l (2l+1)/4π ~ L^-3; pre-asymptotic slopes approach -3 from above
    assert np.all(np.abs(slopes + 3.0) < 0.25)
    assert slopes[-1] < slopes[0]


def test_spectral_kernel_and_truncated():
    k = ActivationKernel("gelu")
    tk = k.truncated(3, 40)
    assert abs(tk.kappa1 - k.kappa1) < 1e-9
    assert np.abs(tk.kappa(T) - k.kappa(T)).max() < 1e-9
    assert np.abs(tk.dkappa(T[1:-1]) - k.dkappa(T[1:-1])).max() < 1e-6


def test_lyapunov_closed_form():
    relu = ActivationKernel("relu")
    assert lyapunov_exponent(relu, 3) == pytest.approx(-0.5, abs=1e-12)
    # ReLU: κ'(1)/κ(1) = 1 < (d-1)/(d-3), so it synchronises in every dimension
    assert all(synchronises(relu, d) for d in range(2, 40))
    tanh = ActivationKernel("tanh")
    ratio = tanh.dkappa1 / tanh.kappa1
    assert ratio > 1.0
    d_crit = (3 * ratio - 1) / (ratio - 1)  # (d-1)/(d-3) = ratio
    assert synchronises(tanh, int(math.floor(d_crit)))
    assert not synchronises(tanh, int(math.ceil(d_crit)) + 1)
    lin = ActivationKernel("linear")
    for d in (2, 3, 5, 8):
        assert lyapunov_exponent(lin, d) == pytest.approx(0.5 * ((d - 3) - (d - 1)), abs=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"activation": "softplus"}, "activation"),
        ({"activation": 3}, "activation"),
        ({"sigma_w": 0.0}, "sigma_w"),
        ({"sigma_b": -1.0}, "sigma_b"),
        ({"scale": float("nan")}, "scale"),
        ({"n_hermite": 0}, "n_hermite"),
    ],
)
def test_bad_kernel_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ActivationKernel(**kwargs)


def test_bad_evaluation_arguments():
    k = ActivationKernel("relu")
    with pytest.raises(ValueError, match="t must lie"):
        k.kappa(1.5)
    with pytest.raises(ValueError, match="NaN"):
        k.kappa(np.nan)
    with pytest.raises(ValueError, match="d must be >= 2"):
        k.harmonic_coefficients(1, 4)
    with pytest.raises(ValueError, match="non-negative"):
        SpectralKernel(3, [1.0, -0.1])

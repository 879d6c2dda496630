"""The exact two-point law: spectral self-convergence, mass, and three independent solvers agreeing."""

import math

import numpy as np
import pytest
from scipy import integrate

from meanfield.kernels import ActivationKernel
from meanfield.studies.depth import _two_point as tp
from tests._reference import two_point_moments

RELU = tp._Generator(ActivationKernel("relu"), 3, 1.0)
THETA = np.linspace(0.0, math.pi, 2001)


def _cdf_error(**kw):
    ref = tp._solve(RELU, math.pi / 2, 1.0, 96, 24, tp.CUT_SDS)
    args = {"n": 96, "M": 24, **kw}
    sol = tp._solve(RELU, math.pi / 2, 1.0, args["n"], args["M"], tp.CUT_SDS)
    return float(np.max(np.abs(tp._cdf(sol, THETA) - tp._cdf(ref, THETA))))


def test_cdf_converges_geometrically_in_the_nodes():
    """Spectral collocation: log10 of the CDF error falls linearly in n (measured 0.29 decades/node)."""
    n = np.array([12, 16, 20, 24, 32])
    err = np.array([_cdf_error(n=int(k)) for k in n])
    slope = np.polyfit(n, np.log10(err), 1)[0]
    assert slope < -0.2, (slope, err)
    assert err[-1] < 1e-8


def test_cdf_converges_geometrically_in_the_talbot_points():
    """Fixed Talbot rule: error about 10^(-0.6 M) (measured -0.66 decades per point)."""
    M = np.array([6, 8, 10, 12, 14])
    err = np.array([_cdf_error(M=int(k)) for k in M])
    slope = np.polyfit(M, np.log10(err), 1)[0]
    assert -0.8 < slope < -0.5, (slope, err)


@pytest.mark.parametrize("kw", [{}, {"d": 2}, {"d": 5, "beta": None}, {"beta": 4.0}, {"c0": 0.9},
                                {"activation": "gelu", "d": 4}, {"T": 0.05}])
def test_law_accuracy_mass_and_backward_agreement(kw):
    """Claimed accuracy 1e-8 or better; mass 1 and the Legendre moments of the independent
    backward-equation solver agree to the same level."""
    law = tp.two_point_law(**kw)
    assert law.accuracy < 1e-8, law.diagnostics
    assert abs(law.moments[0] - 1.0) < 1e-9
    assert law.diagnostics["backward_moments"] < 1e-8
    assert float(law.cdf(-1.0)) == 0.0 and float(law.cdf(1.0)) == pytest.approx(1.0, abs=1e-9)
    F = law.cdf(np.linspace(-1, 1, 501))
    assert np.all(np.diff(F) >= -1e-10)


def test_gelu_law_matches_the_c_variable_backward_solver():
    """Third method: the Kolmogorov backward equation in c (tests/_reference), spectral for the
    polynomial (Mehler-series) gelu kernel, gives the same E c_T and E c_T²."""
    kern = ActivationKernel("gelu")
    law = tp.two_point_law("gelu", d=3, beta=1.0, T=1.0)
    k1 = float(kern.scale**2 * kern.hermite_q.sum())
    ref = two_point_moments(kern.kappa_hermite, k1, 3, 1.0, 0.0, [1.0], n=128)[0]
    assert abs(law.mean - ref[0]) < 1e-9 and abs(law.second - ref[1]) < 1e-9


def test_w1_to_law_against_quadrature():
    """W_1 of a two-point sample: ∫ |F_n - F| by adaptive quadrature of the law's CDF."""
    law = tp.two_point_law()
    sample = np.array([0.2, 0.7])
    Fn = lambda c: np.searchsorted(sample, c, side="right") / 2
    ref = sum(integrate.quad(lambda c: abs(Fn(c) - float(law.cdf(c))), a, b, epsabs=1e-12, limit=200)[0]
              for a, b in ((-1, 0.2), (0.2, 0.7), (0.7, 1)))
    assert tp.w1_to_law(sample, law) == pytest.approx(ref, abs=1e-8)


def test_quantile_inverts_cdf_and_samples_follow_the_law():
    law = tp.two_point_law()
    u = np.array([0.01, 0.3, 0.5, 0.9, 0.999])
    assert np.allclose(law.cdf(law.quantile(u)), u, atol=1e-7)
    x = law.sample(40000, np.random.default_rng(0))
    assert abs(x.mean() - law.mean) < 4 * x.std() / math.sqrt(x.size)


def test_bad_inputs():
    with pytest.raises(ValueError, match="c0"):
        tp.two_point_law(c0=1.0)
    with pytest.raises(ValueError, match="odd activation"):
        tp.two_point_law("tanh")
    with pytest.raises(ValueError, match="n"):
        tp.two_point_law(n=8)

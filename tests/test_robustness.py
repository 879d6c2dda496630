"""Bad input is refused at the entry point with a message that names the parameter and the cause."""

import math
import time

import numpy as np
import pytest
from scipy import special

from meanfield import _validate
from meanfield._validate import as_bool, as_points, as_real_array, check_cost
from meanfield.attention import softmax_attention
from meanfield.attention_spectral import SpectralAttention
from meanfield.kernels import ActivationKernel, SpectralKernel, funk_hecke_cost, lyapunov_exponent, synchronises
from meanfield.noise import BrownianTree, NoisePath, RandomFeatureNoise, RotationNoise, noise_path_cost
from meanfield.particles import solve_particles
from meanfield.spde import Mixture, Uniform, VonMisesFisher, initial_condition_from_dict
from meanfield.spde._initial import check_resolved, minimum_lmax, required_degree_of
from meanfield.sphere import legendre_d, sphere_area
from meanfield.sphere._zonal import legendre_recurrence
from meanfield.transformer import Transformer

RELU = ActivationKernel("relu")
X3 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


# -- 1. activations that return NaN, inf or complex values ------------------------------------------


def _nan_beyond_5(u):
    u = np.asarray(u, dtype=float)
    return np.where(np.abs(u) > 5, np.nan, np.tanh(u))


def _inf_far_out(u):
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(u, dtype=float) ** 2)


def _complex_sqrt(u):
    return np.sqrt(np.asarray(u, dtype=complex))


def _log(u):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.asarray(u, dtype=float))


@pytest.mark.parametrize(
    "activation, exc, match",
    [
        (_nan_beyond_5, ValueError, r"activation '_nan_beyond_5' returned nan at u = "),
        (_inf_far_out, ValueError, r"activation '_inf_far_out' returned inf at u = "),
        (_log, ValueError, r"activation '_log' returned (nan|-inf) at u = "),
        (_complex_sqrt, TypeError, r"activation '_complex_sqrt' returned complex values"),
        (lambda u: 1.0, TypeError, "elementwise"),
        (lambda u: u[:3], TypeError, "elementwise"),
        (math.tanh, TypeError, "accept a NumPy array"),
        (lambda u: np.array(["a"] * np.size(u)), TypeError, "real numbers"),
    ],
)
def test_activation_returning_nan_inf_or_complex_is_refused_at_construction(activation, exc, match):
    with pytest.raises(exc, match=match):
        ActivationKernel(activation)


def test_activation_probe_uses_the_input_scale_and_the_derivative():
    # NaN only beyond |u| = 5: reached through s z with z <= 40, whatever sigma_w
    with pytest.raises(ValueError, match=r"s = sqrt\(sigma_w\^2 \+ sigma_b\^2\) = 0\.2"):
        ActivationKernel(_nan_beyond_5, sigma_w=0.2)
    with pytest.raises(ValueError, match="derivative '_nan_beyond_5' of activation 'tanh'"):
        ActivationKernel(np.tanh, derivative=_nan_beyond_5)
    with pytest.raises(TypeError, match="derivative must be a callable"):
        ActivationKernel(np.tanh, derivative=3.0)
    # a finite activation still works and gives finite κ(1), λ_1
    k = ActivationKernel(lambda u: np.tanh(u))
    assert math.isfinite(k.kappa1) and math.isfinite(lyapunov_exponent(k, 3))


# -- 2. one domain check for every kernel -------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel",
    [RELU, ActivationKernel("tanh"), SpectralKernel(3, [0.0, 4 * np.pi / 3]), RELU.truncated(2, 8)],
    ids=["relu", "tanh", "spectral", "truncated"],
)
@pytest.mark.parametrize("method", ["kappa", "dkappa"])
def test_every_kernel_refuses_t_outside_the_interval_with_the_same_message(kernel, method):
    f = getattr(kernel, method)
    for bad in (5.0, -1.1, [0.0, 2.0], 1.0 + 1e-9):
        with pytest.raises(ValueError, match=r"t must lie in \[-1, 1\] \(t = <x, y> for unit vectors\)"):
            f(bad)
    with pytest.raises(ValueError, match="NaN"):
        f(np.nan)
    with pytest.raises(TypeError, match="t must be real"):
        f(0.5 + 0.0j)
    # round-off beyond 1 is accepted and clipped
    assert np.isfinite(f(1.0 + 1e-13)) and float(f(1.0 + 1e-13)) == float(f(1.0))


# -- 3. lyapunov_exponent of an activation name --------------------------------------------------------


def test_lyapunov_exponent_accepts_an_activation_name_or_raises_type_error():
    assert lyapunov_exponent("relu", 3) == pytest.approx(lyapunov_exponent(RELU, 3), abs=0)
    assert synchronises("tanh", 3)
    for bad in (3, None, [0.5, 0.5]):
        with pytest.raises(TypeError, match="activation name .* meanfield.kernels.Kernel"):
            lyapunov_exponent(bad, 3)
    with pytest.raises(ValueError, match="activation must be one of"):
        lyapunov_exponent("softplus", 3)


# -- 4. noise shapes and horizons ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, exc, match",
    [
        ((0,), ValueError, r"shape\[0\] must be >= 1"),
        ((3, 0), ValueError, r"shape\[1\] must be >= 1"),
        ((), ValueError, "at least one entry"),
        (-2, ValueError, r"shape\[0\] must be >= 1"),
        ((2.5,), TypeError, r"shape\[0\] must be an integer"),
        ("ab", TypeError, r"shape\[0\] must be an integer"),
        (2.0, TypeError, "shape must be an int or a tuple"),
    ],
)
def test_brownian_tree_refuses_bad_shapes(shape, exc, match):
    with pytest.raises(exc, match=match):
        BrownianTree(shape)


@pytest.mark.parametrize("t_max", [math.nan, 0.0, -1.0, math.inf])
def test_brownian_tree_refuses_bad_t_max(t_max):
    with pytest.raises(ValueError, match="t_max"):
        BrownianTree((2,), t_max=t_max)


def test_random_feature_noise_t_max_is_validated():
    for bad in (math.nan, 0.0, -2.0, -math.inf):
        with pytest.raises(ValueError, match="t_max"):
            RandomFeatureNoise(RELU, 3, 8, t_max=bad)
    with pytest.raises(TypeError, match="t_max"):
        RandomFeatureNoise(RELU, 3, 8, t_max="1")
    assert RandomFeatureNoise(RELU, 3, 8).t_max == math.inf  # no horizon, as before
    assert RandomFeatureNoise(RELU, 3, 8, t_max=2).t_max == 2.0
    for bad in (math.nan, 0.0, math.inf):
        with pytest.raises(ValueError, match="t_max"):
            NoisePath(RELU, 3, 4, t_max=bad)
        with pytest.raises(ValueError, match="t_max"):
            RotationNoise(3, t_max=bad)


# -- 5. initial conditions from dicts ------------------------------------------------------------------


def test_initial_condition_dict_requires_kappa_and_refuses_unknown_keys():
    with pytest.raises(ValueError, match="needs the key\\(s\\) 'kappa'"):
        initial_condition_from_dict({"kind": "vmf", "mu": [0, 0, 1]}, 3)
    with pytest.raises(ValueError, match="unknown key\\(s\\) 'kapa'"):
        initial_condition_from_dict({"kind": "vmf", "kapa": 2.0, "kappa": 1.0}, 3)
    with pytest.raises(ValueError, match="needs the key\\(s\\) 'components'"):
        initial_condition_from_dict({"kind": "mixture", "weights": [1.0]}, 3)
    with pytest.raises(ValueError, match="unknown key\\(s\\) 'mu'"):
        initial_condition_from_dict({"kind": "uniform", "mu": [0, 0, 1]}, 3)
    with pytest.raises(ValueError, match="no 'kind'"):
        initial_condition_from_dict({"kappa": 2.0}, 3)
    with pytest.raises(ValueError, match="vmf 'kappa' must be >= 0"):
        initial_condition_from_dict({"kind": "vmf", "kappa": -1.0}, 3)
    with pytest.raises(ValueError, match="length d = 3"):
        initial_condition_from_dict({"kind": "vmf", "kappa": 1.0, "mu": [0, 1]}, 3)
    with pytest.raises(TypeError, match="must be a dict"):
        initial_condition_from_dict("vmf", 3)
    with pytest.raises(ValueError, match="d = 2 but the solver runs with d = 3"):
        initial_condition_from_dict({"kind": "uniform", "d": 2}, 3)
    # the dicts written by to_dict() are read back
    m = Mixture([VonMisesFisher([0, 0, 1], 3.0), Uniform(3)], [0.25, 0.75])
    back = initial_condition_from_dict(m.to_dict(), 3)
    assert back.to_dict() == m.to_dict()
    assert initial_condition_from_dict({"kind": "vmf", "kappa": 2.0}, 3).kappa == 2.0


# -- 6. boolean flags -----------------------------------------------------------------------------------


def test_as_bool_accepts_only_real_booleans():
    assert as_bool(True, "attention") is True
    assert as_bool(np.bool_(False), "attention") is False
    for bad in ("no", "False", 0, 1, 1.0, None, [], np.array([True])):
        with pytest.raises(TypeError, match="attention must be True or False"):
            as_bool(bad, "attention")


def test_boolean_flags_of_the_entry_points():
    with pytest.raises(TypeError, match="progress must be True or False"):
        solve_particles(X3, None, 1.0, 0.5, [0.0, 1.0], progress="no")
    with pytest.raises(TypeError, match="progress must be True or False"):
        Transformer(3, 2, 8, 1.0, 1.0).run(X3, seed=0, progress="no")
    with pytest.raises(TypeError, match="check must be True or False"):
        softmax_attention(X3, 1.0, check="no")
    with pytest.raises(TypeError, match="check must be True or False"):
        SpectralAttention(3, 1.0).velocity(X3, check="no")
    # attention=False is "off" and True is "auto" for the particle solver
    off = solve_particles(X3, None, 1.0, 0.5, [0.0, 1.0], attention=False)
    assert off.meta["attention"] == "off" and np.array_equal(off.x[-1], X3)
    on = solve_particles(X3, None, 1.0, 0.5, [0.0, 1.0], attention=np.bool_(True))
    assert not np.array_equal(on.x[-1], X3)


# -- 7. complex input -----------------------------------------------------------------------------------


def test_complex_input_is_refused_naming_the_parameter():
    xc = X3.astype(complex)
    cases = [
        (lambda: as_points(xc, "x0"), "x0 must be real"),
        (lambda: as_real_array([1 + 1j], "weights"), "weights must be real"),
        (lambda: solve_particles(xc, None, 1.0, 0.5, [0.0, 1.0]), "x0 must be real"),
        (lambda: solve_particles(X3, None, 1.0, 0.5, np.array([0.0, 1.0 + 0j])), "t_eval must be real"),
        (lambda: solve_particles(X3, None, 1.0, 0.5, [0.0, 1.0], Q=np.eye(3) * (1 + 0j), attention="direct"),
         "Q must be real"),
        (lambda: Transformer(3, 2, 8, 1.0, 1.0).run(xc), "x0 must be real"),
        (lambda: softmax_attention(X3, 1.0, weights=np.ones(3, complex)), "weights must be real"),
        (lambda: NoisePath(RELU, 3, 4).field(0.0, 0.5)(xc), "x must be real"),
        (lambda: RandomFeatureNoise(RELU, 3, 8).field(0.0, 0.5)(xc), "x must be real"),
        (lambda: RotationNoise(3).field(0.0, 0.5)(xc), "x must be real"),
        (lambda: SpectralKernel(3, [1.0 + 0j, 0.5]), "a must be real"),
        (lambda: VonMisesFisher([0, 0, 1j], 1.0), "mu must be real"),
        (lambda: Mixture([Uniform(3), Uniform(3)], np.array([0.5, 0.5], complex)), "weights must be real"),
        (lambda: VonMisesFisher([0, 0, 1], 1.0).density(xc), "x must be real"),
        (lambda: RELU.kappa(np.array([0.5 + 0j])), "t must be real"),
    ]
    for call, match in cases:
        with pytest.raises(TypeError, match=match):
            call()


# -- 8. sizes: the recurrence, and cost estimates that refuse what cannot finish ------------------------------


def _scipy_legendre_d(d, lmax, t):
    ls = np.arange(lmax + 1)[:, None]
    if d == 2:
        return special.eval_chebyt(ls, t)
    if d == 3:
        return special.eval_legendre(ls, t)
    a = (d - 2) / 2
    return special.eval_gegenbauer(ls, a, t) / special.eval_gegenbauer(ls, a, 1.0)


@pytest.mark.parametrize("d", [2, 3, 4, 8])
def test_legendre_recurrence_matches_scipy(d):
    t = np.linspace(-1.0, 1.0, 257)
    ref = _scipy_legendre_d(d, 200, t)
    assert np.abs(legendre_d(d, 200, t) - ref).max() < 1e-12
    assert np.array_equal(np.stack(list(legendre_recurrence(d, 200, t))), legendre_d(d, 200, t))
    assert legendre_d(d, 0, t).shape == (1, 257)


@pytest.mark.parametrize("d", [2, 3, 4, 8])
@pytest.mark.parametrize("name", ["relu", "erf", "tanh"])
def test_funk_hecke_recurrence_matches_the_matrix_quadrature(name, d):
    # the former route: the (lmax+1) x nodes matrix of scipy polynomials against the weighted kernel
    k = ActivationKernel(name, sigma_b=0.3)
    lmax, panels = 96, 96
    x, w = np.polynomial.legendre.leggauss(32)
    edges = np.linspace(0.0, math.pi, panels + 1)
    half = 0.5 * np.diff(edges)
    theta = (edges[:-1, None] + half[:, None] * (x[None, :] + 1.0)).ravel()
    weights = (half[:, None] * w[None, :]).ravel() * np.sin(theta) ** (d - 2)
    area = sphere_area(d - 1) if d > 2 else 2.0
    t = np.cos(theta)
    old = area * (_scipy_legendre_d(d, lmax, t) @ (weights * k.kappa(t)))
    new = k._funk_hecke(d, lmax, panels)
    scale = np.abs(old).max()
    assert np.abs(new - old).max() <= 1e-13 * scale
    big = np.abs(old) > 1e-3 * scale
    assert (np.abs(new - old)[big] / np.abs(old)[big]).max() <= 1e-12


def test_large_degrees_are_fast_now():
    start = time.perf_counter()
    hc = RELU.harmonic_coefficients(3, 512)
    assert time.perf_counter() - start < 20  # was about 20 s with the matrix of scipy polynomials
    assert hc.kept_fraction > 0.99999


@pytest.mark.parametrize(
    "call, what, parameter",
    [
        (lambda: NoisePath(RELU, 3, 4096), "NoisePath", "lmax = 4096"),
        (lambda: NoisePath(RELU, 3, 10**5), "NoisePath", "lmax = 100000"),
        (lambda: NoisePath(RELU, 2, 65536), "NoisePath", "lmax = 65536"),
        (lambda: RELU.harmonic_coefficients(3, 10**5), "harmonic_coefficients", "lmax = 100000"),
        (lambda: RELU.harmonic_coefficients(3, 1000, n_panels=10**6), "harmonic_coefficients",
         "lmax (with n_panels = 1000000) = 1000"),
        (lambda: RELU.harmonic_coefficients(3, 10, n_panels=10**8), "harmonic_coefficients", "n_panels = 100000000"),
        (lambda: BrownianTree((10**9,)), "BrownianTree", "shape = (1000000000,)"),
        (lambda: RandomFeatureNoise(RELU, 3, 10**12), "RandomFeatureNoise", "width = 1000000000000"),
        (lambda: RotationNoise(10**5), "RotationNoise", "d = 100000"),
        (lambda: Transformer(3, 4, None, 1.0, 1.0, lmax=4096), "Transformer", "lmax = 4096"),
        (lambda: Transformer(3, 4, 10**12, 1.0, 1.0), "Transformer", "width = 1000000000000"),
        (lambda: Transformer(3, 10**9, 8, 1.0, 1.0).run(X3), "Transformer.run", "(L + 1) * N * d"),
        (lambda: solve_particles(np.tile(X3, (400_000, 1)), None, 1.0, 0.5, 0.5 * np.arange(500), attention="off"),
         "solve_particles", "len(t_eval) * N * d"),
    ],
)
def test_oversized_requests_are_refused_up_front_with_the_estimate(call, what, parameter):
    start = time.perf_counter()
    with pytest.raises(ValueError) as info:
        call()
    assert time.perf_counter() - start < 30
    msg = str(info.value)
    assert msg.startswith(f"{what}: ") and parameter in msg
    assert ("estimated cost is about" in msg or "estimated memory is about" in msg) and "largest accepted" in msg


def test_cost_estimates_and_caps():
    # the cap of a NoisePath on S^2 lies between the measured sizes and 4096
    secs, mem = noise_path_cost(3, 1024)
    assert secs < _validate.COST_LIMIT_SECONDS and mem < _validate.COST_LIMIT_BYTES
    with pytest.raises(ValueError, match=r"the largest accepted lmax here is (2[0-9]{3})"):
        NoisePath(RELU, 3, 4000)
    assert funk_hecke_cost(1024) < 60 < funk_hecke_cost(10**5)
    check_cost("x", seconds=1.0, memory=1.0, parameter="n", value=1, largest=2)
    with pytest.raises(ValueError, match="x: n = 3 is too large.*the largest accepted n here is 2"):
        check_cost("x", seconds=1e9, memory=1.0, parameter="n", value=3, largest=2)


# -- 9. messages that point at the cause --------------------------------------------------------------------


def test_noise_path_lmax_errors_name_noise_path():
    with pytest.raises(ValueError, match="NoisePath lmax must be >= 0, got -2"):
        NoisePath(RELU, 3, -2)
    with pytest.raises(TypeError, match="NoisePath lmax must be an integer"):
        NoisePath(RELU, 3, 2.5)


def test_under_resolved_initial_condition_names_the_degree_it_needs():
    sharp = VonMisesFisher([0, 0, 1], 500.0)
    need = sharp.required_degree(1e-6)
    assert 64 < need < 256
    with pytest.raises(ValueError, match=f"under-resolved at lmax = 16.*use lmax >= {need}"):
        check_resolved(sharp, 16)
    assert check_resolved(sharp, need) == need
    # the closed form agrees with the quadrature of the density (callable route)
    assert required_degree_of(sharp.density, 3) == need
    with pytest.raises(ValueError, match=f"the callable density is under-resolved at lmax = 16.*use lmax >= {need}"):
        check_resolved(sharp.density, 16, d=3)
    # sharper densities need more degrees; the uniform density none; a mixture its sharpest component
    assert VonMisesFisher([0, 0, 1], 5.0).required_degree() < VonMisesFisher([0, 0, 1], 50.0).required_degree() < need
    assert Uniform(3).required_degree() == 0
    assert Mixture([sharp, Uniform(3)], [0.5, 0.5]).required_degree() == need
    assert VonMisesFisher([0, 1], 500.0).required_degree() == required_degree_of(VonMisesFisher([0, 1], 500.0).density, 2)


@pytest.mark.parametrize("kappa, d", [(500.0, 3), (50.0, 3), (200.0, 2)])
def test_minimum_lmax_is_where_the_solver_stops_refusing(kappa, d):
    from meanfield.spde import solve_spde

    v = VonMisesFisher([0.0, 0.0, 1.0] if d == 3 else [0.0, 1.0], kappa)
    m = minimum_lmax(v, 1e-4, neg_tol=1e-3)
    assert minimum_lmax(v.density, 1e-4, neg_tol=1e-3, d=d) == m
    with pytest.raises(ValueError, match=f"under-resolved at lmax = {m - 1}.*use lmax >= {m}"):
        check_resolved(v, m - 1, tail_tol=1e-4, neg_tol=1e-3)
    assert check_resolved(v, m, tail_tol=1e-4, neg_tol=1e-3) == m
    run = dict(beta=1.0, dt=1e-6, t_eval=[0.0, 1e-6], d=d, attention=False, tail_tol=1e-4, neg_tol=1e-3)
    # the solver refuses one degree lower at its entry point, naming the degree that works
    with pytest.raises(ValueError, match=f"use lmax >= {m}"):
        solve_spde(v, None, lmax=m - 1, **run)
    solve_spde(v, None, lmax=m, **run)


# -- 9. points: one pass for the norm and the finiteness checks ------------------------------------------------


def test_as_points_finiteness_rides_on_the_norm_check_and_copy_is_honoured():
    """A NaN or an infinity anywhere is named as such (not as a norm error), a finite row whose |x|² overflows
    is a norm error, and ``copy=False`` returns the caller's C-contiguous float64 array itself."""
    x = VonMisesFisher([0, 0, 1.0], 1.0).sample(50, seed=0)
    for bad in (np.nan, np.inf, -np.inf):
        for j in range(3):
            y = x.copy()
            y[17, j] = bad
            with pytest.raises(ValueError, match="x contains NaN or infinite values"):
                as_points(y, "x")
            with pytest.raises(ValueError, match="x contains NaN or infinite values"):
                SpectralAttention(3, 1.0).velocity(y)
    y = x.copy()
    y[3] = [1e200, 0.0, 0.0]  # finite, |x|² = inf
    with pytest.raises(ValueError, match="must be unit vectors"):
        as_points(y, "x")
    y = x.copy()
    y[5] *= 1.0 + 1e-6
    with pytest.raises(ValueError, match="must be unit vectors"):
        as_points(y, "x")
    got = as_points(x, "x")
    assert got is not x and np.array_equal(got, x)
    assert as_points(x, "x", copy=False) is x
    assert as_points(np.asfortranarray(x), "x", copy=False).flags.c_contiguous
    assert np.array_equal(as_points(x.astype(np.float32), "x", unit_tol=1e-6, copy=False), x.astype(np.float32))

"""Bad arguments of the geometry, transform, sampling and result-file entry points are refused
up front with a message naming the parameter (or file) and the allowed range."""

import numpy as np
import pytest

from meanfield._attention_transforms import empirical_coefficients
from meanfield._validate import MAX_STEPS, check_steps
from meanfield.attention import softmax_attention
from meanfield.harmonics import real_basis
from meanfield.kernels import ActivationKernel, funk_hecke_cost
from meanfield.noise import NoisePath
from meanfield.particles import NonFiniteError, step_grid
from meanfield.spde import CharacteristicsSolution, SPDESolution, Uniform, VonMisesFisher, solve_spde
from meanfield.sphere import (
    alm_to_real,
    cart_to_angles,
    circle_quadrature,
    gauss_legendre,
    harmonic_dimension,
    legendre_d,
    project,
    real_to_alm,
    sample_uniform,
    sphere_area,
    sphere_quadrature,
    zonal,
    zonal_derivative,
)
from meanfield.transformer import Transformer

RELU = ActivationKernel("relu")
X3 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
TOO_LARGE = r"is too large: the estimated memory is about .* the largest accepted"


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: project(np.zeros((2, 3))), r"project: z has a zero row \(row 0 of 2\)"),
        (lambda: project(np.array([[1.0, np.nan, 0.0]])), "project: z has a NaN or infinite entry"),
        (lambda: project(np.ones(3)), r"project: z must have shape \(N, d\)"),
        (lambda: cart_to_angles(np.ones((2, 4))), "cart_to_angles: x must have d = 2 or 3 columns"),
        (lambda: cart_to_angles(np.array([[np.inf, 0.0, 0.0]])), "x contains NaN or infinite values"),
        (lambda: sphere_area(0), "d must be"),
        (lambda: sample_uniform(-1, 3, np.random.default_rng(0)), "n must be"),
        (lambda: sample_uniform(10**12, 3, np.random.default_rng(0)), "sample_uniform: n = 10" + "0" * 11 + " " + TOO_LARGE),
        (lambda: gauss_legendre(10**10), "gauss_legendre: n = 10000000000 " + TOO_LARGE),
        (lambda: sphere_quadrature(10**6), "sphere_quadrature: n_lat = 1000000 " + TOO_LARGE),
        (lambda: circle_quadrature(10**10), "circle_quadrature: n = 10000000000 " + TOO_LARGE),
        (lambda: harmonic_dimension(3, 10**10), "harmonic_dimension: lmax = 10000000000 " + TOO_LARGE),
        (lambda: harmonic_dimension(1, 4), "d must be"),
        (lambda: legendre_d(3, 4, [1.5]), r"legendre_d: t must lie in \[-1, 1\]"),
        (lambda: zonal(3, 4, [np.nan]), "t contains NaN or infinite values"),
        (lambda: zonal_derivative(3, 10**6, np.zeros(10**4)), "zonal_derivative: lmax = 1000000 " + TOO_LARGE),
        (lambda: real_to_alm(np.zeros(5), 2), r"real_to_alm: b must have \(lmax \+ 1\)\^2 = 9 coefficients"),
        (lambda: real_to_alm(np.zeros(9), -1), "lmax must be"),
        (lambda: alm_to_real(np.zeros(5, complex), 2), r"alm_to_real: a must have .* = 6 coefficients"),
        (lambda: alm_to_real(np.full(6, np.nan + 0j), 2), "alm_to_real: a contains NaN or infinite values"),
        (lambda: funk_hecke_cost(-1), "lmax must be"),
        (lambda: funk_hecke_cost(8, n_panels=0), "n_panels must be"),
        (lambda: real_basis(3, 4, 2 * X3), "x must be unit vectors"),
        (lambda: real_basis(3, 200, np.tile(X3, (10**4, 1))), r"real_basis: N \(rows of x\) = 30000 " + TOO_LARGE),
        (lambda: empirical_coefficients(X3, 10**6), "empirical_coefficients: lmax = 1000000 " + TOO_LARGE),
        (lambda: softmax_attention(np.tile(X3, (10**5, 1)), 1.0, block=10**5),
         "softmax_attention: block = 100000 " + TOO_LARGE),
        (lambda: Uniform(3).sample(10**9), "sample: n = 1000000000 " + TOO_LARGE),
        (lambda: VonMisesFisher([0.0, 0.0, 1.0], 2.0).sample(0), "n must be"),
        (lambda: step_grid(0.0, 1e-9, [1.0]), "the step grid: dt = 1e-09 up to t = 1 needs 1e\\+09 steps"),
    ],
)
def test_bad_arguments_are_refused_naming_the_parameter(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_sample_uniform_needs_a_generator():
    with pytest.raises(TypeError, match="rng must be a numpy Generator"):
        sample_uniform(3, 3, 0)


def test_noise_field_refuses_points_off_the_sphere():
    noise = NoisePath(RELU, 3, 4, seed=0)
    dw = noise.field(0.0, 0.5)
    assert dw(X3).shape == (3, 3)
    with pytest.raises(ValueError, match=r"x must be unit vectors \(points of S\^2\): row 1 has \|x\|\^2 = 4"):
        dw(np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="x must be unit vectors"):
        dw(np.array([[np.nan, 0.0, 1.0]]))


def test_check_steps_names_dt_and_a_dt_that_works():
    check_steps("f", MAX_STEPS, 1e-7, 1.0)
    with pytest.raises(ValueError, match=r"f: dt = 1e-08 up to t = 1 needs 1e\+08 steps.*use dt >= 1e-07"):
        check_steps("f", 10**8, 1e-8, 1.0)


def test_solve_spde_refuses_too_many_steps_before_any_work():
    noise = NoisePath(RELU, 3, 4, seed=0, t_max=1.0)
    with pytest.raises(ValueError, match=r"solve_spde: dt = 1e-08 .* needs 1e\+08 steps"):
        solve_spde(Uniform(3), noise, 1.0, 4, 1e-8, [1.0])


def test_transformer_blow_up_is_still_a_non_finite_error_with_its_remedy():
    # a huge beta with a huge V overflows the attention: the layer's own error, not project()'s
    V = 1e308 * np.eye(3)
    tf = Transformer(3, 2, 8, 1.0, 1.0, V=V)
    with pytest.raises(NonFiniteError, match="non-finite tokens after layer 1 of 2"):
        with np.errstate(all="ignore"):
            tf.run(X3, seed=0)


@pytest.mark.parametrize("cls", [SPDESolution, CharacteristicsSolution])
def test_loading_a_foreign_or_missing_file_names_it(cls, tmp_path):
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, a=np.zeros(3))
    with pytest.raises(ValueError, match=rf"foreign.npz' is not a file written by {cls.__name__}.save \(KeyError"):
        cls.load(foreign)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="broken.npz' is not a file written by"):
        cls.load(broken)
    with pytest.raises(OSError):
        cls.load(tmp_path / "missing.npz")

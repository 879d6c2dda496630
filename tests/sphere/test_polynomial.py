"""The homogeneous-polynomial form of low-degree fields against the bases' own evaluations."""

import math

import numpy as np
import pytest

from meanfield.sphere import basis, harmonic_dimension
from meanfield.sphere._polynomial import HomogeneousForm, _Tables, homogeneous_exponents


def _unit(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("D", [0, 1, 2, 5])
def test_monomials_of_one_degree_number_the_harmonics_of_its_parity(d, D):
    exps, parent, var = homogeneous_exponents(d, D)
    assert len(exps) == math.comb(D + d - 1, d - 1)
    assert len(exps) == int(harmonic_dimension(d, D)[D % 2 :: 2].sum())  # N(d, D) + N(d, D - 2) + ...
    assert np.all(exps.sum(axis=1) == D) and len({tuple(e) for e in exps}) == len(exps)
    if D > 0:  # each monomial is its parent times x[var]
        lower = homogeneous_exponents(d, D - 1)[0]
        rebuilt = lower[parent].copy()
        rebuilt[np.arange(len(exps)), var] += 1
        assert np.array_equal(rebuilt, exps)


@pytest.mark.parametrize("d, L", [(2, 12), (3, 7), (5, 5), (6, 3)])
def test_monomial_tables_are_the_monomials(d, L):
    # The tables are built by products of contiguous row ranges of the degree below; every entry
    # must be the monomial prod_i u_i^e_i itself: k - 1 half-ulp roundings in the table, at most
    # k + d - 1 in the powers and product of the direct form, (2k + d - 2) / 2 <= 4k ulp here.
    u = _unit(np.random.default_rng(d), 300, d).T
    tables = _Tables(d, L)(u)
    for k in range(L + 1):
        exps = homogeneous_exponents(d, k)[0]
        direct = np.prod(u[None, :, :] ** exps[:, :, None], axis=1)
        assert np.allclose(tables[k], direct, rtol=4 * k * np.finfo(float).eps, atol=1e-300)


@pytest.mark.parametrize("d, lmax", [(2, 1), (2, 6), (3, 0), (3, 1), (3, 4), (3, 6), (4, 3), (4, 6), (5, 4), (6, 3)])
def test_values_equal_the_basis_matrix_and_gradients_the_transforms(d, lmax, monkeypatch):
    b = basis(d, lmax)
    form = HomogeneousForm.from_basis(b)
    assert form is not None and form.residual < 1e-13
    rng = np.random.default_rng(lmax + 10 * d)
    x = _unit(rng, 5000, d)  # more than two blocks
    c = rng.normal(size=(d, b.n_real))
    vals, grads = form.synth_rows(c, x)
    exact = c @ b.real_basis(x).T
    assert vals.shape == (d, 5000) and grads.shape == (d, 5000, d)
    # tolerances: largest errors measured over these cases are 1.1e-14 (values) and 4.4e-14
    # (gradients, against references at accuracy 1e-13) relative; the conversion is refused
    # above a residual of 1e-12
    assert np.abs(vals - exact).max() < 1e-13 * np.abs(exact).max()
    if lmax == 0:  # ducc0's gradient needs lmax >= 1; a constant has none
        assert np.all(grads == 0.0)
        return
    # the basis' own gradient (NUFFT on S^1, ducc0 on S^2 at accuracy 1e-13, Gegenbauer tables for d >= 4)
    monkeypatch.setitem(b.__dict__, "polynomial", None)
    ref_vals, ref_grads = b.synth_rows(b.from_real(c), x, grad=True, epsilon=1e-13)
    scale = max(np.abs(ref_grads).max(), 1.0)
    assert np.abs(grads - ref_grads).max() < 1e-12 * scale
    assert np.abs(np.einsum("knd,nd->kn", grads, x)).max() < 1e-13 * scale  # tangent


def test_degree_one_field_has_the_projected_constant_gradient():
    # Y_1 along e_a is sqrt(3 / 4π) x_a on S^2: its surface gradient is sqrt(3 / 4π) (e_a - x_a x)
    b = basis(3, 1)
    x = _unit(np.random.default_rng(0), 300, 3)
    B1 = b.real_basis(np.eye(3))  # (3 directions, 4 harmonics)
    c = np.linalg.solve(B1[:, 1:], np.eye(3) * math.sqrt(3 / (4 * math.pi))).T  # row a: values k δ_ab at e_b
    c = np.concatenate([np.zeros((3, 1)), c], axis=1)  # field a = sqrt(3/4π) x_a
    vals, grads = b.polynomial.synth_rows(c, x)
    k = math.sqrt(3 / (4 * math.pi))
    assert np.allclose(vals, k * x.T, atol=1e-15)
    expected = k * (np.eye(3)[:, None, :] - x.T[:, :, None] * x[None])
    assert np.allclose(grads, expected, atol=1e-15)


def test_directions_only_and_the_basis_policy():
    b = basis(3, 6)
    rng = np.random.default_rng(3)
    x = _unit(rng, 50, 3)
    c = rng.normal(size=(2, b.n_real))
    v1, g1 = b.polynomial.synth_rows(c, x)
    v2, g2 = b.polynomial.synth_rows(c, 3.5 * x)
    assert np.allclose(v1, v2, rtol=1e-14, atol=1e-14) and np.allclose(g1, g2, rtol=1e-14, atol=1e-14)
    # synth_rows takes the form up to the basis' degree, the transforms above
    assert basis(3, 6).polynomial is not None and basis(3, 7).polynomial is None
    assert basis(2, 6).polynomial is not None and basis(2, 7).polynomial is None
    assert basis(4, 10).polynomial is not None and basis(7, 6).polynomial is None  # 3906 harmonics
    # at a loose transform accuracy only the exact form gives the values to 1e-13
    vals, _ = b.synth_rows(b.from_real(c), x, grad=False, epsilon=1e-6)
    assert np.abs(vals - v1).max() < 1e-13 * np.abs(v1).max()
    # values alone at many points and a loose accuracy: the transforms (cheaper there); with
    # gradients, or at a tight accuracy, the form
    y = _unit(rng, 5000, 3)
    exact = b.polynomial.synth_rows(c, y)
    loose, _ = b.synth_rows(b.from_real(c), y, grad=False, epsilon=1e-6)
    tight, _ = b.synth_rows(b.from_real(c), y, grad=False, epsilon=1e-12)
    both = b.synth_rows(b.from_real(c), y, grad=True, epsilon=1e-6)
    scale = np.abs(exact[0]).max()
    assert 1e-10 * scale < np.abs(loose - exact[0]).max() < 1e-5 * scale
    assert np.abs(tight - exact[0]).max() < 1e-13 * scale
    assert np.abs(both[1] - exact[1]).max() < 1e-13 * np.abs(exact[1]).max()


def test_noise_field_uses_the_form_on_every_sphere_it_has(monkeypatch):
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath

    # the Gegenbauer tables are exact too, so agreement alone cannot tell which path ran: count calls
    calls = []
    synth = HomogeneousForm.synth_rows
    monkeypatch.setattr(HomogeneousForm, "synth_rows", lambda self, *a, **k: calls.append(self.d) or synth(self, *a, **k))
    for d in (3, 4):
        noise = NoisePath(ActivationKernel("relu"), d=d, lmax=4, seed=1, t_max=1.0)
        f = noise.field(0.0, 0.5)
        x = _unit(np.random.default_rng(d), 3000, d)
        exact = noise.basis.real_basis(x) @ f.coeffs.T
        assert np.abs(f(x) - exact).max() < 1e-13 * np.abs(exact).max()
    assert calls == [3, 4]

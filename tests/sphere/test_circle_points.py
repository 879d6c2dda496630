"""Point transforms of the S^1 Fourier basis: the power sums and the NUFFT against the cos/sin basis matrix."""

import numpy as np
import pytest

from meanfield.sphere import basis
from meanfield.sphere import _circle
from meanfield.sphere._circle import fourier_basis

EPS = np.finfo(float).eps


def _points(rng, n):
    th = rng.uniform(0, 2 * np.pi, n)
    r = rng.uniform(0.5, 2.0, n)  # read as directions
    x = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
    x[:2] = [[1.0, 0.0], [0.0, -3.0]]
    return x


@pytest.mark.parametrize("L,n", [(0, 50), (3, 7), (16, 5000), (16, 70_000), (40, 300), (40, 3000)])
def test_point_transforms_match_the_basis_matrix(L, n):
    """evaluate, adjoint(_rows), synth_rows and hessian_at against sums over fourier_basis (cos kθ and
    sin kθ from the angle), on both routes: power sums up to degree 16 at any N and for small work
    (several blocks of powers at 70000 points), the NUFFT at degree 40 from 2^14 work."""
    rng = np.random.default_rng(L * 1000 + n)
    b = basis(2, L)
    x = _points(rng, n)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    nufft = b._nufft(n)
    assert nufft == (L > _circle._POWER_MAX_LMAX and n * (2 * L + 1) >= _circle._NUFFT_MIN_WORK)
    # the power sums are exact to round-off (measured: values <= 1.8 u Σ|c|, adjoints <= 0.3 u Σ|v|,
    # gradients and Hessians <= 1.5 u (L + 1)^j Σ|c|, L = 3-16), the NUFFT to its accuracy (1e-12)
    tol = 1e-11 if nufft else 8 * EPS
    F = fourier_basis(L, u)
    C = rng.normal(size=(3, 2 * L + 1))
    vals, grads = b.synth_rows(C, x)
    assert np.abs(vals - C @ F.T).max() <= tol * np.abs(C).sum()
    e = np.stack([-u[:, 1], u[:, 0]], axis=1)
    dC = np.stack([_circle.ddtheta(c, L) for c in C])
    assert np.abs(grads - (dC @ F.T)[:, :, None] * e[None]).max() <= (L + 1) * tol * np.abs(C).sum()
    assert np.abs(b.evaluate(C[0], x) - F @ C[0]).max() <= tol * np.abs(C[0]).sum()
    v = rng.normal(size=(2, n))
    ref = v @ F
    assert np.abs(b.adjoint_rows(v, x) - ref).max() <= tol * np.abs(v).sum()
    assert np.abs(b.adjoint(v[0], x) - ref[0]).max() <= tol * np.abs(v[0]).sum()
    f, g, H = b.hessian_at(C[1], x)
    f2 = F @ (-(b.ell.astype(float) ** 2) * C[1])
    assert np.abs(f - F @ C[1]).max() <= tol * np.abs(C[1]).sum()
    assert np.abs(H - f2[:, None, None] * e[:, :, None] * e[:, None, :]).max() <= (L + 1) ** 2 * tol * np.abs(C[1]).sum()

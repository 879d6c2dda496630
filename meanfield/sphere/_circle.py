"""The Fourier basis of S^1 (d = 2) and its equispaced quadrature grid."""

from __future__ import annotations

import math

import numpy as np

from .basis import Basis, Grid, register_basis
from ._quadrature import circle_quadrature

__all__ = ["CircleBasis", "CircleGrid"]

#: Elements of the dense basis blocks formed at once by point transforms.
_BLOCK_ELEMENTS = 2**22


def fourier_basis(lmax: int, x: np.ndarray) -> np.ndarray:
    """``[1/sqrt(2π), cos kθ/sqrt(π), sin kθ/sqrt(π)]_{k <= lmax}`` at unit vectors x (N, 2), shape (N, 2 lmax + 1)."""
    theta = np.arctan2(x[:, 1], x[:, 0])
    k = np.arange(1, lmax + 1)
    out = np.empty((x.shape[0], 2 * lmax + 1))
    out[:, 0] = 1.0 / math.sqrt(2 * math.pi)
    out[:, 1::2] = np.cos(np.outer(theta, k)) / math.sqrt(math.pi)
    out[:, 2::2] = np.sin(np.outer(theta, k)) / math.sqrt(math.pi)
    return out


def ddtheta(c: np.ndarray, lmax: int) -> np.ndarray:
    """d/dθ on real Fourier coefficients: (cos kθ, sin kθ) parts (p, q) -> (k q, -k p)."""
    out = np.zeros_like(c)
    k = np.arange(1, lmax + 1)
    out[1::2] = k * c[2::2]
    out[2::2] = -k * c[1::2]
    return out


def _tangent(x: np.ndarray) -> np.ndarray:
    return np.stack([-x[:, 1], x[:, 0]], axis=1)


@register_basis(2)
class CircleBasis(Basis):
    """Real Fourier basis of degree <= lmax on S^1; the state is the real coefficient vector.

    Examples
    --------
    >>> from meanfield.sphere import basis
    >>> b = basis(2, 2)
    >>> b.n_state, b.ell.tolist()
    (5, [0, 1, 1, 2, 2])
    """

    max_lmax = 2**16

    @property
    def n_state(self) -> int:
        return 2 * self.lmax + 1

    n_real = n_state

    def _layout(self):
        ell = np.concatenate([[0], np.repeat(np.arange(1, self.lmax + 1), 2)])
        return ell, np.ones(ell.size)

    def real_degrees(self) -> np.ndarray:
        return self._layout()[0]

    def labels(self) -> np.ndarray:
        k = np.arange(1, self.lmax + 1)
        pairs = np.stack([np.repeat(k, 2), np.ravel(np.stack([k, -k], axis=1))], axis=1)
        return np.concatenate([np.zeros((1, 2), dtype=int), pairs.astype(int)])

    def resize(self, c: np.ndarray, lmax: int) -> np.ndarray:
        if lmax == self.lmax:
            return c.copy()
        out = np.zeros(2 * lmax + 1)
        n = min(c.size, out.size)
        out[:n] = c[:n]
        return out

    @classmethod
    def lmax_from_size(cls, size: int, dtype) -> int | None:
        return (size - 1) // 2 if size % 2 == 1 else None

    def to_real(self, c: np.ndarray) -> np.ndarray:
        return np.array(c, dtype=np.float64, copy=True)

    def from_real(self, b: np.ndarray) -> np.ndarray:
        return np.array(b, dtype=np.float64, copy=True)

    def real_basis(self, x: np.ndarray) -> np.ndarray:
        return fourier_basis(self.lmax, x)

    def dirac(self, x: np.ndarray) -> np.ndarray:
        return fourier_basis(self.lmax, x)

    def _blocks(self, n: int):
        block = max(1, _BLOCK_ELEMENTS // self.n_state)
        return range(0, n, block), block

    def evaluate(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        out = np.empty(x.shape[0])
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            out[s : s + block] = fourier_basis(self.lmax, x[s : s + block]) @ c
        return out

    def adjoint(self, values: np.ndarray, x: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n_state)
        starts, block = self._blocks(x.shape[0])
        for s in starts:
            out += values[s : s + block] @ fourier_basis(self.lmax, x[s : s + block])
        out[0] = values.sum() / math.sqrt(2 * math.pi)
        return out

    def gradient_at(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        return (fourier_basis(self.lmax, x) @ ddtheta(c, self.lmax))[:, None] * _tangent(x)

    def grid(self, n: int | None = None) -> "CircleGrid":
        return CircleGrid(self, n)

    def plot_values(self, c, nlat=None, nlon=None):
        n = nlon or max(256, 4 * self.lmax + 4)
        th = 2 * np.pi * np.arange(n) / n
        return th, self.evaluate(c, np.stack([np.cos(th), np.sin(th)], axis=1))


class CircleGrid(Grid):
    """M = 2 n equispaced nodes (θ_j = 2π j / M) with dense Fourier transforms."""

    def __init__(self, basis: CircleBasis, n: int | None = None):
        self.basis, self.lmax = basis, basis.lmax
        n1 = (3 * self.lmax) // 2 + 2 if n is None else n
        self.M = 2 * n1
        self.points, self.weights = circle_quadrature(self.M, offset=0.0)
        self.e_theta = _tangent(self.points)
        self.B = basis.real_basis(self.points)
        self._real: dict = {}

    def describe(self) -> dict:
        return {"nlat": None, "nphi": None, "M": self.M, "Q": self.Q}

    def synth(self, c):
        return self.B @ c

    def analysis(self, f):
        return self.B.T @ (self.weights * f)

    def frame(self):
        return [self.e_theta]

    def gradient(self, c):
        return [self.B @ ddtheta(c, self.lmax)]

    def divergence(self, comps):
        return ddtheta(self.analysis(comps[0]), self.lmax)

    def synth_real(self, coeffs, lmax):
        B = self._real.get(lmax)
        if B is None:
            B = self._real[lmax] = fourier_basis(lmax, self.points)
        return B @ coeffs.T

"""The Fourier basis of S^1 (d = 2) and its equispaced quadrature grid.

Grid transforms are real FFTs on the equispaced nodes (ducc0's, as the ring sums of the S^2
grids; the divergence and the drift's four fields take one FFT call each, their spectra formed
directly). Point transforms are sums over the powers z^k = e^{ikθ} of z = (x_1 + i x_2) / |x|
(exact to round-off, no angle and no trigonometric function: cos kθ = Re z^k, sin kθ = Im z^k,
one complex product per point and degree, then one matrix product for all fields) up to degree
:data:`_POWER_MAX_LMAX` at any number of points, and above it below :data:`_NUFFT_MIN_WORK`;
otherwise type-2/type-1 non-uniform FFTs (ducc0).
"""

from __future__ import annotations

import functools
import math

import ducc0
import numpy as np

from .._threads import one_blas_thread, point_threads
from .basis import Basis, Grid, deliver, register_basis, work_array
from ._geometry import row_norms
from ._quadrature import circle_quadrature

__all__ = ["CircleBasis", "CircleGrid"]

#: Powers z^k (complex) formed at once by the point transforms' power sums (1 MiB).
_POWER_ELEMENTS = 2**16

#: Work N·(2 lmax + 1) from which point transforms of degree above :data:`_POWER_MAX_LMAX` use
#: the NUFFT instead of the power sums.
_NUFFT_MIN_WORK = 2**14

#: Largest degree whose point transforms use the power sums at every N: both costs grow as N,
#: the power sums' also as lmax. Measured on 2 cores (medians of 100 calls, the NUFFT on the
#: threads of :func:`~meanfield.point_threads`), NUFFT / power sums for the Hessian (3 fields)
#: and the adjoint: 1.36-1.95 and 1.28-2.04 at lmax 6-12 for N = 10^3-3·10^4 (one Hessian call
#: at 0.91), 1.00-1.29 and 1.00-1.25 at 16 up to 10^5, 1.02-1.21 and 0.90-1.18 at 20, 0.92-1.14
#: and 0.77-1.10 at 24, and 0.26-0.83 at 30-64 from 4096 points (one Hessian call at 1.12).
_POWER_MAX_LMAX = 16


#: Accuracy requested from the S^1 NUFFTs (same as the S^2 point transforms).
_NUFFT_EPS = 1e-12


def _theta(x: np.ndarray) -> np.ndarray:
    return np.arctan2(x[:, 1], x[:, 0])


def _complex_coeffs(c: np.ndarray, lmax: int) -> np.ndarray:
    """Real state -> C_k, k = -lmax..lmax, with f(θ) = Σ C_k e^{ikθ}."""
    out = np.empty(2 * lmax + 1, dtype=np.complex128)
    out[lmax] = c[0] / math.sqrt(2 * math.pi)
    pos = (c[1::2] - 1j * c[2::2]) / (2 * math.sqrt(math.pi))
    out[lmax + 1 :] = pos
    out[:lmax] = np.conj(pos[::-1])
    return out


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


def circle_powers(z: np.ndarray, L: int, out: np.ndarray) -> np.ndarray:
    """Rows z^1..z^L (L, B) of unit complex numbers z (B,), written into ``out[:L, :B]`` (complex).

    One vectorised product per degree (no angle, no trigonometric function): the power sums of
    the point transforms below and of the S^1 attention's exact path share it.
    """
    P = out[:L, : z.shape[0]]
    if L:
        P[0] = z
        for k in range(1, L):
            np.multiply(P[k - 1], z, out=P[k])
    return P


def _tangent(x: np.ndarray) -> np.ndarray:
    """Unit tangents e_θ = (-sin θ, cos θ) at the directions of x (N, 2): the point transforms read
    directions only (:attr:`CircleBasis.directions_only`), so gradients must not scale with |x|."""
    e = np.stack([-x[:, 1], x[:, 0]], axis=1)
    e /= row_norms(e)[:, None]  # the numbers of the einsum form for two entries, twice as fast
    return e


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
    directions_only = True  # every point transform reads θ = atan2(x_2, x_1)
    # 2 fields at 4096 points, values and gradients: 0.35 against 1.02 ms (NUFFT) at degree 6,
    # 0.50 against 0.70 ms at 12 but values alone slower there (0.44 against 0.32 ms); beyond
    # about degree 20 the conversion is no longer accurate to 1e-12
    polynomial_max_lmax = 6

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

    def _nufft(self, n: int) -> bool:
        return self.lmax > _POWER_MAX_LMAX and n * self.n_state >= _NUFFT_MIN_WORK

    def _power_blocks(self, x: np.ndarray):
        """(s, e, P) over blocks of the points: P (lmax, e - s) complex, row k - 1 = z^k at x[s:e]."""
        L, n = self.lmax, x.shape[0]
        block = max(1, _POWER_ELEMENTS // max(L, 1))
        P = np.empty((L, min(block, n)), dtype=np.complex128)
        z = np.empty(min(block, n), dtype=np.complex128)
        for s in range(0, n, block):
            e = min(n, s + block)
            zb = z[: e - s]
            zb.real, zb.imag = x[s:e, 0], x[s:e, 1]
            zb /= np.abs(zb)  # the direction: |z| = 1 to round-off, which powers would amplify
            yield s, e, circle_powers(zb, L, P)

    def _power_rows(self, rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Values (K, N) of K real-coefficient fields (K, 2 lmax + 1) at x by the power sums:
        f = c_0 / sqrt(2π) + Re Σ_k (c_{2k-1} - i c_{2k}) z^k / sqrt(π)."""
        rows = np.atleast_2d(rows)
        A = (rows[:, 1::2] - 1j * rows[:, 2::2]) / math.sqrt(math.pi)
        c0 = rows[:, :1] / math.sqrt(2 * math.pi)
        out = np.empty((rows.shape[0], x.shape[0]))
        with one_blas_thread():  # small products: a woken BLAS pool would cost more than them
            for s, e, P in self._power_blocks(x):
                np.add((A @ P).real, c0, out=out[:, s:e])
        return out

    def _power_adjoint_rows(self, values: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Σ_q v_q φ_i(x_q) for each row of ``values`` (K, N): shape (K, 2 lmax + 1)."""
        values = np.atleast_2d(values)
        S = np.zeros((values.shape[0], self.lmax), dtype=np.complex128)  # Σ_q v_q z_q^k
        with one_blas_thread():
            for s, e, P in self._power_blocks(x):
                S += values[:, s:e] @ P.T
        out = np.empty((values.shape[0], self.n_state))
        out[:, 0] = values.sum(axis=1) / math.sqrt(2 * math.pi)
        out[:, 1::2] = S.real / math.sqrt(math.pi)
        out[:, 2::2] = S.imag / math.sqrt(math.pi)
        return out

    def _u2nu(self, C: np.ndarray, x: np.ndarray, epsilon) -> np.ndarray:
        out = np.empty(x.shape[0], dtype=np.complex128)
        ducc0.nufft.u2nu(grid=C, coord=_theta(x)[:, None], forward=False, epsilon=epsilon or _NUFFT_EPS,
                         nthreads=point_threads(x.shape[0]), out=out)
        return out

    def evaluate(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        if self._nufft(x.shape[0]):
            return self._u2nu(_complex_coeffs(c, self.lmax), x, epsilon).real
        return self._power_rows(c, x)[0]

    def adjoint(self, values: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        if self._nufft(x.shape[0]):
            L = self.lmax
            ck = np.empty(2 * L + 1, dtype=np.complex128)  # Σ_q v_q e^{-ikθ_q}, k = -L..L
            ducc0.nufft.nu2u(points=values.astype(np.complex128), coord=_theta(x)[:, None], forward=True,
                             epsilon=epsilon or _NUFFT_EPS, nthreads=point_threads(x.shape[0]), out=ck)
            out = np.empty(self.n_state)
            pos = ck[L + 1 :]
            out[1::2] = pos.real / math.sqrt(math.pi)
            out[2::2] = -pos.imag / math.sqrt(math.pi)
            out[0] = values.sum() / math.sqrt(2 * math.pi)
            return out
        return self._power_adjoint_rows(values, x)[0]

    def adjoint_rows(self, values: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        values = np.atleast_2d(values)
        if self._nufft(x.shape[0]):
            return super().adjoint_rows(values, x, epsilon=epsilon)
        return self._power_adjoint_rows(values, x)  # the powers once for all rows

    def gradient_at(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None) -> np.ndarray:
        return self.evaluate(ddtheta(c, self.lmax), x, epsilon=epsilon)[:, None] * _tangent(x)

    def _u2nu_rows(self, rows: list, x: np.ndarray, epsilon) -> np.ndarray:
        """Values (K, N) of K real-coefficient fields at many points: one NUFFT with K transforms
        (its point work is shared; the same bits as K separate calls, measured)."""
        grid = np.stack([_complex_coeffs(r, self.lmax) for r in rows])
        out = ducc0.nufft.u2nu(grid=grid, coord=_theta(x)[:, None], forward=False, epsilon=epsilon or _NUFFT_EPS,
                               nthreads=point_threads(x.shape[0]))
        return out.real

    def _rows_at(self, rows: list, x: np.ndarray, epsilon) -> np.ndarray:
        """Values (K, N) of K real-coefficient fields: one NUFFT for all, or one power sum."""
        if self._nufft(x.shape[0]):
            return self._u2nu_rows(rows, x, epsilon)
        return self._power_rows(np.stack(rows), x)

    def synth_rows(self, coeffs, x, *, grad: bool = True, epsilon: float | None = None):
        if self.uses_polynomial(len(x), grad, epsilon):
            return super().synth_rows(coeffs, x, grad=grad, epsilon=epsilon)
        C = list(np.atleast_2d(coeffs))
        vals = self._rows_at(C + ([ddtheta(c, self.lmax) for c in C] if grad else []), x, epsilon)
        if not grad:
            return vals, None
        return vals[: len(C)], vals[len(C) :, :, None] * _tangent(x)[None]

    def hessian_at(self, c: np.ndarray, x: np.ndarray, *, epsilon: float | None = None):
        # on S^1 the covariant Hessian is f''(θ) e e^T, and f'' has coefficients -k^2 c
        e = _tangent(x)
        f2c = -(self.ell.astype(float) ** 2) * c
        f, f1, f2 = self._rows_at([c, ddtheta(c, self.lmax), f2c], x, epsilon)
        grad = f1[:, None] * e
        # component-major (memory (2, 2, N)), as the characteristics scheme's stacks of small matrices
        H = np.empty((2, 2, x.shape[0]))
        for i in range(2):
            fe = f2 * e[:, i]
            for j in range(2):
                np.multiply(fe, e[:, j], out=H[i, j])
        return f, grad, H.transpose(2, 0, 1)

    def grid(self, n: int | None = None) -> "CircleGrid":
        return CircleGrid(self, n)

    def plot_values(self, c, nlat=None, nlon=None):
        n = nlon or max(256, 4 * self.lmax + 4)
        th = 2 * np.pi * np.arange(n) / n
        return th, self.evaluate(c, np.stack([np.cos(th), np.sin(th)], axis=1))


@functools.lru_cache(maxsize=64)
def _spectrum_signs(lmax: int) -> np.ndarray:
    sgn = np.tile([1.0, -1.0], lmax) / (2 * math.sqrt(math.pi))
    sgn.flags.writeable = False
    return sgn


def _fill_spectrum(c: np.ndarray, lmax: int, F: np.ndarray) -> None:
    """Write the half spectrum (columns 0..lmax) of real-coefficient fields c (..., 2 lmax + 1) into F
    (..., >= lmax + 1), complex and C-contiguous, whose other entries are zero: f(θ) = Σ_{|k| <= lmax}
    F_k e^{ikθ}, F_{-k} = conj(F_k), F_k = (c_{2k-1} - i c_{2k}) / (2 sqrt(π)) for k >= 1."""
    F[..., 0] = c[..., 0] * (1.0 / math.sqrt(2 * math.pi))
    # (Re F_1, Im F_1, Re F_2, ...) are consecutive floats: one product with the signs (+, -, +, ...)
    np.multiply(c[..., 1 : 2 * lmax + 1], _spectrum_signs(lmax), out=F.view(np.float64)[..., 2 : 2 * lmax + 2])


def _irfft_synth(c: np.ndarray, lmax: int, M: int, out: np.ndarray | None = None) -> np.ndarray:
    """Values at θ_j = 2π j / M of real-coefficient fields c (..., 2 lmax + 1), lmax < M / 2: one inverse real FFT.

    ducc0's, as for the rings of the S^2 grids: at the grid sizes of the S^1 solvers a call costs
    about half NumPy's (a pair of 392 nodes 5.4-5.7 against 11.9 us, four inverse FFTs of 1540
    nodes 9.0 against 26.2 us, best of 2000 calls on one thread of 2 shared cores); the values
    agree with NumPy's to 1.3e-15 there. ``out``: a float64 (..., M) array to write into.
    """
    F = np.zeros(c.shape[:-1] + (M // 2 + 1,), dtype=np.complex128)
    _fill_spectrum(c, lmax, F)
    return ducc0.fft.c2r(F, axes=(F.ndim - 1,), lastsize=M, forward=False, inorm=0, out=out)


class CircleGrid(Grid):
    """M >= 2 n equispaced nodes (θ_j = 2π j / M, M even and a fast FFT length); synthesis and analysis by real FFTs."""

    def __init__(self, basis: CircleBasis, n: int | None = None):
        self.basis, self.lmax = basis, basis.lmax
        n1 = (3 * self.lmax) // 2 + 2 if n is None else n
        # an even number >= 2 n1 that is a fast FFT length (2 n1 often has a large prime factor)
        self.M = 2 * int(ducc0.fft.good_size(n1))
        self.points, self.weights = circle_quadrature(self.M, offset=0.0)
        self.e_theta = _tangent(self.points)
        # FFT transforms need the band |k| <= lmax strictly below the Nyquist mode M / 2
        self._fft = self.lmax < self.M // 2
        self._real: dict = {}
        # i k, k = 1..M/2: d/dθ of Σ F_k e^{ikθ} multiplies F_k by it
        self._ik = 1j * np.arange(1, self.M // 2 + 1)

    @functools.cached_property
    def B(self) -> np.ndarray:
        """Dense basis matrix at the nodes (Q, 2 lmax + 1); used only when the grid is coarser than the band."""
        return self.basis.real_basis(self.points)

    def describe(self) -> dict:
        return {"nlat": None, "nphi": None, "M": self.M, "Q": self.Q}

    def synth(self, c, *, out=None):
        if self._fft:
            return _irfft_synth(c, self.lmax, self.M, None if out is None else work_array(out, (self.Q,)))
        return deliver(self.B @ c, out, self.Q)

    def analysis(self, f):
        if not self._fft:
            return self.B.T @ (self.weights * f)
        R = ducc0.fft.r2c(np.asarray(f, dtype=np.float64), axes=(0,), forward=True, inorm=0)[: self.lmax + 1]
        s = (2 * math.pi / self.M) / math.sqrt(math.pi)
        out = np.empty(2 * self.lmax + 1)
        out[0] = R[0].real * (2 * math.pi / self.M) / math.sqrt(2 * math.pi)
        out[1::2] = R[1:].real * s
        out[2::2] = R[1:].imag * -s
        return out

    def frame(self):
        return [self.e_theta]

    def gradient(self, c):
        return [self.synth(ddtheta(c, self.lmax))]

    def divergence(self, comps, *, weighted=False):
        if not self._fft:
            f = comps[0] * (self.M / (2 * math.pi)) if weighted else comps[0]
            return ddtheta(self.analysis(f), self.lmax)
        # d/dθ of the analysis in one pass: with R_k = Σ_j u_j e^{-ikθ_j} the analysis has the real
        # coefficients (p_k, q_k) = s (Re R_k, -Im R_k), and d/dθ takes them to (k q_k, -k p_k) =
        # -k s (Im R_k, Re R_k); s holds the equal weights 2π/M, which ``weighted`` components carry
        L = self.lmax
        R = ducc0.fft.r2c(np.asarray(comps[0], dtype=np.float64), axes=(0,), forward=True, inorm=0)[1 : L + 1]
        s = (1.0 if weighted else 2 * math.pi / self.M) / math.sqrt(math.pi)
        ks = self._ik.imag[:L] * -s
        out = np.empty(2 * L + 1)
        out[0] = 0.0
        np.multiply(R.imag, ks, out=out[1::2])
        np.multiply(R.real, ks, out=out[2::2])
        return out

    def synth_grad_times(self, c, lmax, coeffs, lmax_f, alpha, *, radial=False, out=None, f_over_weights=None):
        # one inverse FFT call for f, f', F_x and F_y (zero-padded to a common degree)
        K = max(lmax, lmax_f)
        if coeffs.shape[0] != 2 or K >= self.M // 2:
            return super().synth_grad_times(c, lmax, coeffs, lmax_f, alpha, radial=radial, out=out,
                                            f_over_weights=f_over_weights)
        F = np.zeros((4, self.M // 2 + 1), dtype=np.complex128)
        _fill_spectrum(c, lmax, F[0])
        np.multiply(F[0, 1 : lmax + 1], self._ik[:lmax], out=F[1, 1 : lmax + 1])  # f' = Σ i k F_k e^{ikθ}
        _fill_spectrum(coeffs, lmax_f, F[2:])
        f, fp, Fx, Fy = ducc0.fft.c2r(F, axes=(1,), lastsize=self.M, forward=False, inorm=0)
        cos_t, sin_t = self.points[:, 0], self.points[:, 1]
        shape = (3 if radial else 2, self.M)  # f, then the rows of U
        out = np.empty(shape) if out is None else work_array(out, shape)
        out[0] = f
        f, U = out[0], out[1:]
        af = alpha * f
        np.multiply(Fy, cos_t, out=U[0])
        U[0] -= Fx * sin_t  # F·e_θ, e_θ = (-sin θ, cos θ)
        U[0] *= af
        U[0] += fp
        if radial:
            np.multiply(Fx, cos_t, out=U[1])
            U[1] += Fy * sin_t
            U[1] *= af
        if f_over_weights is not None:
            f *= self.M / (2 * math.pi * f_over_weights)  # equal weights 2π/M
        return f, U

    def synth_real(self, coeffs, lmax):
        if lmax < self.M // 2:
            return _irfft_synth(np.asarray(coeffs, dtype=np.float64), lmax, self.M).T
        B = self._real.get(lmax)
        if B is None:
            B = self._real[lmax] = fourier_basis(lmax, self.points)
        return B @ coeffs.T

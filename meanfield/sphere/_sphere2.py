"""Spherical harmonics on S^2 (d = 3): ducc0 transforms and the Gauss–Legendre grid."""

from __future__ import annotations

import functools
import math

import ducc0
import numpy as np

from .._threads import default_threads, grid_threads, is_deterministic, parallel_rows, point_threads, ring_fft_threads
from ._legendre import legendre_adjoint, legendre_synthesis, legs_from_deriv1
from ._points import S2Points, s2_points
from ._quadrature import gauss_legendre
from ._ring_fft import RingFFT
from ._ring_frame import FRAME_TABLE_MAX_BYTES, gl_ring_frame_table, table_bytes
from ._s2 import _complex_sh_cartesian, _real_to_alm, adjoint_at, alm_index, alm_to_real, n_alm, real_basis_s2, real_to_alm, synthesis_at
from ._s2_exact import low_degree_s2
from .basis import Basis, Grid, register_basis, work_array

__all__ = ["S2Basis", "S2Grid", "NUFFT_EPS"]

#: Accuracy requested from ducc0's non-uniform transforms (must exceed 2e-13).
NUFFT_EPS = 1e-12

#: Legendre work n_θ (lmax + 1)² below which the ring coefficients of a field are computed on one thread.
LEG_SERIAL_WORK = 1 << 20


#: Values alone (no gradients) of degree-6 fields: the polynomial form and ducc0 cost about the
#: same at accuracy 1e-12 (8.5 against 8.3 ms for 3 fields at 1e5 points) but ducc0 is 10-25 %
#: cheaper at 1e-7 beyond a few thousand points (0.66 against 0.52 ms at 4608, 8.5 against
#: 7.7 ms at 1e5); with gradients the form is 2-3x cheaper at every N.
_FORM_VALUES_MAX_POINTS = 4096
_FORM_VALUES_MAX_EPS = 1e-9

#: Largest degree whose Hessians (:meth:`S2Basis.hessian_at`) are formed by the exact low-degree
#: transforms (:meth:`~meanfield.sphere.LowDegreeS2.hessian`, nine polynomial quantities per
#: point) instead of four ducc0 syntheses (value and Laplacian, gradient, spin 2). Measured on 2
#: shared cores inside the characteristics step (S^2, attention at tol 1e-10, ducc0 at ε = 1e-11,
#: the Hessian's time per step, two alternating runs of 16-64 steps): L = 7 (β = 0.1) 1.20-1.28
#: against 1.63-1.64 ms at 4608 nodes, 3.96-4.61 against 7.24-7.45 ms at 3·10^4, 13.6-13.8
#: against 15.6-16.7 ms at 10^5; L = 8 (β = 0.3) the same at 4608 and 10^5 nodes, 1.7x faster at
#: 3·10^4; L = 10 and 12 slower at 4608 (1.49-1.70 against 1.41-1.42 ms; 1.71-2.31 against
#: 1.56-1.81 ms). Alone (best of 7) the exact Hessian measured faster up to L = 12, but its
#: products per point (9 (L + 1) rows) leave the cache inside a step. At ε = 1e-7, where ducc0 is
#: cheaper, L = 7 alone measured 1.07-1.5x faster for N = 10^3-10^5. The rule depends on the
#: degree alone, so neither the route nor the numbers depend on N, ε or the threads.
_HESS_EXACT_MAX_LMAX = 7

#: Values and surface gradients of fields above the polynomial form's degrees
#: (:meth:`S2Basis.synth_rows` with ``grad``) by the exact low-degree transforms
#: (:meth:`~meanfield.sphere.LowDegreeS2.synthesis`, four quantities per point) instead of ducc0's
#: two syntheses per field (values, then spin-1 gradients): up to degree ``_SYNTH_EXACT_MAX_LMAX``
#: at any N and ε; up to ``_SYNTH_EXACT_SMALL_N_LMAX`` for at most ``_SYNTH_EXACT_SMALL_N`` points;
#: up to ``_SYNTH_EXACT_FINE_LMAX`` there when ε <= ``_SYNTH_EXACT_FINE_EPS``. Measured on 2 shared
#: cores (one field, best of 3 x 4-100 calls), ducc0's time over the exact time for N = 10^3 /
#: 8128 / 32768 / 10^5 on two threads: degree 8 1.38 / 1.34 / 1.66 / 1.06 at ε = 1e-7 and 1.75 /
#: 1.80 / 2.39 / 1.39 at 1e-11; degree 10 1.19 / 1.18 / 1.26 / 0.86 at 1e-7, 1.51 / 1.67 / 1.78 /
#: 1.27 at 1e-11; degree 12 1.07 / 0.95 / 0.90 / 0.76 at 1e-7, 1.27 / 1.28 / 1.17 / 0.84 at 1e-9,
#: 1.31 / 1.40 / 1.34 / 0.88 at 1e-11; degree 13 at 1e-11 1.22 / 1.32 / 1.06 / 0.64. On one thread
#: (the deterministic mode of study workers) 1.2-2.6x at every N for degrees 8-12 and every ε, and
#: for three fields (noise) on two threads 1.00-3.32x at degrees 8-10 (the least at 10^5 points and
#: ε = 1e-7) and 1.14-1.92x at degree 12. Values alone stay with ducc0 (two threads: 0.65-0.96x at
#: degree 12 except at 32768 points, 0.83-1.16x there). The
#: exact route has no ε: its numbers are the fields' to round-off (relative to Σ abs(a_lm), 3e-16
#: at degree 10), those of ducc0's route within ε.
_SYNTH_EXACT_MAX_LMAX = 8
_SYNTH_EXACT_SMALL_N = 1 << 15
_SYNTH_EXACT_SMALL_N_LMAX = 10
_SYNTH_EXACT_FINE_LMAX = 12
_SYNTH_EXACT_FINE_EPS = 1e-8


@register_basis(3)
class S2Basis(Basis):
    """Spherical harmonics of degree <= lmax on S^2; the state is ducc0's complex alm (healpy packing).

    Examples
    --------
    >>> from meanfield.sphere import basis
    >>> b = basis(3, 1)
    >>> b.ell.tolist(), b.mult.tolist()
    ([0, 1, 1], [1.0, 1.0, 2.0])
    """

    max_lmax = 4096
    state_dtype = np.complex128
    fast_transforms = True
    directions_only = True  # ducc0 takes the angles of the points
    # Values and gradients of 3 fields at 4608 points: 0.63 against 1.97 ms (ducc0, eps 1e-12) at
    # degree 6, 1.0 against 1.95 ms at 8, 2.3 against 1.9 ms at 10 (2 shared cores); values
    # alone: see _FORM_VALUES_MAX_POINTS.
    polynomial_max_lmax = 6
    # Measured on a 2-core machine (three fields, best of 5 x 20): the matrix wins up to about
    # 2^15 entries (lmax 6: 0.14 against 0.22 ms at N = 256, 0.25 against 0.27 ms at 512) and
    # loses by 4-15x beyond (lmax 6: 1.3 against 0.34 ms at 1024; lmax 12: 2.3 against 0.32 ms
    # at 512), where its (N, n_alm) complex intermediates outgrow the cache.
    direct_max_entries = 2**15

    @property
    def n_state(self) -> int:
        return n_alm(self.lmax)

    @property
    def n_real(self) -> int:
        return (self.lmax + 1) ** 2

    def _layout(self):
        ell, m = self._lm()
        return ell, np.where(m > 0, 2.0, 1.0)

    def real_degrees(self) -> np.ndarray:
        return np.repeat(np.arange(self.lmax + 1), 2 * np.arange(self.lmax + 1) + 1)

    def labels(self) -> np.ndarray:
        l = self.real_degrees()
        m = np.arange(l.size) - l**2 - l
        return np.stack([l, m], axis=1)

    def resize(self, c: np.ndarray, lmax: int) -> np.ndarray:
        if lmax == self.lmax:
            return c.copy()
        out = np.zeros(n_alm(lmax), dtype=np.complex128)
        lm = min(self.lmax, lmax)
        for m in range(lm + 1):
            src = alm_index(self.lmax, np.arange(m, lm + 1), m)
            dst = alm_index(lmax, np.arange(m, lm + 1), m)
            out[dst] = c[src]
        return out

    @classmethod
    def lmax_from_size(cls, size: int, dtype) -> int | None:
        if np.iscomplexobj(np.empty(0, dtype=dtype)):
            lm = int(round((-3 + math.sqrt(1 + 8 * size)) / 2))
            return lm if n_alm(lm) == size else None
        lm = int(round(math.sqrt(size))) - 1
        return lm if (lm + 1) ** 2 == size else None

    def to_real(self, c):
        return alm_to_real(c, self.lmax)

    def from_real(self, b):
        return real_to_alm(b, self.lmax)

    def real_basis(self, x):
        return real_basis_s2(self.lmax, x)

    def uses_polynomial(self, n, grad, epsilon=None):
        return self.polynomial is not None and (grad or n <= _FORM_VALUES_MAX_POINTS
                                                or (epsilon or NUFFT_EPS) < _FORM_VALUES_MAX_EPS)

    def points(self, x):
        return s2_points(x)

    def dirac(self, x):
        y = _complex_sh_cartesian(self.lmax, x)
        ell, m = self._lm()
        return np.conj(y[ell, m]).T

    def _lm(self):
        lmax = self.lmax
        ell = np.concatenate([np.arange(m, lmax + 1) for m in range(lmax + 1)])
        m = np.concatenate([np.full(lmax + 1 - mm, mm) for mm in range(lmax + 1)])
        return ell, m

    def evaluate(self, c, x, *, epsilon=None):
        # x: unit vectors (N, 3) or their S2Points (angles shared with other transforms)
        loc = s2_points(x).loc
        return synthesis_at(c[None], self.lmax, loc, epsilon=epsilon or NUFFT_EPS,
                            nthreads=point_threads(loc.shape[0], self.lmax))[0]

    def exact_synthesis(self, n: int, grad: bool = True, epsilon: float | None = None) -> bool:
        """Whether :meth:`synth_rows` of n points takes the exact low-degree transforms
        (:class:`~meanfield.sphere.LowDegreeS2`) instead of ducc0's, for these ``grad`` and ``epsilon``.

        Values with surface gradients above the polynomial form's degrees (degree 7 and up): to
        degree 8 always, to degree 10 for at most 32768 points, to degree 12 there at ε <= 1e-8
        (where they measured faster; values alone stay with ducc0). The route depends on
        (degree, n, ε) only, not on the threads.

        Examples
        --------
        >>> from meanfield.sphere import basis
        >>> b = basis(3, 12)
        >>> b.exact_synthesis(8128, epsilon=1e-11), b.exact_synthesis(10**5, epsilon=1e-11)
        (True, False)
        >>> b.exact_synthesis(8128, grad=False, epsilon=1e-11), basis(3, 8).exact_synthesis(10**6)
        (False, True)
        """
        L = self.lmax
        if not grad or L <= self.polynomial_max_lmax:
            return False
        if L <= _SYNTH_EXACT_MAX_LMAX:
            return True
        eps = NUFFT_EPS if epsilon is None else epsilon
        return n <= _SYNTH_EXACT_SMALL_N and (L <= _SYNTH_EXACT_SMALL_N_LMAX
                                               or (L <= _SYNTH_EXACT_FINE_LMAX and eps <= _SYNTH_EXACT_FINE_EPS))

    def synth_rows(self, coeffs, x, *, grad=True, epsilon=None):
        xyz = x.x if isinstance(x, S2Points) else x
        if xyz is not None and self.uses_polynomial(len(xyz), grad, epsilon):
            return self.polynomial.synth_rows(self.to_real(np.atleast_2d(coeffs)), xyz, grad=grad)
        if xyz is not None and self.exact_synthesis(len(xyz), grad, epsilon):
            # unchecked like ducc0's route: its callers pass solver nodes or validated points
            return low_degree_s2(self.lmax).synthesis(np.atleast_2d(coeffs), xyz, grad=grad, check=False)
        # the values of the K fields in one call (inside deterministic() two fields share a transform)
        pts = s2_points(x)
        coeffs = np.ascontiguousarray(np.atleast_2d(coeffs))
        vals = synthesis_at(coeffs, self.lmax, pts.loc, epsilon=epsilon or NUFFT_EPS,
                            nthreads=point_threads(pts.loc.shape[0], self.lmax))
        if not grad:
            return vals, None
        return vals, np.stack([self.gradient_at(c, pts, epsilon=epsilon) for c in coeffs])

    def adjoint(self, values, x, *, epsilon=None):
        loc = s2_points(x).loc
        out = adjoint_at(values, self.lmax, loc, epsilon=epsilon or NUFFT_EPS,
                         nthreads=point_threads(loc.shape[0], self.lmax))
        out[0] = values.sum() / math.sqrt(4 * math.pi)
        return out

    def gradient_at(self, c, x, *, epsilon=None):
        pts = s2_points(x)
        gr = synthesis_at(c[None], self.lmax, pts.loc, spin=1, mode="DERIV1", epsilon=epsilon or NUFFT_EPS,
                          nthreads=point_threads(pts.loc.shape[0], self.lmax))
        return pts.tangent(gr[0], gr[1])

    @property
    def exact_hessian(self) -> bool:
        """Whether :meth:`hessian_at` takes the exact low-degree transforms (else ducc0's), by degree alone.

        Examples
        --------
        >>> from meanfield.sphere import basis
        >>> basis(3, 7).exact_hessian, basis(3, 12).exact_hessian
        (True, False)
        """
        return self.lmax <= _HESS_EXACT_MAX_LMAX

    def hessian_at(self, c, x, *, epsilon=None):
        xyz = x.x if isinstance(x, S2Points) else x
        if self.exact_hessian and xyz is not None:
            # unchecked like ducc0's route: the callers pass the nodes of a solver
            return low_degree_s2(self.lmax).hessian(c, xyz, check=False)
        # In the (e_θ, e_φ) frame the Hessian follows from the Laplacian (spin 0, -l(l+1) a_lm) and
        # one spin-2 synthesis of E = sqrt((l-1) l (l+1) (l+2)) a_lm, which gives Q = -(H_θθ - H_φφ),
        # U = -2 H_θφ (ducc0 conventions, checked against the derivative of the gradient).
        pts = s2_points(x)
        ell = self.ell.astype(float)
        kw = dict(epsilon=epsilon or NUFFT_EPS, nthreads=point_threads(pts.loc.shape[0], self.lmax))
        alm = np.ascontiguousarray(c[None])
        val, lap = synthesis_at(np.stack([c, -ell * (ell + 1) * c]), self.lmax, pts.loc, **kw)
        g = synthesis_at(alm, self.lmax, pts.loc, spin=1, mode="DERIV1", **kw)
        n = pts.loc.shape[0]
        if self.lmax >= 2:
            e2 = np.sqrt(np.maximum((ell - 1) * ell * (ell + 1) * (ell + 2), 0.0)) * c
            qu = synthesis_at(np.stack([e2, np.zeros_like(e2)]), self.lmax, pts.loc, spin=2, **kw)
        else:
            qu = np.zeros((2, n))
        et, ep = pts.frame()
        # H = E h E^T with E = [e_θ, e_φ] and h the 2 x 2 frame Hessian, entry by entry over (N,)
        # vectors into a component-major stack (memory (3, 3, N), logical shape (N, 3, 3)): every
        # entry is a contiguous vector, which the characteristics scheme's products of stacks
        # read; H is symmetric, so the entries below the diagonal are copies. In row blocks
        # (parallel_rows): the two dozen vector operations then stay in cache.
        H = np.empty((3, 3, n))
        grad = np.empty((n, 3))

        def rows(s: int, e: int) -> None:
            et_, ep_ = et[s:e], ep[s:e]
            htt, hpp, htp = 0.5 * (lap[s:e] - qu[0, s:e]), 0.5 * (lap[s:e] + qu[0, s:e]), -0.5 * qu[1, s:e]
            for i in range(3):
                a0 = htt * et_[:, i] + htp * ep_[:, i]
                a1 = htp * et_[:, i] + hpp * ep_[:, i]
                for j in range(i, 3):
                    h = H[i, j, s:e]
                    np.multiply(a0, et_[:, j], out=h)
                    h += a1 * ep_[:, j]
                    if j > i:
                        H[j, i, s:e] = h
            grad[s:e] = g[0, s:e, None] * et_ + g[1, s:e, None] * ep_

        parallel_rows(rows, n)
        return val, grad, H.transpose(2, 0, 1)

    def grid(self, n: int | None = None) -> "S2Grid":
        return S2Grid(self, n)

    def plot_values(self, c, nlat=None, nlon=None):
        nlat = nlat or max(65, 2 * self.lmax + 3)
        nlon = nlon or 2 * nlat
        theta = np.pi * np.arange(nlat) / (nlat - 1)
        if is_deterministic():  # the package's Legendre stage (meanfield.sphere._legendre), then ring sums
            leg = legendre_synthesis(np.ascontiguousarray(c, dtype=np.complex128)[None], self.lmax, theta, nthreads=1)
            vals = RingFFT(nlat, nlon).maps(leg)[0].reshape(nlat, nlon)
        else:
            vals = ducc0.sht.synthesis_2d(alm=c[None], spin=0, lmax=self.lmax, geometry="CC", ntheta=nlat,
                                          nphi=nlon, nthreads=default_threads())[0]
        return theta, 2 * np.pi * np.arange(nlon) / nlon, vals


def _gl_rings(nlat: int) -> tuple[np.ndarray, np.ndarray]:
    """Colatitudes (increasing) and Gauss–Legendre weights (sum 2) of ducc0's 'GL' rings."""
    _, wg = gauss_legendre(nlat)
    return np.asarray(ducc0.misc.GL_thetas(nlat), dtype=np.float64), wg[::-1].copy()


class S2Grid(Grid):
    """Gauss–Legendre rings (ducc0 'GL' order, colatitude increasing) × n_φ >= 2 n_θ longitudes.

    n_φ is the smallest fast FFT length >= 2 n_θ (``ducc0.fft.good_size``).

    ``points`` (Q, 3) and ``weights`` (Q,) are flattened ring-major, the layout of
    ``ducc0.sht.synthesis_2d`` maps.
    """

    def __init__(self, basis: S2Basis, n: int | None = None):
        self.basis, self.lmax = basis, basis.lmax
        self.nlat = (3 * self.lmax) // 2 + 2 if n is None else n
        # at least 2 n_θ longitudes (the φ rule is then as exact as the θ rule), rounded up to a
        # fast FFT length: 2 n_θ often has a large prime factor (n_θ = 194 gives 388 = 4·97), and
        # the ring FFTs then cost more than the Legendre part of a transform
        self.nphi = int(ducc0.fft.good_size(2 * self.nlat, True))
        theta, wg = _gl_rings(self.nlat)
        phi = 2 * np.pi * np.arange(self.nphi) / self.nphi
        self._theta, self._phi = theta, phi
        # nodes and frame from ring (θ) and meridian (φ) values: nlat + nphi trigonometric calls, not Q
        ct, st = np.cos(theta)[:, None], np.sin(theta)[:, None]
        cp, sp = np.cos(phi)[None, :], np.sin(phi)[None, :]
        shape = (self.nlat, self.nphi, 3)
        pts = np.empty(shape)
        pts[..., 0] = st * cp
        pts[..., 1] = st * sp
        pts[..., 2] = ct
        e_t = np.empty(shape)
        e_t[..., 0] = ct * cp
        e_t[..., 1] = ct * sp
        e_t[..., 2] = -st
        e_p = np.empty(shape)
        e_p[..., 0] = -sp
        e_p[..., 1] = cp
        e_p[..., 2] = 0.0
        self.points = pts.reshape(-1, 3)
        self.e_theta, self.e_phi = e_t.reshape(-1, 3), e_p.reshape(-1, 3)
        self.weights = np.repeat(wg * 2 * np.pi / self.nphi, self.nphi)
        ell = basis.ell
        self.sqrt_ll = np.sqrt(ell * (ell + 1.0))

    @property
    def nthreads(self) -> int:
        # asked at every transform, so that a grid built outside deterministic() obeys it inside
        return default_threads()

    def _threads(self, maps: int = 1) -> int:
        """Threads for a transform of ``maps`` maps on this grid (:func:`~meanfield._threads.grid_threads`)."""
        return grid_threads(maps * self.Q)

    def _fft_threads(self, maps: int = 1) -> int:
        """Threads for the ring FFT of ``maps`` maps on this grid (:func:`~meanfield._threads.ring_fft_threads`)."""
        return ring_fft_threads(maps * self.Q)

    @functools.cached_property
    def loc(self) -> np.ndarray:
        """(colatitude, longitude) of the nodes, shape (Q, 2)."""
        T, P = np.meshgrid(self._theta, self._phi, indexing="ij")
        return np.stack([T.ravel(), P.ravel()], axis=1)

    def describe(self) -> dict:
        return {"nlat": self.nlat, "nphi": self.nphi, "M": None, "Q": self.Q}

    @functools.cached_property
    def _ring(self) -> RingFFT:
        return RingFFT(self.nlat, self.nphi)

    def _synth(self, alm, spin, lmax, out=None):
        return ducc0.sht.synthesis_2d(alm=alm, spin=spin, lmax=lmax, geometry="GL", ntheta=self.nlat,
                                      nphi=self.nphi, nthreads=self._threads(1 + (spin > 0)), map=out)

    def synth(self, c, *, out=None):
        nt = self._threads()
        if nt > 1:  # ducc0's threaded synthesis is faster there (medians 365 against 466 us at lmax 128)
            if out is None:
                return self._synth(c[None], 0, self.lmax)[0].ravel()
            self._synth(c[None], 0, self.lmax, work_array(out, (self.Q,)).reshape(1, self.nlat, self.nphi))
            return out
        # one thread: ducc0's Legendre stage, then the ring sums as one batched FFT (RingFFT)
        spec = self._ring.spectrum(1)
        self._legs(c[None], self.lmax, spec[:, :, : self.lmax + 1], nthreads=nt)
        res = self._ring.maps_from_spectrum(spec, self.lmax, out=None if out is None else work_array(out, (self.Q,)),
                                            nthreads=nt)
        return res[0] if out is None else out

    def analysis(self, f):
        nt = self._threads()
        if nt > 1:
            return ducc0.sht.analysis_2d(map=f.reshape(1, self.nlat, self.nphi), spin=0, lmax=self.lmax,
                                         geometry="GL", nthreads=nt)[0]
        # Gauss–Legendre quadrature: the ring sums of f times the ring weights, then ducc0's Legendre stage
        leg = self._ring.legs(np.ascontiguousarray(f, dtype=np.float64).reshape(1, self.nlat, self.nphi), self.lmax,
                              nthreads=nt)
        leg *= self._ring_weights
        return legendre_adjoint(leg, self.lmax, self._theta, nthreads=nt)[0]

    def frame(self):
        return [self.e_theta, self.e_phi]

    def gradient(self, c):
        if self.lmax == 0:  # a constant (ducc0's spin-1 transforms need lmax >= 1)
            return [np.zeros(self.Q), np.zeros(self.Q)]
        # DERIV1: the gradient part only (no curl coefficients), sqrt(l(l+1)) applied by ducc0
        nt = self._threads(2)
        if nt > 1:
            g = ducc0.sht.synthesis_2d(alm=c[None], spin=1, lmax=self.lmax, geometry="GL", ntheta=self.nlat,
                                       nphi=self.nphi, nthreads=nt, mode="DERIV1")
            return [g[0].ravel(), g[1].ravel()]
        spec = self._ring.spectrum(2)
        ducc0.sht.experimental.alm2leg_deriv1(alm=c[None], lmax=self.lmax, theta=self._theta, nthreads=nt,
                                              leg=spec[:, :, : self.lmax + 1])
        g = self._ring.maps_from_spectrum(spec, self.lmax, nthreads=nt)
        return [g[0], g[1]]

    def divergence(self, comps, *, weighted=False):
        # div F = -sqrt(l(l+1)) E_lm with E_lm the spin-1 gradient coefficients of (F_θ, F_φ): on the
        # GL grid the analysis is the adjoint synthesis of the weighted map, and DERIV1 computes
        # sqrt(l(l+1)) E_lm alone (no curl part). Ring sums by one batched FFT (RingFFT), then
        # ducc0's Legendre stage: faster than adjoint_synthesis_2d on one thread (113 against 175 us
        # at lmax 64) and inside the exponential step on two (2.05 against 2.13 ms a step at lmax
        # 128, 6.59 against 7.02 ms at lmax 256)
        if self.lmax == 0:  # a divergence has no l = 0 part (ducc0's spin-1 transforms need lmax >= 1)
            return self.basis.zeros()
        if weighted and isinstance(comps, np.ndarray) and comps.shape == (2, self.Q) and comps.flags.c_contiguous:
            m = comps.reshape(2, self.nlat, self.nphi)  # the caller's buffer: no copy
        else:
            m = np.empty((2, self.nlat, self.nphi))
            for k in range(2):
                if weighted:
                    m[k] = comps[k].reshape(self.nlat, self.nphi)
                else:
                    np.multiply(comps[k].reshape(self.nlat, self.nphi), self._w2, out=m[k])
        nt = self._threads(2)
        leg = self._ring.legs(m, self.lmax, nthreads=self._fft_threads(2))
        e = ducc0.sht.experimental.leg2alm(leg=leg, lmax=self.lmax, theta=self._theta, spin=1, nthreads=nt,
                                           mode="DERIV1")[0]
        return np.negative(e, out=e)

    @functools.cached_property
    def _w2(self) -> np.ndarray:
        return self.weights.reshape(self.nlat, self.nphi)

    def _leg2map(self, leg: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return self._ring.maps(leg, out=out, nthreads=self._fft_threads(leg.shape[0]))

    def _leg_threads(self, lmax: int) -> int:
        # the Legendre part of a low-degree field is tiny (n_θ lmax² operations): threads cost more there
        return self.nthreads if self.nlat * (lmax + 1) ** 2 >= LEG_SERIAL_WORK else 1

    def _legs(self, alm: np.ndarray, lmax: int, out: np.ndarray, nthreads: int | None = None) -> np.ndarray:
        return legendre_synthesis(alm, lmax, self._theta, out=out,
                                  nthreads=self._leg_threads(lmax) if nthreads is None else nthreads)

    def _values_legs(self, alm, lmax, out, grad_legs=None):
        """Ring coefficients (n_θ, lmax + 1) of one field into ``out``; inside deterministic() from its
        gradient's (``grad_legs``, from ``alm2leg_deriv1``) when given: no spin-0 transform of its own."""
        if grad_legs is not None and lmax and is_deterministic():
            return legs_from_deriv1(alm, lmax, self._theta, grad_legs, out)
        return self._legs(alm, lmax, out[None])[0]

    def synth_grad(self, c, lmax, *, grad=True):
        # Legendre coefficients per ring at degree lmax (cheap when lmax is far below the grid's
        # degree), then one ring-FFT call for the value and both gradient components
        if lmax >= self.nlat or 2 * lmax >= self.nphi:
            return super().synth_grad(c, lmax, grad=grad)
        alm = np.ascontiguousarray(c, dtype=np.complex128)[None]
        leg = np.empty((3 if grad else 1, self.nlat, lmax + 1), dtype=np.complex128)
        if grad and lmax == 0:  # a constant (ducc0's spin-1 transforms need lmax >= 1)
            leg[1:] = 0.0
        elif grad:
            ducc0.sht.experimental.alm2leg_deriv1(alm=alm, lmax=lmax, theta=self._theta,
                                                  nthreads=self._leg_threads(lmax), leg=leg[1:])
        self._values_legs(alm, lmax, leg[0], leg[1:] if grad else None)
        m = self._leg2map(leg)
        return m[0], ([m[1], m[2]] if grad else None)

    def _real_legs(self, coeffs, lmax):
        coeffs = np.asarray(coeffs, dtype=np.float64)
        if coeffs.shape[-1] != (lmax + 1) ** 2:
            raise ValueError(f"real coefficients of degree {lmax} have (lmax + 1)^2 = {(lmax + 1) ** 2} entries, "
                             f"got shape {coeffs.shape}")
        alm = _real_to_alm(coeffs, lmax)  # the checks of real_to_alm cost more than the conversion here
        leg = np.empty((coeffs.shape[0], self.nlat, lmax + 1), dtype=np.complex128)
        for a in range(coeffs.shape[0]):
            self._legs(alm[a : a + 1], lmax, leg[a : a + 1])
        return leg

    def synth_real(self, coeffs, lmax):
        if lmax + 1 > self.nlat or 2 * lmax + 1 > self.nphi:
            return None
        return self._leg2map(self._real_legs(coeffs, lmax)).T

    def move(self, D, *, cartesian=False):
        if cartesian:
            return super().move(D, cartesian=True)
        # In the node's frame y = a x + b e_θ + c e_φ (a = 1 + r): its horizontal part is
        # (a sin θ + b cos θ) along (cos φ, sin φ) plus c along e_φ, and y_z = a cos θ - b sin θ, so
        # the new angles need two arctangents and no Cartesian vectors
        st, ct, phi = self._node_trig
        loc = np.empty((self.Q, 2))

        def rows(s, e):
            a, b, c = D[2, s:e] + 1.0, D[0, s:e], D[1, s:e]
            hor = a * st[s:e]
            hor += b * ct[s:e]
            z = a * ct[s:e]
            z -= b * st[s:e]
            lon = np.arctan2(c, hor)
            lon += phi[s:e]
            lon[lon < 0.0] += 2 * math.pi
            lon[lon >= 2 * math.pi] -= 2 * math.pi
            loc[s:e, 1] = lon
            # sqrt(hor² + c²), not np.hypot: 13 against about 2 ns a node here (NumPy's hypot is a
            # scalar libm call); the terms are O(1), so there is nothing to over- or underflow
            hor *= hor
            hor += c * c
            np.sqrt(hor, out=hor)
            loc[s:e, 0] = np.arctan2(hor, z)

        # split over two threads although one is faster for the move alone (0.91 against 1.14 ms at
        # lmax 128): on one, the push-forward step gained nothing and an exponential step run in the
        # same process measured 10 % slower (2.34-2.41 against 2.08-2.13 ms at lmax 128), probably
        # because the second core then idles between the threaded transforms
        parallel_rows(rows, self.Q)
        return S2Points.from_loc(loc)

    @functools.cached_property
    def _node_trig(self):
        """sin θ, cos θ and φ at every node (Q,)."""
        return (np.repeat(np.sin(self._theta), self.nphi), np.repeat(np.cos(self._theta), self.nphi),
                np.tile(self._phi, self.nlat))

    def _frame_legs(self, coeffs, lmax, radial=False):
        # a low-degree field (the noise of a step): its kept table, 4x cheaper than what follows
        if table_bytes(self.nlat, lmax, radial) <= FRAME_TABLE_MAX_BYTES:
            return gl_ring_frame_table(self.nlat, int(lmax), bool(radial))(coeffs)
        return self._frame_legs_ducc(coeffs, lmax, radial)

    def _frame_legs_ducc(self, coeffs, lmax, radial=False):
        # F = (F_x, F_y, F_z) of degree lmax; per ring (Legendre coefficients in φ):
        # F_θ = cos θ Re U - sin θ F_z, F_φ = Im U and F_r = sin θ Re U + cos θ F_z with
        # U = e^{-iφ} (F_x + i F_y), a shift of the φ-Fourier coefficients by one, so the frame
        # components need no ambient map (degree lmax + 1 in φ). Shape (2 or 3, nlat, lmax + 2).
        leg = self._real_legs(coeffs, lmax)
        M, K = lmax, lmax + 1
        # two-sided coefficients of Z = F_x + i F_y, k = -M..M at index k + M (a real field has
        # coefficient conj(leg_k) at -k); U_k = Z_{k+1} sits at index k + K of a row of length 2K + 1
        U = np.zeros((self.nlat, 2 * K + 1), dtype=np.complex128)
        U[:, M : 2 * M + 1] = leg[0] + 1j * leg[1]
        U[:, : M + 1] = (np.conj(leg[0]) + 1j * np.conj(leg[1]))[:, ::-1]
        up, um = U[:, K:], np.conj(U[:, K::-1])  # U_k and conj(U_{-k}), k = 0..K
        out = np.empty((3 if radial else 2, self.nlat, K + 1), dtype=np.complex128)
        re_u = 0.5 * (up + um)
        np.multiply(re_u, self._cos_theta, out=out[0])
        out[0, :, : M + 1] -= self._sin_theta * leg[2]
        out[1] = -0.5j * (up - um)
        if radial:
            np.multiply(re_u, self._sin_theta, out=out[2])
            out[2, :, : M + 1] += self._cos_theta * leg[2]
        return out

    def synth_real_frame(self, coeffs, lmax):
        if coeffs.shape[0] != 3 or lmax + 2 > self.nlat or 2 * lmax + 3 > self.nphi:
            return super().synth_real_frame(coeffs, lmax)
        m = self._leg2map(self._frame_legs(coeffs, lmax))
        return [m[0], m[1]]

    def synth_grad_times(self, c, lmax, coeffs, lmax_f, alpha, *, radial=False, out=None, f_over_weights=None):
        # Ring by ring, f and F are trigonometric polynomials of degree lmax and lmax_f + 1 in φ: their
        # product is formed exactly on short rings of P > 2 (lmax + lmax_f + 1) longitudes and taken
        # back to ring coefficients, then added to those of ∇_S f. The full grid then needs the maps
        # of f and of the 2 (3) rows of U only, instead of f, ∇_S f and F's components separately.
        K = lmax_f + 1
        mt = lmax + K
        if coeffs.shape[0] != 3 or lmax >= self.nlat or K + 1 > self.nlat or 2 * mt + 1 > self.nphi:
            return super().synth_grad_times(c, lmax, coeffs, lmax_f, alpha, radial=radial, out=out,
                                            f_over_weights=f_over_weights)
        alm = np.ascontiguousarray(c, dtype=np.complex128)[None]
        nt = self._leg_threads(lmax)
        legf = self._frame_legs(coeffs, lmax_f, radial)
        nf = legf.shape[0]
        # the short-ring inputs (F's frame rows, then f) in the short rings' spectrum
        short = self._short_ring(mt)
        both = short.spectrum(nf + 1)
        top = max(lmax, K)  # the columns beyond are the spectrum's own to zero (maps_from_spectrum)
        both[:nf, :, : K + 1] = legf
        both[:nf, :, K + 1 : top + 1] = 0.0
        legc = both[nf, :, : lmax + 1]
        both[nf, :, lmax + 1 : top + 1] = 0.0
        legg = np.empty((2, self.nlat, lmax + 1), dtype=np.complex128)
        if lmax:
            ducc0.sht.experimental.alm2leg_deriv1(alm=alm, lmax=lmax, theta=self._theta, nthreads=nt, leg=legg)
        else:  # a constant (ducc0's spin-1 transforms need lmax >= 1)
            legg[:] = 0.0
        self._values_legs(alm, lmax, legc, legg)
        m_short = short.maps_from_spectrum(both, top)  # a few rings' worth of work: one thread
        mf = m_short[:nf]
        mf *= m_short[nf] * (alpha / short.nphi)
        # the full-grid rows (f, then U) as ring coefficients in the grid's spectrum
        spec = self._ring.spectrum(1 + nf)
        spec[1:, :, : mt + 1] = short.legs(mf, mt)
        spec[1:3, :, : lmax + 1] += legg
        if f_over_weights is None:
            spec[0, :, : lmax + 1] = legc
        else:  # the weights are constant on each ring: divide f's ring coefficients
            np.multiply(legc, 1.0 / (f_over_weights * self._ring_weights), out=spec[0, :, : lmax + 1])
        spec[0, :, lmax + 1 : mt + 1] = 0.0
        m = self._ring.maps_from_spectrum(spec, mt, out=None if out is None else work_array(out, (1 + nf, self.Q)),
                                          nthreads=self._fft_threads(1 + nf))
        return m[0], m[1:]

    @functools.cached_property
    def _ring_weights(self) -> np.ndarray:
        """The quadrature weight of each ring's nodes, shape (nlat, 1)."""
        return self.weights[:: self.nphi, None].copy()

    def _short_ring(self, mt: int) -> RingFFT:
        """The ring sums of short rings of P > 2 mt + 1 longitudes (an FFT-friendly size), kept per
        degree (the same at every step)."""
        hit = self._short_cache.get(mt)
        if hit is None:
            hit = self._short_cache[mt] = RingFFT(self.nlat, int(ducc0.fft.good_size(2 * mt + 2, True)))
        return hit

    @functools.cached_property
    def _short_cache(self) -> dict:
        return {}

    @functools.cached_property
    def _cos_theta(self) -> np.ndarray:
        return np.cos(self._theta)[:, None]

    @functools.cached_property
    def _sin_theta(self) -> np.ndarray:
        return np.sin(self._theta)[:, None]

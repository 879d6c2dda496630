"""Spherical harmonics on S^2 (d = 3): ducc0 transforms and the Gauss–Legendre grid."""

from __future__ import annotations

import functools
import math

import ducc0
import numpy as np

from .._threads import default_threads
from ._points import s2_points
from ._quadrature import gauss_legendre
from ._s2 import _complex_sh_cartesian, alm_index, alm_to_real, n_alm, real_basis_s2, real_to_alm
from .basis import Basis, Grid, register_basis

__all__ = ["S2Basis", "S2Grid", "NUFFT_EPS"]

#: Accuracy requested from ducc0's non-uniform transforms (must exceed 2e-13).
NUFFT_EPS = 1e-12


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
        return ducc0.sht.synthesis_general(alm=c[None], spin=0, lmax=self.lmax, loc=s2_points(x).loc,
                                           epsilon=epsilon or NUFFT_EPS, nthreads=default_threads())[0]

    def adjoint(self, values, x, *, epsilon=None):
        out = ducc0.sht.experimental.adjoint_synthesis_general(
            map=values[None].astype(np.float64), spin=0, lmax=self.lmax, loc=s2_points(x).loc,
            epsilon=epsilon or NUFFT_EPS, nthreads=default_threads())[0]
        out[0] = values.sum() / math.sqrt(4 * math.pi)
        return out

    def gradient_at(self, c, x, *, epsilon=None):
        pts = s2_points(x)
        gr = ducc0.sht.synthesis_general(alm=c[None], spin=1, lmax=self.lmax, loc=pts.loc, epsilon=epsilon or NUFFT_EPS,
                                         nthreads=default_threads(), mode="DERIV1")
        return pts.tangent(gr[0], gr[1])

    def hessian_at(self, c, x, *, epsilon=None):
        # In the (e_θ, e_φ) frame the Hessian follows from the Laplacian (spin 0, -l(l+1) a_lm) and
        # one spin-2 synthesis of E = sqrt((l-1) l (l+1) (l+2)) a_lm, which gives Q = -(H_θθ - H_φφ),
        # U = -2 H_θφ (ducc0 conventions, checked against the derivative of the gradient).
        pts = s2_points(x)
        ell = self.ell.astype(float)
        kw = dict(lmax=self.lmax, loc=pts.loc, epsilon=epsilon or NUFFT_EPS, nthreads=default_threads())
        alm = np.ascontiguousarray(c[None])
        val = ducc0.sht.synthesis_general(alm=alm, spin=0, **kw)[0]
        g = ducc0.sht.synthesis_general(alm=alm, spin=1, mode="DERIV1", **kw)
        lap = ducc0.sht.synthesis_general(alm=(-ell * (ell + 1) * c)[None], spin=0, **kw)[0]
        n = pts.loc.shape[0]
        if self.lmax >= 2:
            e2 = np.sqrt(np.maximum((ell - 1) * ell * (ell + 1) * (ell + 2), 0.0)) * c
            qu = ducc0.sht.synthesis_general(alm=np.stack([e2, np.zeros_like(e2)]), spin=2, **kw)
        else:
            qu = np.zeros((2, n))
        one, zero = np.ones(n), np.zeros(n)
        et, ep = pts.tangent(one, zero), pts.tangent(zero, one)
        htt, hpp, htp = 0.5 * (lap - qu[0]), 0.5 * (lap + qu[0]), -0.5 * qu[1]
        # H = E h E^T with E = [e_θ, e_φ] and h the 2 x 2 frame Hessian
        eh0 = htt[:, None] * et + htp[:, None] * ep
        eh1 = htp[:, None] * et + hpp[:, None] * ep
        H = eh0[:, :, None] * et[:, None, :]
        H += eh1[:, :, None] * ep[:, None, :]
        return val, g[0][:, None] * et + g[1][:, None] * ep, H

    def grid(self, n: int | None = None) -> "S2Grid":
        return S2Grid(self, n)

    def plot_values(self, c, nlat=None, nlon=None):
        nlat = nlat or max(65, 2 * self.lmax + 3)
        nlon = nlon or 2 * nlat
        vals = ducc0.sht.synthesis_2d(alm=c[None], spin=0, lmax=self.lmax, geometry="CC", ntheta=nlat,
                                      nphi=nlon, nthreads=default_threads())[0]
        return np.pi * np.arange(nlat) / (nlat - 1), 2 * np.pi * np.arange(nlon) / nlon, vals


def _gl_rings(nlat: int) -> tuple[np.ndarray, np.ndarray]:
    """Colatitudes (increasing) and Gauss–Legendre weights (sum 2) of ducc0's 'GL' rings."""
    _, wg = gauss_legendre(nlat)
    return np.asarray(ducc0.misc.GL_thetas(nlat), dtype=np.float64), wg[::-1].copy()


class S2Grid(Grid):
    """Gauss–Legendre rings (ducc0 'GL' order, colatitude increasing) × n_φ = 2 n_θ longitudes.

    ``points`` (Q, 3) and ``weights`` (Q,) are flattened ring-major, the layout of
    ``ducc0.sht.synthesis_2d`` maps.
    """

    def __init__(self, basis: S2Basis, n: int | None = None):
        self.basis, self.lmax = basis, basis.lmax
        self.nlat = (3 * self.lmax) // 2 + 2 if n is None else n
        self.nphi = 2 * self.nlat
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

    @functools.cached_property
    def loc(self) -> np.ndarray:
        """(colatitude, longitude) of the nodes, shape (Q, 2)."""
        T, P = np.meshgrid(self._theta, self._phi, indexing="ij")
        return np.stack([T.ravel(), P.ravel()], axis=1)

    def describe(self) -> dict:
        return {"nlat": self.nlat, "nphi": self.nphi, "M": None, "Q": self.Q}

    def _synth(self, alm, spin, lmax):
        return ducc0.sht.synthesis_2d(alm=alm, spin=spin, lmax=lmax, geometry="GL", ntheta=self.nlat,
                                      nphi=self.nphi, nthreads=self.nthreads)

    def synth(self, c):
        return self._synth(c[None], 0, self.lmax)[0].ravel()

    def analysis(self, f):
        return ducc0.sht.analysis_2d(map=f.reshape(1, self.nlat, self.nphi), spin=0, lmax=self.lmax,
                                     geometry="GL", nthreads=self.nthreads)[0]

    def frame(self):
        return [self.e_theta, self.e_phi]

    def gradient(self, c):
        e = self.sqrt_ll * c
        g = self._synth(np.stack([e, np.zeros_like(e)]), 1, self.lmax)
        return [g[0].ravel(), g[1].ravel()]

    def divergence(self, comps):
        # spin-1 analysis of (F_θ, F_φ) gives E_lm, and div F = -sqrt(l(l+1)) E_lm
        m = np.stack([comps[0].reshape(self.nlat, self.nphi), comps[1].reshape(self.nlat, self.nphi)])
        eb = ducc0.sht.analysis_2d(map=m, spin=1, lmax=self.lmax, geometry="GL", nthreads=self.nthreads)
        return -self.sqrt_ll * eb[0]

    def synth_real(self, coeffs, lmax):
        if lmax + 1 > self.nlat or 2 * lmax + 1 > self.nphi:
            return None
        alm = real_to_alm(coeffs, lmax)
        out = np.empty((self.Q, coeffs.shape[0]))
        for a in range(coeffs.shape[0]):
            out[:, a] = self._synth(alm[a : a + 1], 0, lmax)[0].ravel()
        return out

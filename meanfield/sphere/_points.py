"""Point sets on S^2 shared by every transform at the same points within a step.

ducc0's point transforms take the points as angles; :func:`s2_points` computes them once per
point array (colatitude, longitude and r = sin θ) and hands the same object to the noise
field and to the attention velocity. Arrays that cannot change (not writeable, owning their
data) are remembered, so a solver that marks its positions read-only pays for the angles
once per step. The elementwise work is split over threads for large N
(:func:`~meanfield._threads.parallel_rows`).
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from .._threads import parallel_rows

__all__ = ["S2Points", "s2_points"]


class S2Points:
    """Unit vectors x (N, 3) with their ducc0 locations and r = sqrt(x_1² + x_2²).

    ``loc[:, 0]`` is the colatitude in [0, π], ``loc[:, 1]`` the longitude in [0, 2π];
    the tangent frame is the one of :func:`~meanfield.sphere.tangent_frame`
    (e_θ = (z x/r, z y/r, -r), e_φ = (-y/r, x/r, 0); longitude 0 at the poles).
    """

    __slots__ = ("x", "loc", "r", "_frame", "__weakref__")

    def __init__(self, x: np.ndarray):
        x = np.ascontiguousarray(x, dtype=np.float64)
        n = x.shape[0]
        self.x = x
        self.loc = np.empty((n, 2))
        self.r = np.empty(n)
        self._frame = None
        parallel_rows(self._angles, n)

    @classmethod
    def from_loc(cls, loc: np.ndarray) -> "S2Points":
        """Points given by their angles (Q, 2) alone, for the transforms that read nothing else
        (``x``, ``r`` and the frame are then unavailable)."""
        self = cls.__new__(cls)
        self.loc = np.ascontiguousarray(loc, dtype=np.float64)
        self.x = self.r = self._frame = None
        return self

    def _angles(self, s: int, e: int) -> None:
        x0, x1, x2 = self.x[s:e, 0], self.x[s:e, 1], self.x[s:e, 2]
        r = self.r[s:e]
        np.multiply(x0, x0, out=r)
        r += x1 * x1
        np.sqrt(r, out=r)
        col = np.arctan2(r, x2)
        lon = np.arctan2(-x1, -x0)  # in [-π, π]: longitude - π
        lon += math.pi
        lon[r == 0] = 0.0  # the poles: longitude 0, as in cart_to_angles
        self.loc[s:e, 0] = col
        self.loc[s:e, 1] = lon

    def __len__(self) -> int:
        return self.x.shape[0]

    def frame(self) -> tuple[np.ndarray, np.ndarray]:
        """(e_θ, e_φ), each (N, 3), computed once per point set."""
        if self._frame is None:
            et, ep = np.empty_like(self.x), np.empty_like(self.x)

            def rows(s: int, e: int) -> None:
                # tangent(1, 0) and tangent(0, 1) in one pass: the same values (their zero terms dropped)
                x0, x1, x2 = self.x[s:e, 0], self.x[s:e, 1], self.x[s:e, 2]
                r = self.r[s:e]
                pole = r == 0
                q = np.where(pole, 1.0, r)
                np.divide(1.0, q, out=q)
                qz = q * x2
                np.multiply(qz, x0, out=et[s:e, 0])
                np.multiply(qz, x1, out=et[s:e, 1])
                np.multiply(q, r * r, out=et[s:e, 2])
                np.negative(et[s:e, 2], out=et[s:e, 2])
                np.multiply(q, x1, out=ep[s:e, 0])
                np.negative(ep[s:e, 0], out=ep[s:e, 0])
                np.multiply(q, x0, out=ep[s:e, 1])
                ep[s:e, 2] = 0.0
                if pole.any():  # longitude 0 there: e_θ = (cos θ, 0, 0), e_φ = (0, 1, 0)
                    et[s:e][pole] = (0.0, 0.0, 0.0)
                    et[s:e, 0][pole] = x2[pole]
                    ep[s:e][pole] = (0.0, 1.0, 0.0)

            parallel_rows(rows, self.x.shape[0])
            self._frame = (et, ep)
        return self._frame

    def tangent(self, a: np.ndarray, b: np.ndarray, scale: np.ndarray | None = None, *,
                divide_by: np.ndarray | None = None, factor: float = 1.0) -> np.ndarray:
        """Cartesian vectors s (a e_θ + b e_φ), shape (N, 3) (``scale`` s optional, per point).

        ``divide_by`` g (per point) with ``factor`` c gives s = 1 / (c g) without a full-size pass
        for the reciprocal (the attention velocity's 1 / (β g)).
        """
        if divide_by is not None and scale is not None:
            raise ValueError("pass either scale or divide_by, not both")
        out = np.empty_like(self.x)

        def rows(s: int, e: int) -> None:
            x0, x1, x2 = self.x[s:e, 0], self.x[s:e, 1], self.x[s:e, 2]
            r = self.r[s:e]
            aa, bb = a[s:e], b[s:e]
            pole = r == 0
            q = np.where(pole, 1.0, r)
            if divide_by is not None:
                q *= divide_by[s:e]
                q *= factor
                np.divide(1.0, q, out=q)  # 1 / (c g r)
            elif scale is None:
                np.divide(1.0, q, out=q)
            else:
                np.divide(scale[s:e], q, out=q)  # s / r
            ar = aa * q
            br = bb * q
            ar_z = ar * x2
            o = out[s:e]
            o[:, 0] = ar_z * x0 - br * x1
            o[:, 1] = ar_z * x1 + br * x0
            np.multiply(ar, r * r, out=o[:, 2])  # a s r
            np.negative(o[:, 2], out=o[:, 2])
            if pole.any():
                if divide_by is not None:
                    sp = 1.0 / (factor * divide_by[s:e][pole])
                else:
                    sp = 1.0 if scale is None else scale[s:e][pole]
                o[pole, 0] = aa[pole] * sp * x2[pole]
                o[pole, 1] = bb[pole] * sp
                o[pole, 2] = 0.0

        parallel_rows(rows, out.shape[0])
        return out


_CACHE: list = []
_CACHE_SIZE = 4
_LOCK = threading.Lock()


def _immutable(x) -> bool:
    return isinstance(x, np.ndarray) and not x.flags.writeable and x.base is None and x.dtype == np.float64 \
        and x.flags.c_contiguous


def s2_points(x) -> S2Points:
    """The :class:`S2Points` of unit vectors x (N, 3); remembered for read-only arrays that own their data."""
    if isinstance(x, S2Points):
        return x
    if _immutable(x):
        with _LOCK:
            for ref, pts in _CACHE:
                if ref() is x:
                    return pts
        pts = S2Points(x)
        with _LOCK:
            _CACHE.insert(0, (weakref.ref(x), pts))
            del _CACHE[_CACHE_SIZE:]
        return pts
    return S2Points(x)

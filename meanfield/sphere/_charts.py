"""Cell charts: quadrature cells of the sphere in coordinates, with exact cell measures and sub-rules.

A chart describes S^{d-1} by d - 1 coordinates in which the surface measure is a product
of one-dimensional measures, so that a box [lo, hi] of coordinates has an exact measure
(the product of the one-dimensional ones) and can be cut into sub-boxes with their own
Gauss rules. The characteristics solver of the SPDE carries one node per cell and splits
stretched cells; it asks the chart of its dimension (:func:`cell_chart`) for everything
that depends on the sphere.

* S^1 (:class:`CircleChart`): the angle θ, measure dθ; initial rule M equispaced nodes
  θ_j = 2π j / M with cells [θ_j - π/M, θ_j + π/M].
* S^{d-1}, d >= 3 (:class:`HypersphericalChart`): u_k = cos θ_k (k = 1..d-2) and the
  longitude φ of :mod:`meanfield.sphere._hyper`, measure Π_k (1 - u_k²)^{a_k} du_k dφ,
  a_k = (d-2-k)/2. Initial rule: the product Gauss–Gegenbauer rule with n nodes per polar
  coordinate and 2n longitudes φ_j = 2π j/(2n) (M = 2 n^{d-1}; d = 3: Gauss–Legendre rings);
  the polar cell of a Gauss node is cut at the cumulative weights, which contain the nodes
  (Chebyshev–Markov–Stieltjes separation), so every cell's measure is its weight exactly.

Sub-rules. Cutting a coordinate interval [lo, hi] into s sub-cells uses the s-point
Gauss–Legendre rule in the cumulative-measure coordinate F(u) = ∫_{-1}^u (1 - t²)^a dt (for
a = 0 and for θ, φ: in the coordinate itself), with sub-intervals cut at the cumulative
weights, so the children tile the parent and their measures add up to the parent's.
"""

from __future__ import annotations

import abc
import math

import numpy as np

from .._validate import as_int
from ._hyper import (
    gegenbauer_mass,
    gegenbauer_mass_inverse,
    hyperspherical_frame,
    hyperspherical_to_cart,
    polar_exponents,
    polar_rule,
)

__all__ = ["CellChart", "CircleChart", "HypersphericalChart", "cell_chart"]


def gauss_children(lo: np.ndarray, hi: np.ndarray, s: int):
    """s-point Gauss–Legendre rule on each interval [lo, hi] (n,): sub-interval bounds, nodes, weights, (n s,) each."""
    g, gw = np.polynomial.legendre.leggauss(s)
    cut = np.concatenate([[0.0], np.cumsum(gw) / 2])
    cut[-1] = 1.0
    span = (hi - lo)[:, None]
    clo = (lo[:, None] + span * cut[None, :-1]).ravel()
    chi = (lo[:, None] + span * cut[None, 1:]).ravel()
    node = (lo[:, None] + span * ((g + 1) / 2)[None]).ravel()
    w = (span * (gw / 2)[None]).ravel()
    return clo, chi, node, w


class CellChart(abc.ABC):
    """Coordinates of S^{d-1} with a product measure (see the module docstring).

    Cells are given by arrays ``lo``, ``hi``, ``node`` of shape (N, d-1) (bounds and node in
    the coordinates) and their measures ``w`` (N,). The last coordinate is the longitude
    (S^1: the angle), periodic with period 2π.
    """

    d: int

    @abc.abstractmethod
    def initial(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, node, w) of the initial rule of resolution n (see :meth:`size`)."""

    @abc.abstractmethod
    def size(self, n: int) -> int:
        """Number of cells of the initial rule of resolution n."""

    @abc.abstractmethod
    def resolution(self, M: int) -> int:
        """The resolution n whose initial rule has about M cells."""

    @abc.abstractmethod
    def longitude_spacing(self, n: int) -> float:
        """Spacing of the initial rule in the longitude (last) coordinate."""

    @abc.abstractmethod
    def points(self, node: np.ndarray) -> np.ndarray:
        """Unit vectors (N, d) of coordinates ``node`` (N, d-1)."""

    @abc.abstractmethod
    def frame(self, node: np.ndarray) -> np.ndarray:
        """Unit tangent vectors along the coordinates at ``node``, shape (N, d, d-1)."""

    @abc.abstractmethod
    def extents(self, lo: np.ndarray, hi: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Arc lengths of the cells along the frame directions at their nodes, (N, d-1)."""

    @abc.abstractmethod
    def children(self, k: int, lo: np.ndarray, hi: np.ndarray, s: int):
        """Sub-rule of s cells along coordinate k of each interval [lo, hi] (n,): (lo, hi, node, measure), (n s,) each."""

    @abc.abstractmethod
    def _gauss_1d(self, k: int, lo: np.ndarray, hi: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
        """Coordinate values (n, s) and weights (n, s) of an s-point rule for the measure of coordinate k on [lo, hi],
        accurate for functions smooth in the angles."""

    def cell_integrals(self, f, lo: np.ndarray, hi: np.ndarray, s: int = 3) -> np.ndarray:
        """∫_{cell} f dσ for every cell (N,), by the product of s-point Gauss–Legendre rules in the angles.

        The polar rules are Gauss–Legendre in θ_k with the weight sin^{2 a_k + 1} θ_k (the measure in
        θ_k), so the integrand is smooth up to the coordinate poles (where a rule in u = cos θ is not).
        ``f`` maps points (K, d) to values (K,).
        """
        n, nc = lo.shape
        rules = [self._gauss_1d(k, lo[:, k], hi[:, k], s) for k in range(nc)]
        grids = np.meshgrid(*[np.arange(s)] * nc, indexing="ij")
        idx = [g.ravel() for g in grids]
        node = np.stack([rules[k][0][:, idx[k]] for k in range(nc)], axis=2).reshape(-1, nc)
        w = rules[0][1][:, idx[0]]
        for k in range(1, nc):
            w = w * rules[k][1][:, idx[k]]
        vals = np.asarray(f(self.points(node)), dtype=np.float64).reshape(n, -1)
        return np.sum(w * vals, axis=1)


class CircleChart(CellChart):
    """S^1 by its angle θ (module docstring)."""

    d = 2

    def initial(self, n):
        n = as_int(n, "M", min_value=1)
        th = 2 * math.pi * np.arange(n) / n
        half = math.pi / n
        return (th - half)[:, None], (th + half)[:, None], th[:, None], np.full(n, 2 * math.pi / n)

    def size(self, n):
        return int(n)

    def resolution(self, M):
        return int(M)

    def longitude_spacing(self, n):
        return 2 * math.pi / n

    def points(self, node):
        t = node[:, 0]
        return np.stack([np.cos(t), np.sin(t)], axis=1)

    def frame(self, node):
        t = node[:, 0]
        return np.stack([-np.sin(t), np.cos(t)], axis=1)[:, :, None]

    def extents(self, lo, hi, node):
        return hi - lo

    def children(self, k, lo, hi, s):
        return gauss_children(lo, hi, s)

    def _gauss_1d(self, k, lo, hi, s):
        _, _, node, w = gauss_children(lo, hi, s)
        return node.reshape(-1, s), w.reshape(-1, s)


class HypersphericalChart(CellChart):
    """S^{d-1}, d >= 3, by (cos θ_1, ..., cos θ_{d-2}, φ) (module docstring); d = 3 is (cos θ, φ)."""

    def __init__(self, d: int):
        self.d = as_int(d, "d", min_value=3)
        self.a = [float(a) for a in polar_exponents(self.d)]

    def __repr__(self) -> str:
        return f"HypersphericalChart(d={self.d})"

    def size(self, n):
        return 2 * int(n) ** (self.d - 1)

    def resolution(self, M):
        return max(2, int(round((M / 2) ** (1.0 / (self.d - 1)))))

    def longitude_spacing(self, n):
        return 2 * math.pi / (2 * n)

    def _polar_cuts(self, a: float, w: np.ndarray) -> np.ndarray:
        cum = np.cumsum(w)
        cuts = np.concatenate([[-1.0], -1.0 + cum if a == 0.0 else gegenbauer_mass_inverse(cum, a)])
        cuts[-1] = 1.0
        return cuts

    def initial(self, n):
        n = as_int(n, "n_lat", min_value=1)
        k = self.d - 2
        rules = [polar_rule(n, a) for a in self.a]
        cuts = [self._polar_cuts(a, r[1]) for a, r in zip(self.a, rules)]
        nphi = 2 * n
        dphi = 2 * math.pi / nphi
        phi = dphi * np.arange(nphi)
        idx = [g.ravel() for g in np.meshgrid(*[np.arange(n)] * k, np.arange(nphi), indexing="ij")]
        P = idx[-1]
        lo = np.stack([cuts[j][idx[j]] for j in range(k)] + [phi[P] - dphi / 2], axis=1)
        hi = np.stack([cuts[j][idx[j] + 1] for j in range(k)] + [phi[P] + dphi / 2], axis=1)
        node = np.stack([rules[j][0][idx[j]] for j in range(k)] + [phi[P]], axis=1)
        w = rules[0][1][idx[0]] * dphi
        for j in range(1, k):
            w = w * rules[j][1][idx[j]]
        return lo, hi, node, w

    def _angles(self, node):
        return np.arccos(np.clip(node[:, :-1], -1, 1)), node[:, -1]

    def points(self, node):
        return hyperspherical_to_cart(*self._angles(node))

    def frame(self, node):
        return hyperspherical_frame(*self._angles(node))

    def extents(self, lo, hi, node):
        k = self.d - 2
        ulo, uhi = np.clip(lo[:, :k], -1, 1), np.clip(hi[:, :k], -1, 1)
        arcs = np.arccos(ulo) - np.arccos(uhi)
        sin_t = np.sqrt(np.maximum(0.0, 1.0 - node[:, :k] ** 2))
        out = np.empty_like(lo)
        scale = np.ones(lo.shape[0])
        for j in range(k):
            out[:, j] = arcs[:, j] * scale if j else arcs[:, j]
            scale = scale * sin_t[:, j]
        out[:, k] = (hi[:, k] - lo[:, k]) * (scale if k > 1 else sin_t[:, 0])
        return out

    def children(self, k, lo, hi, s):
        if k == self.d - 2 or self.a[k] == 0.0:
            return gauss_children(lo, hi, s)
        # Gauss–Legendre in the cumulative measure F_a, mapped back to u = cos θ
        a = self.a[k]
        flo, fhi = gegenbauer_mass(lo, a), gegenbauer_mass(hi, a)
        clo, chi, node, w = gauss_children(flo, fhi, s)
        return (gegenbauer_mass_inverse(clo, a), gegenbauer_mass_inverse(chi, a), gegenbauer_mass_inverse(node, a), w)


    def _gauss_1d(self, k, lo, hi, s):
        if k == self.d - 2:
            _, _, node, w = gauss_children(lo, hi, s)
            return node.reshape(-1, s), w.reshape(-1, s)
        # Gauss–Legendre in θ on [θ(hi), θ(lo)], weight sin^{2a+1} θ, mapped back to u = cos θ
        t_lo, t_hi = np.arccos(np.clip(hi, -1, 1)), np.arccos(np.clip(lo, -1, 1))
        _, _, th, w = gauss_children(t_lo, t_hi, s)
        w = w * np.sin(th) ** (2 * self.a[k] + 1)
        return np.cos(th).reshape(-1, s), w.reshape(-1, s)


def cell_chart(d: int) -> CellChart:
    """The cell chart of S^{d-1}: :class:`CircleChart` for d = 2, :class:`HypersphericalChart` for d >= 3.

    Examples
    --------
    >>> lo, hi, node, w = cell_chart(4).initial(3)
    >>> node.shape, round(float(w.sum()) / (2 * np.pi**2), 13)
    ((54, 3), 1.0)
    """
    d = as_int(d, "d", min_value=2)
    return CircleChart() if d == 2 else HypersphericalChart(d)

"""Quadrature cells of the characteristics scheme in the starting coordinates (private helpers).

Every node q is the representative of a cell of the *initial* sphere:

* S^2: a box [u_a, u_b] × [φ_a, φ_b] in (u = cos θ, φ) with quadrature weight w_q equal
  to its area (u_b - u_a)(φ_b - φ_a). The initial rule is Gauss–Legendre in u (n_lat
  nodes) × uniform in φ (n_φ = 2 n_lat nodes φ_j = 2π j / n_φ, the nodes of the Eulerian
  grid); the u-cell of a Gauss node is cut at the cumulative weights -1 + Σ_{i<k} w_i, which
  contain the nodes (Chebyshev–Markov–Stieltjes separation), so the cell areas are the
  weights exactly.
* S^1: an arc [θ_a, θ_b] with its midpoint as node and w_q = θ_b - θ_a; initially
  M equispaced nodes θ_j = 2π j / M.

Splitting a cell replaces its node by an s_u × s_φ tensor Gauss–Legendre rule on its box
(S^1: an s-point Gauss–Legendre rule on its arc); each sub-node gets the sub-box cut at the
cumulative weights, so the children tile the parent exactly, their weights add up to the
parent's, and together they form a rule of order 2 s on the parent cell.
"""

from __future__ import annotations

import math

import numpy as np

from ..harmonics import angles_to_cart, tangent_frame

__all__: list[str] = []


class Cells:
    """Arrays describing the cells (one row per node), in the starting coordinates."""

    def __init__(self, d: int, lo: np.ndarray, hi: np.ndarray, node: np.ndarray, w: np.ndarray,
                 depth: np.ndarray):
        # lo, hi, node: (N, d - 1) bounds and node in (u, φ) on S^2, θ on S^1
        self.d, self.lo, self.hi, self.node, self.w, self.depth = d, lo, hi, node, w, depth

    def __len__(self) -> int:
        return self.w.size

    @classmethod
    def initial(cls, d: int, n: int) -> "Cells":
        """S^2: n = n_lat (M = 2 n_lat² nodes); S^1: n = M."""
        if d == 2:
            th = 2 * math.pi * np.arange(n) / n
            half = math.pi / n
            return cls(2, (th - half)[:, None], (th + half)[:, None], th[:, None], np.full(n, 2 * math.pi / n),
                       np.zeros(n, dtype=np.int32))
        u, wu = np.polynomial.legendre.leggauss(n)
        cuts = np.concatenate([[-1.0], -1.0 + np.cumsum(wu)])
        cuts[-1] = 1.0
        nphi = 2 * n
        dphi = 2 * math.pi / nphi
        phi = dphi * np.arange(nphi)
        U, P = np.meshgrid(np.arange(n), np.arange(nphi), indexing="ij")
        U, P = U.ravel(), P.ravel()
        lo = np.stack([cuts[U], phi[P] - dphi / 2], axis=1)
        hi = np.stack([cuts[U + 1], phi[P] + dphi / 2], axis=1)
        node = np.stack([u[U], phi[P]], axis=1)
        return cls(3, lo, hi, node, wu[U] * dphi, np.zeros(U.size, dtype=np.int32))

    def points(self) -> np.ndarray:
        """Node positions on the sphere, (N, d)."""
        if self.d == 2:
            return angles_to_cart(self.node[:, 0])
        return angles_to_cart(np.stack([np.arccos(np.clip(self.node[:, 0], -1, 1)), self.node[:, 1]], axis=1))

    def start_frame(self) -> np.ndarray:
        """Unit tangent vectors along the cell coordinates at the nodes, (N, d, d-1): [e_θ, e_φ] or [e_θ].

        On S^2 e_θ × e_φ = x, so the columns are positively oriented.
        """
        if self.d == 2:
            t = self.node[:, 0]
            return np.stack([-np.sin(t), np.cos(t)], axis=1)[:, :, None]
        loc = np.stack([np.arccos(np.clip(self.node[:, 0], -1, 1)), self.node[:, 1]], axis=1)
        et, ep = tangent_frame(loc)
        return np.stack([et, ep], axis=2)

    def extents(self) -> np.ndarray:
        """Arc lengths of the cell along the frame directions of :meth:`start_frame`, (N, d-1)."""
        if self.d == 2:
            return self.hi - self.lo
        th_extent = np.arccos(np.clip(self.lo[:, 0], -1, 1)) - np.arccos(np.clip(self.hi[:, 0], -1, 1))
        sin_t = np.sqrt(np.maximum(0.0, 1.0 - self.node[:, 0] ** 2))
        return np.stack([th_extent, (self.hi[:, 1] - self.lo[:, 1]) * sin_t], axis=1)

    def take(self, idx) -> "Cells":
        return Cells(self.d, self.lo[idx], self.hi[idx], self.node[idx], self.w[idx], self.depth[idx])

    @staticmethod
    def concat(parts: list["Cells"]) -> "Cells":
        d = parts[0].d
        return Cells(d, *(np.concatenate([getattr(p, a) for p in parts]) for a in ("lo", "hi", "node", "w", "depth")))

    def split(self, factors: np.ndarray) -> tuple["Cells", np.ndarray]:
        """Children of every cell, ``factors`` (N, d-1) sub-cells per direction; returns (children, parent index)."""
        kids, parent = [], []
        # group by factor tuple so the sub-rules are built once per shape, not per cell
        keys = [tuple(f) for f in factors.astype(int)]
        for key in sorted(set(keys)):
            sel = np.nonzero([k == key for k in keys])[0]
            lo, hi = self.lo[sel], self.hi[sel]
            if self.d == 2:
                clo, chi, node, w = _gauss_children(lo[:, 0], hi[:, 0], key[0])
                clo, chi, node = clo[:, None], chi[:, None], node[:, None]
            else:
                su, sp = key
                ulo, uhi, un, uw = _gauss_children(lo[:, 0], hi[:, 0], su)  # (n * su,)
                plo, phi_, pn, pw = _gauss_children(lo[:, 1], hi[:, 1], sp)  # (n * sp,)
                n = sel.size
                # tensor product per parent: index (parent, i_u, i_φ)
                iu = (np.arange(n)[:, None, None] * su + np.arange(su)[None, :, None] + 0 * np.arange(sp)).ravel()
                ip = (np.arange(n)[:, None, None] * sp + 0 * np.arange(su)[None, :, None]
                      + np.arange(sp)[None, None, :]).ravel()
                clo = np.stack([ulo[iu], plo[ip]], axis=1)
                chi = np.stack([uhi[iu], phi_[ip]], axis=1)
                node = np.stack([un[iu], pn[ip]], axis=1)
                w = uw[iu] * pw[ip]
            per = int(np.prod(key))
            depth = np.repeat(self.depth[sel] + 1, per)
            kids.append(Cells(self.d, clo, chi, node, w, depth))
            parent.append(np.repeat(sel, per))
        return Cells.concat(kids), np.concatenate(parent)


def _gauss_children(lo: np.ndarray, hi: np.ndarray, s: int):
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

"""Quadrature cells of the characteristics scheme in the starting coordinates (private helpers).

Every node q is the representative of a cell of the *initial* sphere, a box [lo, hi] in the
coordinates of the sphere's cell chart (:func:`meanfield.sphere.cell_chart`) with quadrature
weight w_q equal to its measure:

* S^1: an arc [θ_a, θ_b] with its midpoint as node; initially M equispaced nodes.
* S^2: a box in (u = cos θ, φ); initially Gauss–Legendre in u (n_lat nodes) × uniform in φ
  (2 n_lat nodes φ_j = 2π j / (2 n_lat), the nodes of the Eulerian grid).
* S^{d-1}, d >= 4: a box in (cos θ_1, ..., cos θ_{d-2}, φ) (hyperspherical coordinates);
  initially the product Gauss–Gegenbauer rule, n_lat nodes per polar angle and 2 n_lat
  longitudes (M = 2 n_lat^{d-1}).

The polar cell of a Gauss node is cut at the cumulative weights, which contain the nodes
(Chebyshev–Markov–Stieltjes separation), so the cell measures are the weights exactly.
Splitting a cell replaces its node by a tensor rule of s_1 × ... × s_{d-1} sub-cells, each
coordinate cut by the chart's one-dimensional Gauss sub-rule at the cumulative weights, so
the children tile the parent exactly and their weights add up to the parent's.
"""

from __future__ import annotations

import numpy as np

from ..sphere import cell_chart

__all__: list[str] = []


def cells_resolution(d: int, M=None, n_lat=None) -> int:
    """Resolution of the chart's initial rule from M (number of nodes) or n_lat (d >= 3: nodes per polar angle)."""
    from .._validate import as_int

    if M is not None and n_lat is not None:
        raise ValueError("give M or n_lat, not both")
    chart = cell_chart(d)
    if n_lat is not None:
        if d == 2:
            raise ValueError("n_lat is an option of S^{d-1}, d >= 3; on S^1 give M")
        return as_int(n_lat, "n_lat", min_value=2, max_value=20000)
    return chart.resolution(as_int(M, "M", min_value=4))


class Cells:
    """Arrays describing the cells (one row per node), in the starting coordinates of the chart."""

    def __init__(self, d: int, lo: np.ndarray, hi: np.ndarray, node: np.ndarray, w: np.ndarray,
                 depth: np.ndarray, chart=None):
        # lo, hi, node: (N, d - 1) bounds and node in the chart's coordinates
        self.d, self.lo, self.hi, self.node, self.w, self.depth = d, lo, hi, node, w, depth
        self.chart = cell_chart(d) if chart is None else chart

    def __len__(self) -> int:
        return self.w.size

    @classmethod
    def initial(cls, d: int, n: int) -> "Cells":
        """The chart's initial rule of resolution n (S^1: n = M; d >= 3: n = n_lat, M = 2 n_lat^{d-1})."""
        chart = cell_chart(d)
        lo, hi, node, w = chart.initial(n)
        return cls(d, lo, hi, node, w, np.zeros(w.size, dtype=np.int32), chart)

    def points(self) -> np.ndarray:
        """Node positions on the sphere, (N, d)."""
        return self.chart.points(self.node)

    def start_frame(self) -> np.ndarray:
        """Unit tangent vectors along the cell coordinates at the nodes, (N, d, d-1) (S^2: [e_θ, e_φ])."""
        return self.chart.frame(self.node)

    def extents(self) -> np.ndarray:
        """Arc lengths of the cell along the frame directions of :meth:`start_frame`, (N, d-1); read-only.

        Computed once per set of cells (cells are never changed in place, only replaced by
        :meth:`take`, :meth:`concat` and :meth:`split`): the solver asks at every saved time.
        """
        ext = self.__dict__.get("_extents")
        if ext is None:
            ext = self.chart.extents(self.lo, self.hi, self.node)
            ext.flags.writeable = False
            self._extents = ext
        return ext

    def take(self, idx) -> "Cells":
        return Cells(self.d, self.lo[idx], self.hi[idx], self.node[idx], self.w[idx], self.depth[idx], self.chart)

    @staticmethod
    def concat(parts: list["Cells"]) -> "Cells":
        d = parts[0].d
        return Cells(d, *(np.concatenate([getattr(p, a) for p in parts]) for a in ("lo", "hi", "node", "w", "depth")),
                     parts[0].chart)

    def split(self, factors: np.ndarray) -> tuple["Cells", np.ndarray]:
        """Children of every cell, ``factors`` (N, d-1) sub-cells per direction; returns (children, parent index)."""
        kids, parent = [], []
        nc = self.d - 1
        # group by factor tuple so the sub-rules are built once per shape, not per cell
        keys = [tuple(f) for f in factors.astype(int)]
        for key in sorted(set(keys)):
            sel = np.nonzero([k == key for k in keys])[0]
            lo, hi = self.lo[sel], self.hi[sel]
            n = sel.size
            sub = [self.chart.children(j, lo[:, j], hi[:, j], key[j]) for j in range(nc)]  # (n * s_j,) each
            # tensor product per parent: index (parent, i_1, ..., i_{d-1})
            grids = np.meshgrid(np.arange(n), *[np.arange(s) for s in key], indexing="ij")
            ind = [(grids[0] * key[j] + grids[j + 1]).ravel() for j in range(nc)]
            clo = np.stack([sub[j][0][ind[j]] for j in range(nc)], axis=1)
            chi = np.stack([sub[j][1][ind[j]] for j in range(nc)], axis=1)
            node = np.stack([sub[j][2][ind[j]] for j in range(nc)], axis=1)
            w = sub[0][3][ind[0]]
            for j in range(1, nc):
                w = w * sub[j][3][ind[j]]
            per = int(np.prod(key))
            depth = np.repeat(self.depth[sel] + 1, per)
            kids.append(Cells(self.d, clo, chi, node, w, depth, self.chart))
            parent.append(np.repeat(sel, per))
        return Cells.concat(kids), np.concatenate(parent)

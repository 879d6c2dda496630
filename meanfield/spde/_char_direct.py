"""Attention of a weighted node cloud by the direct sum, with its Jacobian (private helpers; any d).

For Q = K = I and value matrix V the softmax attention of μ = Σ_j w_j δ_{y_j} is

    A(x) = V Σ_j p_j(x) y_j,     p_j(x) = w_j e^{β<x, y_j>} / Σ_i w_i e^{β<x, y_i>},

and v = P_x A. Differentiating the softmax weights, ∂p_j/∂x = β p_j (y_j - ȳ), so the
ambient derivative of A is the weighted covariance of the cloud,

    DA(x) = β V (Σ_j p_j y_j y_j^T - ȳ ȳ^T),       ȳ = Σ_j p_j y_j,

and Dv ξ = P_x DA ξ - x (A · ξ) - (x · A) ξ for tangent ξ (as for the spectral evaluator of
:mod:`._char_maps`). This is what the characteristics scheme uses where no fast spectral
attention exists (d >= 4): cost O(M N d²) per evaluation at N points of an M-node cloud,
memory O(block · M). Blocks of query rows have a fixed size and are spread over threads
(:func:`~meanfield._threads.parallel_rows`); each row is computed by the same operations
whatever the thread count, so results do not depend on it.
"""

from __future__ import annotations

import numpy as np

from .._threads import parallel_rows

__all__: list[str] = []

#: Elements of one block of logits (query rows × cloud nodes).
BLOCK_ELEMENTS = 2**20

class DirectAttention:
    """Attention velocity (and Jacobian) of a weighted cloud by the blocked direct sum, any d.

    The same interface as the spectral evaluator of the characteristics scheme:
    :meth:`coefficients` returns what a step stores (here the cloud itself, one row
    ``[log w_j, y_j]`` per node, weights normalised), :meth:`evaluate` the velocity of a stored
    cloud at any points.
    """

    method = "direct"

    def __init__(self, d: int, beta: float, V: np.ndarray | None):
        self.d, self.beta, self.V = d, float(beta), V
        self.lmax = None

    def coefficients(self, x: np.ndarray, masses: np.ndarray) -> np.ndarray:
        """The cloud ``[log(m_j / Σ m), x_j]``, shape (M, d + 1); nodes of zero mass are dropped."""
        keep = masses > 0
        w = masses[keep] / masses.sum()
        return np.concatenate([np.log(w)[:, None], x[keep]], axis=1)

    def fields(self, cloud: np.ndarray, x: np.ndarray, jac: bool = True) -> tuple:
        """(v, Dv) at every point (:meth:`evaluate`): the direct sum has no cheaper intermediate."""
        return self.evaluate(cloud, x, jac)

    @staticmethod
    def velocity_rows(f: tuple, x: np.ndarray, s: int, e: int, jac: bool = True):
        """Rows s:e of the (v, Dv) of :meth:`fields`."""
        v, Dv = f
        return v[s:e], (Dv[s:e] if jac else None)

    def evaluate(self, cloud: np.ndarray, x: np.ndarray, jac: bool = True):
        """v(x) (N, d) and, if ``jac``, the matrix of ξ -> Dv(x) ξ (N, d, d)."""
        d = self.d
        n = x.shape[0]
        logw, y = cloud[:, 0], cloud[:, 1:]
        # one product gives the logits β<x, y_j> + log w_j - shift <= 0 (|x| = |y| = 1), a second one
        # the softmax sums of [1, y, y y^T]: four passes over each block instead of eight
        shift = self.beta + float(logw.max())
        ya = np.ascontiguousarray(np.concatenate([y, (logw - shift)[:, None]], axis=1))
        xa = np.concatenate([self.beta * x, np.ones((n, 1))], axis=1)
        cols = [np.ones((y.shape[0], 1)), y]
        if jac:
            cols.append((y[:, :, None] * y[:, None, :]).reshape(-1, d * d))
        Z = np.ascontiguousarray(np.concatenate(cols, axis=1))
        sums = np.empty((n, Z.shape[1]))
        block = max(1, BLOCK_ELEMENTS // max(1, y.shape[0]))

        def rows(s: int, e: int) -> None:
            logits = xa[s:e] @ ya.T
            np.exp(logits, out=logits)
            sums[s:e] = logits @ Z

        parallel_rows(rows, n, block=block, min_rows=2 * block)
        low = ~(sums[:, 0] > 1e-250)
        if low.any():
            # every term underflowed against the global shift (very large β): shift these rows by their own maximum
            lg = xa[low] @ ya.T
            lg -= lg.max(axis=1, keepdims=True)
            np.exp(lg, out=lg)
            sums[low] = lg @ Z
        sums /= sums[:, :1]
        ybar = sums[:, 1 : 1 + d]
        A = ybar if self.V is None else ybar @ self.V.T
        xa_ = np.einsum("ij,ij->i", x, A)
        v = A - xa_[:, None] * x
        if not jac:
            return v, None
        cov = sums[:, 1 + d :].reshape(n, d, d) - ybar[:, :, None] * ybar[:, None, :]
        DA = self.beta * (cov if self.V is None else np.einsum("ab,nbc->nac", self.V, cov))
        PDA = DA - x[:, :, None] * np.einsum("ni,nij->nj", x, DA)[:, None, :]
        Dv = PDA - x[:, :, None] * A[:, None, :]
        Dv -= xa_[:, None, None] * np.eye(d)
        return v, Dv

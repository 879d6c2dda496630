"""Attention of a weighted node cloud by the direct sum, with its Jacobian (private helpers; any d).

For Q = K = I and value matrix V the softmax attention of μ = Σ_j w_j δ_{y_j} is

    A(x) = V Σ_j p_j(x) y_j,     p_j(x) = w_j e^{β<x, y_j>} / Σ_i w_i e^{β<x, y_i>},

and v = P_x A. Differentiating the softmax weights, ∂p_j/∂x = β p_j (y_j - ȳ), so the
ambient derivative of A is the weighted covariance of the cloud,

    DA(x) = β V (Σ_j p_j y_j y_j^T - ȳ ȳ^T),       ȳ = Σ_j p_j y_j,

and Dv ξ = P_x DA ξ - x (A · ξ) - (x · A) ξ for tangent ξ (as for the spectral evaluator of
:mod:`._char_maps`). This is what the characteristics scheme uses where no fast spectral
attention exists (d >= 4): cost O(M N d²) per evaluation at N points of an M-node cloud,
memory O(block · M). Blocks of query rows have a fixed size and are spread over
:func:`~meanfield._threads.default_threads` threads; each row is computed by the same
operations whatever the thread count, so results do not depend on it.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._threads import default_threads

__all__: list[str] = []

#: Elements of one block of logits (query rows × cloud nodes).
BLOCK_ELEMENTS = 2**20

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_LOCK = threading.Lock()


def _pool(k: int) -> ThreadPoolExecutor:
    global _POOL, _POOL_SIZE
    with _LOCK:
        if _POOL is None or _POOL_SIZE != k:
            _POOL = ThreadPoolExecutor(max_workers=k)
            _POOL_SIZE = k
        return _POOL


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
        starts = list(range(0, n, block))

        def rows(s: int) -> None:
            logits = xa[s : s + block] @ ya.T
            np.exp(logits, out=logits)
            sums[s : s + block] = logits @ Z

        k = min(default_threads(), len(starts))
        if k > 1:
            list(_pool(k).map(rows, starts))
        else:
            for s in starts:
                rows(s)
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

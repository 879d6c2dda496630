"""Exact optimal transport on the circle S^1 = [0, 1) for batches of 1-D problems.

Private kernels behind :func:`meanfield.transport.wasserstein_circle` and
:func:`meanfield.transport.sliced_wasserstein_sphere`.  Coordinates are in
turns (arc length / 2π), the convention of POT's ``ot.wasserstein_circle``;
the public functions convert to radians.

Layout: a batch of ``K`` independent problems is stored row-wise, shape
``(K, n)``, with weights shared by all rows.

Method (Delon, Salomon & Sobolevski, SIAM J. Appl. Math. 70, 2010; Rabin,
Delon & Gousseau, J. Math. Imaging Vis. 41, 2011).  With quantile functions
X, Y of the two measures, extended by X(q + 1) = X(q) + 1, the optimal circle
plan is a monotone plan with a shifted cut,

    W_p^p = min_θ C(θ),   C(θ) = ∫_0^1 |X(s + θ) - Y(s)|^p ds.

* p = 1: C is minimised in closed form by the level median,
  W_1 = min_α ∫_0^1 |F(t) - G(t) - α| dt  (F, G the cumulative distribution
  functions), which is a weighted median: exact, O((n + m) log(n + m)).
* p = 2: for atomic measures C is convex and piecewise *linear* in θ, with
  kinks at θ = F_i - G_j (mod 1), and

      C'(θ)/2 = u_0 + 1/2 - Σ_i (u_{i+1} - u_i) Ỹ(F_i - θ)       (u_n = u_0 + 1),

  a non-decreasing step function that costs one sorted search per evaluation.
  Bisection on C' brackets the minimiser; the last step intersects the tangent
  lines of C at the bracket ends, which is exact when the bracket holds a single
  kink and otherwise errs by at most (bracket width) × (slope jump inside),
  i.e. below 1e-15 in turns² at the default full-precision tolerance.
"""

from __future__ import annotations

import numpy as np

__all__ = ["circle_wpp_turns"]

# d(θ) = C'(θ)/2 satisfies d(θ + 1) = d(θ) + 1 and is non-decreasing, so with
# d0 = d(0) the root lies in [-d0 - 1, -d0 + 1]; the bracket is widened by a
# small margin against round-off.
_BRACKET_MARGIN = 1e-9


def _sort_with_cdf(u: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort each row of ``u`` (K, n) and return it with its cumulative weights (last = 1)."""
    order = np.argsort(u, axis=1, kind="stable")
    us = np.take_along_axis(u, order, axis=1)
    cdf = np.cumsum(w[order], axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    return us, cdf


def _row_searchsorted(levels: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Flat index into ``levels.ravel()`` of the first level >= query, row by row.

    ``levels`` (K, m) has sorted rows with values in [0, 1]; ``queries`` (K, q)
    are in [0, 1].  Rows are searched in one call by offsetting row k by 2k; the
    offset costs at most ulp(2K) of resolution, irrelevant for K = 1 (the exact
    single-problem path) and far below the Monte Carlo error of sliced estimates.
    """
    K, m = levels.shape
    if K == 1:
        idx = np.searchsorted(levels[0], queries[0], side="left")[None, :]
        np.minimum(idx, m - 1, out=idx)
        return idx
    off = 2.0 * np.arange(K, dtype=np.float64)[:, None]
    idx = np.searchsorted((levels + off).ravel(), (queries + off).ravel(), side="left")
    idx = idx.reshape(K, -1)
    np.minimum(idx, (m * np.arange(K) + m - 1)[:, None], out=idx)
    return idx


def _quantile(values_flat: np.ndarray, cdf: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quasi-periodic quantile X(q) = X(frac q) + floor q, row by row."""
    whole = np.floor(q)
    return values_flat[_row_searchsorted(cdf, q - whole)] + whole


class _CircleProblem:
    """Sorted data of a batch of circle problems, with C(θ) and C'(θ)/2."""

    def __init__(self, u, v, a, b):
        self.us, self.F = _sort_with_cdf(u, a)
        self.vs, self.G = _sort_with_cdf(v, b)
        self.us_flat = self.us.ravel()
        self.vs_flat = self.vs.ravel()
        self.du = np.diff(np.concatenate([self.us, self.us[:, :1] + 1.0], axis=1), axis=1)
        self.base = self.us[:, 0] + 0.5

    def half_slope(self, theta: np.ndarray) -> np.ndarray:
        """d(θ) = C'(θ)/2 for each row (a subgradient at kinks)."""
        y = _quantile(self.vs_flat, self.G, self.F - theta[:, None])
        return self.base - np.einsum("ki,ki->k", self.du, y)

    def cost(self, theta: np.ndarray) -> np.ndarray:
        """C(θ) = ∫_0^1 (X(s + θ) - Y(s))² ds, exact for the step functions X, Y."""
        K = self.us.shape[0]
        shifted = np.mod(self.F - theta[:, None], 1.0)
        cuts = np.sort(
            np.concatenate([np.zeros((K, 1)), shifted, self.G, np.ones((K, 1))], axis=1), axis=1
        )
        np.clip(cuts, 0.0, 1.0, out=cuts)
        length = np.diff(cuts, axis=1)
        mid = 0.5 * (cuts[:, 1:] + cuts[:, :-1])
        x = _quantile(self.us_flat, self.F, mid + theta[:, None])
        y = _quantile(self.vs_flat, self.G, mid)
        return np.einsum("ki,ki->k", length, (x - y) ** 2)


def _w2sq_turns(u, v, a, b, xtol: float) -> np.ndarray:
    """W_2² in turns² for each row; bisection on C' to bracket width ``xtol``."""
    if u.shape[1] > v.shape[1]:
        # W is symmetric; the search cost is (#queries) × log(#levels), so query the smaller side.
        u, v, a, b = v, u, b, a
    prob = _CircleProblem(u, v, a, b)
    K = u.shape[0]
    d0 = prob.half_slope(np.zeros(K))
    lo = -d0 - 1.0 - _BRACKET_MARGIN
    hi = -d0 + 1.0 + _BRACKET_MARGIN
    dlo = prob.half_slope(lo)
    dhi = prob.half_slope(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        active = (hi - lo > xtol) & (mid > lo) & (mid < hi) & (dlo < 0.0) & (dhi > 0.0)
        if not active.any():
            break
        d = prob.half_slope(np.where(active, mid, lo))
        right = active & (d >= 0.0)
        left = active & (d < 0.0)
        hi = np.where(right, mid, hi)
        dhi = np.where(right, d, dhi)
        lo = np.where(left, mid, lo)
        dlo = np.where(left, d, dlo)
    c_lo = prob.cost(lo)
    c_hi = prob.cost(hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        # C is linear with slope 2 dlo left of the kink and 2 dhi right of it.
        kink = (c_hi - c_lo + 2.0 * (dlo * lo - dhi * hi)) / (2.0 * (dlo - dhi))
        c_kink = c_lo + 2.0 * dlo * (kink - lo)
    usable = np.isfinite(c_kink) & (kink >= lo) & (kink <= hi)
    best = np.minimum(c_lo, c_hi)
    return np.maximum(np.where(usable, np.minimum(c_kink, best), best), 0.0)


def _w1_turns(u, v, a, b) -> np.ndarray:
    """W_1 in turns for each row by the level median of F - G (exact)."""
    K, n = u.shape
    z = np.concatenate([u, v], axis=1)
    signed = np.concatenate([a, -b])
    order = np.argsort(z, axis=1, kind="stable")
    zs = np.take_along_axis(z, order, axis=1)
    diff = np.cumsum(signed[order], axis=1)
    diff[:, -1] = 0.0  # F(1) - G(1) = 0 exactly; the wrap-around arc carries this value
    length = np.diff(np.concatenate([zs, zs[:, :1] + 1.0], axis=1), axis=1)
    by_value = np.argsort(diff, axis=1, kind="stable")
    cum = np.cumsum(np.take_along_axis(length, by_value, axis=1), axis=1)
    pos = np.argmax(cum >= 0.5 * cum[:, -1:], axis=1)
    level = np.take_along_axis(np.take_along_axis(diff, by_value, axis=1), pos[:, None], axis=1)
    return np.einsum("ki,ki->k", length, np.abs(diff - level))


def circle_wpp_turns(u, v, a, b, p: int, xtol: float = 0.0) -> np.ndarray:
    """W_p^p (p = 1, 2) in turns^p for rows of ``u`` (K, n) and ``v`` (K, m) in [0, 1).

    ``a`` (n,) and ``b`` (m,) are non-negative weights summing to 1.  ``xtol`` is
    the bisection tolerance on the cut θ (p = 2 only); 0 means full precision.
    """
    u = np.mod(u, 1.0)
    v = np.mod(v, 1.0)
    if p == 1:
        return _w1_turns(u, v, a, b)
    return _w2sq_turns(u, v, a, b, xtol)

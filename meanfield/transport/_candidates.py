"""Exact W_p^p by the network simplex on a candidate edge set, certified by the full dual check.

The optimal plan between a cloud and a (weighted) cloud on the sphere moves
mass over short distances, so almost every edge of the complete bipartite
graph is irrelevant.  The solver here runs POT's sparse network simplex on a
small candidate set and proves optimality afterwards on the full problem:

1. candidates: the ``k`` nearest targets of every source (fewer against
   fewer than ``16 k`` targets: ``max(k // 4, m // 16)``, so that they stay
   a small fraction of the ``m`` targets) and the ``k // 4`` nearest sources
   of every target, both taken after moving the source cloud
   by the mean displacement ``Σ b_j y_j - Σ a_i x_i`` (and projecting back to
   the sphere), and the support of one feasible plan (the monotone coupling
   along the first coordinate, at most ``n + m - 1`` edges), so that the
   restricted problem is always feasible;
2. solve the restricted problem exactly, which gives a plan of cost ``P`` and
   potentials ``(u, v)`` with dual value ``D = <a, u> + <b, v>``;
3. compute every reduced cost ``r_ij = C_ij - u_i - v_j`` (one vectorised pass
   over the cost matrix).  With ``δ = min_ij r_ij``, ``(u, v + min(δ, 0))`` is
   feasible for the dual of the *full* problem, so

   .. math::  P - \\mathrm{OPT} \\le P - D - \\min(δ, 0) =: \\text{gap},

   a bound that holds whatever the candidates were;
4. if some ``r_ij < -tol`` those edges join the set and step 2 runs again.

The loop suits measures that are close once their mean displacement is
removed, where the plan moves mass to near neighbours: particles against the
density they sample, two samples of one law, and two tight clusters a few
widths apart (a synchronised particle cloud against the density's cluster at
long horizons: without the shift the nearest targets of every source are the
near edge of the other cluster, and the first round found too many
violating pairs, 27 000-145 000 at 4608 x 512).  In R^d translating one
cloud changes no optimal plan for squared Euclidean cost; on the sphere the
projection back makes this approximate, and with equal means the shift is the
identity.  Between measures of different shapes (a concentrated cloud against a
uniform one, or clusters whose masses differ so that mass crosses between
them) the first round leaves violating pairs in a sizeable fraction of all
pairs and the loop is slower than one dense solve, so it gives up as soon as
a round finds more than ``max(n + m, n m / 128)`` violating pairs.  Measured
(first-round violators as a fraction of the ``n m`` pairs; loop time over one
dense solve, 2 shared cores):

* a vMF(50) or vMF(5) cloud against a uniform one, 512² to 4000²: 1/2 to
  1/46 of the pairs, the loop 2.1-18x slower;
* particles against the characteristics nodes at long horizons (512 x 4608):
  1/2 to 1/47 (six instances), the loop 0.5-6.8x the dense time, 9.0 s
  against 3.8 s in all; 1/101 to 1/128 (three), 0.9-2.2x; 1/394 and 1/1148
  (two), 0.4-0.8x;
* the positive against the negative part of the difference of two SPDE
  solutions on one grid (about 4100 x 4100 nodes, where the first round has
  up to 8 times ``n + m`` violators): 1/259 to 1/1931 (four instances),
  3-4 rounds, the loop 0.08-0.41x the dense time (0.6-1.1 s against
  2.7-8.0 s);
* the chaos-study problems at short horizons (512-1024 particles against
  2048-8192 nodes, twelve instances): at most 53 violators, 1-2 rounds.

Stopping.  Exact arithmetic would stop at ``δ >= 0``.  POT's potentials carry
round-off: on the chaos study's problems (up to 8192 x 1024 pairs, squared
geodesic costs up to π²) the *dense* simplex's own potentials have
``δ ≈ -7e-12 ≈ -7e-13 max C``; on a synchronised cloud (``max C = 9e-5``)
``δ ≈ -4e-13``, not proportional to ``max C``; re-solving does not remove such
edges.  The loop therefore stops once no reduced cost is below ``-tol`` with
``tol = max(OPTIMALITY_RTOL * max C, 2 ε)`` (1e-10, about 100x the round-off
above; ``ε`` the most negative reduced cost among the edges the simplex
already had, its own precision on this problem), and returns the certified
``gap``.  It gives up after ``MAX_ROUNDS`` rounds, once a grown set holds a
quarter of all pairs, where the dense solver is as fast, or on the far-apart
test above.  The first set is always solved, however large (under
``solver="auto"`` at most about a third of all pairs: 9 targets per source
against 32 targets), so that a hand-over has potentials to start from.

Hand-over.  When the loop gives up, the dense simplex solves the full problem
started from the potentials of the last candidate solve (POT's
``potentials_init``, which guides its first pivots); its own potentials are
then certified like the loop's.  Measured (2 shared cores, best of 3): the
chaos study's long-horizon problems that hand over (128-512 particles against
4608 characteristics nodes, three instances) 0.72-0.78x the time of the
loop followed by a cold dense solve; 32 particles against 8192 weighted nodes,
where the first round is 30 % of all pairs and then hands over, 0.34 and 0.64x
one cold dense solve; a vMF(50) cloud against a uniform one (512² to 8192 x
32, four instances) 1.1-1.5x one dense solve.  The values agree with the cold
dense solve's within the two certified gaps (measured: equal, or 1e-15 to
3e-14 apart in ``W_2^2`` against gaps of 4e-12 to 1e-10).

Measured against the dense simplex (2 shared cores, squared geodesic cost,
best of 2): on the chaos study's short-horizon clouds (512-1024 particles
against 512-8192 weighted Gauss–Legendre nodes on S^2) 1-2 rounds, the same
value to 5e-17, and 1.4-8.9x less time (8192 x 1024: 0.53 s against 2.39 s,
and 0.88 s against 7.89 s); on sixteen long-horizon instances (512 particles
against 4608 characteristics nodes, 8 replicas at T = 2 and 8) 10 solve on
candidates (1-4 rounds, 0.18-0.96 s against 0.38-1.42 s dense) and 6 hand
over (+0.2-0.3 s each): 9.8 s in all against 11.2 s dense.  For p = 1 the
loop needs 3-5 rounds and is as fast as the dense simplex.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass

import numpy as np
import ot
import scipy.sparse as sp
from scipy.spatial import cKDTree

from ..sphere import row_norms
from ._checks import _BLOCK_ELEMENTS

#: Cheapest targets kept per source (``max(k // 4, m // 16)`` against ``m < 16 k`` targets;
#: and ``k // 4`` cheapest sources per target).
DEFAULT_CANDIDATES = 32
#: Reduced costs above ``-OPTIMALITY_RTOL * max C`` count as non-negative.
OPTIMALITY_RTOL = 1e-10
#: Rounds of the candidate loop before the dense simplex takes over.
MAX_ROUNDS = 20
# Above this fraction of all pairs in the candidate set the dense simplex is as fast.
_MAX_EDGE_FRACTION = 0.25
# Points of the searched cloud from which nearest neighbours come from a k-d tree (see _nearest).
_KDTREE_MIN_POINTS = 512
# Whether POT's dense simplex takes a warm start (``potentials_init``); without it the hand-over
# starts cold, as before.
_WARM_START = "potentials_init" in inspect.signature(ot.emd2).parameters
# More violating pairs than this fraction of all pairs (and than n + m) in one round: the plan
# moves mass far beyond the candidates and the dense simplex is faster (module docstring).
_MAX_VIOLATOR_FRACTION = 2.0**-7


@dataclass(frozen=True)
class EmdResult:
    """Optimal value of one network-simplex solve and its certificate (internal)."""

    value: float
    result_code: int
    gap: float
    solver: str
    rounds: int
    edges: int
    message: str = ""


def _solve(a, b, M, num_iter_max, potentials=None):
    with warnings.catch_warnings():
        # POT warns on non-convergence; callers check the result code instead.
        warnings.simplefilter("ignore", UserWarning)
        if sp.issparse(M):
            # ot.emd, not ot.emd2: on sparse costs emd2 also maps every edge to its index in a
            # Python dict for the gradient (41 ms per call at 1.5e5 edges, measured, as long as
            # the solve); emd's log carries the same optimal cost and potentials
            _, log = ot.emd(a, b, M, numItermax=num_iter_max, log=True)
            return log["cost"], log
        warm = {"potentials_init": potentials} if potentials is not None and _WARM_START else {}
        return ot.emd2(a, b, M, numItermax=num_iter_max, log=True, **warm)


def _reduced_min(M: np.ndarray, u: np.ndarray, v: np.ndarray, tol: float | None):
    """``min_ij (M_ij - u_i - v_j)`` and the pairs below ``-tol``, in row blocks."""
    n, m = M.shape
    rows = max(1, _BLOCK_ELEMENTS // m)
    delta = np.inf
    bad_i, bad_j = [], []
    for i0 in range(0, n, rows):
        red = M[i0 : i0 + rows] - u[i0 : i0 + rows, None]
        red -= v
        low = float(red.min())
        delta = min(delta, low)
        # the search for the pairs only where the block has one: the certifying round has none,
        # and the two passes of the search were half the time of the check (measured at 4100²)
        if tol is not None and low < -tol:
            i, j = np.nonzero(red < -tol)
            bad_i.append(i + i0)
            bad_j.append(j)
    if tol is None:
        return delta, None, None
    empty = np.empty(0, dtype=np.intp)
    return delta, (np.concatenate(bad_i) if bad_i else empty), (np.concatenate(bad_j) if bad_j else empty)


def certified_gap(a, b, value, u, v, delta) -> float:
    """Bound on ``value - OPT`` from potentials ``(u, v)`` whose least reduced cost is ``delta``.

    ``(u, v + min(δ, 0))`` is dual feasible, so ``OPT >= <a, u> + <b, v> +
    min(δ, 0)``; a few machine epsilons of the sums are added for their own
    round-off.
    """
    dual = float(a @ u + b @ v)
    eps = np.finfo(float).eps
    rounding = 4 * eps * (float(a @ np.abs(u) + b @ np.abs(v)) + abs(value))
    return float(max(0.0, value - dual - min(delta, 0.0)) + rounding)


def dense_emd(M, a, b, num_iter_max, potentials=None, rounds: int = 0) -> EmdResult:
    """POT's dense network simplex on the full cost matrix, with the same certificate.

    ``potentials`` (u, v): a warm start (POT's ``potentials_init``, which guides the first
    pivots), the potentials of the last candidate solve when :func:`sparse_emd` hands over after
    ``rounds`` of them; the reported rounds are ``rounds + 1``. A POT whose ``ot.emd2`` has no
    ``potentials_init`` starts cold (the same optimum, certified the same way).
    """
    value, log = _solve(a, b, M, num_iter_max, potentials)
    code = int(log["result_code"])
    gap = np.inf
    if code == 1:
        delta = _reduced_min(M, log["u"], log["v"], None)[0]
        gap = certified_gap(a, b, float(value), log["u"], log["v"], delta)
    return EmdResult(float(value), code, gap, "dense", rounds + 1, M.size, str(log.get("warning") or ""))


def _monotone_support(x, a, y, b):
    """Support of the monotone coupling of ``a`` and ``b`` along the first coordinate.

    The north-west-corner plan between the two clouds sorted by ``x[:, 0]``: a
    feasible plan with at most ``n + m - 1`` edges, whatever the geometry.
    """
    ox, oy = np.argsort(x[:, 0], kind="stable"), np.argsort(y[:, 0], kind="stable")
    ca, cb = np.cumsum(a[ox]), np.cumsum(b[oy])
    cuts = np.unique(np.concatenate([[0.0], ca[:-1], cb[:-1]]))
    mid = cuts + 0.5 * np.diff(np.append(cuts, max(ca[-1], cb[-1])))
    i = np.minimum(np.searchsorted(ca, mid), a.size - 1)
    j = np.minimum(np.searchsorted(cb, mid), b.size - 1)
    return ox[i], oy[j]


def _aligned(x, a, y, b):
    """Sources moved by the mean displacement ``Δ = Σ_j b_j y_j - Σ_i a_i x_i`` and projected back.

    In R^d the optimal plan for squared Euclidean cost does not change when one
    cloud is translated (on the sphere, after the projection, approximately),
    and after the translation by ``Δ`` it moves mass only to near neighbours
    even when the two clouds sit apart (a synchronised particle cloud against
    the density's cluster a few cluster widths away).
    """
    s = x + (b @ y - a @ x)
    s /= np.maximum(row_norms(s), np.finfo(float).tiny)[:, None]
    return s


def _nearest(p, q, k: int):
    """Indices ``(len(p), k + 1)`` of the ``k + 1`` points of ``q`` nearest to each point of ``p``.

    Nearest in any distance that decreases with ``<p_i, q_j>`` (geodesic or
    chordal, any power).  From ``_KDTREE_MIN_POINTS`` (512) points in ``q``, by a
    k-d tree on ``q`` (chordal distance); below, in row blocks of the inner
    products, which form the products again in both directions of
    :func:`candidate_edges` rather than keep an ``(n, m)`` array.  Measured
    (d = 3, 2 shared cores, ms, products against tree): 4100 points in 4100,
    k = 32: 82 against 14, k = 8: 83 against 4.6; 8192 in 1024, k = 32: 45
    against 23; 512 in 1024, k = 8: 1.8 against 0.6; 2048 in 512, k = 32: 5.9
    against 5.6; 8192 in 128, k = 8: 6.5 against 5.9, but 4608 in 128: 2.7
    against 3.0 and 8192 in 64: 3.4 against 4.8.  The two give the same sets
    (up to ties between equidistant points).
    """
    n, m = p.shape[0], q.shape[0]
    if m >= _KDTREE_MIN_POINTS:
        return cKDTree(q).query(p, k + 1)[1].reshape(n, k + 1)
    rows = max(1, _BLOCK_ELEMENTS // m)
    minus_q = -q.T
    out = np.empty((n, k + 1), dtype=np.intp)
    for i0 in range(0, n, rows):
        out[i0 : i0 + rows] = np.argpartition(p[i0 : i0 + rows] @ minus_q, k, axis=1)[:, : k + 1]
    return out


def candidate_edges(x, a, y, b, k: int):
    """Initial candidate set ``(rows, cols)``: nearest neighbours both ways plus a feasible support.

    Neighbours are taken between the target cloud and the source cloud moved
    by the mean displacement (:func:`_aligned`); the monotone support keeps the
    restricted problem feasible whatever the neighbours are.
    """
    n, m = x.shape[0], y.shape[0]
    # k of few targets would be a large share of all pairs (a quarter at m = 128, k = 32, where
    # the loop gives up at once); measured on the chaos study's 8192 nodes against 64-256
    # particles, m // 16 (at least k // 4) takes 0.42 / 0.62 / 1.06 s where k takes 1.31 / 1.80 /
    # 1.05 s and the dense simplex 1.02 / 1.47 / 3.43 s (four instances each)
    kr, kc = min(k, max(k // 4, m // 16), m - 1), min(max(2, k // 4), n - 1)
    s = _aligned(x, a, y, b)
    rows = [np.repeat(np.arange(n), kr + 1), _nearest(y, s, kc).ravel()]
    cols = [_nearest(s, y, kr).ravel(), np.repeat(np.arange(m), kc + 1)]
    i, j = _monotone_support(x, a, y, b)
    rows.append(i)
    cols.append(j)
    return np.concatenate(rows), np.concatenate(cols)


def sparse_emd(M, x, a, y, b, num_iter_max, k: int = DEFAULT_CANDIDATES) -> EmdResult:
    """Certified optimum on candidate edges; where the loop gives up, the dense simplex warm-started.

    ``M`` is the full ``(n, m)`` cost matrix between ``x`` and ``y``; it is
    read for the costs of the candidate edges and for the reduced-cost check
    (the candidates themselves come from ``x`` and ``y``).  When the loop gives
    up (module docstring), :func:`dense_emd` solves the full problem from the
    potentials of the last candidate solve.
    """
    n, m = M.shape
    rows, cols = candidate_edges(x, a, y, b, k)
    rtol = OPTIMALITY_RTOL * float(M.max())
    # the candidate set as a mask over all pairs: it only grows, and its sorted keys (the order
    # np.unique gave) cost one scan of n m bytes instead of a sort: 4-6x less at 256 x 8192 to
    # 4100 x 4100 pairs with 4e4-3e5 keys (measured)
    chosen = np.zeros(n * m, dtype=bool)
    potentials, solved = None, 0
    for rounds in range(1, MAX_ROUNDS + 1):
        chosen[rows.astype(np.int64) * m + cols] = True
        key = np.flatnonzero(chosen)
        # the first set is solved whatever its size (see the module): its potentials start the
        # dense simplex if the loop gives up
        if rounds > 1 and key.size > _MAX_EDGE_FRACTION * n * m:
            break
        rows, cols = np.divmod(key, m)
        costs = M[rows, cols]
        value, log = _solve(a, b, sp.coo_array((costs, (rows, cols)), shape=(n, m)), num_iter_max)
        code = int(log["result_code"])
        if code != 1:
            break
        u, v = log["u"], log["v"]
        potentials, solved = (u, v), rounds
        # The simplex's own precision on this problem: the most negative reduced cost among the
        # edges it had and did not pivot on.  Demanding more of the other pairs can stall the loop
        # (a synchronised cloud, max C = 9e-5: ~800 pairs at -8e-13 every round, while the dense
        # simplex's own potentials reach -4e-13 there).
        in_set = float(np.min(costs - u[rows] - v[cols]))
        tol = max(rtol, -2.0 * in_set)
        delta, bad_i, bad_j = _reduced_min(M, u, v, tol)
        if bad_i.size == 0:
            gap = certified_gap(a, b, float(value), u, v, delta)
            return EmdResult(float(value), code, gap, "sparse", rounds, key.size)
        if bad_i.size > max(n + m, _MAX_VIOLATOR_FRACTION * n * m):
            # The plan moves mass far beyond the nearest neighbours (measures of different shapes):
            # the loop would need large rounds, each slower than one dense solve.
            break
        rows, cols = bad_i, bad_j
    return dense_emd(M, a, b, num_iter_max, potentials, solved)

"""Cost matrices and exact W_p between weighted clouds on S^{d-1} (POT network simplex).

Exact W_p uses POT's ``ot.emd2`` with ``numItermax >= 1e7`` and a check of
``log["result_code"] == 1`` (POT otherwise returns unconverged values with
only a warning).  On S^1 the geodesic W_p goes to the exact circle solver of
:mod:`._circle` instead (no size limit).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.spatial.distance import cdist

from meanfield._validate import as_int, as_points, as_rng

from ._candidates import dense_emd, sparse_emd
from ._checks import _BLOCK_ELEMENTS, _COSTS, _as_choice, _as_p, _as_pair
from ._circle import _circle_turns, circle_wpp_turns
from ._sliced import DEFAULT_N_PROJECTIONS, _sliced

if TYPE_CHECKING:
    from ._density import DensityCloud

__all__ = [
    "DEFAULT_MAX_EXACT",
    "NEGLIGIBLE_WEIGHT",
    "SPARSE_MIN_PAIRS",
    "SPARSE_MIN_SIDE",
    "SlicedFallbackWarning",
    "TransportInfo",
    "cost_matrix",
    "wasserstein",
]

#: Default largest cloud size (per side) handed to the exact network simplex.
DEFAULT_MAX_EXACT = 6000

_METHODS = ("exact", "sliced")
_SOLVERS = ("auto", "dense", "sparse")
#: ``solver="auto"`` uses candidate edges from this many pairs (below, the dense simplex is as fast) ...
SPARSE_MIN_PAIRS = 1 << 18
#: ... and this many points on the smaller side.
SPARSE_MIN_SIDE = 32
_FALLBACKS = ("raise", "sliced")
_MIN_NUM_ITER = 10**7
#: Nodes whose weight is at most this fraction of the total mass are dropped
#: before the network simplex (zero-mass quadrature nodes, underflowed tails).
NEGLIGIBLE_WEIGHT = 1e-15
# Names of the quantity a TransportInfo describes.
_WASSERSTEIN = "wasserstein"
_SLICED = "sliced_wasserstein"


class SlicedFallbackWarning(UserWarning):
    """The clouds exceeded ``max_exact`` and, as asked by ``fallback="sliced"``, the sliced estimate was returned.

    Only raised when the caller opted in with ``fallback="sliced"`` (the default
    ``fallback="raise"`` raises a ``ValueError`` instead).  The value is the
    spherical sliced Wasserstein distance, not W_p; the info says so
    (``distance == "sliced_wasserstein"``).  Filter it like any warning, e.g.
    ``warnings.simplefilter("error", SlicedFallbackWarning)`` to make
    fallbacks fatal.

    Examples
    --------
    >>> from meanfield.transport import SlicedFallbackWarning
    >>> issubclass(SlicedFallbackWarning, UserWarning)
    True
    """


@dataclass(frozen=True)
class TransportInfo:
    """How a Wasserstein value was obtained (``return_info=True``).

    Attributes
    ----------
    value : float
        The returned value: W_p if ``distance == "wasserstein"``, the sliced
        distance SSW_p if ``distance == "sliced_wasserstein"``.
    method : str
        ``"emd"`` (exact network simplex), ``"circle"`` (exact solver on S^1) or
        ``"sliced"`` (the sliced estimate, *not* W_p).
    exact : bool
        True for ``"emd"`` and ``"circle"``.
    p : int
        The order.
    cost : str
        ``"geodesic"`` or ``"chordal"`` as requested (the sliced value is always geodesic).
    n, m : int
        Cloud sizes as given.
    result_code : int or None
        POT's ``log["result_code"]`` for ``"emd"`` (1 = optimal), else None.
    cost_matrix_bytes : int
        Bytes of the float64 cost matrix ``8 n' m'`` for ``"emd"`` (sizes after
        dropping negligible nodes), else 0.
    message : str
        Why a fallback happened, or ``""``.
    density : DensityCloud or None
        The converted density for :func:`wasserstein_to_density`, else None.
    distance : str
        What ``value`` is: ``"wasserstein"`` (W_p) or ``"sliced_wasserstein"``
        (the spherical sliced distance of :func:`sliced_wasserstein_sphere`,
        a different metric).
    n_support, m_support : int
        Points handed to the solver: for ``"emd"``, those with weight above
        :data:`NEGLIGIBLE_WEIGHT` times the total; else ``n`` and ``m``.
    solver : str
        For ``"emd"``: ``"dense"`` (simplex on every pair) or ``"sparse"``
        (simplex on candidate edges, certified on every pair); else ``""``.
    rounds : int
        Simplex solves: the candidate-set solves for ``"sparse"``; for ``"dense"``, 1 plus
        the candidate solves before a hand-over (whose potentials started it); 0 otherwise.
    edges : int
        Edges of the last network solved (``n' m'`` for ``"dense"``), 0 otherwise.
    gap_bound : float or None
        For ``"emd"``: a proven bound on ``W_p^p(returned) - W_p^p(optimal)``
        from the dual potentials checked on every pair,
        ``P - <a, u> - <b, v> - min(0, min_ij (C_ij - u_i - v_j))`` plus the
        round-off of the sums; None otherwise.  It measures how far the
        floating-point plan is from optimal, typically 1e-12 for costs of
        order 1.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import wasserstein
    >>> value, info = wasserstein(np.eye(3)[:1], np.eye(3)[1:], return_info=True)
    >>> info.method, info.distance, info.exact, info.result_code, info.cost_matrix_bytes
    ('emd', 'wasserstein', True, 1, 16)
    >>> info.solver, info.gap_bound < 1e-14
    ('dense', True)
    """

    value: float
    method: str
    exact: bool
    p: int
    cost: str
    n: int
    m: int
    result_code: int | None
    cost_matrix_bytes: int
    message: str = ""
    density: DensityCloud | None = None
    distance: str = _WASSERSTEIN
    n_support: int = 0
    m_support: int = 0
    solver: str = ""
    rounds: int = 0
    edges: int = 0
    gap_bound: float | None = None


def _cost(x: np.ndarray, y: np.ndarray, cost: str, p: int) -> np.ndarray:
    """Cost matrix d(x_i, y_j)^p built in row blocks (validated inputs)."""
    n, m = x.shape[0], y.shape[0]
    out = np.empty((n, m))
    rows = max(1, _BLOCK_ELEMENTS // m)
    for i0 in range(0, n, rows):
        xb = x[i0 : i0 + rows]
        dist = cdist(xb, y)
        if cost == "geodesic":
            # θ = 2 atan2(|x - y|, |x + y|): accurate near 0 and π, unlike arccos <x, y>.
            np.arctan2(dist, cdist(xb, -y), out=dist)
            dist *= 2.0
        if p == 2:
            dist *= dist
        out[i0 : i0 + rows] = dist
    return out


def cost_matrix(x, y, cost: str = "geodesic", p: int = 1) -> np.ndarray:
    """Pairwise transport cost ``d(x_i, y_j)^p`` between two clouds on S^{d-1}.

    Geodesic: ``d = arccos <x, y>``, evaluated as ``2 atan2(|x - y|, |x + y|)``,
    which keeps full relative accuracy near 0 and π (``arccos`` of a clipped
    inner product has errors ~1e-8 there).  Chordal: ``d = |x - y|``.
    theory §9(b).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors.
    y : array_like, shape (m, d)
        Unit vectors.
    cost : {"geodesic", "chordal"}
        Ground distance; radians for geodesic, ambient units for chordal.
    p : {1, 2}
        Power.

    Returns
    -------
    ndarray, shape (n, m)
        float64, ``8 n m`` bytes.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import cost_matrix
    >>> e = np.eye(3)
    >>> bool(np.isclose(cost_matrix(e[:1], e[1:2])[0, 0], np.pi / 2))
    True
    """
    x = as_points(x, "x")
    y = as_points(y, "y", x.shape[1])
    return _cost(x, y, _as_choice(cost, "cost", _COSTS), _as_p(p))


def _emd_wpp(x, y, a, b, cost, p, num_iter_max, solver):
    """Exact W_p^p by POT's network simplex with its optimality certificate; raise if it did not converge.

    The larger cloud is handed to the simplex as the source side: W_p is symmetric, and with
    n << m the simplex on the (m, n) problem pivots 2-4x faster than on the (n, m) one
    (measured: 1024 particles against 8192 weighted quadrature nodes on S^2, 17.8 s -> 8.0 s;
    512 against 8192, 4.8 s -> 1.3 s; the same optimum to 2e-15 relative).  ``solver`` is
    "dense", or "sparse" (candidate edges, :mod:`._candidates`; the dense simplex takes over
    when the candidate loop gives up).
    """
    if x.shape[0] < y.shape[0]:
        x, y, a, b = y, x, b, a
    M = _cost(x, y, cost, p)
    result = sparse_emd(M, x, a, y, b, num_iter_max) if solver == "sparse" else dense_emd(M, a, b, num_iter_max)
    if result.result_code != 1:
        raise RuntimeError(
            f"ot.emd2 did not reach the optimum (result_code={result.result_code}: {result.message!r}) "
            f"for clouds of sizes {x.shape[0]} and {y.shape[0]} with num_iter_max={num_iter_max}; "
            "increase num_iter_max"
        )
    return result, M.nbytes


def _pick_solver(solver: str, n: int, m: int) -> str:
    """The solver "auto" picks: candidate edges from ``SPARSE_MIN_PAIRS`` pairs and ``SPARSE_MIN_SIDE``
    points a side, the dense simplex below."""
    if solver != "auto":
        return solver
    return "sparse" if n * m >= SPARSE_MIN_PAIRS and min(n, m) >= SPARSE_MIN_SIDE else "dense"


def _support(w: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Weights above ``NEGLIGIBLE_WEIGHT`` × total, renormalised if any dropped weight was > 0.

    Returns the kept weights and the boolean mask (None when every point is kept).
    """
    keep = w > NEGLIGIBLE_WEIGHT * w.sum()
    if keep.all():
        return w, None
    kept = w[keep]
    if np.any(w[~keep] > 0):
        kept = kept / kept.sum()
    return kept, keep


def _too_large(n: int, m: int, n_kept: int, m_kept: int, max_exact: int) -> str:
    dropped = (n - n_kept) + (m - m_kept)
    sizes = f"n={n_kept}, m={m_kept}" + (
        f" (after dropping {dropped} point(s) of negligible weight from n={n}, m={m})" if dropped else ""
    )
    return (
        f"exact W_p needs n*m <= max_exact**2 = {max_exact}**2, got {sizes}: about "
        f"{32 * n_kept * m_kept / 2**30:.2f} GiB at 32 bytes per pair"
    )


def wasserstein(
    x,
    y,
    a=None,
    b=None,
    p: int = 2,
    cost: str = "geodesic",
    *,
    method: str = "exact",
    solver: str = "auto",
    max_exact: int = DEFAULT_MAX_EXACT,
    num_iter_max: int = _MIN_NUM_ITER,
    fallback: str = "raise",
    n_projections: int = DEFAULT_N_PROJECTIONS,
    seed=0,
    return_info: bool = False,
):
    """Exact Wasserstein distance W_p between two weighted clouds on S^{d-1}.

    .. math::
        W_p(μ, ν) = \\Big(\\min_{π ∈ Π(a, b)} \\sum_{ij} π_{ij}\\, d(x_i, y_j)^p\\Big)^{1/p},

    with ``d`` the geodesic (radians) or chordal distance.  theory §9(b), §10.

    Method: POT's exact network simplex ``ot.emd2`` with ``numItermax =
    num_iter_max`` (at least 1e7) and a check of ``result_code == 1``.  For
    ``d = 2`` and the geodesic cost the exact circle solver of
    :func:`wasserstein_circle` is used instead, for any size.  Points whose
    weight is at most :data:`NEGLIGIBLE_WEIGHT` (1e-15) times the total are
    dropped before the simplex (zero-mass quadrature nodes of a concentrated
    density, say); the kept weights are renormalised if the dropped ones
    carried any mass.

    Solver.  ``solver="dense"`` runs the simplex on all ``n' m'`` pairs.
    ``solver="sparse"`` runs it on candidate edges (the larger cloud is the
    source side; the 32 nearest targets of each source, ``max(8, k/16)`` of
    them when the smaller cloud has ``k < 512`` points, and the 8 nearest
    sources of each target, once the source
    cloud is moved by the mean displacement ``Σ b_j y_j - Σ a_i x_i``, and the
    support of one feasible plan), checks the reduced cost ``C_ij - u_i - v_j``
    of every pair with the potentials it returns, adds the pairs below
    ``-1e-10 max C`` (or below twice the simplex's own round-off on the edges it
    had, when that is larger) and solves again; the result is the same optimum
    (measured: to 5e-17 in ``W_2^2``, to 2e-14 on synchronised clouds where
    ``max C ~ 1e-4``), with the proven bound ``info.gap_bound``.  Between
    measures of different shapes (more than ``n' + m'`` violating pairs and
    more than ``n' m' / 128`` in a round) it hands over to the dense simplex,
    started from the potentials of the last candidate solve (POT's
    ``potentials_init``): 1.1-1.5x one dense solve for a vMF(50) cloud against a
    uniform one (512² to 8192 x 32), and 0.72-0.78x a cold dense solve on the
    chaos study's long-horizon problems that hand over (128-512 particles
    against 4608 characteristics nodes).  ``"auto"`` (default) takes
    ``"sparse"`` from :data:`SPARSE_MIN_PAIRS` (2^18) pairs with at least :data:`SPARSE_MIN_SIDE`
    (32) points a side.  Measured (2 shared cores, one thread, squared geodesic
    cost on S^2), time of ``"sparse"`` over ``"dense"``, best of 3: uniform clouds
    512² 0.74, 700 x 400 0.76, 8192 x 32 0.85, two vMF(8) samples 1024 x 256
    1.02; particles against the chaos study's density nodes at 2^18-2^19 pairs
    (ten instances: 32-1024 particles against 512-8192 Gauss–Legendre or
    characteristics nodes) 0.26-0.70; and (earlier, above 2^19 pairs) uniform
    clouds 800² 0.67, 1000² 0.55, 2000² 0.77, 4000² 0.37, 5000² 0.32, 8192 x 64
    0.72, 4096 x 128 0.61. One run each:
    particles against a weighted Gauss–Legendre grid from the chaos study, 8192 nodes
    against 64 / 128 / 256 / 512 / 1024 particles (four instances each):
    1.02 / 1.47 / 3.43 / 4.47 / 14.05 s -> 0.43 / 0.62 / 1.06 / 0.98 / 1.71 s;
    the positive against the negative part of the difference of two SPDE
    solutions on one grid, about 4100² pairs: 2.7-8.0 s -> 0.6-1.1 s.

    Size limit.  The exact path needs about 32 bytes per pair (measured peak
    memory, d = 3): the ``8 n m``-byte cost matrix plus POT's dense plan and
    network — 0.13 GB at n = m = 2000, 0.8 GB at 5000, 1.15 GB at 6000.  It is
    used when ``n' m' <= max_exact²`` (default 6000², i.e. 6000 points per side
    for equal sizes; ``n', m'`` the sizes after dropping negligible points).
    Above that it raises a ``ValueError`` that names the limit and the
    remedies: subsample the clouds, use a coarser density quadrature, raise
    ``max_exact`` when memory and time allow, or ask for the sliced distance
    explicitly.  It never returns another distance in place of W_p unless
    asked to: ``fallback="sliced"`` returns the sliced value above the limit
    with a :class:`SlicedFallbackWarning`, and ``method="sliced"`` returns it
    always; the info then says ``distance == "sliced_wasserstein"``.  CPU time
    for uniform random clouds with n = m (cost matrix + simplex, one core in
    use, shared 2-core machine): 0.2 s at 1000, 0.6-1.1 s at 2000, 5-8 s at
    5000.

    The sliced distance of :func:`sliced_wasserstein_sphere` is a different
    metric, not an estimate of W_p: on two vMF(κ = 400) samples on S^2 whose
    mean directions are 0.2 rad apart (2000 points each, 256 projections) it
    is 0.256 where the exact W_2 is 0.199 (ratio 1.28).

    Parameters
    ----------
    x : array_like, shape (n, d)
        Unit vectors (``|x| = 1`` to 1e-8).
    y : array_like, shape (m, d)
        Unit vectors, same d.
    a : array_like, shape (n,), optional
        Non-negative weights summing to 1 (to 1e-9); uniform if None.
    b : array_like, shape (m,), optional
        Same for ``y``.
    p : {1, 2}
        Order.
    cost : {"geodesic", "chordal"}
        Ground distance.
    method : {"exact", "sliced"}
        ``"exact"`` (default): W_p.  ``"sliced"``: the spherical sliced
        distance of :func:`sliced_wasserstein_sphere` (geodesic cost only),
        with ``n_projections`` and ``seed``; not W_p.
    solver : {"auto", "dense", "sparse"}
        Network simplex on every pair or on certified candidate edges (see
        Solver above); the same optimum either way.
    max_exact : int, >= 1
        The exact solver is used when ``n' m' <= max_exact**2``.
    num_iter_max : int, >= 1e7
        Iteration cap of the network simplex.
    fallback : {"raise", "sliced"}
        What the exact method does above ``max_exact``: raise (default), or
        return the sliced distance with a :class:`SlicedFallbackWarning`
        (geodesic cost only).
    n_projections : int, >= 1
        Projections of the sliced distance.
    seed : int, SeedSequence or Generator
        Seed of the sliced distance's projections.
    return_info : bool
        Also return a :class:`TransportInfo`.

    Returns
    -------
    float
        W_p (radians for geodesic), or the sliced distance with
        ``method="sliced"`` or after an opted-in fallback.
    TransportInfo
        Only with ``return_info=True``; ``info.distance`` names the value.

    Raises
    ------
    RuntimeError
        If the network simplex stops before the optimum.
    ValueError
        On invalid input, or above ``max_exact`` with ``fallback="raise"``.

    Examples
    --------
    >>> import numpy as np
    >>> from meanfield.transport import wasserstein
    >>> x = np.array([[1.0, 0.0, 0.0]])
    >>> y = np.array([[np.cos(0.3), np.sin(0.3), 0.0]])
    >>> round(wasserstein(x, y), 12), round(wasserstein(x, y, cost="chordal"), 12)
    (0.3, 0.298876264947)
    >>> value, info = wasserstein(x, y, method="sliced", return_info=True)
    >>> info.method, info.distance, info.exact
    ('sliced', 'sliced_wasserstein', False)
    """
    x, y, a, b = _as_pair(x, y, a, b)
    p = _as_p(p)
    cost = _as_choice(cost, "cost", _COSTS)
    method = _as_choice(method, "method", _METHODS)
    solver = _as_choice(solver, "solver", _SOLVERS)
    fallback = _as_choice(fallback, "fallback", _FALLBACKS)
    max_exact = as_int(max_exact, "max_exact", min_value=1)
    num_iter_max = as_int(num_iter_max, "num_iter_max", min_value=_MIN_NUM_ITER)
    n_projections = as_int(n_projections, "n_projections", min_value=1)
    as_rng(seed)  # validated here, used only by the sliced distance
    n, m = x.shape[0], y.shape[0]
    if method == "sliced":
        _check_sliced_cost(cost, "method='sliced'")
        value = _sliced(x, y, a, b, p, n_projections, seed)[0]
        info = TransportInfo(value, "sliced", False, p, cost, n, m, None, 0, "", None, _SLICED, n, m)
        return (value, info) if return_info else value
    if x.shape[1] == 2 and cost == "geodesic":
        wpp = float(circle_wpp_turns(_circle_turns(x)[None], _circle_turns(y)[None], a, b, p)[0])
        value = 2.0 * np.pi * wpp ** (1.0 / p)
        info = TransportInfo(value, "circle", True, p, cost, n, m, None, 0, n_support=n, m_support=m)
        return (value, info) if return_info else value
    a_kept, keep_x = _support(a)
    b_kept, keep_y = _support(b)
    n_kept, m_kept = a_kept.size, b_kept.size
    if n_kept * m_kept <= max_exact**2:
        xs = x if keep_x is None else x[keep_x]
        ys = y if keep_y is None else y[keep_y]
        res, nbytes = _emd_wpp(xs, ys, a_kept, b_kept, cost, p, num_iter_max, _pick_solver(solver, n_kept, m_kept))
        value = max(res.value, 0.0) ** (1.0 / p)
        info = TransportInfo(
            value, "emd", True, p, cost, n, m, res.result_code, nbytes, n_support=n_kept, m_support=m_kept,
            solver=res.solver, rounds=res.rounds, edges=res.edges, gap_bound=res.gap,
        )
        return (value, info) if return_info else value
    message = _too_large(n, m, n_kept, m_kept, max_exact)
    if fallback == "raise":
        raise ValueError(
            message + ". Subsample the clouds (e.g. x[rng.choice(n, k, replace=False)]), use a coarser "
            "quadrature for a density, raise max_exact if memory and time allow, or ask for the spherical "
            "sliced distance explicitly with method='sliced' (a different metric, not W_p)"
        )
    _check_sliced_cost(cost, "fallback='sliced'")
    warnings.warn(
        message + f"; returning the geodesic sliced distance with {n_projections} projections, "
        "which is not W_p (fallback='sliced')",
        SlicedFallbackWarning,
        stacklevel=2,
    )
    value = _sliced(x, y, a, b, p, n_projections, seed)[0]
    info = TransportInfo(value, "sliced", False, p, cost, n, m, None, 0, message, None, _SLICED, n, m)
    return (value, info) if return_info else value


def _check_sliced_cost(cost: str, what: str) -> None:
    if cost != "geodesic":
        raise ValueError(f"{what} gives the geodesic sliced distance only, got cost={cost!r}")

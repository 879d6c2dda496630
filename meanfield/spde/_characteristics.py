"""Characteristics (Lagrangian quadrature) scheme for the McKean–Vlasov SPDE on S^{d-1}, any d >= 2.

The push-forward scheme ρ_{n+1} = (T_n)_# ρ_n with the particles' one-step map

    T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)),      Π(z) = z / |z|,

has the exact solution ρ_n = (Φ_n)_# ρ_0 with Φ_n = T_{n-1} ∘ … ∘ T_0. This module carries
it without any projection onto harmonics: a quadrature rule (x_q, w_q) of the sphere
(equispaced on S^1; Gauss–Legendre in cos θ × uniform φ on S^2; on S^{d-1}, d >= 4, the
product Gauss–Gegenbauer rule in hyperspherical coordinates, :func:`meanfield.sphere.hypersphere_quadrature`)
with masses m_q = w_q ρ_0(x_q) is moved by exactly the particle step (same noise field, same
projection), the attention velocity v[ρ_n] being that of the weighted node cloud (weights =
masses; spectral attention on S^1 and S^2, the blocked direct sum in d >= 4). Then

    ∫ f dρ_n = Σ_q m_q f(Φ_n(x_q)),

whose error is the quadrature error of (f ∘ Φ_n) ρ_0 on the initial sphere; it stays small
while the flow contracts (on S^1 and S^2 the noise flow synchronises; in d >= 4 it does when
the top Lyapunov exponent (d-3) κ'(1)/2 - (d-1) κ(1)/2 is negative, e.g. ReLU noise). No
degree, no CFL condition, mass exact.

Densities. Forward: each node carries log J_q = log det DΦ_n(x_q) (sum of the log-dets of
the tangent Jacobians of the step maps, differentiated analytically: spectral attention
through its coefficients, direct-sum attention through the covariance of the softmax weights,
spectral noise through its harmonic basis, random-feature noise through φ'), and
ρ_n(Φ_n(x_q)) = ρ_0(x_q) / J_q. Backward: at any point y, the near-identity maps are
inverted one by one by Newton on the sphere (x_{k} = T_k^{-1}(x_{k+1}), x_n = y), using the
stored attention coefficients and noise of every step, and

    ρ_n(y) = ρ_0(x_0) / Π_k det DT_k(x_k).

Resolution. Mass that has not synchronised yet lives in an exponentially thin patch of the
initial sphere that the flow stretches across the sphere; a fixed rule samples it by
chance. Diagnostics: the area defect |Σ_q w_q J_q - |S|| / |S| (Φ_n is a diffeomorphism, so
∫ J = |S|) and the unresolved mass (mass of nodes whose image cell is longer than
``split_threshold``). Remedy (``split=True``): every ``split_every`` steps, cells whose image
is too long are split *in the starting coordinates* into sub-cells with their own
Gauss–Legendre × midpoint sub-rules; the new nodes are carried from t = 0 on the same noise
path, with the attention velocity of each past step re-evaluated from that step's stored
attention coefficients. So new nodes do not change the past of the old ones (the past
velocity is that of the cloud as it was); from the split on, the refined cloud drives the
attention. The children share their parent's mass in proportion to w_c ρ_0(x_c), so the
total mass is unchanged.

Caveat (measured): the initial rule is a *global* Gauss–Legendre × uniform rule, whose
one-node-per-cell errors w_q f(x_q) - ∫_cell f are first order in the cell size and cancel
only in the sum over all cells. Splitting some cells removes their share of that
cancellation, so splitting cells that the global rule still resolves makes the result
*worse* (a forced split of every stretched cell at t = 0.5, n_lat = 24–48, moved the
degree <= 4 moments by 3e-5 where the unsplit rule was accurate to 4e-14). Hence the default
threshold of 1 rad: only cells whose image spans a sizeable arc, for which the one-node
estimate is already wrong at O(1), are split. For the same reason the area defect grows
after splits and ``tol`` applies to the unresolved mass only (``area_tol`` is optional).
"""

from __future__ import annotations

import time as _time

import numpy as np

from ._char_cells import Cells
from ._char_direct import DirectAttention
from ._char_maps import Attention, NoiseStep, Step, apply_step, log_volume
from ._char_solution import CharacteristicsError, CharacteristicsSolution, _read_only
from ._initial import InitialCondition, as_initial_condition
from .._validate import as_beta, as_bool, as_float, as_int, as_matrix
from ..noise import noise_dimension
from ..harmonics import sphere_area
from ..sphere import cell_chart, row_sums
from ..particles import step_grid

__all__ = ["solve_characteristics", "CharacteristicsSolution", "CharacteristicsError"]

#: Accuracy of the transforms that evaluate the noise field (that of NoisePath.evaluate).
NOISE_EPS = 1e-12
#: Dimensions with a spectral attention evaluator (:class:`meanfield.attention_spectral.SpectralAttention`).
SPECTRAL_DIMENSIONS = (2, 3)
#: Default number of nodes on S^{d-1}, d >= 4 (n_lat = round((M/2)^{1/(d-1)}) per polar angle).
DEFAULT_M_ANY_D = 8192


# ----------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """a · b by NumPy's pairwise summation, not BLAS: the same bits on any number of threads, no
    OpenBLAS threads left spinning on the cores of the next step's transforms (the BLAS dot under
    a one-thread limit cost about 50 us a call at 4608 nodes, the limit's own switching), and
    round-off O(u log n) (``einsum``'s running sums left 1.04e-14 of area defect at t = 0 on
    20000 nodes of S^4, against 1e-14 allowed)."""
    return float(np.sum(a * b))


def _initial_density(rho0, d: int):
    """A callable ρ_0(x) (N, d) -> (N,) and a description."""
    rho0 = as_initial_condition(rho0, d)
    if isinstance(rho0, InitialCondition):
        return rho0.density, rho0.to_dict()
    if callable(rho0):
        return (lambda x: np.asarray(rho0(x), dtype=np.float64)), {"kind": "callable", "repr": repr(rho0)}
    raise TypeError("rho0 must be 'uniform', a dict, an initial-condition object (Uniform, VonMisesFisher, "
                    f"Mixture) or a callable density rho0(x) for points (N, d); got {type(rho0).__name__}")


# ----------------------------------------------------------------------------------------
# solver state
# ----------------------------------------------------------------------------------------


class _State:
    """Nodes: cells, positions x, Jacobian columns C = DΦ [frame of the cell], log J, masses."""

    def __init__(self, cells: Cells, rho0):
        self.cells = cells
        self.x0 = cells.points()
        self.x = self.x0.copy()
        self.C = cells.start_frame()
        self.logJ = np.zeros(len(cells))
        dens = rho0(self.x0)
        self.rho0_at_nodes = dens
        self.mass = cells.w * dens

    def replace(self, keep, kids: Cells, x, C, logJ, rho0_at_nodes, mass) -> "_State":
        """A new state with the nodes ``keep`` of this one followed by the children ``kids``."""
        new = _State.__new__(_State)
        new.cells = Cells.concat([self.cells.take(keep), kids])
        new.x0 = np.concatenate([self.x0[keep], kids.points()])
        new.x = np.concatenate([self.x[keep], x])
        new.C = np.concatenate([self.C[keep], C])
        new.logJ = np.concatenate([self.logJ[keep], logJ])
        new.rho0_at_nodes = np.concatenate([self.rho0_at_nodes[keep], rho0_at_nodes])
        new.mass = np.concatenate([self.mass[keep], mass])
        return new

    def diameters(self) -> np.ndarray:
        """Length of the image cell, Σ_j |DΦ e_j| ext_j (first-order image of the box)."""
        # column norms |C e_j|, one (N, d-1) product per row of the component-major stack (np.linalg.norm
        # over axis 1 is 4x slower; an einsum does not run along the contiguous entries)
        C = self.C
        cols = C[:, 0, :] * C[:, 0, :]
        for i in range(1, C.shape[1]):
            cols += C[:, i, :] * C[:, i, :]
        np.sqrt(cols, out=cols)
        cols *= self.cells.extents()
        return row_sums(cols)

    def unresolved(self, threshold: float, diameters: np.ndarray | None = None) -> np.ndarray:
        """Cells whose image is longer than ``threshold`` *and* than the cell itself at t = 0.

        The second condition keeps a coarse initial rule (whose global Gauss–Legendre accuracy
        does not depend on the cell size) from counting as unresolved before the flow stretches it.
        ``diameters``: :meth:`diameters` if the caller has it already.
        """
        ext = row_sums(self.cells.extents())
        diam = self.diameters() if diameters is None else diameters
        return diam > np.maximum(threshold, ext)


def _advance(x, C, logJ, steps, attention, t_of):
    """Carry nodes through ``steps`` (list of Step); raise on folding."""
    for k, st in enumerate(steps):
        y, C_new, det = apply_step(st, attention, x, jac=True, det=True, carry=C)
        # read-only: the next step's attention adjoint and Hessian then share one set of angles
        # (meanfield.sphere.s2_points remembers arrays that cannot change)
        y.flags.writeable = False
        ld, det = log_volume(det)
        if not np.all(det > 0) or not np.all(np.isfinite(y)):
            bad = int(np.sum(~(det > 0)))
            raise CharacteristicsError(
                f"the step map folds at t = {t_of(k):.6g}: det DT <= 0 (or non-finite) at {bad} node(s), "
                f"min det = {np.nanmin(det):.3g}; the noise increment is too large for one step "
                f"— use a smaller dt (now {st.dt:g}), e.g. dt = {st.dt / 4:g}",
                t_of(k), "fold")
        C = C_new
        logJ = logJ + ld
        x = y
    return x, C, logJ


# ----------------------------------------------------------------------------------------
# the solver
# ----------------------------------------------------------------------------------------


def solve_characteristics(
    rho0,
    noise,
    beta: float,
    t_eval,
    dt: float,
    *,
    M: int | None = None,
    n_lat: int | None = None,
    V=None,
    attention: bool = True,
    attention_tol: float = 1e-10,
    attention_method: str = "auto",
    noise_map: str = "projected",
    d: int | None = None,
    split: bool = True,
    split_threshold: float = 1.0,
    split_every: int | None = None,
    max_split: int = 8,
    max_nodes: int | None = None,
    tol: float | None = 1e-2,
    area_tol: float | None = None,
    error_estimate: bool = False,
    seed=None,
    progress: bool = False,
) -> "CharacteristicsSolution":
    """Solve the McKean–Vlasov SPDE by characteristics: ρ_n = (T_{n-1} ∘ … ∘ T_0)_# ρ_0 on M nodes.

    T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)) is the particle step (``solve_particles``,
    ``scheme="euler"``) and the map of the push-forward scheme of ``solve_spde``; the nodes of
    a quadrature rule with masses m_q = w_q ρ_0(x_q) follow it, v[ρ_n] being the softmax
    attention velocity P_x V N/G of the weighted node cloud (module docstring).

    Parameters
    ----------
    rho0 : str, dict, initial-condition object or callable
        ``"uniform"``, a dict for :func:`meanfield.spde.initial_condition_from_dict`, a
        ``Uniform`` / ``VonMisesFisher`` / ``Mixture``, or a non-negative density ``rho0(x)``
        for points (N, d) -> (N,) integrating to 1 (to 1e-6 by the initial rule).
    noise : NoiseSource or None
        The common noise; it fixes d. ``None`` is the deterministic equation (give ``d``).
        Spectral noise is differentiated exactly; other fields by a centred difference
        (step 1e-6, error about 1e-10).
    beta : float
        Inverse temperature, any real (β < 0 weights distant tokens more; β = 0 with attention on:
        v = P_x V (mean of ρ)). For β < 0 the spectral attention has a round-off floor
        2.2e-16 e^{2 abs(β)}; an ``attention_tol`` below it is refused.
    t_eval : float or array_like
        Save times (non-decreasing multiples of ``dt``); a single number T means [0, T].
    dt : float, > 0
        Time step h; the step times are n h, so a particle run with the same dt and noise
        sees the same increments.
    M : int, optional
        Number of initial nodes. S^{d-1}, d >= 3: rounded to 2 n_lat^{d-1} with
        n_lat = round((M / 2)^{1/(d-1)}); S^1: M equispaced nodes (default 1024).
    n_lat : int, optional
        d >= 3: Gauss nodes per polar angle (S^2: Gauss–Legendre rings), n_φ = 2 n_lat
        longitudes, M = 2 n_lat^{d-1}; default 128 on S^2, 16 on S^3 and 8 on S^4 (M ≈ 8192 for d >= 4).
    V : ndarray (d, d), optional
        Value matrix (Q = K = I); default identity.
    attention : bool
        Switch the attention drift off.
    attention_tol : float, > 0
        Absolute accuracy of the spectral attention velocity (``|v| <= ||V||``); fixes its degree.
    attention_method : {"auto", "spectral", "direct"}
        How the attention of the node cloud is evaluated: spectral (S^1, S^2: O(M) per step),
        or the blocked direct sum (any d, O(M²) per step, exact to round-off). ``"auto"``:
        spectral where it exists, direct otherwise.
    noise_map : {"projected", "flow"}
        "flow" (RotationNoise only): T(x) = exp(ΔΩ) Π(x + h v), an exact rotation step.
    d : int, >= 2, optional
        Needed when ``noise`` is None.
    split : bool
        Adaptive splitting of initial cells whose image is longer than ``split_threshold``.
    split_threshold : float, > 0
        Image-cell length (radians) above which a cell that has been stretched (image longer
        than the cell at t = 0) is split and its mass counts as unresolved.
    split_every : int, optional
        Steps between splitting passes (default: about 0.5 time units; each pass re-runs the new
        nodes from t = 0, so its cost grows with t).
    max_split : int, >= 2
        Largest number of sub-cells per direction in one split.
    max_nodes : int, optional
        Cap on the number of nodes (default 8 M); beyond it no more cells are split.
    tol : float or None
        Raise :class:`CharacteristicsError` at a save time when the unresolved mass exceeds
        it (None: only report it).
    area_tol : float or None
        Same for the area defect (default: only report it). Without splitting the defect of
        the global rule is tiny while the flow is resolved (its one-node-per-cell errors
        cancel); splitting part of the cells removes that cancellation, so after splits the
        defect measures the one-point error of the split cells rather than the rule's error.
    error_estimate : bool
        Also solve with about M / 2 nodes (n_lat / 2^{1/(d-1)}) and report, per save time,
        the largest change of the real harmonic coefficients of degree <= 4 (d >= 4 without a
        registered harmonic basis: of the monomial moments of degree <= 4,
        :meth:`CharacteristicsSolution.monomial_moments`) (:attr:`CharacteristicsSolution.error_estimate`).
    seed : int, optional
        Random longitude (S^1: angle) offset of the initial rule; None: no offset.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    CharacteristicsSolution

    Raises
    ------
    ValueError, TypeError
        Bad input (the message names the parameter and the allowed range).
    CharacteristicsError
        A step map folds (det DT <= 0: lower dt) or the diagnostics exceed ``tol``; the partial
        solution is attached.

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> from meanfield.noise import NoisePath
    >>> from meanfield.spde import VonMisesFisher
    >>> noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=0, t_max=0.25)
    >>> sol = solve_characteristics(VonMisesFisher([0, 0, 1], 4.0), noise, beta=1.0, t_eval=[0, 0.25],
    ...                             dt=2**-5, n_lat=16)
    >>> abs(sol.mass(-1) - 1.0) < 1e-12, sol.moments(-1, 1).shape
    (True, (4,))
    """
    wall0 = _time.perf_counter()
    if noise_map not in ("projected", "flow"):
        raise ValueError(f"noise_map must be 'projected' or 'flow', got {noise_map!r}")
    d = noise_dimension(noise, d)
    d = as_int(d, "d", min_value=2)
    beta = as_beta(beta)
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True)
    attention = as_bool(attention, "attention")
    progress = as_bool(progress, "progress")
    attention_tol = as_float(attention_tol, "attention_tol", min_value=0.0, strict_min=True)
    if np.ndim(t_eval) == 0:
        t_eval = [0.0, as_float(t_eval, "t_eval", min_value=0.0)]
    t_eval = np.atleast_1d(np.asarray(t_eval, dtype=np.float64))
    if t_eval.ndim != 1 or t_eval.size == 0 or not np.all(np.isfinite(t_eval)) or np.any(t_eval < 0) \
            or np.any(np.diff(t_eval) < 0):
        raise ValueError("t_eval must be a number T >= 0 or a non-empty, finite, non-decreasing 1-D array "
                         "of times >= 0")
    k_save = step_grid(0.0, dt, t_eval)
    n_total = int(k_save[-1])
    if noise is not None and n_total * dt > noise.t_max * (1 + 1e-12):
        raise ValueError(f"t_eval reaches {n_total * dt} beyond the noise path's t_max = {noise.t_max}; "
                         "build the noise with a larger t_max")
    if noise_map == "flow" and noise is not None and not noise.supports_flow:
        raise ValueError("noise_map='flow' needs a rotation noise (a NoiseSource with supports_flow, e.g. "
                         f"RotationNoise), got {type(noise).__name__}")
    V = as_matrix(V, "V", d)
    chart = cell_chart(d)
    if d >= 3:
        if M is not None and n_lat is not None:
            raise ValueError("give M or n_lat, not both")
        if M is not None:
            n_lat = chart.resolution(as_int(M, "M", min_value=8))
        default_n = 128 if d == 3 else chart.resolution(DEFAULT_M_ANY_D)
        n_lat = as_int(default_n if n_lat is None else n_lat, "n_lat", min_value=2, max_value=20000)
        n_init = n_lat
    else:
        if n_lat is not None:
            raise ValueError("n_lat is an option of S^{d-1}, d >= 3; on S^1 give M")
        n_init = as_int(1024 if M is None else M, "M", min_value=4)
    if attention_method not in ("auto", "spectral", "direct"):
        raise ValueError(f"attention_method must be 'auto', 'spectral' or 'direct', got {attention_method!r}")
    if attention_method == "spectral" and d not in SPECTRAL_DIMENSIONS:
        raise ValueError(f"attention_method='spectral' needs d in {SPECTRAL_DIMENSIONS} (S^1, S^2), got d = {d}; "
                         "use 'direct' or 'auto'")
    split = bool(split)
    split_threshold = as_float(split_threshold, "split_threshold", min_value=0.0, strict_min=True)
    split_every = max(1, int(round(0.5 / dt))) if split_every is None else as_int(split_every, "split_every",
                                                                                     min_value=1)
    max_split = as_int(max_split, "max_split", min_value=2, max_value=64)
    if tol is not None:
        tol = as_float(tol, "tol", min_value=0.0, strict_min=True)
    if area_tol is not None:
        area_tol = as_float(area_tol, "area_tol", min_value=0.0, strict_min=True)
    rho0_fn, rho0_desc = _initial_density(rho0, d)

    cells = Cells.initial(d, n_init)
    if seed is not None:
        off = np.random.default_rng(seed).uniform(0, chart.longitude_spacing(n_init))
        k = d - 2  # the longitude
        cells.lo[:, k] += off
        cells.hi[:, k] += off
        cells.node[:, k] += off
    state = _State(cells, rho0_fn)
    dens = state.rho0_at_nodes
    if dens.shape != (len(cells),) or not np.all(np.isfinite(dens)):
        raise ValueError(f"rho0(x) must return finite values of shape (N,) for points (N, {d})")
    if np.any(dens < 0):
        raise ValueError(f"rho0 must be non-negative; its minimum at the nodes is {dens.min():.3g}")
    mass0 = float(state.mass.sum())
    if abs(mass0 - 1.0) > 1e-6:
        raise ValueError(f"rho0 must be a probability density (∫ rho0 = 1), but the initial rule gives "
                         f"{mass0:.12g}; divide it by that value")
    M0 = len(cells)
    max_nodes = 8 * M0 if max_nodes is None else as_int(max_nodes, "max_nodes", min_value=M0)
    if not attention:
        att = None
    elif attention_method == "direct" or (attention_method == "auto" and d not in SPECTRAL_DIMENSIONS):
        att = DirectAttention(d, beta, V)
    else:
        att = Attention(d, beta, V, attention_tol)
    noise_eps = NOISE_EPS
    area = sphere_area(d)

    meta = {
        "solver": "solve_characteristics", "scheme": "characteristics", "d": d, "beta": beta, "dt": dt,
        "M": M0, "n_lat": n_init if d >= 3 else None, "attention": attention,
        "attention_method": None if att is None else ("direct" if isinstance(att, DirectAttention) else "spectral"),
        "attention_lmax": None if att is None else att.lmax, "attention_tol": attention_tol,
        "noise_map": noise_map, "V": None if V is None else V.tolist(), "rho0": rho0_desc,
        "noise": {"type": None} if noise is None else noise.describe(), "split": split, "split_threshold": split_threshold,
        "split_every": split_every, "max_split": max_split, "max_nodes": max_nodes, "tol": tol, "area_tol": area_tol,
        "seed": seed, "n_steps": n_total,
    }
    timing = {"steps_s": 0.0, "split_s": 0.0, "node_steps": 0, "split_events": 0, "split_budget_hit": False}
    steps: list[Step] = []
    snaps: list[dict] = []
    saved_t: list[float] = []
    n_splits = 0

    def t_of(k):
        return (k + 1) * dt

    def finish(completed: bool) -> "CharacteristicsSolution":
        m = dict(meta, completed=completed, n_splits=n_splits, wall_time_s=_time.perf_counter() - wall0,
                 timing=dict(timing, us_per_node_step=(1e6 * timing["steps_s"] / timing["node_steps"]
                                                      if timing["node_steps"] else None)))
        return CharacteristicsSolution(d, np.array(saved_t), snaps, steps, k_save[: len(saved_t)], dt, att,
                                       rho0_fn, split_threshold, m)

    def snapshot(t: float) -> None:
        diam = state.diameters()
        J = np.exp(state.logJ)
        diag = {
            "t": t, "n_nodes": len(state.cells), "n_splits": n_splits,
            "area_defect": float(abs(_dot(state.cells.w, J) - area) / area),
            "unresolved_mass": float(state.mass[state.unresolved(split_threshold, diam)].sum()),
            "max_cell_length": float(diam.max()), "min_log_jacobian": float(state.logJ.min()),
            "max_log_jacobian": float(state.logJ.max()), "max_depth": int(state.cells.depth.max()),
        }
        # no copies: the solver replaces these arrays (each step makes new x and log J; a split new
        # x0, w and masses) and never writes into them, so snapshots share x0, w and the masses
        # between splits (about half the memory of a solution saved at every step)
        snaps.append({"x": _read_only(state.x), "mass": _read_only(state.mass), "logJ": _read_only(state.logJ),
                      "w": _read_only(state.cells.w), "x0": _read_only(state.x0), "diag": diag})
        saved_t.append(t)
        if (tol is not None and diag["unresolved_mass"] > tol) or (area_tol is not None
                                                                 and diag["area_defect"] > area_tol):
            raise CharacteristicsError(
                f"the characteristics solution is no longer resolved at t = {t:.6g}: area defect "
                f"{diag['area_defect']:.3g} (area_tol = {area_tol}), unresolved mass {diag['unresolved_mass']:.3g} "
                f"(tol = {tol}; "
                f"{diag['n_nodes']} nodes, {n_splits} splits); raise n_lat/M (now {M0} nodes), "
                + ("raise max_nodes (now %d) or lower split_every" % max_nodes if split else "use split=True")
                + ", or pass tol=None to only report the diagnostics",
                t, "unresolved", finish(False))

    def do_split(k: int) -> None:
        nonlocal state, n_splits
        t0s = _time.perf_counter()
        for _round in range(6):
            cand = np.nonzero(state.unresolved(split_threshold))[0]
            if cand.size == 0:
                break
            ext = np.linalg.norm(state.C, axis=1) * state.cells.extents()
            # aim at children of image length <= threshold / 2, so they do not split again at once
            fac = np.clip(np.ceil(ext[cand] / (0.5 * split_threshold)), 1, max_split).astype(int)
            per = np.prod(fac, axis=1)
            budget = max_nodes - len(state.cells)
            # heaviest cells first when the node budget does not allow all splits
            order = np.argsort(-state.mass[cand], kind="stable")
            keep = order[np.cumsum(per[order] - 1) <= budget]
            if keep.size < cand.size:
                timing["split_budget_hit"] = True
            if keep.size == 0:
                break
            cand, fac = cand[keep], fac[keep]
            kids, parent = state.cells.take(cand).split(fac)
            xk = kids.points()
            rk = rho0_fn(xk)
            mk = kids.w * rk
            tot = np.bincount(parent, weights=mk, minlength=cand.size)
            pm = state.mass[cand]
            scale = np.divide(pm, tot, out=np.zeros_like(pm), where=tot > 0)
            mk = mk * scale[parent]
            xk, Ck, lk = _advance(xk, kids.start_frame(), np.zeros(len(kids)), steps[:k], att, lambda j: (j + 1) * dt)
            rest = np.setdiff1d(np.arange(len(state.cells)), cand)
            new = state.replace(rest, kids, xk, Ck, lk, rk, mk)
            state = new
            n_splits += int(cand.size)
            timing["split_events"] += 1
        timing["split_s"] += _time.perf_counter() - t0s

    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_total, desc="characteristics")
        except ImportError:  # pragma: no cover
            bar = None
    save_ptr = 0
    while save_ptr < k_save.size and k_save[save_ptr] == 0:
        snapshot(float(t_eval[save_ptr]))
        save_ptr += 1
    flow = noise_map == "flow"
    for n in range(n_total):
        ts = _time.perf_counter()
        t0, t1 = n * dt, (n + 1) * dt
        coeffs = att.coefficients(state.x, state.mass) if att is not None else None
        ns = NoiseStep(noise.field(t0, t1), d, noise_eps, flow) if noise is not None else None
        st = Step(dt, coeffs, ns)
        steps.append(st)
        try:
            state.x, state.C, state.logJ = _advance(state.x, state.C, state.logJ, [st], att, lambda j: t1)
        except CharacteristicsError as exc:
            exc.solution = finish(False)
            raise
        timing["steps_s"] += _time.perf_counter() - ts
        timing["node_steps"] += len(state.cells)
        if split and (n + 1) % split_every == 0:
            do_split(n + 1)
        if bar is not None:
            bar.update(1)
        while save_ptr < k_save.size and k_save[save_ptr] == n + 1:
            snapshot(float(t_eval[save_ptr]))
            save_ptr += 1
    if bar is not None:
        bar.close()
    sol = finish(True)
    if error_estimate:
        kw = dict(V=V, attention=attention, attention_tol=attention_tol, noise_map=noise_map, d=d, split=split,
                  split_threshold=split_threshold, split_every=split_every, max_split=max_split, tol=None,
                  area_tol=None, seed=seed, error_estimate=False, attention_method=attention_method)
        if d >= 3:
            kw["n_lat"] = max(2, int(round(n_init / 2 ** (1.0 / (d - 1)))))
        else:
            kw["M"] = max(4, n_init // 2)
        t_est = _time.perf_counter()
        half = solve_characteristics(rho0, noise, beta, t_eval, dt, **kw)
        est = np.array([np.abs(sol.low_moments(i, 4) - half.low_moments(i, 4)).max() for i in range(len(sol))])
        sol.error_estimate = est
        sol.meta["error_estimate"] = {"M_half": half.meta["M"], "max_change_deg4": est.tolist(),
                                      "wall_time_s": _time.perf_counter() - t_est}
    return sol

"""The Eulerian SPDE driver: validate, set up the basis and grid, step a registered scheme, monitor resolution."""

from __future__ import annotations

import math
import time as _time

import numpy as np

import meanfield

from .._validate import as_beta, as_bool, as_float, as_int, as_matrix, check_steps
from ..attention import required_degree
from ..noise import noise_dimension
from ..sphere import Basis, Grid, basis, check_dimension
from ._characteristics import solve_characteristics
from ._initial import InitialCondition, as_initial_condition, check_resolved
from ._schemes import Problem, get_scheme
from ._solution import SPDESolution, SPDEResolutionError, tail_fraction
from ._velocity import Velocity

__all__ = ["solve_spde", "initial_coefficients", "coefficient_degrees"]

#: Default relative accuracy of the truncated attention convolution used to check lmax against β.
ATTENTION_TOL = 1e-8


def coefficient_degrees(d: int, lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Degree l and energy multiplicity of every stored coefficient (see :class:`meanfield.sphere.Basis`).

    S^2 (complex alm, healpy packing): multiplicity 1 for m = 0 and 2 for m > 0, so that
    ``∫ ρ² = Σ mult · |a_lm|²``. S^1 (real Fourier): multiplicity 1.

    Returns
    -------
    ell : ndarray of int, shape (n,)
    mult : ndarray of float, shape (n,)

    Examples
    --------
    >>> ell, mult = coefficient_degrees(3, 1)
    >>> ell.tolist(), mult.tolist()
    ([0, 1, 1], [1.0, 1.0, 2.0])
    """
    b = basis(d, lmax)
    return b.ell.copy(), b.mult.copy()


def initial_coefficients(rho0, b: Basis, grid: Grid, neg_tol: float, tail_tol: float | None = None) -> tuple[np.ndarray, dict]:
    """State coefficients of ρ0 at the basis degree and a plain-dict description of ρ0 (validated)."""
    d, lmax = b.d, b.lmax
    rho0 = as_initial_condition(rho0, d)
    if isinstance(rho0, InitialCondition):
        c = rho0.coefficients(lmax)
        desc = rho0.to_dict()
        vals = rho0.density(grid.points)
        if np.any(vals < 0):
            raise ValueError("rho0 must be non-negative")
        if tail_tol is not None:
            truncated = grid.synth(c)
            negm = float(np.einsum("i,i->", grid.weights, np.maximum(-truncated, 0.0)))
            if tail_fraction(b, c) > tail_tol or negm > neg_tol:
                # the truncation at this degree would fail the run's first resolution check: say which degree works
                check_resolved(rho0, lmax, d=d, tail_tol=tail_tol, neg_tol=neg_tol)
    elif callable(rho0):
        vals = np.asarray(rho0(grid.points), dtype=np.float64)
        if vals.shape != (grid.Q,):
            raise ValueError(f"rho0(x) must return shape (N,) for points of shape (N, {d}), got {vals.shape}")
        if not np.all(np.isfinite(vals)):
            raise ValueError("rho0 returned NaN or infinite values")
        if np.any(vals < 0):
            raise ValueError(f"rho0 must be non-negative; its minimum on the quadrature grid is {vals.min():.3g}")
        if tail_tol is not None:
            c_try = grid.analysis(vals)
            if abs(b.mass(c_try) - 1.0) > 1e-6 or tail_fraction(b, c_try) > tail_tol:
                check_resolved(rho0, lmax, d=d, tail_tol=tail_tol, neg_tol=neg_tol)
        c = grid.analysis(vals)
        desc = {"kind": "callable", "repr": repr(rho0)}
    else:
        arr = np.asarray(rho0)
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.number):
            raise TypeError("rho0 must be 'uniform', an initial-condition object, a callable density or a 1-D "
                            "coefficient array")
        lin = type(b).lmax_from_size(arr.size, arr.dtype)
        if lin is None:
            raise ValueError(f"rho0 has {arr.size} coefficients, which is not the length of a state or real "
                             f"coefficient vector of {type(b).__name__} (state {b.n_state}, real {b.n_real} at "
                             f"lmax = {lmax})")
        src_basis = basis(d, lin)
        if np.iscomplexobj(arr) and not np.iscomplexobj(src_basis.zeros()):
            raise TypeError(f"coefficients of {type(b).__name__} must be real")
        if arr.size == src_basis.n_state and arr.dtype.kind == np.dtype(src_basis.state_dtype).kind:
            arr = arr.astype(src_basis.state_dtype)
        else:
            arr = src_basis.from_real(arr.astype(np.float64))
        if not np.all(np.isfinite(arr)):
            raise ValueError("rho0 coefficients contain NaN or infinite values")
        c = src_basis.resize(arr, lmax)
        desc = {"kind": "coefficients", "lmax": lin}
        vals = grid.synth(c)
        negm = float(np.einsum("i,i->", grid.weights, np.maximum(-vals, 0.0)))
        if negm > neg_tol:
            raise ValueError(f"rho0 must be non-negative: its negative part has mass {negm:.3g} > neg_tol = {neg_tol:g}")
    mass = b.mass(c)
    if abs(mass - 1.0) > 1e-6:
        raise ValueError(f"rho0 must be a probability density (∫ rho0 = 1), but its integral is {mass:.12g}; "
                         f"divide it by that value")
    return c, desc


def solve_spde(
    rho0,
    noise,
    beta: float,
    lmax: int,
    dt: float,
    t_eval,
    *,
    scheme: str = "pushforward",
    attention: bool = True,
    noise_on: bool = True,
    V=None,
    filter: int | None = None,
    tail_tol: float = 1e-4,
    neg_tol: float = 1e-3,
    attention_tol: float | None = None,
    noise_map: str = "projected",
    d: int | None = None,
    t0: float = 0.0,
    progress: bool = False,
    **options,
):
    """Solve the McKean–Vlasov SPDE of theory §4 on S^{d-1} for one noise path (d >= 4: characteristics only).

    dρ = [ -div_S(ρ v[ρ]) + ½ κ_σ(1) Δ_S ρ ] dt - div_S(ρ P_x dW),  v[ρ] = P_x A(x; ρ) with
    softmax attention (Q = K = I, value matrix V), discretised by the exponential Euler
    scheme (a) or the Lagrangian push-forward scheme (b) of theory §6 (see the module
    docstring for both formulas).

    Parameters
    ----------
    rho0 : str, dict, initial-condition object, callable or ndarray
        ``"uniform"``; a dict for :func:`initial_condition_from_dict` (e.g.
        ``{"kind": "vmf", "mu": [0, 0, 1], "kappa": 4.0}``); a :class:`Uniform`, :class:`VonMisesFisher` or :class:`Mixture`
        (exact coefficients); a callable density ``rho0(x)`` for points (N, d) -> (N,),
        projected on degree <= lmax by quadrature; or coefficients (S^2: complex alm of
        length (L+1)(L+2)/2 or real of length (L+1)², S^1: real Fourier of length 2L+1, any L;
        padded or truncated to ``lmax``). Must be non-negative and integrate to 1 (1e-6).
    noise : NoiseSource or None
        The common noise (:class:`~meanfield.noise.NoisePath`, :class:`~meanfield.noise.RotationNoise`,
        any :class:`~meanfield.noise.NoiseSource`); it fixes d. ``None`` means the deterministic
        equation (give ``d``).
    beta : float
        Inverse temperature of the attention, any real (β < 0 weights distant tokens more; nonzero
        when ``attention`` is on).
    lmax : int, >= 1
        Degree of the state. With attention it must be at least
        ``required_degree(d, beta, attention_tol)``.
    dt : float, > 0
        Time step h. The step times are n·h, so the noise increments are
        ``noise.field(n h, (n+1) h)``, exactly those of a particle run with the same step.
    t_eval : array_like
        Non-decreasing save times, each a multiple of ``dt`` (to 1e-9 relative).
    scheme : {"pushforward", "exponential", "characteristics"} or any name in :func:`scheme_names`
        (b) Lagrangian–spectral push-forward (default; no step-size condition, matches
        particles at fixed h) or (a) Eulerian Itô exponential Euler.
    attention, noise_on : bool
        Switch the attention drift / the noise off.
    V : ndarray (d, d), optional
        Value matrix; default identity. General V uses the ambient gradient of theory §4.
    filter : int, optional
        Order p (even, >= 2) of the exponential filter σ(l) = exp(-36 (l / lmax)^p)
        applied to the coefficients after every step (σ(0) = 1: mass is kept). Off by default.
    tail_tol : float
        Stop when the energy fraction in degrees l > 3 lmax / 4 exceeds this.
    neg_tol : float
        Stop when ∫ max(-ρ, 0) exceeds this.
    attention_tol : float, > 0, optional
        Eulerian schemes: relative accuracy of the truncated attention convolution used to check
        ``lmax`` (default 1e-8). ``scheme="characteristics"``: the absolute accuracy of its spectral
        attention velocity, which fixes that velocity's degree (default 1e-10, see
        :func:`solve_characteristics`).
    noise_map : {"projected", "flow"}
        Scheme (b) only. "projected": T(x) = Π(x + h v + ΔW(x)), the particles' map.
        "flow" (RotationNoise only): T(x) = exp(ΔΩ) Π(x + h v), an exact rotation.
    d : {2, 3}, optional
        Needed when ``noise`` is None; must match ``noise.d`` otherwise.
    t0 : float, >= 0
        Start time: ``rho0`` is the state at t0 and the steps are t0 + n·h, on the same
        noise path. With the saved coefficients of an earlier run as ``rho0`` (any degree:
        they are zero-padded) this restarts it, e.g. at a higher ``lmax``.
    progress : bool
        Show a tqdm progress bar.
    **options
        ``scheme="characteristics"`` only: the options of :func:`solve_characteristics`
        (``M``/``n_lat``, ``split``, ``split_threshold``, ``tol``, ``error_estimate``, ...).

    Notes
    -----
    ``scheme="characteristics"`` follows the density along the particles' own step maps on a
    weighted quadrature cloud, without projecting onto harmonics, so it stays resolved while
    the density concentrates (synchronisation); it returns a
    :class:`CharacteristicsSolution` and ``lmax`` is then only the default degree of the
    coefficients it reports. The Eulerian schemes return an :class:`SPDESolution`.

    Returns
    -------
    SPDESolution

    Raises
    ------
    ValueError, TypeError
        Bad input: see the message (negative or unnormalised ρ0, lmax too small for β,
        dt violating the step-size condition of scheme (a), mismatched dimensions, ...).
    SPDEResolutionError
        The run became unresolved; the partial solution is attached.

    Examples
    --------
    >>> from meanfield.noise import NoisePath
    >>> from meanfield.spde import VonMisesFisher
    >>> from meanfield.kernels import ActivationKernel
    >>> noise = NoisePath(ActivationKernel("relu"), d=3, lmax=4, seed=0)
    >>> sol = solve_spde(VonMisesFisher([0, 0, 1], 4.0), noise, beta=1.0, lmax=16, dt=0.01,
    ...                  t_eval=[0.0, 0.05, 0.1])
    >>> sol.coeffs.shape
    (3, 153)
    """
    wall0 = _time.perf_counter()
    if scheme == "characteristics":
        if filter is not None:
            raise ValueError("filter applies to the Eulerian schemes; the characteristics scheme has no degree to filter")
        if as_float(t0, "t0", min_value=0.0) != 0.0:
            raise ValueError("t0 != 0 (restart) is available for the Eulerian schemes; the characteristics scheme "
                             "starts from rho0 at t = 0")
        if attention_tol is not None:
            options["attention_tol"] = attention_tol
        if not as_bool(noise_on, "noise_on") and noise is not None:
            noise, d = None, noise_dimension(noise, d)
        sol = solve_characteristics(rho0, noise, beta, t_eval, dt, V=V, attention=attention,
                                    noise_map=noise_map, d=d, progress=progress, **options)
        sol.lmax = as_int(lmax, "lmax", min_value=1)
        return sol
    if options:
        raise TypeError(f"solve_spde() got options {sorted(options)} that only scheme='characteristics' accepts")
    scheme_cls = get_scheme(scheme)
    if noise_map not in ("projected", "flow"):
        raise ValueError(f"noise_map must be 'projected' or 'flow', got {noise_map!r}")
    attention, noise_on = as_bool(attention, "attention"), as_bool(noise_on, "noise_on")
    progress = as_bool(progress, "progress")
    d = noise_dimension(noise, d)
    noise_on = noise_on and noise is not None
    d = check_dimension(d)
    beta = as_beta(beta)
    b = basis(d, as_int(lmax, "lmax", min_value=1, max_value=2048))
    lmax = b.lmax
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True)
    tail_tol = as_float(tail_tol, "tail_tol", min_value=0.0)
    neg_tol = as_float(neg_tol, "neg_tol", min_value=0.0)
    t_start = as_float(t0, "t0", min_value=0.0)
    t_eval = np.atleast_1d(np.asarray(t_eval, dtype=np.float64))
    if t_eval.ndim != 1 or t_eval.size == 0 or not np.all(np.isfinite(t_eval)) or np.any(t_eval < t_start) \
            or np.any(np.diff(t_eval) < 0):
        raise ValueError(f"t_eval must be a non-empty, finite, non-decreasing 1-D array of times >= t0 = {t_start}")
    steps = np.rint((t_eval - t_start) / dt).astype(np.int64)
    bad = np.abs(t_start + steps * dt - t_eval) > 1e-9 * np.maximum(1.0, t_eval)
    if np.any(bad):
        raise ValueError(f"every t_eval must be t0 + a multiple of dt = {dt} (t0 = {t_start}); {t_eval[bad][0]} is not")
    n_total = int(steps[-1])
    check_steps("solve_spde", n_total, dt, float(t_start + n_total * dt))
    t_final = n_total * dt
    if noise_on and t_start + t_final > noise.t_max * (1 + 1e-12):
        raise ValueError(f"t_eval reaches {t_start + t_final} beyond the noise path's t_max = {noise.t_max}")
    if V is not None:
        V = as_matrix(V, "V", d)
    attention_tol = ATTENTION_TOL if attention_tol is None else as_float(
        attention_tol, "attention_tol", min_value=0.0, strict_min=True)
    if attention:
        if beta == 0:
            raise ValueError("beta must be nonzero when attention is on (use attention=False for pure noise)")
        need = required_degree(d, beta, attention_tol)
        if lmax < need:
            raise ValueError(f"lmax = {lmax} is too small for beta = {beta}: the attention convolution needs "
                             f"degree >= {need} for relative accuracy attention_tol = {attention_tol:g}; "
                             f"use lmax >= {need}")
    if filter is not None:
        filter = as_int(filter, "filter", min_value=2)
        if filter % 2:
            raise ValueError(f"filter order must be even, got {filter}")

    # 3/2 rule: ρ (degree lmax) times a field of degree max(lmax, l_σ + 1) projected on degree lmax
    # needs 2 n_θ - 1 >= 2 lmax + max(lmax, l_σ + 1)
    lsig = noise.describe().get("lmax") or 0 if noise_on else 0
    grid = b.grid(max((3 * lmax) // 2 + 2, (2 * lmax + int(lsig) + 1) // 2 + 2))
    problem = Problem(
        d=d, basis=b, grid=grid, dt=dt, t_final=t_final, beta=beta, V=V, noise=noise, noise_on=noise_on,
        attention=attention, kappa1=float(noise.kappa1) if noise_on else 0.0,
        vmax=(1.0 if V is None else float(np.linalg.norm(V, 2))) if attention else 0.0, noise_map=noise_map)
    scheme_cls.check(problem)
    c, rho0_desc = initial_coefficients(rho0, b, grid, neg_tol, tail_tol)
    stepper = scheme_cls(problem)
    vel = Velocity(d, lmax, beta, V) if attention else None
    filt = np.exp(-36.0 * (b.ell / lmax) ** filter) if filter is not None else None

    meta = {
        "solver": "solve_spde", "scheme": scheme, "d": d, "lmax": lmax, "dt": dt, "t0": t_start, "beta": beta,
        "attention": attention, "noise_on": noise_on, "noise_map": noise_map, "filter": filter,
        "tail_tol": tail_tol, "neg_tol": neg_tol, "attention_tol": attention_tol,
        "transform_epsilon": stepper.epsilon,
        "convolution_degree": None if vel is None else vel.lconv,
        "V": None if V is None else V.tolist(), "rho0": rho0_desc,
        "noise": {"type": None} if noise is None else noise.describe(),
        "grid": grid.describe(),
        "version": meanfield.__version__,
    }
    saved_t: list[float] = []
    saved_c: list[np.ndarray] = []
    monitor = _Monitor(b, grid, meta, saved_t, saved_c, wall0, beta, V, tail_tol, neg_tol, dt)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_total, desc=f"SPDE ({scheme})")

    save_ptr = 0
    while save_ptr < steps.size and steps[save_ptr] == 0:
        saved_t.append(float(t_eval[save_ptr]))
        saved_c.append(c.copy())
        save_ptr += 1
    saved_vals = None  # grid values of a state just checked at a save time: the next step starts from them
    vals_buf = np.empty(grid.Q)  # one buffer for ρ_n on the grid over the run (no page faults per step)
    for n in range(n_total):
        ta, tb = t_start + n * dt, t_start + (n + 1) * dt
        rho_g = grid.synth(c, out=vals_buf) if saved_vals is None else saved_vals
        saved_vals = None
        monitor.check(c, rho_g, ta)
        c = stepper.step(c, rho_g, vel, ta, tb)
        if filt is not None:
            c = c * filt
        if bar is not None:
            bar.update(1)
        while save_ptr < steps.size and steps[save_ptr] == n + 1:
            saved_vals = grid.synth(c, out=vals_buf) if saved_vals is None else saved_vals
            monitor.check(c, saved_vals, tb)
            saved_t.append(float(t_eval[save_ptr]))
            saved_c.append(c.copy())
            save_ptr += 1
    if bar is not None:
        bar.close()
    meta["wall_time_s"] = _time.perf_counter() - wall0
    meta["n_steps"] = n_total
    meta["completed"] = True
    return SPDESolution(d, lmax, np.array(saved_t), np.array(saved_c), beta, V, meta)


class _Monitor:
    """Resolution checks after every step; on failure raises SPDEResolutionError with the partial solution."""

    def __init__(self, b, grid, meta, saved_t, saved_c, wall0, beta, V, tail_tol, neg_tol, dt):
        self.b, self.grid, self.meta, self.saved_t, self.saved_c = b, grid, meta, saved_t, saved_c
        self.wall0, self.beta, self.V, self.tail_tol, self.neg_tol, self.dt = wall0, beta, V, tail_tol, neg_tol, dt

    def partial(self, extra) -> SPDESolution:
        ts, cs = list(self.saved_t) + [extra[0]], list(self.saved_c) + [extra[1]]
        m = dict(self.meta, wall_time_s=_time.perf_counter() - self.wall0, completed=False)
        return SPDESolution(self.b.d, self.b.lmax, np.array(ts), np.array(cs), self.beta, self.V, m)

    def _remedy(self) -> str:
        lmax, m = self.b.lmax, self.meta
        parts = [f"raise lmax (now {lmax}, e.g. {2 * lmax})"]
        if m["filter"] is None:
            parts.append("enable the filter (filter=16)")
        parts.append("or use scheme='characteristics', which follows the density without a degree limit")
        return ", ".join(parts)

    def check(self, cn: np.ndarray, vals: np.ndarray | None, t: float) -> None:
        # one reduction per array finds every non-finite entry: the energy sum of tail_fraction is
        # inf/NaN iff a coefficient is (or overflows), and the min of the values is NaN iff one is
        # (it propagates NaN) or -inf if one is; +inf values come from coefficients that overflow
        tail = tail_fraction(self.b, cn)
        vmin = 0.0 if vals is None else float(vals.min())
        if not (math.isfinite(tail) and math.isfinite(vmin)):
            raise SPDEResolutionError(
                f"the SPDE solution became non-finite at t = {t:.6g}; {self._remedy()}",
                self.partial((t, cn)), t, "nonfinite")
        lmax = self.b.lmax
        if tail > self.tail_tol:
            raise SPDEResolutionError(
                f"the SPDE solution is no longer resolved at t = {t:.6g}: the spectral energy in degrees "
                f"l > {(3 * lmax) // 4} is {tail:.3g} of the total (> tail_tol = {self.tail_tol:g}); {self._remedy()}",
                self.partial((t, cn)), t, "tail")
        if vals is not None and vmin < 0.0:
            negm = float(np.einsum("i,i->", self.grid.weights, np.maximum(-vals, 0.0)))
            if negm > self.neg_tol:
                raise SPDEResolutionError(
                    f"the SPDE solution is no longer resolved at t = {t:.6g}: its negative part has mass "
                    f"{negm:.3g} (> neg_tol = {self.neg_tol:g}, min rho = {vals.min():.3g}); {self._remedy()}",
                    self.partial((t, cn)), t, "negative")

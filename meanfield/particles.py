"""Particle solvers for the interacting SDE with common noise (theory §3, §7).

N tokens on S^{d-1} follow

    Stratonovich:  dX_i = v(X_i) dt + P_{X_i} ∘ dW(t, X_i),
    Itô:           dX_i = [ v(X_i) - ½ (d-1) κ(1) X_i ] dt + P_{X_i} dW(t, X_i),

with v(x) = P_x A(x; μ^N_t) the tangential softmax-attention velocity and W the common
Brownian field of a noise source (:mod:`meanfield.noise`). Two schemes:

* ``"euler"`` — projected (geometric) Euler, the layer-normalised step

      x <- Π( x + h v(x) + ΔW(x) ),        Π(z) = z / ``|z|``,

  which is the one-step map T_n of the SPDE push-forward scheme (theory §6(b)) and the
  discrete transformer itself. It is consistent with the *Itô* form: for a tangent
  increment δ of size O(sqrt h), ``Π(x + δ) = x + δ - ½|δ|² x + O(h^{3/2})``, and
  ``E|P_x ΔW(x)|² = (d-1) κ(1) h``, so the projection supplies the drift -½ (d-1) κ(1) x.
  Strong order 1/2, weak order 1.
* ``"heun"`` — Stratonovich Heun with the *same* field increment at both stages:

      x̃  = Π( x + h v(x) + P_x ΔW(x) ),
      x' = Π( x + ½ h (v(x) + v(x̃)) + ½ (P_x ΔW(x) + P_x̃ ΔW(x̃)) ).

The attention evaluator is pluggable (:func:`make_velocity`): the steppers only call a
:class:`Velocity`, a callable x -> v(x) carrying a method name and metadata, so further
evaluators (e.g. a spectral one, theory §7) are added with :func:`register_velocity`
without touching the steppers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import _validate
from ._validate import as_beta, as_bool, as_float, as_int, as_matrix, as_points, as_real_array, as_times, check_cost
from .attention import DEFAULT_BLOCK, softmax_attention
from .attention_spectral import select_velocity
from .noise import check_noise
from .noise._path import FieldIncrement
from .sphere import project, tangent_project
from .sphere._geometry import _normalise, _project_sum
from .trajectory import Trajectory

__all__ = [
    "Velocity",
    "make_velocity",
    "register_velocity",
    "velocity_methods",
    "ParticleSolution",
    "NonFiniteError",
    "solve_particles",
    "project",
    "step_grid",
    "step_accuracy",
]


class NonFiniteError(FloatingPointError):
    """A solver produced NaN or infinite positions (raised with the time and a remedy)."""


# --------------------------------------------------------------------------------------
# attention evaluators
# --------------------------------------------------------------------------------------


@dataclass
class Velocity:
    """A drift evaluator x -> v(x) for the particle steppers.

    Parameters
    ----------
    fn : callable
        Maps token positions, shape (N, d), to tangent velocities, shape (N, d). The
        velocity of token i may depend on all tokens passed in (the empirical measure).
    method : str
        Name reported in :attr:`ParticleSolution.meta` (``"direct"``, ``"off"``, ...).
    meta : dict
        Anything the evaluator wants recorded (block size, degree, tolerance, ...).

    Examples
    --------
    >>> vel = make_velocity("off", d=3, beta=1.0)
    >>> vel(np.eye(3)).shape
    (3, 3)
    """

    fn: Callable[[np.ndarray], np.ndarray]
    method: str
    meta: dict = field(default_factory=dict)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.fn(x)


_VELOCITY_BUILDERS: dict[str, Callable[..., Velocity]] = {}


def register_velocity(name: str):
    """Decorator registering a builder ``f(d, beta, Q, K, V, block, **options) -> Velocity``.

    Examples
    --------
    >>> @register_velocity("zero-demo")
    ... def _zero(d, beta, Q, K, V, block, **options):
    ...     return Velocity(lambda x: np.zeros_like(x), "zero-demo")
    >>> "zero-demo" in velocity_methods()
    True
    """

    def deco(builder):
        _VELOCITY_BUILDERS[name] = builder
        return builder

    return deco


def velocity_methods() -> tuple[str, ...]:
    """Names accepted by :func:`make_velocity` and ``solve_particles(attention=...)``."""
    return tuple(_VELOCITY_BUILDERS)


@register_velocity("direct")
def _direct_velocity(d, beta, Q, K, V, block, **options):
    if options:
        raise TypeError(f"the direct evaluator takes no options, got {sorted(options)}")

    def fn(x):
        # softmax_attention's own checks would re-normalise-test every step; inputs are
        # already validated unit tokens, so skip them (check=False) for speed
        return tangent_project(x, softmax_attention(x, beta, Q=Q, K=K, V=V, block=block, check=False))

    return Velocity(fn, "direct", {"block": block, "cost": "O(N^2) time, O(N block) memory"})


@register_velocity("off")
def _off_velocity(d, beta, Q, K, V, block, **options):
    if options:
        raise TypeError(f"the 'off' evaluator takes no options, got {sorted(options)}")
    return Velocity(lambda x: np.zeros_like(x), "off", {})


def _spectral_builder(requested: str):
    def build(d, beta, Q, K, V, block, *, N=None, tol=1e-10, nthreads=None):
        fn, info = select_velocity(requested, d, beta, Q=Q, K=K, V=V, N=N, tol=tol, block=block, nthreads=nthreads)
        # the steppers pass validated unit tokens (check=False skips re-validating them every step);
        # the evaluator's method is the one chosen
        if info["method"] == "spectral":
            return Velocity(lambda x: fn(x, check=False), "spectral", info)
        return Velocity(lambda x: fn(x), info["method"], info)

    return build


register_velocity("spectral")(_spectral_builder("spectral"))
register_velocity("auto")(_spectral_builder("auto"))


def make_velocity(method: str, d: int, beta: float, *, Q=None, K=None, V=None,
                  block: int = DEFAULT_BLOCK, **options) -> Velocity:
    """Build the attention velocity v(x) = P_x A(x; μ^N) by a registered method (theory §7).

    A(x; μ) = Σ_j exp(β<Qx, K x_j>) V x_j / Σ_j exp(β<Qx, K x_j>) over the tokens passed
    to the evaluator (their empirical measure).

    Parameters
    ----------
    method : str
        ``"direct"`` (blocked softmax sum, any d and Q, K, V, O(N · block) memory),
        ``"spectral"`` (O(N + L² log L) spectral sum, d in {2, 3} and Q = K = V = I; theory §7,
        :class:`meanfield.attention_spectral.SpectralAttention`), ``"auto"`` (spectral where it
        applies, is accurate to ``tol`` and is faster for ``N`` tokens, direct otherwise; the
        choice is the evaluator's ``method``) or ``"off"`` (v = 0, pure noise); see
        :func:`velocity_methods`.
    d : int, >= 2
    beta : float
        Inverse temperature, any real (β < 0 weights distant tokens more).
    Q, K, V : ndarray (d, d), optional
        Default identity.
    block : int
        Query rows per block of the direct sum.
    **options
        Passed to the builder of ``method``; ``"auto"`` and ``"spectral"`` take ``N`` (the
        number of tokens, for the crossover rule), ``tol`` (absolute velocity error,
        default 1e-10) and ``nthreads``.

    Returns
    -------
    Velocity

    Examples
    --------
    >>> vel = make_velocity("direct", d=2, beta=0.0)
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> np.round(vel(x), 12)   # β = 0: P_x of the mean (½, ½)
    array([[0. , 0.5],
           [0.5, 0. ]])
    """
    if not isinstance(method, str):
        raise TypeError(f"attention must be a method name or a Velocity, got {type(method).__name__}")
    if method not in _VELOCITY_BUILDERS:
        raise ValueError(f"attention must be one of {sorted(_VELOCITY_BUILDERS)}, got {method!r}")
    d = as_int(d, "d", min_value=2)
    beta = as_beta(beta)
    Q, K, V = as_matrix(Q, "Q", d), as_matrix(K, "K", d), as_matrix(V, "V", d)
    block = as_int(block, "block", min_value=1)
    return _VELOCITY_BUILDERS[method](d, beta, Q, K, V, block, **options)


# --------------------------------------------------------------------------------------
# solver
# --------------------------------------------------------------------------------------


#: The result type of :func:`solve_particles` (one trajectory type for every token solver).
ParticleSolution = Trajectory


def step_grid(t0: float, dt: float, t_eval, *, rtol: float = 1e-9) -> np.ndarray:
    """Step indices k with t0 + k dt = t_eval (to ``rtol`` · dt), or raise.

    Examples
    --------
    >>> step_grid(0.0, 0.25, [0.5, 1.0])
    array([2, 4])
    """
    t_eval = as_real_array(t_eval, "t_eval")
    k = (t_eval - t0) / dt
    if k.size:
        _validate.check_steps("the step grid", float(np.max(k)), dt, float(np.max(t_eval)))
    kr = np.rint(k)
    bad = np.abs(k - kr) > rtol * np.maximum(1.0, np.abs(k))
    if np.any(bad):
        tb = float(t_eval[np.argmax(bad)])
        raise ValueError(
            f"t_eval must lie on the step grid t0 + k*dt (t0 = {t0}, dt = {dt}); {tb} does not. "
            "Choose dt dividing the save times (e.g. dt = T / 2**k, which also keeps the noise "
            "path on its fast dyadic grid)."
        )
    return kr.astype(np.int64)


#: (N, d) arrays a particle step holds at once (positions, drift, noise, Heun's predictor,
#: angles), for the memory estimate of :func:`solve_particles`.
_WORK_ARRAYS = 10

#: Step-error budget of the transforms: attention velocity error and noise-field accuracy are
#: both ``ACCURACY_PER_STEP · dt``, clipped to the ranges below (see :func:`step_accuracy`).
ACCURACY_PER_STEP = 1e-4
ATTENTION_TOL_RANGE = (1e-10, 1e-6)
NOISE_EPS_RANGE = (1e-12, 1e-7)


def step_accuracy(dt: float) -> dict:
    """Transform accuracies tied to the time-step error of a particle step (the default of the solver).

    One step moves a token by h v + ΔW; an error δ in v changes it by h δ, an error ε (relative
    to the coefficients) in the field by ε sqrt(κ h). Over T / h steps these add at most
    T δ and T ε sqrt(κ / h), against the schemes' own weak error O(h) and strong error
    O(h^{1/2}). With δ = ε = 10^-4 h both stay four orders of magnitude below the O(h) weak
    error of the step (and far below its strong error); δ is clipped to [1e-10, 1e-6] and ε to
    [1e-12, 1e-7] (measured at tol 1e-6 against the direct sum, 2·10^4 tokens on S^2, uniform /
    clustered (a Gaussian spread of 0.15 about a pole): 1.4e-9 / 2.1e-7 at β = 0.1 and 5.9e-10 /
    2.3e-8 at β = 1, with the exact transforms at degrees 4 and 8 that these calls take: inside
    the bound).

    Examples
    --------
    >>> step_accuracy(2.0**-6)["attention_tol"]
    1e-06
    """
    a = ACCURACY_PER_STEP * float(dt)
    tol = min(ATTENTION_TOL_RANGE[1], max(ATTENTION_TOL_RANGE[0], a))
    eps = min(NOISE_EPS_RANGE[1], max(NOISE_EPS_RANGE[0], a))
    return {"attention_tol": tol, "noise_epsilon": eps,
            "rule": f"{ACCURACY_PER_STEP:g} * dt, attention tol clipped to {ATTENTION_TOL_RANGE}, "
                    f"noise epsilon to {NOISE_EPS_RANGE}"}


def _noise_meta(noise) -> dict:
    if noise is None:
        return {"noise": None, "sigma": 0.0, "kappa1": 0.0, "kept_fraction": 1.0}
    return {
        "noise": repr(noise),
        "sigma": float(noise.sigma),
        "kappa1": float(noise.kappa1),
        "kept_fraction": float(noise.kept_fraction),
        "lmax": noise.describe().get("lmax"),
    }


def solve_particles(
    x0,
    noise,
    beta: float,
    dt: float,
    t_eval,
    *,
    scheme: str = "euler",
    attention="auto",
    attention_tol: float | str = "auto",
    noise_epsilon: float | str = "auto",
    Q=None,
    K=None,
    V=None,
    t0: float = 0.0,
    block: int = DEFAULT_BLOCK,
    progress: bool = False,
) -> ParticleSolution:
    """Integrate the N-token SDE with common noise on S^{d-1} (theory §3, §7).

    Euler: x <- Π(x + h v(x) + ΔW(x)), the projected (geometric) Euler step — the one-step
    map T_n of theory §6(b); Itô-consistent because Π produces the drift -½(d-1)κ(1)x.
    Heun, with the same ΔW at both points::

        x̃  = Π(x + h v(x) + P_x ΔW(x)),
        x' = Π(x + ½h(v(x) + v(x̃)) + ½(P_x ΔW(x) + P_x̃ ΔW(x̃))).

    Here v(x) = P_x A(x; μ^N) and ΔW = W(t + h, ·) - W(t, ·) from ``noise.field(t, t + h)``.

    Parameters
    ----------
    x0 : ndarray, shape (N, d)
        Initial tokens, unit vectors.
    noise : noise source or None
        Anything with ``d``, ``t_max`` and ``field(t0, t1)`` returning a callable
        (N, d) -> (N, d) ambient increment: :class:`~meanfield.noise.NoisePath`,
        :class:`~meanfield.noise.RandomFeatureNoise`, :class:`~meanfield.noise.RotationNoise`.
        ``None`` means no noise (the deterministic attention flow).
    beta : float
        Inverse temperature, any real (β < 0 weights distant tokens more).
        Inverse temperature of the attention.
    dt : float, > 0
        Fixed step h. Prefer dt = T / 2^k: the Brownian tree is fastest on dyadic times.
    t_eval : array_like
        Save times, non-decreasing, >= t0, on the step grid t0 + k dt (a ValueError says
        so otherwise; the last step is never shortened) and <= ``noise.t_max``.
    scheme : {"euler", "heun"}
    attention : str, bool or Velocity
        ``True`` is ``"auto"`` and ``False`` is ``"off"``; ``"auto"`` (default: the O(N) spectral sum of theory §7 where it applies — d in {2, 3},
        Q = K = V = I, accurate to ``attention_tol`` and faster for this N — else the direct
        sum; ``meta["attention"]`` says which), ``"direct"`` (blocked softmax sum),
        ``"spectral"``, ``"off"`` (pure noise), any name registered with
        :func:`register_velocity`, or a ready :class:`Velocity`.
    attention_tol : float or "auto"
        Absolute accuracy of the spectral attention velocity (``|v| <= 1``). ``"auto"``
        (default): tied to the time-step error, 10^-4 dt clipped to [1e-10, 1e-6]
        (:func:`step_accuracy`); a number overrides it. Recorded in ``meta["accuracy"]``.
    noise_epsilon : float or "auto"
        Accuracy of the fast transforms evaluating a spectral noise field (relative to its
        coefficients); ``"auto"``: 10^-4 dt clipped to [1e-12, 1e-7]; a number overrides it.
    Q, K, V : ndarray (d, d), optional
        Attention matrices (default identity); ignored when ``attention`` is a Velocity.
    t0 : float
        Initial time (the noise is read on [t0, max(t_eval)]).
    block : int
        Query rows per block of the direct attention sum (memory O(N · block)).
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    ParticleSolution
        ``t`` (n_save,), ``x`` (n_save, N, d), ``meta``.

    Raises
    ------
    NonFiniteError
        If a position becomes NaN or infinite (message gives the time and a remedy).

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> from meanfield.noise import NoisePath
    >>> noise = NoisePath(ActivationKernel("relu"), d=3, lmax=8, seed=0)
    >>> x0 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    >>> sol = solve_particles(x0, noise, beta=1.0, dt=2**-6, t_eval=[0.0, 0.5, 1.0])
    >>> sol.x.shape
    (3, 2, 3)
    """
    progress = as_bool(progress, "progress")
    if isinstance(attention, (bool, np.bool_)):
        attention = "auto" if attention else "off"
    shape = np.shape(x0)
    if len(shape) == 2:  # the memory of a step, before x0 is copied and checked
        check_cost("solve_particles", seconds=0.0, memory=8.0 * _WORK_ARRAYS * shape[0] * max(shape[1], 1),
                   parameter="N (rows of x0)", value=shape[0],
                   largest=int(_validate.COST_LIMIT_BYTES // (8 * _WORK_ARRAYS * max(shape[1], 1))))
    x = as_points(x0, "x0")
    n, d = x.shape
    if noise is not None:
        check_noise(noise, d)
    beta = as_beta(beta)
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True)
    t0 = as_float(t0, "t0")
    t_eval = as_times(t_eval, "t_eval", min_value=t0)
    if not isinstance(scheme, str) or scheme not in ("euler", "heun"):
        raise ValueError(f"scheme must be 'euler' or 'heun', got {scheme!r}")
    block = as_int(block, "block", min_value=1)
    if noise is not None:
        t_max = float(noise.t_max)
        if t_eval[-1] > t_max * (1 + 1e-12):
            raise ValueError(f"t_eval reaches {t_eval[-1]}, beyond the noise window [0, {t_max}]; "
                             "build the noise with a larger t_max")
        if t0 < 0:
            raise ValueError(f"t0 = {t0} is before the noise window [0, {t_max}]")
    budget = step_accuracy(dt)
    if isinstance(attention_tol, str) and attention_tol == "auto":
        attention_tol = budget["attention_tol"]
    else:
        attention_tol = as_float(attention_tol, "attention_tol", min_value=0.0, strict_min=True)
    if isinstance(noise_epsilon, str) and noise_epsilon == "auto":
        noise_epsilon = budget["noise_epsilon"]
    else:
        noise_epsilon = as_float(noise_epsilon, "noise_epsilon", min_value=1e-13, max_value=0.1)
    accuracy = {"attention_tol": attention_tol, "noise_epsilon": noise_epsilon, "rule": budget["rule"]}
    if isinstance(attention, Velocity):
        velocity = attention
    else:
        extra = {"N": n, "tol": attention_tol} if attention in ("auto", "spectral") else {}
        velocity = make_velocity(attention, d, beta, Q=Q, K=K, V=V, block=block, **extra)
    k_save = step_grid(t0, dt, t_eval)
    n_steps = int(k_save[-1])
    check_cost("solve_particles", seconds=0.0, memory=8.0 * t_eval.size * n * d, parameter="len(t_eval) * N * d",
               value=f"{t_eval.size} * {n} * {d}", largest=f"{int(_validate.COST_LIMIT_BYTES // 8)} saved numbers")


    out = np.empty((t_eval.size, n, d))
    # positions are read-only from here on: transforms at the same points (noise and attention)
    # then share their geometry (angles) within a step
    x = x.copy()
    x.flags.writeable = False

    def field_at(dW, y):
        return dW(y, epsilon=noise_epsilon) if isinstance(dW, FieldIncrement) else dW(y)

    def proj(z):
        # not the checked public project(): a non-finite step must reach the NonFiniteError
        # below, which names the time and the remedy
        y = _normalise(z)
        y.flags.writeable = False
        return y

    save_pos = 0
    while save_pos < k_save.size and k_save[save_pos] == 0:
        out[save_pos] = x
        save_pos += 1

    steps = range(n_steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=f"{scheme} N={n}", unit="step")
    off = velocity.method == "off"
    start = time.perf_counter()
    for k in steps:
        ta, tb = t0 + k * dt, t0 + (k + 1) * dt
        dW = None if noise is None else noise.field(ta, tb)
        v = None if off else velocity(x)
        if scheme == "euler":
            x = _project_sum(x, dt, v, None if dW is None else field_at(dW, x))
            x.flags.writeable = False
        else:
            pdw = 0.0 if dW is None else tangent_project(x, field_at(dW, x))
            z = x + pdw if v is None else x + dt * v + pdw
            xt = proj(z)
            pdwt = 0.0 if dW is None else tangent_project(xt, field_at(dW, xt))
            incr = 0.5 * (pdw + pdwt)
            if v is not None:
                incr = incr + 0.5 * dt * (v + velocity(xt))
            x = proj(x + incr)
        if not np.all(np.isfinite(x)):
            raise NonFiniteError(
                f"non-finite token positions at t = {tb:.6g} (step {k + 1} of {n_steps}, scheme {scheme!r}, "
                f"dt = {dt:g}); reduce dt, check the noise scale and the attention matrices Q, K, V"
            )
        while save_pos < k_save.size and k_save[save_pos] == k + 1:
            out[save_pos] = x
            save_pos += 1
    wall = time.perf_counter() - start
    norm_err = float(np.max(np.abs(np.linalg.norm(out, axis=2) - 1.0)))
    meta = {
        "scheme": scheme,
        "attention": velocity.method,
        "attention_meta": dict(velocity.meta),
        "beta": beta,
        "dt": dt,
        "t0": t0,
        "n_steps": n_steps,
        "n_tokens": n,
        "d": d,
        "max_norm_error": norm_err,
        "wall_time": wall,
        "accuracy": accuracy,
        **_noise_meta(noise),
    }
    return ParticleSolution(t=t0 + k_save * dt, x=out, meta=meta)

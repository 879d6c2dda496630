"""Lyapunov spectrum of a linear noise field W(t, x) = Ω(t) x, by the products of the particle steps.

For a noise source whose increments are linear, ΔW(x) = ΔΩ x (:attr:`meanfield.noise.NoiseField.omega`
not None: :class:`~meanfield.noise.RotationNoise`, or a user-written source), the projected Euler step
of :func:`meanfield.particles.solve_particles` without attention is x -> Π((I + ΔΩ) x): the
projectivisation of the linear cocycle Φ_n = (I + ΔΩ_{n-1}) ··· (I + ΔΩ_0). Its Lyapunov exponents
λ^Φ_1 >= ... >= λ^Φ_d (Gram–Schmidt / QR of the product) give those of the flow on the sphere:
λ^Φ_i - λ^Φ_1, i >= 2; the top one, λ^Φ_2 - λ^Φ_1, is the synchronisation exponent λ_1 of the
sphere flow. As dt -> 0 the product converges to the Itô linear flow dY = dΩ Y; the sphere flow
it projects to is the Stratonovich flow dX = P_X ∘ dΩ X whenever the Itô correction
½ E[ΔΩ²] / dt is a multiple of the identity (it only shifts every λ^Φ_i by the same amount), as
for rotation-invariant laws of Ω.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from meanfield._seeds import child_seeds
from meanfield._validate import as_float, as_int

__all__ = ["LinearFlowLyapunov", "linear_flow_lyapunov"]


@dataclass(frozen=True)
class LinearFlowLyapunov:
    """Lyapunov exponents of the linear cocycle of a linear noise field (:func:`linear_flow_lyapunov`).

    Attributes
    ----------
    spectrum, spectrum_se : ndarray, shape (d,)
        λ^Φ_1 >= ... >= λ^Φ_d of the Euler product, mean over replicas and standard error.
    sphere, sphere_se : float
        λ^Φ_2 - λ^Φ_1, the top Lyapunov exponent of the flow on S^{d-1}, and its standard error.
    per_replica : ndarray, shape (n_replicas, d)
        Exponents of each replica (Richardson-extrapolated when ``richardson``).
    raw : ndarray, shape (n_replicas, n_levels, d)
        Per replica, the exponents at each step size of ``dts``.
    dts : tuple of float
    richardson : bool
    d : int
    noise : str
        ``repr`` of the source of replica 0.
    """

    spectrum: np.ndarray
    spectrum_se: np.ndarray
    sphere: float
    sphere_se: float
    per_replica: np.ndarray = field(repr=False)
    raw: np.ndarray = field(repr=False)
    dts: tuple
    richardson: bool
    d: int
    noise: str

    def z_score(self, closed_form: float) -> float:
        """(sphere - closed_form) / sphere_se."""
        return (self.sphere - closed_form) / self.sphere_se if self.sphere_se > 0 else math.inf


def _cocycle_exponents(src, d: int, h: float, t_total: float) -> np.ndarray:
    n_steps = round(t_total / h)
    eye = np.eye(d)
    q = eye.copy()
    acc = np.zeros(d)
    for k in range(n_steps):
        om = src.field(k * h, (k + 1) * h).omega
        if om is None or np.shape(om) != (d, d):
            raise TypeError(f"the noise field must be linear with a ({d}, {d}) matrix omega (NoiseField.omega), "
                            f"got {None if om is None else np.shape(om)}")
        q, r = np.linalg.qr((eye + om) @ q)
        acc += np.log(np.abs(np.diag(r)))
    return np.sort(acc / t_total)[::-1]


def linear_flow_lyapunov(make_noise, d: int, *, dt: float = 2.0**-6, t_total: float = 32.0, n_replicas: int = 8,
                         richardson: bool | None = None, seed=0) -> LinearFlowLyapunov:
    """Lyapunov spectrum of the Euler product of a linear noise field, and the sphere's top exponent.

    Each replica builds one source ``make_noise(seed_r)`` (seed_r = ``child_seeds(seed, n_replicas)[r]``)
    and multiplies the step matrices I + ΔΩ_k over [0, t_total] with a QR renormalisation at every
    step; λ^Φ_i = (1/t_total) Σ_k log |R_ii|. With ``richardson`` (default: the source is
    refinable) the same path is also run at dt/2 and 2 λ_{dt/2} - λ_dt is used, removing the O(dt)
    bias. The standard errors are over replicas.

    Parameters
    ----------
    make_noise : callable
        ``seed -> NoiseSource`` with ``d``, ``t_max >= t_total`` and linear fields (``field(t0, t1).omega``).
    d : int, >= 2
    dt, t_total : float
        Step and horizon; t_total / dt must be an integer.
    n_replicas : int, >= 2
    richardson : bool or None
    seed : int or SeedSequence

    Returns
    -------
    LinearFlowLyapunov

    Examples
    --------
    >>> from meanfield.noise import RotationNoise
    >>> est = linear_flow_lyapunov(lambda s: RotationNoise(2, seed=s, t_max=4.0), 2, dt=2**-5, t_total=4.0,
    ...                            n_replicas=2)
    >>> abs(est.sphere) < 1e-12     # on S^1, I + ΔΩ is a multiple of a rotation: no synchronisation
    True
    """
    from meanfield.noise import check_noise

    d = as_int(d, "d", min_value=2)
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True, max_value=1.0)
    t_total = as_float(t_total, "t_total", min_value=0.0, strict_min=True)
    n_steps = round(t_total / dt)
    if n_steps < 1 or abs(n_steps * dt - t_total) > 1e-9 * t_total:
        raise ValueError(f"t_total / dt must be a positive integer, got {t_total / dt:.6g}")
    n_replicas = as_int(n_replicas, "n_replicas", min_value=2)
    if not callable(make_noise):
        raise TypeError(f"make_noise must be a callable seed -> noise source, got {type(make_noise).__name__}")
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(as_int(seed, "seed", min_value=0))
    raw, description = [], ""
    for r, child in enumerate(child_seeds(root, n_replicas)):
        src = make_noise(child)
        check_noise(src, d, t_end=t_total, name="make_noise(seed)")
        if r == 0:
            description = repr(src)
            refinable = bool(getattr(src, "refinable", False))
            if richardson is None:
                richardson = refinable
            elif richardson and not refinable:
                raise ValueError("richardson=True needs a refinable noise source (the dt and dt/2 runs must see "
                                 "the same path)")
        hs = (dt, dt / 2) if richardson else (dt,)
        raw.append([_cocycle_exponents(src, d, h, t_total) for h in hs])
    raw = np.asarray(raw)
    per = 2 * raw[:, 1] - raw[:, 0] if richardson else raw[:, 0]
    sph = per[:, 1] - per[:, 0]
    root_n = math.sqrt(n_replicas)
    return LinearFlowLyapunov(
        spectrum=per.mean(axis=0), spectrum_se=per.std(axis=0, ddof=1) / root_n,
        sphere=float(sph.mean()), sphere_se=float(sph.std(ddof=1) / root_n),
        per_replica=per, raw=raw, dts=(dt, dt / 2) if richardson else (dt,), richardson=bool(richardson),
        d=d, noise=description,
    )

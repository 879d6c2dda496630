"""Top Lyapunov exponent of the noise flow, estimated by simulating pairs of nearby tokens (SPEC §5.4).

The closed form λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)] is :func:`meanfield.kernels.lyapunov_exponent`;
:func:`lyapunov_estimate` measures it by simulation. Also importable from :mod:`meanfield.sync`
(its former home).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from meanfield._validate import as_float, as_int

__all__ = ["LyapunovEstimate", "lyapunov_estimate"]


@dataclass(frozen=True)
class LyapunovEstimate:
    """Monte Carlo estimate of the top Lyapunov exponent λ_1 (see :func:`lyapunov_estimate`).

    Attributes
    ----------
    mean, se : float
        Estimate of λ_1 and its standard error over noise replicas.
    closed_form : float
        λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)] of the kernel the noise actually carries
        (the truncated κ_σ of a :class:`~meanfield.noise.NoisePath`).
    per_replica : ndarray, shape (n_replicas,)
        The estimate of each replica (Richardson-extrapolated when ``richardson``).
    raw : ndarray, shape (n_replicas, n_steps)
        Per replica, the rate at each step size of ``dts``.
    dts : tuple of float
        Step sizes used (``(h,)`` or ``(h, h/2)``).
    richardson : bool
        Whether ``per_replica = 2 λ_{h/2} - λ_h``.
    d : int
    noise : str
        Description of the noise source of replica 0.
    """

    mean: float
    se: float
    closed_form: float
    per_replica: np.ndarray = field(repr=False)
    raw: np.ndarray = field(repr=False)
    dts: tuple
    richardson: bool
    d: int
    noise: str

    @property
    def z_score(self) -> float:
        """(mean - closed_form) / se."""
        return (self.mean - self.closed_form) / self.se if self.se > 0 else math.inf

    def agrees(self, n_se: float = 3.0) -> bool:
        """Whether ``|mean - closed_form| <= n_se * se``."""
        return abs(self.mean - self.closed_form) <= n_se * self.se

    @property
    def synchronises(self) -> bool:
        """Simulated verdict: λ_1 < 0 (the point estimate is negative)."""
        return self.mean < 0


def _noise_factory(noise, d: int, lmax: int, width: int, t_total: float):
    from meanfield.kernels import ActivationKernel, SpectralKernel
    from meanfield.noise import NoisePath, RandomFeatureNoise

    if isinstance(noise, (ActivationKernel, SpectralKernel)):
        kern = noise
        if d in (2, 3):
            return lambda ss: NoisePath(kern, d, lmax, seed=ss, t_max=t_total)
        if not isinstance(kern, ActivationKernel):
            raise TypeError(f"for d = {d} >= 4 the noise is a RandomFeatureNoise, which needs an ActivationKernel")
        return lambda ss: RandomFeatureNoise(kern, d, width, seed=ss, t_max=t_total)
    if callable(noise):
        return noise
    raise TypeError("noise must be an ActivationKernel, a SpectralKernel or a callable seed -> noise source, "
                    f"got {type(noise).__name__}")


def _pair_rate(x_base, direc, noise, h: float, t_total: float, chunk: float, eps: float) -> np.ndarray:
    from meanfield.particles import solve_particles

    n = x_base.shape[0]
    x = np.concatenate([x_base, x_base * math.cos(eps) + direc * math.sin(eps)])
    acc = np.zeros(n)
    for j in range(round(t_total / chunk)):
        sol = solve_particles(x, noise, 0.0, h, [(j + 1) * chunk], t0=j * chunk, attention="off")
        a, b = sol.final[:n], sol.final[n:]
        # geodesic distance from the chord: full precision at separations ~1e-6
        r = 2.0 * np.arcsin(np.minimum(0.5 * np.linalg.norm(b - a, axis=1), 1.0))
        acc += np.log(r / eps)
        u = b - np.einsum("ij,ij->i", a, b)[:, None] * a
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        x = np.concatenate([a, a * math.cos(eps) + u * math.sin(eps)])
    return acc / t_total


def lyapunov_estimate(
    noise,
    d: int,
    *,
    dt: float = 2.0**-5,
    t_total: float = 8.0,
    chunk: float = 1.0,
    n_replicas: int = 16,
    n_pairs: int = 64,
    eps: float = 1e-6,
    richardson: bool | None = None,
    lmax: int = 8,
    width: int = 256,
    seed=0,
) -> LyapunovEstimate:
    """Top Lyapunov exponent of the pure-noise flow from pairs of nearby tokens (SPEC §5.4).

    Each replica draws one noise source and ``n_pairs`` pairs (x, y) at geodesic distance
    ε (x uniform, the direction uniform in the tangent space). The pairs follow the
    projected Euler scheme x <- Π(x + ΔW(x)) (no attention) with step ``dt``; every
    ``chunk`` time units the distance r is recorded and y is reset to distance ε along the
    current separation direction (renormalisation, so the pair stays in the linear
    regime). The estimate of one replica is

        λ̂ = (1 / t_total) mean_pairs Σ_chunks log(r_end / ε),

    and the result is the mean over replicas with its standard error. It has an O(dt)
    discretisation bias; with ``richardson`` the same pairs on the same (refinable) path
    are run at dt and dt/2 and 2 λ̂_{dt/2} - λ̂_{dt} is used, which removes it.

    Closed form for comparison: λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)] of the kernel the noise
    carries (``noise.kernel``: the truncated κ_σ for a NoisePath).

    Parameters
    ----------
    noise : ActivationKernel, SpectralKernel or callable
        A kernel: d in {2, 3} uses a :class:`~meanfield.noise.NoisePath` of degree ``lmax``
        (refinable), d >= 4 a :class:`~meanfield.noise.RandomFeatureNoise` of ``width``
        (not refinable: a fresh MLP per step, exact covariance κ). A callable
        ``make_noise(seed: SeedSequence) -> noise source`` is used as is (the source needs
        ``d``, ``t_max >= t_total``, ``field`` and ``kernel``).
    d : int, >= 2
    dt : float
        Step h; ``chunk / dt`` must be an integer.
    t_total : float
        Integration time per replica; a multiple of ``chunk``.
    chunk : float
        Renormalisation interval.
    n_replicas, n_pairs : int
        Independent noise sources, and pairs per source (pairs sharing a source are
        correlated, so the SE is computed over replicas only; n_replicas >= 2).
    eps : float in (0, 1e-2]
        Pair separation (radians).
    richardson : bool or None
        Extrapolate in dt. Default: True iff the noise is refinable (``noise.refinable``).
        Refused for a non-refinable noise (the dt and dt/2 runs would see different fields).
    lmax, width : int
        Degree of the NoisePath / width of the RandomFeatureNoise built from a kernel.
    seed : int or SeedSequence
        Root seed; replica k uses ``SeedSequence(seed).spawn(n_replicas)[k]``.

    Returns
    -------
    LyapunovEstimate

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> est = lyapunov_estimate(ActivationKernel("relu"), 3, t_total=2.0, n_replicas=4,
    ...                         n_pairs=16, seed=0)            # doctest: +SKIP
    >>> est.closed_form, est.mean, est.se                      # doctest: +SKIP
    (-0.4998..., -0.5..., 0.05...)
    """
    d = as_int(d, "d", min_value=2)
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True)
    t_total = as_float(t_total, "t_total", min_value=0.0, strict_min=True)
    chunk = as_float(chunk, "chunk", min_value=0.0, strict_min=True, max_value=t_total)
    n_replicas = as_int(n_replicas, "n_replicas", min_value=2)
    n_pairs = as_int(n_pairs, "n_pairs", min_value=1)
    eps = as_float(eps, "eps", min_value=0.0, strict_min=True, max_value=1e-2)
    lmax = as_int(lmax, "lmax", min_value=0)
    width = as_int(width, "width", min_value=1)
    for num, den, what in ((t_total, chunk, "t_total / chunk"), (chunk, dt, "chunk / dt")):
        k = round(num / den)
        if k < 1 or abs(k * den - num) > 1e-9 * num:
            raise ValueError(f"{what} must be a positive integer, got {num / den:.6g}")
    make = _noise_factory(noise, d, lmax, width, t_total)
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(as_int(seed, "seed", min_value=0))
    children = root.spawn(n_replicas)
    raw_rows = []
    description = ""
    kern = None
    for k, child in enumerate(children):
        s_noise, s_pairs = child.spawn(2)
        src = make(s_noise)
        if getattr(src, "d", None) != d:
            raise ValueError(f"the noise source has d = {getattr(src, 'd', None)}, expected {d}")
        if k == 0:
            description = repr(src)
            kern = getattr(src, "kernel", None)
            if kern is None:
                raise TypeError("the noise source needs a 'kernel' attribute (for the closed form of λ_1)")
            refinable = bool(getattr(src, "refinable", False))
            if richardson is None:
                richardson = refinable
            elif richardson and not refinable:
                raise ValueError("richardson=True needs a refinable noise (a NoisePath): a non-refinable source "
                                 "gives the dt and dt/2 runs different fields")
        rng = np.random.default_rng(s_pairs)
        base = rng.standard_normal((n_pairs, d))
        base /= np.linalg.norm(base, axis=1, keepdims=True)
        direc = rng.standard_normal((n_pairs, d))
        direc -= np.einsum("ij,ij->i", base, direc)[:, None] * base
        direc /= np.linalg.norm(direc, axis=1, keepdims=True)
        hs = (dt, dt / 2) if richardson else (dt,)
        raw_rows.append([_pair_rate(base, direc, src, h, t_total, chunk, eps).mean() for h in hs])
    raw = np.asarray(raw_rows)
    per = 2 * raw[:, 1] - raw[:, 0] if richardson else raw[:, 0]
    from meanfield.kernels import lyapunov_exponent

    return LyapunovEstimate(
        mean=float(per.mean()),
        se=float(per.std(ddof=1) / math.sqrt(per.size)),
        closed_form=float(lyapunov_exponent(kern, d)),
        per_replica=per,
        raw=raw,
        dts=(dt, dt / 2) if richardson else (dt,),
        richardson=bool(richardson),
        d=d,
        noise=description,
    )

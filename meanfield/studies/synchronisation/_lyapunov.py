"""Top Lyapunov exponent of the noise flow, estimated by simulation.

The closed form λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)] (Agazzi et al., arXiv 2604.26898) is
:func:`meanfield.kernels.lyapunov_exponent`. Two estimators measure it:

* :func:`tangent_lyapunov` (recommended, any d): the linearised flow of one token driven by
  exact Gaussian increments of the field and of its tangential derivative, with Richardson
  extrapolation in the step — no field, no random features, no O(dt) bias left at the
  reported precision;
* :func:`lyapunov_estimate`: pairs of nearby tokens moved by a noise source (from a kernel: a
  NoisePath for d <= 3, random-feature noise for d >= 4); it keeps an O(dt) bias when the
  source is not refinable. A NoisePath exists in every d, so passing the factory
  ``lambda ss: NoisePath(kernel, d, lmax, seed=ss, t_max=t_total)`` gives the refinable path
  and Richardson extrapolation in any d (the closed form is then that of the truncated kernel).

Also importable from :mod:`meanfield.sync` (its former home).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from meanfield._seeds import child_seeds

from meanfield._validate import as_float, as_int
from meanfield.sphere import row_norms

__all__ = ["LyapunovEstimate", "lyapunov_estimate", "tangent_lyapunov"]


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
        r = 2.0 * np.arcsin(np.minimum(0.5 * row_norms(b - a), 1.0))
        acc += np.log(r / eps)
        u = b - np.einsum("ij,ij->i", a, b)[:, None] * a
        u /= row_norms(u)[:, None]
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
    """Top Lyapunov exponent of the pure-noise flow from pairs of nearby tokens (theory §5.4).

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
        (not refinable: a fresh MLP per step, exact covariance κ); for the refinable path in
        d >= 4 pass a NoisePath factory (its basis grows like l_σ^{d-1}). A callable
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
        Root seed; replica k uses ``child_seeds(SeedSequence(seed), n_replicas)[k]`` (= ``spawn``).

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
    children = child_seeds(root, n_replicas)
    raw_rows = []
    description = ""
    kern = None
    for k, child in enumerate(children):
        s_noise, s_pairs = child_seeds(child, 2)
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


def _tangent_rates(kappa1: float, dkappa1: float, d: int, h: float, n_tokens: int, n_steps: int,
                   rng: np.random.Generator, block: int = 1 << 16) -> float:
    """Mean log-growth rate of the linearised projected Euler flow over n_tokens × n_steps steps.

    Per step, with ξ ~ N(0, h κ(1) I_d) the field increment at x and η ~ N(0, h κ'(1) I_d) its
    derivative along the unit tangent v (uncorrelated with ξ):
    z = x + ξ, x' = z/|z|, w = v + η, v' = (w - <w, x'> x') / |z| (the derivative of
    x -> Π(x + ΔW(x)) along v), rate += log|v'|, v <- v'/|v'|. The zero-mean terms
    <v, η> - <x, ξ> (the first-order part of log|v'|) are subtracted as a control variate.
    """
    sk, sd = math.sqrt(h * kappa1), math.sqrt(h * dkappa1)
    total = 0.0
    for start in range(0, n_tokens, block):
        n = min(block, n_tokens - start)
        x = np.zeros((n, d))
        x[:, 0] = 1.0
        v = np.zeros((n, d))
        v[:, 1] = 1.0
        acc = np.zeros(n)
        for _ in range(n_steps):
            xi = sk * rng.standard_normal((n, d))
            eta = sd * rng.standard_normal((n, d))
            z = x + xi
            nz = np.sqrt(np.einsum("ij,ij->i", z, z))
            xn = z / nz[:, None]
            w = v + eta
            w -= np.einsum("ij,ij->i", w, xn)[:, None] * xn
            nw = np.sqrt(np.einsum("ij,ij->i", w, w))
            acc += np.log(nw / nz) - np.einsum("ij,ij->i", v, eta) + np.einsum("ij,ij->i", x, xi)
            x, v = xn, w / nw[:, None]
        total += acc.sum()
    return total / (n_tokens * n_steps * h)


def tangent_lyapunov(
    kernel,
    d: int,
    *,
    dt: float | None = None,
    levels: int = 3,
    n_tokens: int = 4096,
    n_steps: int = 64,
    n_replicas: int = 8,
    seed=0,
) -> LyapunovEstimate:
    """Top Lyapunov exponent of the pure-noise flow from the tangent flow of one token.

    For the field W with E[W^a(x) W^b(y)] = t κ(<x,y>) δ_ab, the value W(x) has covariance
    κ(1) I and the tangential derivative ∂_v W(x) (v ⊥ x, unit) covariance κ'(1) I, the two
    uncorrelated. The linearised projected Euler flow (x, v) can therefore be driven by
    exact Gaussian increments: no field, no random features, any d. By isotropy the
    per-step log growth has the same law in every state, so tokens and steps are
    interchangeable samples; the per-step rate λ_h has an O(h) bias, removed by Richardson
    extrapolation over ``levels`` step sizes h, h/2, ..., h/2^(levels-1) (independent
    samples at each level; the extrapolation assumes λ_h = λ_1 + c_1 h + c_2 h² + ...).
    The SE is over ``n_replicas`` independent replicas of the whole procedure.

    Parameters
    ----------
    kernel : ActivationKernel or SpectralKernel
        Needs ``kappa1`` and ``dkappa1`` (κ(1), κ'(1)).
    d : int, >= 2
    dt : float, optional
        Coarsest step. Default 1 / (8 (d + 1) max(κ(1), κ'(1))): one step moves a token by
        about (d-1) κ(1) h, so h is scaled with d.
    levels : int in [1, 4]
        Step sizes of the Richardson extrapolation (1: none).
    n_tokens, n_steps : int
        Tokens and steps per level and replica (the finest level uses the same number of
        steps: its time horizon is shorter, which does not matter by isotropy).
    n_replicas : int, >= 2
    seed : int or SeedSequence

    Returns
    -------
    LyapunovEstimate
        ``raw[:, k]`` is λ_{h/2^k}; ``per_replica`` the extrapolated value; ``noise =
        "tangent flow"``.

    Examples
    --------
    >>> from meanfield.kernels import ActivationKernel
    >>> est = tangent_lyapunov(ActivationKernel("relu"), 8, n_tokens=1024, n_steps=16, seed=0)
    >>> est.closed_form, abs(est.z_score) < 4
    (-0.5, True)
    """
    from meanfield.kernels import lyapunov_exponent

    d = as_int(d, "d", min_value=2)
    levels = as_int(levels, "levels", min_value=1, max_value=4)
    n_tokens = as_int(n_tokens, "n_tokens", min_value=1)
    n_steps = as_int(n_steps, "n_steps", min_value=1)
    n_replicas = as_int(n_replicas, "n_replicas", min_value=2)
    k1, dk1 = float(kernel.kappa1), float(kernel.dkappa1)
    if not (k1 > 0 and dk1 >= 0):
        raise ValueError(f"need κ(1) > 0 and κ'(1) >= 0, got {k1}, {dk1}")
    if dt is None:
        dt = 1.0 / (8.0 * (d + 1) * max(k1, dk1))
    dt = as_float(dt, "dt", min_value=0.0, strict_min=True, max_value=1.0)
    hs = tuple(dt / 2.0**k for k in range(levels))
    # Richardson weights for λ_h = λ + c1 h + c2 h² + ...: solve the Vandermonde system in h
    V = np.vander(np.asarray(hs), levels, increasing=True)
    weights = np.linalg.solve(V.T, np.eye(levels)[0])
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(as_int(seed, "seed", min_value=0))
    raw = np.empty((n_replicas, levels))
    for r, child in enumerate(child_seeds(root, n_replicas)):
        for k, (h, ss) in enumerate(zip(hs, child_seeds(child, levels))):
            raw[r, k] = _tangent_rates(k1, dk1, d, h, n_tokens, n_steps, np.random.default_rng(ss))
    per = raw @ weights
    return LyapunovEstimate(
        mean=float(per.mean()),
        se=float(per.std(ddof=1) / math.sqrt(per.size)),
        closed_form=float(lyapunov_exponent(kernel, d)),
        per_replica=per,
        raw=raw,
        dts=hs,
        richardson=levels > 1,
        d=d,
        noise="tangent flow",
    )

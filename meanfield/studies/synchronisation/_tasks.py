"""Task functions of the synchronisation study and :func:`build` (the runner studies of a configuration)."""

from __future__ import annotations

import math
import time

import numpy as np

from meanfield._validate import as_beta, as_int

from ._presets import ACTIVATIONS, CLUSTER_TOL, _check_energy, _check_lyapunov, _check_spde

#: The parts of the study, in the order they run.
PARTS = ("lyapunov", "energy", "spde", "phase")



def lyapunov_step(dt: float, d: int) -> float:
    """Step of the Lyapunov estimate in dimension d: dt / 2^ceil(log2((d-1)/2)) for d > 3.

    One projected Euler step moves a token by ``|P_x ΔW|²`` ≈ (d-1) κ(1) h, so the O(h) bias of
    the estimate grows with d at fixed h (with dt = 2^-5 it was 5-30 SE at d = 16, 20 for the
    linear and erf kernels). Halving the step whenever (d-1)/2 doubles keeps (d-1) h
    roughly constant; d <= 3 is unchanged (and Richardson-extrapolated there).

    Examples
    --------
    >>> [lyapunov_step(2.0**-5, d) * 2**5 for d in (3, 5, 8, 20)]
    [1.0, 0.5, 0.25, 0.0625]
    """
    d = as_int(d, "d", min_value=2)
    if d <= 3:
        return float(dt)
    return float(dt) / 2.0 ** max(0, math.ceil(math.log2((d - 1) / 2)))


def lyapunov_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One cell (activation, d) of the Lyapunov table.

    ``params["estimator"]``: ``"tangent"`` (:func:`tangent_lyapunov`: the tangent flow of one
    token with exact Gaussian increments and Richardson in dt, any d) or ``"pairs"`` (the
    default of older configurations, :func:`lyapunov_estimate`: pairs of tokens on a NoisePath
    for d <= 3, on random-feature noise for d >= 4).

    Returns
    -------
    dict
        ``closed_form`` (of the kernel the noise carries: truncated for the NoisePath of
        ``"pairs"`` at d <= 3), ``closed_form_full`` (untruncated κ), ``kept_fraction``,
        ``estimate``, ``se``, ``z`` ((estimate - closed) / se), ``richardson``, ``noise``,
        ``dt`` (coarsest step), ``seconds``.
    """
    from meanfield.kernels import ActivationKernel, lyapunov_exponent
    from ._lyapunov import lyapunov_estimate, tangent_lyapunov

    act, sw = ACTIVATIONS[params["activation"]]
    kern = ActivationKernel(act, sigma_w=sw)
    d = int(params["d"])
    t = time.perf_counter()
    if params.get("estimator", "pairs") == "tangent":
        est = tangent_lyapunov(kern, d, levels=int(params.get("levels", 3)), n_tokens=int(params["n_tokens"]),
                               n_steps=int(params["n_steps"]), n_replicas=int(params["n_replicas"]), seed=seed)
        dt, noise = est.dts[0], f"tangent flow, {len(est.dts)} step sizes"
    else:
        dt = lyapunov_step(float(params["dt"]), d)
        est = lyapunov_estimate(kern, d, dt=dt, t_total=float(params["t_total"]), chunk=1.0
                                if params["t_total"] >= 1 else float(params["t_total"]),
                                n_replicas=int(params["n_replicas"]), n_pairs=int(params["n_pairs"]),
                                lmax=int(params["lmax"]), width=int(params["width"]), seed=seed)
        noise = "NoisePath" if d <= 3 else f"RandomFeature(m={int(params['width'])})"
    full = lyapunov_exponent(kern, d)
    return {
        "closed_form": est.closed_form, "closed_form_full": full,
        "kept_fraction": (est.closed_form / full) if full != 0 else 1.0,
        "estimate": est.mean, "se": est.se, "z": est.z_score, "richardson": est.richardson,
        "noise": noise, "dt": dt, "seconds": time.perf_counter() - t,
    }


def energy_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One particle run: E_β(μ_t), ``1 - |∫x dμ_t|²`` and the number of clusters at the saved times.

    ``attention=False`` runs the noise only (and reports E_0 = ½(``1 - |∫x dμ|²``) scaled
    like E_β at the task's β: for β = 0 it is the variance / 2).

    Returns
    -------
    dict
        Arrays ``t``, ``energy``, ``variance``, ``n_clusters``; scalar ``seconds``.
    """
    from meanfield.attention import gap_energy
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.particles import solve_particles
    from meanfield.sync import cluster_labels, order_parameter

    d, T, beta = int(params["d"]), float(params["T"]), float(params["beta"])
    s_noise, s_x = seed.spawn(2)
    noise = NoisePath(ActivationKernel(params["activation"]), d, int(params["lmax"]), seed=s_noise, t_max=T)
    x = np.random.default_rng(s_x).standard_normal((int(params["N"]), d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ts = np.arange(round(T / params["save_every"]) + 1) * float(params["save_every"])
    t = time.perf_counter()
    sol = solve_particles(x, noise, beta, float(params["dt"]), ts,
                          attention="direct" if params["attention"] else "off")
    energy = np.array([gap_energy(xx, beta) for xx in sol.x])
    return {
        "t": sol.t, "energy": energy, "variance": order_parameter(sol.x),
        "n_clusters": np.array([cluster_labels(xx, CLUSTER_TOL)[1] for xx in sol.x]),
        "kappa1": float(noise.kappa1), "seconds": time.perf_counter() - t,
    }


def signed_gap_energy(x, w, beta: float) -> tuple[float, float]:
    """E_β and ``1 - |∫x dμ|²`` of a weighted cloud whose weights may be negative (a truncated density).

    E_β(μ) = (e^β / 2β) Σ_ij w_i w_j (1 - e^{β(<x_i,x_j> - 1)}) (½ Σ w_i w_j (1 - <x_i, x_j>) at
    β = 0), blocked over rows; :func:`meanfield.attention.gap_energy` refuses negative weights.

    Parameters
    ----------
    x : ndarray, shape (n, d)
    w : ndarray, shape (n,)
        Signed weights (not renormalised).
    beta : float (any real)

    Returns
    -------
    (energy, variance) : tuple of float

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [-1.0, 0.0]])
    >>> signed_gap_energy(x, np.array([0.5, 0.5]), 0.0)
    (0.5, 1.0)
    """
    x = np.asarray(x, dtype=float)
    w = np.asarray(w, dtype=float)
    beta = as_beta(beta)
    acc = 0.0
    for s in range(0, x.shape[0], 1024):
        g = x[s : s + 1024] @ x.T - 1.0
        acc += w[s : s + 1024] @ (-g if beta == 0 else -np.expm1(beta * g)) @ w
    m = w @ x
    energy = 0.5 * acc if beta == 0 else math.exp(beta) / (2 * beta) * acc
    return float(energy), float(w.sum() ** 2 - m @ m)


def spde_energy_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """E_β and the variance along the SPDE solution (characteristics scheme) and along N particles
    drawn from the same initial density on the same noise path and time step, up to the horizon T.

    The SPDE is solved by :func:`meanfield.spde.solve_spde` with ``scheme="characteristics"``
    (ρ_t carried as the push-forward of ρ_0 on a weighted quadrature cloud moved by the
    particles' own step map), so it stays resolved while the density synchronises.

    Params: ``d`` (2 or 3), ``beta``, ``attention`` (False: noise only, E_0 = ½ variance),
    ``n_lat`` (M = 2 n_lat² nodes: Gauss–Legendre rings × 2 n_lat longitudes on S^2, equispaced on S^1),
    ``split`` (adaptive cell splitting), ``check`` (also solve with about 2M nodes and
    return its energies), ``noise_lmax``, ``dt``, ``T``, ``save_every``, ``N``, ``kappa0``
    (von Mises–Fisher concentration of ρ_0 about the last axis), ``activation``.

    Returns
    -------
    dict
        Arrays ``t``, ``energy_spde``, ``variance_spde``, ``energy_particles``,
        ``variance_particles``, ``energy_spde_2M`` (NaN without ``check``),
        ``unresolved_mass``, ``area_defect`` (per saved time); scalars ``M``, ``M_check``,
        ``n_splits``, ``spde_seconds``, ``particle_seconds``.
    """
    from meanfield.attention import gap_energy
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.particles import solve_particles
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.sync import order_parameter

    d, T, dt = int(params["d"]), float(params["T"]), float(params["dt"])
    beta, att = float(params["beta"]), bool(params.get("attention", True))
    s_noise, s_x = seed.spawn(2)
    noise = NoisePath(ActivationKernel(params["activation"]), d, int(params["noise_lmax"]), seed=s_noise, t_max=T)
    rho0 = VonMisesFisher([0.0] * (d - 1) + [1.0], float(params["kappa0"]))
    ts = np.arange(round(T / params["save_every"]) + 1) * float(params["save_every"])
    n_lat = int(params["n_lat"])
    split = bool(params.get("split", False))

    def solve(n):
        size = {"n_lat": n} if d == 3 else {"M": 2 * n * n}
        return solve_spde(rho0, noise, beta, 4, dt, ts, scheme="characteristics", attention=att, split=split,
                          tol=None, **size)

    t0 = time.perf_counter()
    sol = solve(n_lat)
    spde_seconds = time.perf_counter() - t0
    e_s = np.array([sol.energy(i, beta) for i in range(len(ts))])
    v_s = np.array([sol.variance(i) for i in range(len(ts))])
    diag = [sol.diagnostics(i) for i in range(len(ts))]
    e_2 = np.full(ts.size, np.nan)
    m_check = 0
    if bool(params.get("check", False)):
        ref = solve(max(n_lat + 1, int(round(n_lat * math.sqrt(2)))))
        e_2 = np.array([ref.energy(i, beta) for i in range(len(ts))])
        m_check = int(ref.meta["M"])
        del ref
    x0 = rho0.sample(int(params["N"]), seed=np.random.default_rng(s_x))
    t0 = time.perf_counter()
    part = solve_particles(x0, noise, beta, dt, ts, attention="auto" if att else "off")
    e_p = np.array([gap_energy(x, beta) for x in part.x])
    return {
        "t": ts, "energy_spde": e_s, "variance_spde": v_s,
        "energy_particles": e_p, "variance_particles": order_parameter(part.x),
        "energy_spde_2M": e_2,
        "unresolved_mass": np.array([g["unresolved_mass"] for g in diag]),
        "area_defect": np.array([g["area_defect"] for g in diag]),
        "M": int(sol.meta["M"]), "M_check": m_check, "n_splits": int(sol.meta["n_splits"]),
        "spde_seconds": spde_seconds, "particle_seconds": time.perf_counter() - t0,
    }


def make_spde_study(config: dict, root_seed: int = 0):
    """Study of :func:`spde_energy_task` over β (+ a noise-only point), ``seed_by=()``: replica r
    has the same noise path and particle sample for every β (common random numbers)."""
    from meanfield.runner import Study

    c = dict(config)
    _check_spde(c)
    betas, replicas, noise_only = c.pop("betas"), int(c.pop("replicas")), bool(c.pop("noise_only"))
    c.pop("t_fit")
    grid = [{"beta": float(b), "attention": True} for b in betas]
    if noise_only:
        grid.append({"beta": 0.0, "attention": False})
    return Study("sync-spde", spde_energy_task, grid=grid, replicas=replicas, root_seed=root_seed, fixed=c,
                 seed_by=())


def make_lyapunov_study(config: dict, root_seed: int = 0):
    """Study over the grid activation × d (one task per cell; replicas inside the task)."""
    from meanfield.runner import Study

    c = dict(config)
    _check_lyapunov(c)
    grid = {"activation": list(c.pop("activations")), "d": [int(d) for d in c.pop("dims")]}
    return Study("sync-lyapunov", lyapunov_task, grid=grid, replicas=1, root_seed=root_seed, fixed=c)


def make_energy_study(config: dict, root_seed: int = 0):
    """Study over β (+ a noise-only point), ``seed_by=()``: replica r has the same noise path
    and initial cloud for every β (common random numbers)."""
    from meanfield.runner import Study

    c = dict(config)
    _check_energy(c)
    betas, replicas, noise_only = c.pop("betas"), int(c.pop("replicas")), bool(c.pop("noise_only"))
    c.pop("t_fit")
    grid = [{"beta": float(b), "attention": True} for b in betas]
    if noise_only:
        grid.append({"beta": 0.0, "attention": False})
    return Study("sync-energy", energy_task, grid=grid, replicas=replicas, root_seed=root_seed, fixed=c, seed_by=())


def build(cfg: dict, root_seed: int = 0, parts=None) -> dict:
    """The runner studies of a resolved configuration: ``{"lyapunov", "energy", "spde", "phase"}`` -> Study.

    ``parts`` selects some of them (default all four, in that order; a configuration without a
    ``phase`` entry runs the other three).
    """
    from ._phase import make_phase_study

    parts = tuple(p for p in PARTS if p in cfg) if parts is None else tuple(parts)
    if not parts or set(parts) - set(PARTS):
        raise ValueError(f"parts must be a non-empty subset of {PARTS}, got {parts}")
    missing = [p for p in parts if p not in cfg]
    if missing:
        raise ValueError(f"the configuration has no settings for the parts {missing}")
    makers = {"lyapunov": make_lyapunov_study, "energy": make_energy_study, "spde": make_spde_study,
              "phase": make_phase_study}
    return {p: makers[p](cfg[p], root_seed) for p in PARTS if p in parts}

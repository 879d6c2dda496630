"""Task function of the propagation-of-chaos study and :func:`build` (the runner studies of a configuration)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import numpy as np

from meanfield._seeds import extend_seed

from ._presets import _check_config, config


#: Largest cloud size handed to the exact network simplex for the W_2 error (n m <= this squared):
#: 2048 particles against a 64 × 128 reference grid of S^2 (8192 nodes) is inside.
_W2_MAX_EXACT = 6000


def _replica_inputs(cfg: Mapping, d: int, T: float, seed):
    """The streams of one replica: ``child(*words)`` seeds, the noise path (words 0) and ρ_0 (vMF about e_d).

    Particles of size N are drawn with ``child(1, N)``; both chaos tasks use these words, so a
    replica sees the same noise path and initial clouds in the short and long parts.
    """
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.spde import VonMisesFisher

    def child(*key):
        return extend_seed(seed, *key)

    noise = NoisePath(ActivationKernel(cfg["activation"]), d=d, lmax=cfg["noise_lmax"], seed=child(0), t_max=T)
    mu = np.zeros(d)
    mu[-1] = 1.0
    return child, noise, VonMisesFisher(mu, cfg["kappa"])


def _density_nodes(d: int, n: int):
    from meanfield.transport import circle_quadrature, sphere_quadrature

    return circle_quadrature(n) if d == 2 else sphere_quadrature(n)


def _quantisation_floor(d: int, n: int, nodes: np.ndarray, mass: np.ndarray) -> float:
    """ρ-weighted RMS half-cell size of the quadrature nodes: an estimate of W_2(ρ, Σ_q m_q δ_{x_q})."""
    p = np.maximum(mass, 0.0)
    p = p / p.sum()
    if d == 2:
        return float(2 * np.pi / n / math.sqrt(12.0))
    t, _ = np.polynomial.legendre.leggauss(n)
    theta = np.arccos(t)  # descending colatitudes of the rings (t ascending)
    edges = np.concatenate([[np.pi], 0.5 * (theta[1:] + theta[:-1]), [0.0]])
    dtheta = np.abs(np.diff(edges))
    n_lon = nodes.shape[0] // n
    dphi = 2 * np.pi / n_lon
    cell2 = (np.repeat(dtheta, n_lon) ** 2 + (np.repeat(np.sin(theta), n_lon) * dphi) ** 2) / 12.0
    return float(math.sqrt(np.sum(p * cell2)))


def _w2_bound_s2(c, c_ref, lmax: int, check_lmax: int, weights, vals, vals_ref) -> float:
    """Upper bound of W_2(ρ, ρ') on S^2 from two SPDE states (degrees lmax < check_lmax).

    The smaller of (i) π sqrt(TV), TV = ½ Σ_q w_q |ρ_q - ρ'_q| (keep the common mass, move
    the rest at most the diameter π), and (ii) sqrt(π W_1) with
    W_1 <= sqrt(4π) ||ρ - ρ'||_{Ḣ^{-1}}, ||δ||²_{Ḣ^{-1}} = Σ_{l>=1} |δ_lm|² / (l(l+1))
    (Kantorovich duality and Cauchy–Schwarz: a 1-Lipschitz f has ||∇f||_{L²} <= sqrt(4π);
    W_2² <= π W_1 because d² <= π d).
    """
    from meanfield.sphere import basis

    tv = 0.5 * float(np.sum(weights * np.abs(vals - vals_ref)))
    delta = basis(3, lmax).resize(np.asarray(c), check_lmax) - np.asarray(c_ref)
    b = basis(3, check_lmax)
    pos = b.ell > 0
    h1 = math.sqrt(float(np.sum(b.energy(delta)[pos] / b.laplacian[pos])))
    w1 = math.sqrt(4 * math.pi) * h1
    return min(math.pi * math.sqrt(tv), math.sqrt(math.pi * w1))


def _mean_field_paths(x0: np.ndarray, noise, sol, dt: float, n_steps: int) -> np.ndarray:
    """X̄ <- Π(X̄ + h v[ρ_n](X̄) + ΔW_n(X̄)), n = 0..n_steps-1, with ρ_n the SPDE state at step n."""
    from meanfield.particles import project

    x = np.array(x0, dtype=np.float64, copy=True)
    for n in range(n_steps):
        dw = noise.field(n * dt, (n + 1) * dt)
        x = project(x + dt * sol.velocity(n, x) + dw(x))
    return x


def chaos_replica(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replica of the chaos study: one noise path, the SPDE once, every N (task function).

    Parameters
    ----------
    params : dict
        ``sphere`` (1 or 2), ``configs`` (settings per sphere, see :func:`chaos_study`),
        ``replica``, ``preset``.
    seed : numpy.random.SeedSequence
        The task seed; the noise path uses the child keyed ``0``, the sample for N the
        child keyed ``(1, N)``.

    Returns
    -------
    dict
        Arrays (shape ``(len(Ns),)``): ``Ns``, ``coupling``, ``w2`` (NaN for N > w2_max_N),
        ``observable``, and the controls of ``w2`` (NaN for N > w2_max_N): ``w2_iid`` (N iid
        samples of ρ_T of this path, seed child ``(2, N)``, against the same nodes) and
        ``w2_coarse``, ``w2_coarser`` (the particles against ρ_T on the rules with half and a
        quarter of the nodes). Scalars: ``spde_coupling``, ``spde_w2_bound``, ``spde_observable``
        (SPDE error at lmax vs check_lmax), ``rho_negative_mass``, ``rho_negative_fraction``,
        ``rho_min`` (of ρ_T at the density nodes), ``spde_tail`` (spectral tail of ρ_T),
        ``w2_floor`` (quantisation estimate), ``kept_fraction`` (κ_σ(1)/κ(1)) and the wall
        times ``spde_seconds``, ``particle_seconds``, ``coupling_seconds``, ``w2_seconds``,
        ``control_seconds``, ``check_seconds`` (the SPDE-error measures after the two solves).

    Examples
    --------
    >>> study = chaos_study("tiny", spheres=1, replicas=1)
    >>> out = chaos_replica(study.task_params(study.tasks[0]), study.seed(study.tasks[0]))  # doctest: +SKIP
    >>> out["coupling"].shape  # doctest: +SKIP
    (3,)
    """
    from meanfield.particles import solve_particles
    from meanfield.spde import solve_spde
    from meanfield.transport import density_moments, density_to_cloud, observable_errors, wasserstein

    from ._controls import cell_density_sampler, difference_w2_bound

    sphere = int(params["sphere"])
    if sphere not in (1, 2):
        raise ValueError(f"unknown sphere {sphere!r}")
    cfg = _check_config(params["configs"][str(sphere)], sphere)
    d = sphere + 1
    Ns, T, dt, beta = cfg["Ns"], cfg["T"], cfg["dt"], cfg["beta"]
    n_steps = round(T / dt)
    times = np.arange(n_steps + 1) * dt
    child, noise, rho0 = _replica_inputs(cfg, d, T, seed)

    t0 = time.perf_counter()
    sol = solve_spde(rho0, noise, beta=beta, lmax=cfg["lmax"], dt=dt, t_eval=times, scheme="pushforward")
    ref = solve_spde(rho0, noise, beta=beta, lmax=cfg["check_lmax"], dt=dt, t_eval=times, scheme="pushforward")
    spde_seconds = time.perf_counter() - t0

    nodes, weights = _density_nodes(d, cfg["density_nodes"])
    vals = sol.evaluate(n_steps, nodes)
    vals_ref = ref.evaluate(n_steps, nodes)
    cloud = density_to_cloud(vals, nodes, weights, clip_negative=True)
    keep = cloud.weights > 0  # zero-weight nodes carry no mass; dropping them only shrinks the cost matrix
    # grid check of W_2: the same particles against ρ_T on the rules with half and a quarter of the nodes
    coarse_targets = []
    for div in (2, 4):
        n_c = max(cfg["density_nodes"] // div, 2)
        nodes_c, weights_c = _density_nodes(d, n_c)
        cloud_c = density_to_cloud(sol.evaluate(n_steps, nodes_c), nodes_c, weights_c, clip_negative=True)
        keep_c = cloud_c.weights > 0
        coarse_targets.append((cloud_c.points[keep_c], cloud_c.weights[keep_c] / cloud_c.weights[keep_c].sum()))
    # iid control: exact samples of ρ_T on this path (S^1: the W_2 nodes; S^2: twice the latitudes)
    sample_n = cfg["density_nodes"] * (1 if d == 2 else 2)
    sample_vals = vals if d == 2 else sol.evaluate(n_steps, _density_nodes(d, sample_n)[0])
    sample_rho_T = cell_density_sampler(d, sample_n, sample_vals)

    coupling = np.empty(len(Ns))
    w2 = np.full(len(Ns), np.nan)
    w2_iid = np.full(len(Ns), np.nan)
    w2_coarse = np.full(len(Ns), np.nan)
    w2_coarser = np.full(len(Ns), np.nan)
    observable = np.empty(len(Ns))
    t_part = t_coup = t_w2 = t_ctrl = 0.0
    xbar = x0 = None
    for k, N in enumerate(Ns):
        x0 = rho0.sample(N, seed=child(1, N))
        t0 = time.perf_counter()
        xN = solve_particles(x0, noise, beta, dt, [T]).final
        t1 = time.perf_counter()
        xbar = _mean_field_paths(x0, noise, sol, dt, n_steps)
        t2 = time.perf_counter()
        t_part += t1 - t0
        t_coup += t2 - t1
        coupling[k] = math.sqrt(np.mean(np.sum((xN - xbar) ** 2, axis=1)))
        observable[k] = float(np.max(observable_errors(xN, None, nodes, weights, vals, lmax=cfg["obs_lmax"])))
        if N <= cfg["w2_max_N"]:
            target = (cloud.points[keep], cloud.weights[keep] / cloud.weights[keep].sum())
            w2[k] = wasserstein(xN, target[0], None, target[1], p=2, max_exact=_W2_MAX_EXACT)
            t3 = time.perf_counter()
            t_w2 += t3 - t2
            w2_coarse[k] = wasserstein(xN, coarse_targets[0][0], None, coarse_targets[0][1], p=2)
            w2_coarser[k] = wasserstein(xN, coarse_targets[1][0], None, coarse_targets[1][1], p=2)
            x_iid = sample_rho_T(N, np.random.default_rng(child(2, N)))
            w2_iid[k] = wasserstein(x_iid, target[0], None, target[1], p=2, max_exact=_W2_MAX_EXACT)
            t_ctrl += time.perf_counter() - t3

    # SPDE discretisation error: the same path and step at check_lmax
    t0 = time.perf_counter()
    xbar_ref = _mean_field_paths(x0, noise, ref, dt, n_steps)
    spde_coupling = math.sqrt(np.mean(np.sum((xbar - xbar_ref) ** 2, axis=1)))
    if d == 2:
        # exact W_2 between the two solutions on the same nodes (exact circle solver, any size)
        cloud_ref = density_to_cloud(vals_ref, nodes, weights, clip_negative=True)
        spde_w2_bound = float(wasserstein(nodes, nodes, cloud.weights, cloud_ref.weights, p=2))
    else:
        spde_w2_bound = min(_w2_bound_s2(sol.coeffs[n_steps], ref.coeffs[n_steps], cfg["lmax"], cfg["check_lmax"],
                                         weights, vals, vals_ref),
                            difference_w2_bound(nodes, weights, vals, vals_ref))
    spde_observable = float(np.max(np.abs(density_moments(nodes, weights, vals, cfg["obs_lmax"])
                                          - density_moments(nodes, weights, vals_ref, cfg["obs_lmax"]))))
    check_seconds = time.perf_counter() - t0
    return {
        "Ns": np.asarray(Ns, dtype=np.int64),
        "coupling": coupling,
        "w2": w2,
        "observable": observable,
        "w2_iid": w2_iid,
        "w2_coarse": w2_coarse,
        "w2_coarser": w2_coarser,
        "spde_coupling": spde_coupling,
        "spde_w2_bound": spde_w2_bound,
        "spde_observable": spde_observable,
        "rho_negative_mass": float(cloud.negative_mass) + 0.0,  # + 0.0 turns -0.0 into 0.0
        "rho_negative_fraction": float(cloud.negative_fraction) + 0.0,
        "rho_min": float(cloud.min_value),
        "spde_tail": float(sol.tail_energy(n_steps)),
        "w2_floor": _quantisation_floor(d, cfg["density_nodes"], nodes, weights * vals),
        "kept_fraction": float(noise.kept_fraction),
        "spde_seconds": spde_seconds,
        "particle_seconds": t_part,
        "coupling_seconds": t_coup,
        "w2_seconds": t_w2,
        "control_seconds": t_ctrl,
        "check_seconds": check_seconds,
    }


def _cloud_paths(x0: np.ndarray, noise, sol, dt: float, n_steps: int, save_steps) -> dict:
    """X̄ <- Π(X̄ + h v[ρ_n](X̄) + ΔW_n(X̄)) with ρ_n the node cloud of a characteristics solution
    saved at every step; returns ``{step: X̄}`` at the steps in ``save_steps``."""
    from meanfield.particles import project

    x = np.array(x0, dtype=np.float64, copy=True)
    out = {}
    for n in range(n_steps):
        dw = noise.field(n * dt, (n + 1) * dt)
        x = project(x + dt * sol.velocity(n, x) + dw(x))
        if n + 1 in save_steps:
            out[n + 1] = x.copy()
    return out


def chaos_long_replica(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replica of the long-horizon chaos study (task function): the characteristics solution as
    the mean-field reference, every N, errors at every horizon.

    The SPDE solution ρ_t is carried by :func:`meanfield.spde.solve_characteristics` (the
    push-forward of ρ_0 on ``M`` weighted quadrature nodes moved by the particles' own step
    map; no degree, so it stays resolved while the tokens synchronise) and saved at every
    step. The mean-field paths X̄_i start at the particles' X_i(0) and move by the same step
    map with v[ρ_n] the attention velocity of the node cloud at step n
    (:meth:`CharacteristicsSolution.velocity`). At each horizon T: (a) the coupling error
    ``sqrt(mean_i |X_i(T) - X̄_i(T)|²)``, (b) W_2(μ^N_T, ρ_T) with ρ_T the weighted node cloud
    (exact: circle solver on S^1, network simplex on S^2 for N <= ``w2_max_N``), (c) the
    largest difference of the real harmonic moments of degree 1..``obs_lmax``.

    Parameters
    ----------
    params : dict
        ``sphere`` (1 or 2), ``configs`` (long-horizon settings per sphere, see
        :data:`LONG_PRESETS`), ``preset``.
    seed : numpy.random.SeedSequence
        Noise path: child keyed ``0``; sample for N: child keyed ``(1, N)`` (the keys of
        :func:`chaos_replica`).

    Returns
    -------
    dict
        Arrays of shape ``(len(horizons), len(Ns))``: ``coupling``, ``w2`` (NaN for
        N > w2_max_N), ``observable``; ``Ns``, ``horizons``; per horizon ``spde_coupling``
        (RMS distance of the X̄ paths of the largest N driven by the M and the 2M solutions),
        ``spde_w2`` (S^1: exact W_2 between the two node clouds; S^2: NaN),
        ``spde_observable`` (largest moment difference of the two clouds), ``variance``
        (``1 - |E x|²`` of ρ_T), ``unresolved_mass``, ``area_defect``; scalars ``M``, ``M_check``
        and the wall times ``spde_seconds``, ``particle_seconds``, ``coupling_seconds``,
        ``w2_seconds``.
    """
    from meanfield.particles import solve_particles
    from meanfield.spde import solve_characteristics
    from meanfield.transport import empirical_moments, wasserstein

    from ._presets import _check_long

    sphere = int(params["sphere"])
    if sphere not in (1, 2):
        raise ValueError(f"unknown sphere {sphere!r}")
    cfg = _check_long(params["configs"][str(sphere)], sphere)
    d = sphere + 1
    Ns, horizons, dt, beta = cfg["Ns"], cfg["horizons"], cfg["dt"], cfg["beta"]
    T = horizons[-1]
    n_steps = round(T / dt)
    h_steps = [round(h / dt) for h in horizons]
    times = np.arange(n_steps + 1) * dt
    child, noise, rho0 = _replica_inputs(cfg, d, T, seed)

    def solve(M):
        return solve_characteristics(rho0, noise, beta, times, dt, M=M, split=cfg["split"], tol=None)

    def moments(x, w=None):
        return empirical_moments(x, None if w is None else w / w.sum(), cfg["obs_lmax"])[1:]

    t0 = time.perf_counter()
    sol = solve(cfg["M"])
    spde_seconds = time.perf_counter() - t0
    clouds = {k: (sol.positions(k), sol.masses(k)) for k in h_steps}
    diag = [sol.diagnostics(k) for k in h_steps]
    samples = [rho0.sample(N, seed=child(1, N)) for N in Ns]
    t0 = time.perf_counter()
    xbar_all = _cloud_paths(np.concatenate(samples), noise, sol, dt, n_steps, set(h_steps))
    coupling_seconds = time.perf_counter() - t0
    variance = [sol.variance(k) for k in h_steps]
    M0 = int(sol.meta["M"])
    del sol

    shape = (len(horizons), len(Ns))
    coupling, observable, w2 = np.empty(shape), np.empty(shape), np.full(shape, np.nan)
    t_part = t_w2 = 0.0
    offsets = np.concatenate([[0], np.cumsum(Ns)])
    for j, (N, x0) in enumerate(zip(Ns, samples)):
        t0 = time.perf_counter()
        part = solve_particles(x0, noise, beta, dt, list(horizons))
        t_part += time.perf_counter() - t0
        for i, k in enumerate(h_steps):
            xN = part.x[i]
            xbar = xbar_all[k][offsets[j] : offsets[j + 1]]
            nodes, mass = clouds[k]
            coupling[i, j] = math.sqrt(np.mean(np.sum((xN - xbar) ** 2, axis=1)))
            observable[i, j] = float(np.max(np.abs(moments(xN) - moments(nodes, mass))))
            if N <= cfg["w2_max_N"]:
                t1 = time.perf_counter()
                w2[i, j] = wasserstein(xN, nodes, None, mass / mass.sum(), p=2)
                t_w2 += time.perf_counter() - t1

    # error of the reference: the same path and step with about twice the nodes
    nan = np.full(len(horizons), np.nan)
    spde_coupling, spde_w2, spde_observable, M_check = nan.copy(), nan.copy(), nan.copy(), 0
    if cfg["check"]:
        t0 = time.perf_counter()
        ref = solve(2 * cfg["M"])
        spde_seconds += time.perf_counter() - t0
        M_check = int(ref.meta["M"])
        t0 = time.perf_counter()
        xref = _cloud_paths(samples[-1], noise, ref, dt, n_steps, set(h_steps))
        coupling_seconds += time.perf_counter() - t0
        for i, k in enumerate(h_steps):
            xb = xbar_all[k][offsets[-2] :]
            spde_coupling[i] = math.sqrt(np.mean(np.sum((xb - xref[k]) ** 2, axis=1)))
            nodes, mass = clouds[k]
            rn, rm = ref.positions(k), ref.masses(k)
            spde_observable[i] = float(np.max(np.abs(moments(nodes, mass) - moments(rn, rm))))
            if d == 2:
                spde_w2[i] = wasserstein(nodes, rn, mass / mass.sum(), rm / rm.sum(), p=2)
        del ref
    return {
        "Ns": np.asarray(Ns, dtype=np.int64),
        "horizons": np.asarray(horizons, dtype=np.float64),
        "coupling": coupling,
        "w2": w2,
        "observable": observable,
        "spde_coupling": spde_coupling,
        "spde_w2": spde_w2,
        "spde_observable": spde_observable,
        "variance": np.asarray(variance),
        "unresolved_mass": np.array([g["unresolved_mass"] for g in diag]),
        "area_defect": np.array([g["area_defect"] for g in diag]),
        "M": M0,
        "M_check": M_check,
        "spde_seconds": spde_seconds,
        "particle_seconds": t_part,
        "coupling_seconds": coupling_seconds,
        "w2_seconds": t_w2,
    }


def build(cfg: dict, root_seed: int = 0, parts=None) -> dict:
    """The runner studies of a resolved :func:`config`: ``{"chaos": Study, "long": Study}``.

    ``chaos``: grid ``{"sphere": spheres}``, one task per (sphere, replica) running
    :func:`chaos_replica`; the fixed parameters hold the settings of both spheres.
    ``long`` (when the configuration has long-horizon settings): the same layout with
    :func:`chaos_long_replica` (characteristics reference, horizons up to T = 8).
    ``dims`` (when it has cross-dimension settings): grid ``{"d": [2, 3, 4, 5]}``, one task per
    (d, replica) running :func:`chaos_dims_replica`.
    ``parts`` selects some of them (default: every part the configuration has).
    """
    from meanfield.runner import Study

    available = ("chaos", "long") if cfg.get("long") else ("chaos",)
    if cfg.get("dims"):
        available = (*available, "dims")
    parts = available if parts is None else tuple(parts)
    if not parts or set(parts) - set(available):
        raise ValueError(f"parts must be a non-empty subset of {available}, got {tuple(parts)}")
    out = {}
    if "chaos" in parts:
        out["chaos"] = Study(f"chaos-{cfg['preset']}", chaos_replica, grid={"sphere": list(cfg["spheres"])},
                             replicas=cfg["replicas"], root_seed=root_seed,
                             fixed={"preset": cfg["preset"], "configs": cfg["configs"]})
    if "long" in parts:
        lc = cfg["long"]
        out["long"] = Study(f"chaos-long-{cfg['preset']}", chaos_long_replica, grid={"sphere": list(cfg["spheres"])},
                            replicas=lc["replicas"], root_seed=root_seed,
                            fixed={"preset": cfg["preset"], "configs": lc["configs"]})
    if "dims" in parts:
        from ._dims import build_dims

        out["dims"] = build_dims(cfg["dims"], cfg["preset"], root_seed)
    return out


def chaos_study(preset: str = "quick", spheres="both", *, replicas: int | None = None, root_seed: int = 0,
                overrides: Mapping | None = None):
    """Build the propagation-of-chaos :class:`~meanfield.runner.Study` (theory §9).

    Grid ``{"sphere": spheres}``, one task per (sphere, replica) running
    :func:`chaos_replica`; the fixed parameters hold the settings of *both* spheres of the
    preset, so a store started with one sphere can be resumed with both.

    Parameters
    ----------
    preset : {"tiny", "test", "quick", "full"}
        See :data:`PRESETS`. ``quick``: N = 2^6..2^12, 8 replicas (a few minutes on two
        cores); ``full``: N up to 2^16 (S^1) / 2^14 (S^2), 32 replicas; ``test`` and
        ``tiny``: reduced settings for the test suite.
    spheres : 1, 2, "both" or a sequence
        Which spheres to run (S^1 and/or S^2).
    replicas : int, optional
        Override the preset's number of replicas (>= 1).
    root_seed : int
        Root seed of the study.
    overrides : dict, optional
        Settings replacing the preset's, either for both spheres (``{"T": 0.125}``) or per
        sphere (``{"1": {"Ns": [64, 256]}}``). Keys: ``Ns, T, dt, lmax, check_lmax,
        noise_lmax, activation, beta, kappa, density_nodes, w2_max_N, obs_lmax``.

    Returns
    -------
    meanfield.runner.Study
        ``build(config(preset, spheres, replicas=replicas, overrides=overrides), root_seed)["chaos"]``.

    Raises
    ------
    ValueError
        Unknown preset or sphere, N < 2, fewer than two N values, T not a multiple of dt,
        ``check_lmax <= lmax``, unknown setting.

    Examples
    --------
    >>> study = chaos_study("quick", spheres=2, replicas=3)
    >>> study.name, len(study.tasks), study.fixed["configs"]["2"]["Ns"][-1]
    ('chaos-quick', 3, 4096)
    """
    cfg = config(preset, spheres, replicas=replicas, overrides=overrides)
    return build(cfg, root_seed)["chaos"]

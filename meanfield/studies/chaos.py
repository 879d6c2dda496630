"""Propagation of chaos: N particles against the McKean–Vlasov SPDE on one noise path (SPEC §9).

For one common noise path W (a :class:`~meanfield.noise.NoisePath`, ReLU kernel truncated
at degree l_σ) and an initial density ρ_0 (von Mises–Fisher, concentration κ), the study
compares at time T

* the N-token particle system of SPEC §7, projected Euler with step h,
  X_i <- Π(X_i + h v[μ^N](X_i) + ΔW_n(X_i)), X_i(0) iid ~ ρ_0, N = 2^k;
* the SPDE solution ρ_t of the push-forward scheme SPEC §6(b) with the *same* h and the
  same path, ρ_{n+1} = (T_n)_# ρ_n, T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)) — the fixed-h
  limit of the particles, so every error below measures the N-error alone;

through three errors, each averaged over replicas (independent noise paths and samples):

(a) synchronous coupling  ``e_a(N) = sqrt( (1/N) Σ_i |X_i(T) - X̄_i(T)|² )``  (chordal, in R^d),
    where X̄_i(0) = X_i(0) and X̄_i <- Π(X̄_i + h v[ρ_n](X̄_i) + ΔW_n(X̄_i)) follows the same
    noise with the SPDE velocity (:meth:`SPDESolution.velocity`); theory O(N^{-1/2});
(b) e_b(N) = W_2(μ^N_T, ρ_T), geodesic, exact optimal transport against ρ_T given as
    weighted quadrature nodes (S^1: ``density_nodes`` equispaced nodes and the exact
    circle solver; S^2: the Gauss–Legendre product rule with ``density_nodes`` latitudes and
    POT's network simplex, only for N <= ``w2_max_N`` because the cost matrix is N × Q).
    Negative quadrature values of the truncated ρ_T are set to zero and their mass is
    reported per replica (``rho_negative_mass``), never dropped silently. Theory: N^{-1/2}
    on S^1 and sqrt(log N / N) on S^2 (iid sampling, SPEC §9), whose local log–log slope
    -1/2 + 1/(2 ln N) lies in the band [-1/2, -1/2 + 1/(2 ln N_min)] over N >= N_min;
    the S^2 verdict accepts a slope CI that meets this band (theory slope = band centre,
    tolerance = band half-width);
(c) ``e_c(N) = max_k |<μ^N_T, Y_k> - <ρ_T, Y_k>|`` over the real orthonormal harmonics Y_k of
    degree <= 2 (the degree-0 term vanishes); theory O(N^{-1/2}).

The SPDE discretisation error is measured on every replica by solving again at degree
``check_lmax`` (twice ``lmax``) on the same path and step: (a) the RMS distance between
the X̄ paths driven by the two solutions (from the largest sample), (b) on S^1 the exact
W_2 between the two solutions as weighted nodes, on S^2 the smaller of the upper bounds
π sqrt(TV(ρ, ρ')), TV = ½ ∫|ρ - ρ'| (geodesic diameter π), and sqrt(π W_1) with
W_1 <= sqrt(4π) ||ρ - ρ'||_{Ḣ^{-1}} (see ``_w2_bound_s2``), (c) the largest
difference of the degree <= 2 moments. :func:`analyse_chaos` checks that each is below
the smallest mean particle error of its kind (``spde_check``). The W_2 value also contains
the quantisation error of replacing ρ_T by quadrature nodes; ``w2_floor`` estimates it as
the ρ-weighted RMS half-cell size sqrt(Σ_q ρ_q w_q (Δθ_q² + sin²θ_q Δφ²)/12) (S^1: Δθ/sqrt(12)).

Design: one task per (sphere, replica) computes the noise path and the SPDE once and loops
over every N (the SPDE at ``lmax`` and at ``check_lmax`` costs as much as the particles of
the small N; recomputing it for each (N, replica) task would repeat that work len(N)
times). Task seeds depend on the sphere and the replica; inside a task the noise seed and
the seed of the sample for N are children of the task seed keyed by ``0`` and ``(1, N)``,
so adding N values changes no other number.

Examples
--------
>>> from meanfield.studies.chaos import chaos_study, run_chaos
>>> study = chaos_study("tiny", spheres=1)
>>> [t.params for t in study.tasks][:2]
[{'sphere': 1}, {'sphere': 1}]
>>> report = run_chaos("tiny", spheres=1, executor="serial", progress=False)  # doctest: +SKIP
>>> report.summaries[1][["error", "slope", "verdict"]]  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from meanfield._validate import as_float, as_int

__all__ = [
    "PRESETS",
    "ERRORS",
    "ChaosReport",
    "chaos_study",
    "chaos_replica",
    "chaos_frame",
    "analyse_chaos",
    "run_chaos",
    "write_chaos_outputs",
    "summary_markdown",
    "parse_spheres",
    "theory_slopes",
    "iid_w2_control",
]

#: The three errors of SPEC §9, as columns of the long frame and rows of the rate tables.
ERRORS = ("coupling", "w2", "observable")

_ERROR_LABELS = {
    "coupling": "synchronous coupling sqrt(mean |X_i - X̄_i|²)",
    "w2": "W_2(μ^N_T, ρ_T)",
    "observable": "max_{l<=2} |<μ^N_T - ρ_T, Y_lm>|",
}

_SPHERE_DEFAULTS = {
    "activation": "relu",
    "noise_lmax": 6,
    "beta": 1.0,
    "kappa": 4.0,
    "obs_lmax": 2,
}


def _cfg(**kw) -> dict:
    return {**_SPHERE_DEFAULTS, **kw}


#: Presets: per sphere ("1" = S^1, "2" = S^2) the N values, time step, horizon, SPDE degrees,
#: density nodes for W_2 and the largest N for W_2; plus the number of replicas.
#: The horizons are short because the common noise concentrates ρ_t into thin filaments on
#: some paths: the push-forward solution of a κ = 4 vMF under ReLU noise (σ = 1) of degree 6
#: with h = 2^-6 stays resolved (spectral tail <= 1e-4, the solver's default stop) up to
#: T = 0.25 at degree 64 on S^1 (all 32 seeds tried; at T = 0.5 even degree 64 failed on 3
#: of 8) and up to T = 0.125 at degree 64 on S^2 (one of 8 quick seeds needs degree ~128 at
#: T = 0.25, where its spectrum still carries 4e-3 of the energy at l = 48 — a real sharp
#: feature, the spectra at degrees 96 and 128 agree). An unresolved replica raises
#: SPDEResolutionError (the task fails) instead of returning garbage.
PRESETS: dict[str, dict] = {
    "tiny": {
        "replicas": 2,
        "spheres": {
            "1": _cfg(Ns=[16, 32, 64], T=0.0625, dt=0.015625, lmax=16, check_lmax=32, density_nodes=512,
                      w2_max_N=64),
            "2": _cfg(Ns=[16, 32, 64], T=0.0625, dt=0.015625, lmax=16, check_lmax=32, density_nodes=16,
                      w2_max_N=32),
        },
    },
    "test": {
        "replicas": 6,
        "spheres": {
            "1": _cfg(Ns=[64, 128, 256, 512, 1024], T=0.25, dt=0.015625, lmax=64, check_lmax=128,
                      density_nodes=2048, w2_max_N=1024),
            "2": _cfg(Ns=[64, 128, 256, 512, 1024], T=0.125, dt=0.015625, lmax=64, check_lmax=128,
                      density_nodes=32, w2_max_N=256),
        },
    },
    "quick": {
        "replicas": 8,
        "spheres": {
            "1": _cfg(Ns=[64, 128, 256, 512, 1024, 2048, 4096], T=0.25, dt=0.015625, lmax=64, check_lmax=128,
                      density_nodes=4096, w2_max_N=4096),
            "2": _cfg(Ns=[64, 128, 256, 512, 1024, 2048, 4096], T=0.125, dt=0.015625, lmax=64, check_lmax=128,
                      density_nodes=48, w2_max_N=512),
        },
    },
    "full": {
        "replicas": 32,
        "spheres": {
            "1": _cfg(Ns=[2**k for k in range(6, 17)], T=0.25, dt=0.0078125, lmax=96, check_lmax=192,
                      density_nodes=16384, w2_max_N=2**16),
            "2": _cfg(Ns=[2**k for k in range(6, 15)], T=0.125, dt=0.0078125, lmax=96, check_lmax=192,
                      density_nodes=64, w2_max_N=2048),
        },
    },
}

_CONFIG_KEYS = set(PRESETS["quick"]["spheres"]["1"])


def parse_spheres(spheres) -> tuple[int, ...]:
    """Normalise a sphere selection: ``1``, ``2``, ``"both"`` or a sequence of them -> sorted tuple.

    Parameters
    ----------
    spheres : int, str or sequence
        ``1`` (S^1), ``2`` (S^2), ``"1"``, ``"2"``, ``"both"``, or e.g. ``[1, 2]``.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        For an unknown sphere (only S^1 and S^2 are supported: SPEC §6 solver).

    Examples
    --------
    >>> parse_spheres("both"), parse_spheres(2)
    ((1, 2), (2,))
    """
    if isinstance(spheres, str):
        if spheres == "both":
            return (1, 2)
        spheres = [spheres]
    elif isinstance(spheres, (int, np.integer)):
        spheres = [spheres]
    elif not hasattr(spheres, "__iter__"):
        raise ValueError(f"unknown sphere {spheres!r}: use 1 (S^1), 2 (S^2) or 'both'")
    out = set()
    for s in spheres:
        try:
            value = int(s)
        except (TypeError, ValueError):
            raise ValueError(f"unknown sphere {s!r}: use 1 (S^1), 2 (S^2) or 'both'") from None
        if isinstance(s, bool) or value not in (1, 2) or (not isinstance(s, str) and value != s):
            raise ValueError(f"unknown sphere {s!r}: use 1 (S^1), 2 (S^2) or 'both'")
        out.add(value)
    if not out:
        raise ValueError("no sphere selected")
    return tuple(sorted(out))


def _check_config(cfg: Mapping, sphere: int) -> dict:
    cfg = dict(cfg)
    unknown = set(cfg) - _CONFIG_KEYS
    if unknown:
        raise ValueError(f"unknown chaos settings {sorted(unknown)}; allowed: {sorted(_CONFIG_KEYS)}")
    missing = _CONFIG_KEYS - set(cfg)
    if missing:
        raise ValueError(f"missing chaos settings {sorted(missing)}")
    Ns = cfg["Ns"]
    if isinstance(Ns, (str, bytes)) or not hasattr(Ns, "__iter__"):
        raise TypeError(f"Ns must be a list of integers, got {Ns!r}")
    Ns = [as_int(n, "N", min_value=2) for n in Ns]
    if len(Ns) < 2 or len(set(Ns)) != len(Ns):
        raise ValueError(f"Ns must hold at least 2 distinct values (a slope needs two points), got {Ns}")
    cfg["Ns"] = sorted(Ns)
    dt = as_float(cfg["dt"], "dt", min_value=0.0, strict_min=True)
    T = as_float(cfg["T"], "T", min_value=0.0, strict_min=True)
    n_steps = round(T / dt)
    if n_steps < 1 or abs(n_steps * dt - T) > 1e-9 * T:
        raise ValueError(f"T = {T} must be a positive multiple of dt = {dt}")
    cfg["dt"], cfg["T"] = dt, T
    cfg["lmax"] = as_int(cfg["lmax"], "lmax", min_value=1)
    cfg["check_lmax"] = as_int(cfg["check_lmax"], "check_lmax", min_value=1)
    if cfg["check_lmax"] <= cfg["lmax"]:
        raise ValueError(f"check_lmax = {cfg['check_lmax']} must exceed lmax = {cfg['lmax']} (it measures the SPDE error)")
    cfg["noise_lmax"] = as_int(cfg["noise_lmax"], "noise_lmax", min_value=0)
    cfg["density_nodes"] = as_int(cfg["density_nodes"], "density_nodes", min_value=2)
    cfg["w2_max_N"] = as_int(cfg["w2_max_N"], "w2_max_N", min_value=0)
    if sum(n <= cfg["w2_max_N"] for n in cfg["Ns"]) == 1:
        raise ValueError(f"w2_max_N = {cfg['w2_max_N']} leaves a single N for W_2; allow none or at least two")
    cfg["beta"] = as_float(cfg["beta"], "beta", min_value=0.0, strict_min=True)
    cfg["kappa"] = as_float(cfg["kappa"], "kappa", min_value=0.0)
    cfg["obs_lmax"] = as_int(cfg["obs_lmax"], "obs_lmax", min_value=1)
    if not isinstance(cfg["activation"], str):
        raise TypeError(f"activation must be a string, got {cfg['activation']!r}")
    return cfg


def chaos_study(preset: str = "quick", spheres="both", *, replicas: int | None = None, root_seed: int = 0,
                overrides: Mapping | None = None):
    """Build the propagation-of-chaos :class:`~meanfield.runner.Study` (SPEC §9).

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
    from meanfield.runner import Study

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    spheres = parse_spheres(spheres)
    base = copy.deepcopy(PRESETS[preset])
    configs = base["spheres"]
    overrides = dict(overrides or {})
    per_sphere = {k: overrides.pop(k) for k in list(overrides) if k in ("1", "2")}
    for key in configs:
        configs[key].update(overrides)
        configs[key].update(per_sphere.get(key, {}))
        configs[key] = _check_config(configs[key], int(key))
    reps = base["replicas"] if replicas is None else as_int(replicas, "replicas", min_value=1)
    return Study(f"chaos-{preset}", chaos_replica, grid={"sphere": list(spheres)}, replicas=reps,
                 root_seed=root_seed, fixed={"preset": preset, "configs": configs})


# ----------------------------------------------------------------------------------------
# the task
# ----------------------------------------------------------------------------------------


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
    from meanfield.spde import _resize, coefficient_degrees

    tv = 0.5 * float(np.sum(weights * np.abs(vals - vals_ref)))
    delta = _resize(np.asarray(c), 3, lmax, check_lmax) - np.asarray(c_ref)
    ell, mult = coefficient_degrees(3, check_lmax)
    pos = ell > 0
    h1 = math.sqrt(float(np.sum(mult[pos] * np.abs(delta[pos]) ** 2 / (ell[pos] * (ell[pos] + 1.0)))))
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
        ``observable``. Scalars: ``spde_coupling``, ``spde_w2_bound``, ``spde_observable``
        (SPDE error at lmax vs check_lmax), ``rho_negative_mass``, ``rho_negative_fraction``,
        ``rho_min`` (of ρ_T at the density nodes), ``spde_tail`` (spectral tail of ρ_T),
        ``w2_floor`` (quantisation estimate), ``kept_fraction`` (κ_σ(1)/κ(1)) and the wall
        times ``spde_seconds``, ``particle_seconds``, ``coupling_seconds``, ``w2_seconds``.

    Examples
    --------
    >>> study = chaos_study("tiny", spheres=1, replicas=1)
    >>> out = chaos_replica(study.task_params(study.tasks[0]), study.seed(study.tasks[0]))  # doctest: +SKIP
    >>> out["coupling"].shape  # doctest: +SKIP
    (3,)
    """
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import NoisePath
    from meanfield.particles import solve_particles
    from meanfield.spde import VonMisesFisher, solve_spde
    from meanfield.transport import density_moments, density_to_cloud, observable_errors, wasserstein

    sphere = int(params["sphere"])
    if sphere not in (1, 2):
        raise ValueError(f"unknown sphere {sphere!r}")
    cfg = _check_config(params["configs"][str(sphere)], sphere)
    d = sphere + 1
    Ns, T, dt, beta = cfg["Ns"], cfg["T"], cfg["dt"], cfg["beta"]
    n_steps = round(T / dt)
    times = np.arange(n_steps + 1) * dt
    if not isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed)

    def child(*key):
        return np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, *key))

    noise = NoisePath(ActivationKernel(cfg["activation"]), d=d, lmax=cfg["noise_lmax"], seed=child(0), t_max=T)
    mu = np.zeros(d)
    mu[-1] = 1.0
    rho0 = VonMisesFisher(mu, cfg["kappa"])

    t0 = time.perf_counter()
    sol = solve_spde(rho0, noise, beta=beta, lmax=cfg["lmax"], dt=dt, t_eval=times, scheme="pushforward")
    ref = solve_spde(rho0, noise, beta=beta, lmax=cfg["check_lmax"], dt=dt, t_eval=times, scheme="pushforward")
    spde_seconds = time.perf_counter() - t0

    nodes, weights = _density_nodes(d, cfg["density_nodes"])
    vals = sol.evaluate(n_steps, nodes)
    vals_ref = ref.evaluate(n_steps, nodes)
    cloud = density_to_cloud(vals, nodes, weights, clip_negative=True)
    keep = cloud.weights > 0  # zero-weight nodes carry no mass; dropping them only shrinks the cost matrix

    coupling = np.empty(len(Ns))
    w2 = np.full(len(Ns), np.nan)
    observable = np.empty(len(Ns))
    t_part = t_coup = t_w2 = 0.0
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
            w2[k] = wasserstein(xN, cloud.points[keep], None, cloud.weights[keep] / cloud.weights[keep].sum(), p=2)
            t_w2 += time.perf_counter() - t2

    # SPDE discretisation error: the same path and step at check_lmax
    xbar_ref = _mean_field_paths(x0, noise, ref, dt, n_steps)
    spde_coupling = math.sqrt(np.mean(np.sum((xbar - xbar_ref) ** 2, axis=1)))
    if d == 2:
        # exact W_2 between the two solutions on the same nodes (exact circle solver, any size)
        cloud_ref = density_to_cloud(vals_ref, nodes, weights, clip_negative=True)
        spde_w2_bound = float(wasserstein(nodes, nodes, cloud.weights, cloud_ref.weights, p=2))
    else:
        spde_w2_bound = _w2_bound_s2(sol.coeffs[n_steps], ref.coeffs[n_steps], cfg["lmax"], cfg["check_lmax"],
                                     weights, vals, vals_ref)
    spde_observable = float(np.max(np.abs(density_moments(nodes, weights, vals, cfg["obs_lmax"])
                                          - density_moments(nodes, weights, vals_ref, cfg["obs_lmax"]))))
    return {
        "Ns": np.asarray(Ns, dtype=np.int64),
        "coupling": coupling,
        "w2": w2,
        "observable": observable,
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
    }


# ----------------------------------------------------------------------------------------
# analysis
# ----------------------------------------------------------------------------------------


def chaos_frame(result) -> pd.DataFrame:
    """Long table of a chaos :class:`~meanfield.runner.StudyResult`: one row per (sphere, replica, N).

    Parameters
    ----------
    result : meanfield.runner.StudyResult

    Returns
    -------
    DataFrame
        Columns ``sphere, replica, N, coupling, w2, observable`` (``w2`` NaN where not computed).

    Examples
    --------
    >>> long = chaos_frame(result)  # doctest: +SKIP
    >>> long.groupby(["sphere", "N"])["coupling"].mean()  # doctest: +SKIP
    """
    rows = []
    frame = result.frame
    for i, row in enumerate(frame.itertuples(index=False)):
        Ns = result.arrays["Ns"][i]
        for k, N in enumerate(Ns):
            rows.append({"sphere": int(row.sphere), "replica": int(row.replica), "N": int(N),
                         **{e: float(result.arrays[e][i][k]) for e in ERRORS}})
    return pd.DataFrame(rows, columns=["sphere", "replica", "N", *ERRORS])


def theory_slopes(sphere: int, n_min_w2: int) -> tuple[dict, dict]:
    """Theory slopes and tolerances of the three errors (SPEC §9).

    Coupling and observables: -1/2, tolerance 0. W_2: -1/2 on S^1 (tolerance 0); on S^2
    the band [-1/2, -1/2 + 1/(2 ln N_min)] of local slopes of sqrt(log N / N), written as
    centre -1/2 + 1/(4 ln N_min) with tolerance 1/(4 ln N_min).

    Parameters
    ----------
    sphere : {1, 2}
    n_min_w2 : int
        Smallest N of the W_2 fit.

    Returns
    -------
    (dict, dict)
        ``{error: theory slope}``, ``{error: tolerance}``.

    Examples
    --------
    >>> slopes, tol = theory_slopes(2, 64)
    >>> round(slopes["w2"] - tol["w2"], 12), round(slopes["w2"] + tol["w2"], 4)
    (-0.5, -0.3798)
    """
    slopes = {"coupling": -0.5, "w2": -0.5, "observable": -0.5}
    tol = {"coupling": 0.0, "w2": 0.0, "observable": 0.0}
    if sphere == 2:
        half = 1.0 / (4.0 * math.log(n_min_w2))
        slopes["w2"] = -0.5 + half
        tol["w2"] = half
    return slopes, tol


@dataclass
class ChaosReport:
    """Analysed propagation-of-chaos study.

    Attributes
    ----------
    result : meanfield.runner.StudyResult
        The raw study result (per (sphere, replica) row; arrays per N).
    frame : DataFrame
        :func:`chaos_frame` of the result.
    tables : dict of int to DataFrame
        Rate table (:func:`meanfield.rates.rate_table`) per sphere, errors stacked.
    summaries : dict of int to DataFrame
        :func:`meanfield.rates.slope_summary` per sphere.
    spde_check : DataFrame
        One row per (sphere, error): ``spde_error`` (largest over replicas),
        ``smallest_particle_error`` (smallest mean over N), ``ratio``, ``below``.
    diagnostics : DataFrame
        Per sphere: negative mass of ρ_T, min ρ_T, spectral tail, W_2 quantisation floor,
        kept fraction of κ(1), mean wall times per replica.
    """

    result: object
    frame: pd.DataFrame
    tables: dict
    summaries: dict
    spde_check: pd.DataFrame
    diagnostics: pd.DataFrame

    @property
    def spheres(self) -> tuple[int, ...]:
        return tuple(sorted(self.tables))


def analyse_chaos(result, *, n_boot: int = 2000, seed: int = 0) -> ChaosReport:
    """Rate tables, slope fits, SPDE-error check and diagnostics of a chaos study result.

    Parameters
    ----------
    result : meanfield.runner.StudyResult
        From ``run_study(chaos_study(...))``; needs at least 2 replicas per sphere for the
        bootstrap CIs.
    n_boot : int
        Bootstrap resamples of :func:`meanfield.rates.rate_table`.
    seed : int
        Bootstrap seed.

    Returns
    -------
    ChaosReport

    Examples
    --------
    >>> report = analyse_chaos(run_study(chaos_study("tiny"), progress=False))  # doctest: +SKIP
    """
    from meanfield.rates import rate_table, slope_summary

    if result.failures:
        raise RuntimeError(f"{len(result.failures)} chaos task(s) failed, first: {result.failures[0].error}")
    long = chaos_frame(result)
    fr = result.frame
    tables, summaries, checks, diags = {}, {}, [], []
    for sphere in sorted(long["sphere"].unique()):
        sub = long[long["sphere"] == sphere]
        w2_rows = sub[np.isfinite(sub["w2"])]
        n_min_w2 = int(w2_rows["N"].min()) if len(w2_rows) else 2
        slopes, tol = theory_slopes(int(sphere), n_min_w2)
        parts = []
        for err in ERRORS:
            data = sub if err != "w2" else w2_rows
            if data["N"].nunique() < 2:
                continue
            parts.append(rate_table(data, "N", err, slopes[err], tolerance=tol[err], n_boot=n_boot, seed=seed))
        table = pd.concat(parts, ignore_index=True)
        table.attrs["param"] = "N"
        tables[int(sphere)] = table
        summaries[int(sphere)] = slope_summary(table)
        rows = fr[fr["sphere"] == sphere]
        means = sub.groupby("N")[list(ERRORS)].mean()
        for err, col in (("coupling", "spde_coupling"), ("w2", "spde_w2_bound"), ("observable", "spde_observable")):
            smallest = float(means[err].min()) if np.isfinite(means[err]).any() else float("nan")
            spde_err = float(rows[col].max())
            checks.append({"sphere": int(sphere), "error": err, "spde_measure": col, "spde_error": spde_err,
                           "smallest_particle_error": smallest, "ratio": spde_err / smallest,
                           "below": bool(spde_err < smallest)})
        diags.append({
            "sphere": int(sphere), "replicas": int(len(rows)),
            "rho_negative_mass_max": float(rows["rho_negative_mass"].max()),
            "rho_negative_fraction_max": float(rows["rho_negative_fraction"].max()),
            "rho_min": float(rows["rho_min"].min()),
            "spde_tail_max": float(rows["spde_tail"].max()),
            "w2_floor": float(rows["w2_floor"].max()),
            "kept_fraction": float(rows["kept_fraction"].mean()),
            "spde_seconds": float(rows["spde_seconds"].mean()),
            "particle_seconds": float(rows["particle_seconds"].mean()),
            "coupling_seconds": float(rows["coupling_seconds"].mean()),
            "w2_seconds": float(rows["w2_seconds"].mean()),
        })
    return ChaosReport(result, long, tables, summaries, pd.DataFrame(checks), pd.DataFrame(diags))


def iid_w2_control(sphere: int, Ns, replicas: int = 8, *, kappa: float = 4.0, density_nodes: int = 4096,
                   seed: int = 0, n_boot: int = 2000):
    """Control for error (b): W_2 of N iid samples of ρ_0 (vMF) against ρ_0 itself, no dynamics.

    Measures the pre-asymptotic W_2 decay of pure sampling for the same initial density, the
    same N and the same quadrature representation as the study, so that a W_2 slope of the
    study can be compared with what sampling alone gives. S^1 only by default use (exact
    circle solver, cheap); S^2 works too but costs one network simplex per (N, replica).

    Parameters
    ----------
    sphere : {1, 2}
    Ns : sequence of int
        Sample sizes (>= 2, at least two distinct).
    replicas : int
    kappa : float
        vMF concentration (mean direction e_d).
    density_nodes : int
        Equispaced nodes (S^1) or Gauss–Legendre latitudes (S^2) for ρ_0.
    seed : int
    n_boot : int

    Returns
    -------
    (DataFrame, meanfield.rates.SlopeFit)
        Long table ``N, replica, w2`` and the slope fit of mean W_2 against N.

    Examples
    --------
    >>> df, fit = iid_w2_control(1, [64, 256], replicas=3, density_nodes=512)
    >>> df.shape, bool(fit.slope < 0)
    ((6, 3), True)
    """
    from meanfield.rates import fit_slope
    from meanfield.spde import VonMisesFisher
    from meanfield.transport import wasserstein_to_density

    sphere = parse_spheres(sphere)
    if len(sphere) != 1:
        raise ValueError("iid_w2_control takes one sphere")
    d = sphere[0] + 1
    Ns = [as_int(n, "N", min_value=2) for n in Ns]
    if len(set(Ns)) < 2:
        raise ValueError(f"Ns must hold at least 2 distinct values, got {Ns}")
    replicas = as_int(replicas, "replicas", min_value=1)
    mu = np.zeros(d)
    mu[-1] = 1.0
    rho0 = VonMisesFisher(mu, kappa)
    nodes, weights = _density_nodes(d, as_int(density_nodes, "density_nodes", min_value=2))
    vals = rho0.density(nodes)
    rows = []
    for N in Ns:
        for r in range(replicas):
            x = rho0.sample(N, seed=np.random.SeedSequence(seed, spawn_key=(N, r)))
            rows.append({"N": N, "replica": r, "w2": wasserstein_to_density(x, None, nodes, weights, vals)})
    df = pd.DataFrame(rows)
    return df, fit_slope(df["N"].to_numpy(float), df["w2"].to_numpy(), n_boot=n_boot, seed=seed)


def run_chaos(preset: str = "quick", spheres="both", *, replicas: int | None = None, root_seed: int = 0,
              overrides: Mapping | None = None, n_boot: int = 2000, **execution) -> ChaosReport:
    """Build, run (:func:`meanfield.runner.run_study`) and analyse the chaos study.

    Parameters
    ----------
    preset, spheres, replicas, root_seed, overrides
        See :func:`chaos_study`.
    n_boot : int
        Bootstrap resamples of the rate tables.
    **execution
        Keyword arguments of :func:`meanfield.runner.run_study` (``executor``, ``workers``,
        ``scheduler``, ``store``, ``resume``, ``progress``, ...).

    Returns
    -------
    ChaosReport

    Examples
    --------
    >>> report = run_chaos("quick", workers=2, store="results/chaos")  # doctest: +SKIP
    >>> report.summaries[1]  # doctest: +SKIP
    """
    from meanfield.runner import run_study

    study = chaos_study(preset, spheres, replicas=replicas, root_seed=root_seed, overrides=overrides)
    execution.setdefault("raise_on_failure", True)
    result = run_study(study, **execution)
    return analyse_chaos(result, n_boot=n_boot)


# ----------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------


def _md(df: pd.DataFrame, floatfmt: str = ".4g") -> str:
    from meanfield.rates import to_markdown

    return to_markdown(df, floatfmt=floatfmt)


def summary_markdown(report: ChaosReport, *, extra: Mapping | None = None) -> str:
    """Markdown summary: fitted exponents with CIs and verdicts, the SPDE-error check, diagnostics.

    Parameters
    ----------
    report : ChaosReport
    extra : dict, optional
        ``{heading: markdown text}`` sections appended (run time, machine, speed-up...).

    Returns
    -------
    str

    Examples
    --------
    >>> text = summary_markdown(report)  # doctest: +SKIP
    """
    study = report.result.study
    lines = [f"# Propagation of chaos (SPEC §9), preset `{study.fixed['preset']}`", ""]
    lines.append(f"Replicas per sphere: {study.replicas}; root seed {study.root_seed}. Errors at time T: "
                 "(a) synchronous coupling sqrt(mean_i |X_i - X̄_i|²) (chordal), (b) geodesic W_2 to ρ_T as "
                 "weighted quadrature nodes, (c) max over the real harmonics of degree ≤ 2 of "
                 "|<μ^N - ρ_T, Y_lm>|. Slope CIs: 95 % within-N bootstrap of the fit of log mean error on log N.")
    lines.append("")
    for sphere in report.spheres:
        cfg = study.fixed["configs"][str(sphere)]
        lines.append(f"## S^{sphere}")
        lines.append("")
        lines.append(f"vMF ρ_0 (κ = {cfg['kappa']:g}), {cfg['activation']} noise of degree l_σ = {cfg['noise_lmax']}, "
                     f"β = {cfg['beta']:g}, T = {cfg['T']:g}, h = {cfg['dt']:g}, SPDE push-forward scheme at degree "
                     f"{cfg['lmax']} (check at {cfg['check_lmax']}), N = {cfg['Ns'][0]}..{cfg['Ns'][-1]}, "
                     f"W_2 for N ≤ {min(cfg['w2_max_N'], cfg['Ns'][-1])} against "
                     + (f"{cfg['density_nodes']} equispaced nodes (exact circle solver)." if sphere == 1 else
                        f"the {cfg['density_nodes']} × {2 * cfg['density_nodes']} Gauss–Legendre product grid "
                        "(exact network simplex)."))
        lines.append("")
        summ = report.summaries[sphere].copy()
        summ["band"] = [f"[{t - tol:.4g}, {t + tol:.4g}]" for t, tol in zip(summ["theory_slope"], summ["tolerance"])]
        lines.append(_md(summ[["error", "n_points", "slope", "slope_ci_low", "slope_ci_high", "r2", "band",
                               "verdict"]]))
        lines.append("")
        bad = summ[summ["verdict"] != "consistent"]
        for row in bad.itertuples(index=False):
            lines.append(f"- **{row.error}: not consistent** — fitted slope {row.slope:.3f} "
                         f"[{row.slope_ci_low:.3f}, {row.slope_ci_high:.3f}] misses the accepted band {row.band}.")
        if len(bad):
            lines.append("")
    lines.append("## SPDE discretisation error vs the smallest particle error")
    lines.append("")
    lines.append("SPDE error: the same replica (path, step, initial density) at the check degree; coupling: RMS "
                 "distance of the X̄ paths driven by the two solutions; W_2: exact between the two solutions on "
                 "S^1, on S^2 the upper bound min(π sqrt(TV), sqrt(π W_1)), W_1 ≤ sqrt(4π) ‖ρ - ρ'‖_{H^-1}; observables: "
                 "largest difference of the degree ≤ 2 moments. Largest over replicas.")
    lines.append("")
    lines.append(_md(report.spde_check))
    lines.append("")
    lines.append("## Diagnostics (per sphere; negative mass of ρ_T at the W_2 nodes is clipped and reported here)")
    lines.append("")
    lines.append(_md(report.diagnostics))
    lines.append("")
    for heading, text in (extra or {}).items():
        lines.append(f"## {heading}")
        lines.append("")
        lines.append(str(text).rstrip())
        lines.append("")
    return "\n".join(lines)


def write_chaos_outputs(report: ChaosReport, out, *, extra: Mapping | None = None) -> dict:
    """Write the tables, figures, SPDE check and summary of a chaos study into ``out``.

    Files: ``table_s{1,2}.{csv,md,tex}`` (rate tables), ``figure_s{1,2}.{png,pdf}``
    (log–log, mean with CI, fitted and theory lines), ``spde_check.{csv,md}``,
    ``diagnostics.csv`` and ``summary.md``.

    Parameters
    ----------
    report : ChaosReport
    out : str or Path
        Output directory (created).
    extra : dict, optional
        Extra summary sections, see :func:`summary_markdown`.

    Returns
    -------
    dict
        ``{name: Path}`` of every file written.

    Examples
    --------
    >>> files = write_chaos_outputs(report, "chaos-out")  # doctest: +SKIP
    """
    from meanfield.rates import export_table, plot_rates

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for sphere in report.spheres:
        table = report.tables[sphere]
        for fmt, path in export_table(table, out / f"table_s{sphere}").items():
            files[f"table_s{sphere}.{fmt}"] = path
        fig = plot_rates(table, "N", path_stem=out / f"figure_s{sphere}", formats=("png", "pdf"),
                         title=f"Propagation of chaos on S^{sphere}")
        del fig
        for fmt in ("png", "pdf"):
            files[f"figure_s{sphere}.{fmt}"] = out / f"figure_s{sphere}.{fmt}"
    for fmt, path in export_table(report.spde_check, out / "spde_check", formats=("csv", "md")).items():
        files[f"spde_check.{fmt}"] = path
    report.diagnostics.to_csv(out / "diagnostics.csv", index=False)
    files["diagnostics.csv"] = out / "diagnostics.csv"
    (out / "summary.md").write_text(summary_markdown(report, extra=extra), encoding="utf-8")
    files["summary.md"] = out / "summary.md"
    return files

"""Task functions of the circle study and :func:`build` (the runner studies of a configuration)."""

from __future__ import annotations

import math
import time

import numpy as np

from ._presets import PARTS, check_stability, check_sync, check_threshold

#: Outcomes of one random start (:func:`sync_task`).
OUTCOMES = ("synchronised", "stuck", "unresolved")


def sync_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One random start on the circle, followed until it is certified synchronised, stuck, or t_max.

    N angles iid uniform (from ``seed``) follow :func:`meanfield.particles.solve_particles` (no
    noise, projected Euler, step ``dt``, attention evaluator ``attention``) in segments of
    ``segment`` time units, saved every ``save_every``. The presets use the direct sum: the test
    for rest compares the exact speed with ``v_tol``, and a solver with a velocity error ε comes to
    rest where the exact speed is about ε (measured: ~1e-8 for the spectral sum at N = 256, which
    left two runs above v_tol = 1e-8 for t = 1000). Outcomes:

    * **synchronised** at the first saved time at which all tokens lie in an open half circle
      (:func:`meanfield.circle_stability.in_open_half_circle`; from then on they provably converge
      to one point);
    * **stuck** at the end of a segment if not, the largest angular speed is below ``v_tol`` and
      the linearisation there is stable (top nontrivial eigenvalue
      :func:`~meanfield.circle_stability.top_nontrivial_eigenvalue` below ``-eig_margin``): a stable
      equilibrium that is not one cluster;
    * **unresolved** if neither happened by ``t_max``.

    Returns
    -------
    dict
        ``outcome``, ``t_end``, ``t_half`` (time of the half-circle certificate, NaN otherwise),
        ``max_speed`` and ``top_eigenvalue`` at the end, ``n_clusters`` and ``largest_fraction``
        (single linkage at ``cluster_tol``, :func:`meanfield.clusters.cluster_sizes`) at the end, ``attention`` (evaluator used), ``seconds``.
    """
    from meanfield.circle_stability import (angular_velocity, circle_angles, circle_points, in_open_half_circle,
                                            top_nontrivial_eigenvalue)
    from meanfield.clusters import cluster_sizes
    from meanfield.particles import solve_particles

    beta, n, dt = float(params["beta"]), int(params["N"]), float(params["dt"])
    seg, save, t_max = float(params["segment"]), float(params["save_every"]), float(params["t_max"])
    start = time.perf_counter()
    x = circle_points(np.random.default_rng(seed).uniform(0.0, 2.0 * math.pi, n))
    t, t_half, outcome, method = 0.0, math.nan, "unresolved", ""
    speed = top = math.nan
    offsets = save * np.arange(1, round(seg / save) + 1)
    while t < t_max - 1e-9 * t_max:
        sol = solve_particles(x, None, beta, dt, t + offsets, t0=t, attention=params["attention"])
        method = sol.meta["attention"]
        for ti, xi in zip(sol.t, sol.x):
            if in_open_half_circle(circle_angles(xi)):
                t_half = float(ti)
                break
        x, t = sol.final, float(sol.t[-1])
        theta = circle_angles(x)
        speed = float(np.abs(angular_velocity(theta, beta)).max())
        if not math.isnan(t_half):
            outcome = "synchronised"
            break
        if speed < float(params["v_tol"]):
            top = top_nontrivial_eigenvalue(theta, beta)
            if top < -float(params["eig_margin"]):
                outcome = "stuck"
                break
    sizes = cluster_sizes(x, float(params["cluster_tol"]))
    return {"outcome": outcome, "t_end": t, "t_half": t_half, "max_speed": speed, "top_eigenvalue": top,
            "n_clusters": int(sizes.size), "largest_fraction": float(sizes[0] / n), "attention": method,
            "seconds": time.perf_counter() - start}


def perturbation_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One perturbation run of the k-cluster state (:func:`meanfield.circle_stability.perturbation_growth`).

    Returns
    -------
    dict
        ``rate`` (measured), ``predicted`` (eigenvalue), ``predicted_scheme`` (what the scheme
        should show), ``diff`` = rate - predicted_scheme, ``top`` (top nontrivial eigenvalue of the
        state), ``seconds``.
    """
    from meanfield.circle_stability import cluster_spectrum, perturbation_growth

    kind = params["kind"]
    start = time.perf_counter()
    t_total = float(params["random_t_total"] if kind == "random" else params["t_total"])
    run = perturbation_growth(int(params["k"]), int(params["n"]), float(params["beta"]), kind=kind,
                              p=int(params["p"]) if kind == "inter" else 1, amplitude=float(params["amplitude"]),
                              t_total=t_total, chunk=float(params["chunk"]), dt=float(params["dt"]), scheme="heun",
                              seed=seed)
    return {"rate": run.rate, "predicted": run.predicted, "predicted_scheme": run.predicted_scheme,
            "diff": run.rate - run.predicted_scheme, "top": cluster_spectrum(int(params["k"]), float(params["beta"])).top,
            "seconds": time.perf_counter() - start}


def threshold_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """Stability threshold of the k-cluster state from perturbation runs and from the eigenvalues.

    ``params["brackets"][str(k)]`` is the β interval searched.

    Returns
    -------
    dict
        ``beta_runs`` (root of the measured growth rate of the top inter-cluster mode in the bracket,
        :func:`~meanfield.circle_stability.perturbation_threshold`), ``n_runs``, ``beta_eigen`` (root of
        the top nontrivial eigenvalue in the bracket, :func:`~meanfield.circle_stability.stability_thresholds`),
        ``seconds``.
    """
    from meanfield.circle_stability import cluster_spectrum, perturbation_threshold, stability_thresholds

    k = int(params["k"])
    lo, hi = (float(b) for b in params["brackets"][str(k)])
    start = time.perf_counter()
    # the inter mode that crosses: the one that is largest just above the bracket's top
    p = int(np.argmax(cluster_spectrum(k, hi).inter)) + 1
    p = min(p, k - p)  # μ_p = μ_{k-p}: name the smaller wave number
    beta_runs, n_runs = perturbation_threshold(k, lo, hi, kind="inter", p=p, n=int(params["n"]),
                                               t_total=float(params["t_total"]), chunk=float(params["chunk"]),
                                               dt=float(params["dt"]), xtol=float(params["xtol"]))
    eig = stability_thresholds(k, lo, hi)
    return {"p": p, "beta_runs": beta_runs, "n_runs": n_runs, "beta_eigen": float(eig[0]) if eig.size == 1 else math.nan,
            "n_eigen_roots": int(eig.size), "seconds": time.perf_counter() - start}


def _sync_grid(c: dict) -> list[dict]:
    grid = [{"beta": float(b), "N": int(n), "dt": float(c["dt"])} for b in c["betas"] for n in c["Ns"]]
    grid += [{"beta": float(b), "N": int(c["dt_check_N"]), "dt": float(c["dt"]) / 2} for b in c["dt_check_betas"]]
    return grid


def _stability_grid(c: dict) -> list[dict]:
    grid = []
    for k in c["ks"]:
        modes = [("intra", 0)] + [("inter", p) for p in range(1, k // 2 + 1)] + [("random", 0)]
        for n in c["ns"]:
            for b in c["betas"]:
                grid += [{"k": int(k), "n": int(n), "beta": float(b), "kind": kind, "p": p} for kind, p in modes]
    return grid


def make_sync_study(c: dict, root_seed: int = 0):
    """The fraction-synchronised study: grid (β, N, dt) plus the dt/2 control points; seeds by N only
    (every β and step size starts from the same clouds)."""
    from meanfield.runner import Study

    check_sync(c)
    fixed = {k: c[k] for k in ("t_max", "segment", "save_every", "v_tol", "eig_margin", "cluster_tol", "attention")}
    return Study("circle-sync", sync_task, grid=_sync_grid(c), replicas=int(c["replicas"]), root_seed=root_seed,
                 fixed=fixed, seed_by=("N",))


def make_stability_study(c: dict, root_seed: int = 0):
    """Perturbation runs of the k-cluster states: every (k, n, β) with the intra mode, the inter modes
    p = 1..k/2 and a random perturbation."""
    from meanfield.runner import Study

    check_stability(c)
    fixed = {k: c[k] for k in ("dt", "t_total", "random_t_total", "chunk", "amplitude")}
    return Study("circle-stability", perturbation_task, grid=_stability_grid(c), replicas=1, root_seed=root_seed,
                 fixed=fixed)


def make_threshold_study(c: dict, root_seed: int = 0):
    """The threshold of each k in ``ks`` located by perturbation runs (one task per k)."""
    from meanfield.runner import Study

    check_threshold(c)
    fixed = {k: c[k] for k in ("n", "dt", "t_total", "chunk", "xtol", "brackets")}
    return Study("circle-threshold", threshold_task, grid={"k": [int(k) for k in c["ks"]]}, replicas=1,
                 root_seed=root_seed, fixed=fixed)


def build(config: dict, root_seed: int = 0, parts=None) -> dict:
    """``{part: Study}`` for the parts of ``config`` (default all of :data:`PARTS`)."""
    parts = PARTS if parts is None else tuple(parts)
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"parts must be among {PARTS}, got {bad}")
    makers = {"circle_sync": make_sync_study, "circle_stability": make_stability_study,
              "circle_threshold": make_threshold_study}
    return {p: makers[p](config[p], root_seed) for p in parts}

"""Synchronisation by common noise and attention (SPEC §5.4, §9; Thm 1.4, Prop. 1.5).

Three measurements:

1. **Lyapunov table** (activations × d). For each activation kernel κ and dimension d:
   the closed form λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)] (SPEC §5.4), the Monte Carlo
   estimate of :func:`meanfield.sync.lyapunov_estimate` (two nearby tokens with
   renormalisation; NoisePath + Richardson in dt for d <= 3, finite-width random-feature
   noise for d >= 4) with its SE over noise replicas, and "synchronises?" from both.
   The simulated verdict is "yes" if mean + 2 SE < 0, "no" if mean - 2 SE > 0, and
   "unresolved" otherwise.

2. **Energy decay** along particle runs (d = 3, N iid uniform tokens, ReLU noise path,
   softmax attention at several β, plus a noise-only run without attention). Along each
   run: the gap energy E_β(μ_t) = (1/2β) ∫∫ (e^β - e^{β<x,y>}) dμ dμ and the variance
   ``1 - |∫ x dμ|²``. Two rates are fitted per β:

   * the decay rate of the **mean** E[E_β(μ_t)] over replicas (least squares of
     log mean E on the late window t >= t_fit, above the round-off floor), with a
     percentile-bootstrap CI over replicas (Thm 1.4: exponential decay);
   * the **almost-sure** rate: per replica, the slope of log E_β(μ_t) over the times at
     which the cloud is one cluster (single linkage at 0.1 rad) and E_β is above the
     round-off floor; mean over replicas ± SE. Theory for a single tight cluster: the
     separation of two tokens follows the linearised flow, whose noise part has top
     exponent λ_1 and whose attention part is -I (inside a tight cluster
     A(x_i) ≈ mean token, for every β), so E_β ∝ spread² decays at
     **2 (1 - λ_1)** with attention and **-2 λ_1** without.

   Noise "dominates" attention when the noise-only mean rate is comparable to the
   rates with attention; large β slows the *mean* decay (metastable multi-cluster
   states that only the noise can merge) even though the a.s. rate inside one cluster
   does not depend on β.

3. The β-dependence of both rates (table + figure).

Task functions are module-level (``fn(params, seed) -> dict``) and run through
:func:`meanfield.runner.run_study`; :func:`run_sync_study` runs a preset and
:func:`write_sync_outputs` writes the tables and figures.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._presets import preset_config
from .._validate import as_float, as_int

__all__ = [
    "SYNC_PRESETS",
    "ACTIVATIONS",
    "sync_config",
    "lyapunov_task",
    "lyapunov_step",
    "energy_task",
    "spde_energy_task",
    "signed_gap_energy",
    "make_lyapunov_study",
    "make_energy_study",
    "make_spde_study",
    "spde_table",
    "lyapunov_table",
    "energy_rates",
    "fit_decay_rate",
    "SyncStudyResult",
    "run_sync_study",
    "write_sync_outputs",
]

#: Activation kernels of the Lyapunov table: name -> (activation, σ_w).
ACTIVATIONS: dict[str, tuple[str, float]] = {
    "relu": ("relu", 1.0),
    "tanh": ("tanh", 1.0),
    "erf(sw=2)": ("erf", 2.0),
    "linear": ("linear", 1.0),
}

#: Presets of :func:`run_sync_study` (``test``, ``quick``, ``full``): per part
#: (``lyapunov``, ``energy``, ``spde``) the parameters of its study; see :func:`sync_config`.
SYNC_PRESETS: dict[str, dict] = {
    "test": {
        "lyapunov": {"activations": ["relu", "erf(sw=2)"], "dims": [3, 8], "t_total": 2.0, "dt": 2.0**-5,
                     "n_replicas": 6, "n_pairs": 32, "lmax": 8, "width": 256},
        "energy": {"d": 3, "N": 32, "T": 12.0, "dt": 2.0**-5, "save_every": 0.5, "lmax": 8, "betas": [0.0, 4.0],
                   "noise_only": True, "replicas": 8, "t_fit": 3.0, "activation": "relu"},
        "spde": {"d": 3, "beta": 1.0, "lmax": 32, "noise_lmax": 8, "dt": 2.0**-5, "T": 0.5, "save_every": 0.125,
                 "N": 1024, "kappa0": 2.0, "activation": "relu", "replicas": 1},
    },
    "quick": {
        "lyapunov": {"activations": ["relu", "tanh", "erf(sw=2)", "linear"], "dims": [2, 3, 5, 8, 16, 20],
                     "t_total": 4.0, "dt": 2.0**-5, "n_replicas": 8, "n_pairs": 16, "lmax": 8, "width": 256},
        "energy": {"d": 3, "N": 64, "T": 24.0, "dt": 2.0**-5, "save_every": 0.5, "lmax": 8,
                   "betas": [0.0, 1.0, 4.0, 10.0], "noise_only": True, "replicas": 16, "t_fit": 4.0,
                   "activation": "relu"},
        "spde": {"d": 3, "beta": 1.0, "lmax": 64, "noise_lmax": 8, "dt": 2.0**-6, "T": 0.5, "save_every": 0.0625,
                 "N": 4096, "kappa0": 2.0, "activation": "relu", "replicas": 2},
    },
    "full": {
        "lyapunov": {"activations": ["relu", "tanh", "erf(sw=2)", "linear"], "dims": [2, 3, 5, 8, 12, 14, 16, 20],
                     "t_total": 8.0, "dt": 2.0**-6, "n_replicas": 16, "n_pairs": 64, "lmax": 12, "width": 512},
        "energy": {"d": 3, "N": 128, "T": 32.0, "dt": 2.0**-6, "save_every": 0.5, "lmax": 12,
                   "betas": [0.0, 1.0, 2.0, 4.0, 10.0], "noise_only": True, "replicas": 48, "t_fit": 4.0,
                   "activation": "relu"},
        "spde": {"d": 3, "beta": 1.0, "lmax": 64, "noise_lmax": 8, "dt": 2.0**-7, "T": 1.0, "save_every": 0.125,
                 "N": 16384, "kappa0": 2.0, "activation": "relu", "replicas": 4},
    },
}

#: Energies below this multiple of the initial energy are at the round-off floor of
#: <x, y> - 1 (the cosine of two unit vectors is known to ~1e-16) and are not fitted.
ENERGY_FLOOR = 1e-11
#: Linking distance (radians) of the one-cluster test of the almost-sure rate.
CLUSTER_TOL = 0.1


def sync_config(preset: str = "quick", **overrides) -> dict:
    """A copy of ``SYNC_PRESETS[preset]`` with ``lyapunov={...}`` / ``energy={...}`` overrides.

    Examples
    --------
    >>> sync_config("test")["energy"]["betas"]
    [0.0, 4.0]
    """
    cfg = preset_config(SYNC_PRESETS, preset, overrides)
    _check_lyapunov(cfg["lyapunov"])
    _check_energy(cfg["energy"])
    return cfg


def _check_lyapunov(c: dict) -> None:
    acts = list(c["activations"])
    if not acts:
        raise ValueError("activations is empty")
    bad = [a for a in acts if a not in ACTIVATIONS]
    if bad:
        raise ValueError(f"unknown activations {bad}; known: {sorted(ACTIVATIONS)}")
    dims = [as_int(d, "dims[]", min_value=2) for d in c["dims"]]
    if not dims:
        raise ValueError("dims is empty")
    as_float(c["t_total"], "t_total", min_value=0.0, strict_min=True)
    as_float(c["dt"], "dt", min_value=0.0, strict_min=True, max_value=0.5)
    as_int(c["n_replicas"], "n_replicas", min_value=2)
    as_int(c["n_pairs"], "n_pairs", min_value=1)


def _check_energy(c: dict) -> None:
    as_int(c["d"], "d", min_value=2, max_value=3)
    as_int(c["N"], "N", min_value=2)
    T = as_float(c["T"], "T", min_value=0.0, strict_min=True)
    dt = as_float(c["dt"], "dt", min_value=0.0, strict_min=True)
    save = as_float(c["save_every"], "save_every", min_value=0.0, strict_min=True)
    for num, den, what in ((T, save, "T / save_every"), (save, dt, "save_every / dt")):
        k = round(num / den)
        if k < 1 or abs(k * den - num) > 1e-9 * num:
            raise ValueError(f"{what} must be a positive integer, got {num / den:.6g}")
    betas = [as_float(b, "betas[]", min_value=0.0) for b in c["betas"]]
    if not betas:
        raise ValueError("betas is empty")
    as_int(c["replicas"], "replicas", min_value=3)
    t_fit = as_float(c["t_fit"], "t_fit", min_value=0.0)
    if t_fit >= T - 2 * save:
        raise ValueError(f"t_fit = {t_fit} leaves fewer than 3 saved times before T = {T}")


# --------------------------------------------------------------------------------------
# task functions
# --------------------------------------------------------------------------------------


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

    Returns
    -------
    dict
        ``closed_form`` (of the kernel the noise carries: truncated for d <= 3),
        ``closed_form_full`` (untruncated κ), ``kept_fraction``, ``estimate``, ``se``,
        ``z`` ((estimate - closed) / se), ``richardson``, ``noise``, ``seconds``.
    """
    from ..kernels import ActivationKernel, lyapunov_exponent
    from ..sync import lyapunov_estimate

    act, sw = ACTIVATIONS[params["activation"]]
    kern = ActivationKernel(act, sigma_w=sw)
    d = int(params["d"])
    dt = lyapunov_step(float(params["dt"]), d)
    t = time.perf_counter()
    est = lyapunov_estimate(kern, d, dt=dt, t_total=float(params["t_total"]), chunk=1.0
                            if params["t_total"] >= 1 else float(params["t_total"]),
                            n_replicas=int(params["n_replicas"]), n_pairs=int(params["n_pairs"]),
                            lmax=int(params["lmax"]), width=int(params["width"]), seed=seed)
    full = lyapunov_exponent(kern, d)
    return {
        "closed_form": est.closed_form, "closed_form_full": full,
        "kept_fraction": (est.closed_form / full) if full != 0 else 1.0,
        "estimate": est.mean, "se": est.se, "z": est.z_score, "richardson": est.richardson,
        "noise": "NoisePath" if d <= 3 else f"RandomFeature(m={int(params['width'])})", "dt": dt,
        "seconds": time.perf_counter() - t,
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
    from ..attention import gap_energy
    from ..kernels import ActivationKernel
    from ..noise import NoisePath
    from ..particles import solve_particles
    from ..sync import cluster_labels, order_parameter

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
    beta : float, >= 0

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
    beta = as_float(beta, "beta", min_value=0.0)
    acc = 0.0
    for s in range(0, x.shape[0], 1024):
        g = x[s : s + 1024] @ x.T - 1.0
        acc += w[s : s + 1024] @ (-g if beta == 0 else -np.expm1(beta * g)) @ w
    m = w @ x
    energy = 0.5 * acc if beta == 0 else math.exp(beta) / (2 * beta) * acc
    return float(energy), float(w.sum() ** 2 - m @ m)


def spde_energy_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """E_β and the variance along an SPDE run (push-forward scheme, SPEC §6(b)) and along N particles
    drawn from the same initial density on the same noise path and time step.

    Params: ``d`` (3), ``beta``, ``lmax`` (state), ``noise_lmax``, ``dt``, ``T``, ``save_every``, ``N``,
    ``kappa0`` (von Mises–Fisher concentration of ρ_0 about the north pole), ``activation``.
    If the SPDE becomes unresolved (the density concentrates: SPEC §6) the curves stop at
    the last resolved time, recorded in ``t_resolved``.

    Returns
    -------
    dict
        Arrays ``t``, ``energy_spde``, ``variance_spde``, ``energy_particles``,
        ``variance_particles`` (NaN after ``t_resolved`` for the SPDE); scalars
        ``t_resolved``, ``min_density`` (at the last resolved time).
    """
    from ..attention import gap_energy
    from ..kernels import ActivationKernel
    from ..noise import NoisePath
    from ..particles import solve_particles
    from ..spde import SPDEResolutionError, VonMisesFisher, solve_spde
    from ..sync import order_parameter

    d, T, beta, dt = int(params["d"]), float(params["T"]), float(params["beta"]), float(params["dt"])
    s_noise, s_x = seed.spawn(2)
    noise = NoisePath(ActivationKernel(params["activation"]), d, int(params["noise_lmax"]), seed=s_noise, t_max=T)
    rho0 = VonMisesFisher([0.0] * (d - 1) + [1.0], float(params["kappa0"]))
    ts = np.arange(round(T / params["save_every"]) + 1) * float(params["save_every"])
    try:
        sol = solve_spde(rho0, noise, beta, int(params["lmax"]), dt, ts)
        n_ok = len(sol.times)
    except SPDEResolutionError as exc:
        sol = exc.solution
        n_ok = len(sol.times) - 1  # the last entry is the offending state
    e_s = np.full(ts.size, np.nan)
    v_s = np.full(ts.size, np.nan)
    for i in range(n_ok):
        nodes, w = sol.quadrature_cloud(i)
        e_s[i], v_s[i] = signed_gap_energy(nodes, w, beta)
    x0 = rho0.sample(int(params["N"]), seed=np.random.default_rng(s_x))
    part = solve_particles(x0, noise, beta, dt, ts)
    return {
        "t": ts, "energy_spde": e_s, "variance_spde": v_s,
        "energy_particles": np.array([gap_energy(x, beta) for x in part.x]),
        "variance_particles": order_parameter(part.x),
        "t_resolved": float(ts[n_ok - 1]) if n_ok else 0.0,
        "min_density": float(sol.min_density(n_ok - 1)) if n_ok else math.nan,
    }


# --------------------------------------------------------------------------------------
# studies
# --------------------------------------------------------------------------------------


def make_spde_study(config: dict, root_seed: int = 0):
    """Study of :func:`spde_energy_task` (one grid point, ``replicas`` noise paths)."""
    from ..runner import Study

    c = dict(config)
    replicas = as_int(c.pop("replicas"), "replicas", min_value=1)
    return Study("sync-spde", spde_energy_task, grid=None, replicas=replicas, root_seed=root_seed, fixed=c)


def spde_table(result) -> pd.DataFrame:
    """Long table of the SPDE-vs-particles energy curves: one row per (replica, saved time).

    Columns ``replica, t, energy_spde, energy_particles, variance_spde, variance_particles,
    rel_diff_energy`` (``|E_spde - E_particles| / E_spde``; NaN after the SPDE's last resolved time).
    """
    rows = []
    for k, (_, r) in enumerate(result.frame.iterrows()):
        t = result.arrays["t"][k]
        for i, ti in enumerate(t):
            es, ep = result.arrays["energy_spde"][k][i], result.arrays["energy_particles"][k][i]
            rows.append({"replica": int(r["replica"]), "t": float(ti), "energy_spde": es, "energy_particles": ep,
                         "variance_spde": result.arrays["variance_spde"][k][i],
                         "variance_particles": result.arrays["variance_particles"][k][i],
                         "rel_diff_energy": abs(es - ep) / es if np.isfinite(es) else math.nan})
    return pd.DataFrame(rows)


def make_lyapunov_study(config: dict, root_seed: int = 0):
    """Study over the grid activation × d (one task per cell; replicas inside the task)."""
    from ..runner import Study

    c = dict(config)
    _check_lyapunov(c)
    grid = {"activation": list(c.pop("activations")), "d": [int(d) for d in c.pop("dims")]}
    return Study("sync-lyapunov", lyapunov_task, grid=grid, replicas=1, root_seed=root_seed, fixed=c)


def make_energy_study(config: dict, root_seed: int = 0):
    """Study over β (+ a noise-only point), ``seed_by=()``: replica r has the same noise path
    and initial cloud for every β (common random numbers)."""
    from ..runner import Study

    c = dict(config)
    _check_energy(c)
    betas, replicas, noise_only = c.pop("betas"), int(c.pop("replicas")), bool(c.pop("noise_only"))
    c.pop("t_fit")
    grid = [{"beta": float(b), "attention": True} for b in betas]
    if noise_only:
        grid.append({"beta": 0.0, "attention": False})
    return Study("sync-energy", energy_task, grid=grid, replicas=replicas, root_seed=root_seed, fixed=c, seed_by=())


# --------------------------------------------------------------------------------------
# analysis
# --------------------------------------------------------------------------------------


def lyapunov_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The activation × d table: closed form, simulation ± SE, and both verdicts.

    Columns: ``activation, d, kappa_ratio`` (κ'(1)/κ(1)), ``threshold`` ((d-1)/(d-3), ∞ for
    d <= 3), ``lambda_closed``, ``lambda_sim``, ``se``, ``z``, ``sync_closed``,
    ``sync_sim`` ("yes"/"no"/"unresolved"), ``agree_3se``, ``noise``.
    """
    from ..kernels import ActivationKernel

    rows = []
    ratios = {}
    for _, r in frame.iterrows():
        a = r["activation"]
        if a not in ratios:
            k = ActivationKernel(*ACTIVATIONS[a][:1], sigma_w=ACTIVATIONS[a][1])
            ratios[a] = k.dkappa1 / k.kappa1
        d = int(r["d"])
        lo, hi = r["estimate"] - 2 * r["se"], r["estimate"] + 2 * r["se"]
        sim = "yes" if hi < 0 else "no" if lo > 0 else "unresolved"
        rows.append({
            "activation": a, "d": d, "kappa_ratio": ratios[a], "threshold": (d - 1) / (d - 3) if d > 3 else math.inf,
            "lambda_closed": r["closed_form"], "lambda_sim": r["estimate"], "se": r["se"], "z": r["z"],
            "sync_closed": "yes" if r["closed_form"] < 0 else "no", "sync_sim": sim,
            "agree_3se": bool(abs(r["z"]) <= 3), "noise": r["noise"], "dt": r["dt"] if "dt" in r else math.nan,
        })
    return pd.DataFrame(rows)


def fit_decay_rate(t, energies, *, t_fit: float = 0.0, floor: float = ENERGY_FLOOR, n_boot: int = 2000,
                   seed=0, ci: float = 0.95) -> dict:
    """Exponential decay rate of the replica mean E[E(t)] with a bootstrap CI over replicas.

    The rate γ is minus the least-squares slope of log mean_r E_r(t) against t, over the
    saved times t >= ``t_fit`` at which the mean is above ``floor`` × its initial value.
    The CI resamples replicas with replacement (the window rule is re-applied).

    Parameters
    ----------
    t : ndarray, shape (n_t,)
    energies : ndarray, shape (n_replicas, n_t)
        Non-negative energies.
    t_fit : float
        Start of the fit window.

    Returns
    -------
    dict
        ``rate``, ``ci_low``, ``ci_high``, ``n_points`` (fitted times), ``t_end`` (last
        fitted time).

    Raises
    ------
    ValueError
        Bad shapes, negative energies, or fewer than 3 times in the window.

    Examples
    --------
    >>> t = np.linspace(0, 4, 9)
    >>> e = np.exp(-2 * t)[None, :] * np.array([[1.0], [1.2], [0.8]])
    >>> round(fit_decay_rate(t, e)["rate"], 6)
    2.0
    """
    t = np.asarray(t, dtype=float)
    e = np.asarray(energies, dtype=float)
    if t.ndim != 1 or e.ndim != 2 or e.shape[1] != t.size or e.shape[0] < 2:
        raise ValueError(f"energies must have shape (n_replicas >= 2, {t.size}), got {e.shape}")
    if not np.all(np.isfinite(e)) or np.any(e < 0):
        raise ValueError("energies must be finite and non-negative")

    def one(mean):
        keep = (t >= t_fit) & (mean > floor * mean[0])
        if keep.sum() < 3:
            return math.nan, int(keep.sum()), math.nan
        slope = np.polyfit(t[keep], np.log(mean[keep]), 1)[0]
        return -float(slope), int(keep.sum()), float(t[keep][-1])

    rate, npts, t_end = one(e.mean(axis=0))
    if not math.isfinite(rate):
        raise ValueError(f"fewer than 3 saved times with t >= {t_fit} above the floor: cannot fit a rate")
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, e.shape[0], e.shape[0])
        r, _, _ = one(e[idx].mean(axis=0))
        if math.isfinite(r):
            boots.append(r)
    a = (1 - ci) / 2
    lo, hi = np.quantile(boots, [a, 1 - a])
    return {"rate": rate, "ci_low": float(lo), "ci_high": float(hi), "n_points": npts, "t_end": t_end}


def _as_rate(t, energy, n_clusters, floor) -> float:
    keep = (n_clusters == 1) & (energy > floor * energy[0])
    if keep.sum() < 3:
        return math.nan
    return -float(np.polyfit(t[keep], np.log(energy[keep]), 1)[0])


def energy_rates(result, config: dict, lambda1: float) -> pd.DataFrame:
    """Per β (and noise only): the mean-energy decay rate with CI and the a.s. rate with SE.

    Parameters
    ----------
    result : StudyResult
        Of :func:`make_energy_study`.
    config : dict
        The energy configuration (for ``t_fit``).
    lambda1 : float
        Closed-form λ_1 of the noise (truncated kernel), for the a.s. theory
        2 (1 - λ_1) with attention and -2 λ_1 without.

    Returns
    -------
    DataFrame
        ``beta, attention, rate_mean, ci_low, ci_high, ci_excludes_0, rate_var`` (same fit
        on the variance ``1 - |∫x dμ|²``), ``as_rate, as_se, n_as`` (replicas that reached one
        cluster), ``as_theory, decreased`` (fraction of replicas with E(T) < E(0)),
        ``sync_fraction`` (one cluster at T).
    """
    frame = result.frame
    E = result.arrays["energy"]
    V = result.arrays["variance"]
    C = result.arrays["n_clusters"]
    T_arr = result.arrays["t"]
    rows = []
    for (beta, att), sub in frame.groupby(["beta", "attention"], sort=False):
        idx = sub.index.to_numpy()
        t = T_arr[idx[0]]
        # round-off: <x, y> - 1 of unit vectors can come out slightly positive, giving an
        # energy of order -1e-16 for a collapsed cloud; such values are clipped to 0
        e = np.maximum(np.stack([E[i] for i in idx]), 0.0)
        v = np.maximum(np.stack([V[i] for i in idx]), 0.0)
        c = np.stack([C[i] for i in idx])
        fit = fit_decay_rate(t, e, t_fit=float(config["t_fit"]))
        fit_v = fit_decay_rate(t, v, t_fit=float(config["t_fit"]))
        asr = np.array([_as_rate(t, e[k], c[k], ENERGY_FLOOR) for k in range(len(idx))])
        ok = asr[np.isfinite(asr)]
        rows.append({
            "beta": float(beta), "attention": bool(att), "rate_mean": fit["rate"], "ci_low": fit["ci_low"],
            "ci_high": fit["ci_high"], "ci_excludes_0": bool(fit["ci_low"] > 0 or fit["ci_high"] < 0),
            "fit_points": fit["n_points"], "rate_var": fit_v["rate"],
            "as_rate": ok.mean() if ok.size else math.nan,
            "as_se": ok.std(ddof=1) / math.sqrt(ok.size) if ok.size > 1 else math.nan, "n_as": int(ok.size),
            "as_theory": 2 * (1 - lambda1) if att else -2 * lambda1,
            "decreased": float(np.mean(e[:, -1] < e[:, 0])), "sync_fraction": float(np.mean(c[:, -1] == 1)),
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# driver and outputs
# --------------------------------------------------------------------------------------


@dataclass
class SyncStudyResult:
    """Outcome of :func:`run_sync_study`.

    Attributes
    ----------
    config : dict
    lyapunov_result, energy_result : StudyResult
    lyapunov : DataFrame
        :func:`lyapunov_table`.
    rates : DataFrame
        :func:`energy_rates`.
    lambda1 : float
        Closed-form λ_1 of the energy study's noise path.
    seconds : dict
    """

    config: dict
    lyapunov_result: object
    energy_result: object
    lyapunov: pd.DataFrame
    rates: pd.DataFrame
    lambda1: float
    seconds: dict = field(default_factory=dict)
    spde_result: object = None
    spde: pd.DataFrame | None = None


def run_sync_study(preset: str = "quick", *, config: dict | None = None, root_seed: int = 0,
                   parts=("lyapunov", "energy", "spde"), **execution) -> SyncStudyResult:
    """Run the Lyapunov table and the energy-decay study of a preset (or ``config``).

    Parameters
    ----------
    preset : {"test", "quick", "full"}
    config : dict, optional
        From :func:`sync_config` (overrides ``preset``).
    parts : sequence of {"lyapunov", "energy", "spde"}
        Which parts to run (the others' fields are None). "spde": E_β and the variance along
        an SPDE run and N particles on the same path (:func:`spde_energy_task`).
    **execution
        Passed to :func:`meanfield.runner.run_study`; a ``store`` gets the sub-stores
        ``lyapunov`` and ``energy``.

    Examples
    --------
    >>> res = run_sync_study("test", executor="serial", progress=False)   # doctest: +SKIP
    >>> res.rates[["beta", "rate_mean", "ci_low", "ci_high"]]              # doctest: +SKIP
    """
    from ..kernels import ActivationKernel, lyapunov_exponent
    from ..noise import NoisePath
    from ..runner import run_study

    cfg = config if config is not None else sync_config(preset)
    parts = tuple(parts)
    if not parts or set(parts) - {"lyapunov", "energy", "spde"}:
        raise ValueError(f"parts must be a non-empty subset of ('lyapunov', 'energy', 'spde'), got {parts}")
    _check_lyapunov(cfg["lyapunov"])
    _check_energy(cfg["energy"])
    store = execution.pop("store", None)
    sec = {}
    lres = eres = ltab = rtab = None
    if "lyapunov" in parts:
        t = time.perf_counter()
        lres = run_study(make_lyapunov_study(cfg["lyapunov"], root_seed),
                         store=None if store is None else Path(store) / "lyapunov", raise_on_failure=True, **execution)
        sec["lyapunov"] = time.perf_counter() - t
        ltab = lyapunov_table(lres.frame)
    ec = cfg["energy"]
    lam = lyapunov_exponent(NoisePath(ActivationKernel(ec["activation"]), int(ec["d"]), int(ec["lmax"])).kernel,
                            int(ec["d"]))
    if "energy" in parts:
        t = time.perf_counter()
        eres = run_study(make_energy_study(ec, root_seed), store=None if store is None else Path(store) / "energy",
                         raise_on_failure=True, **execution)
        sec["energy"] = time.perf_counter() - t
        rtab = energy_rates(eres, ec, lam)
    sres = stab = None
    if "spde" in parts:
        t = time.perf_counter()
        sres = run_study(make_spde_study(cfg["spde"], root_seed), store=None if store is None else Path(store) / "spde",
                         raise_on_failure=True, **execution)
        sec["spde"] = time.perf_counter() - t
        stab = spde_table(sres)
    return SyncStudyResult(cfg, lres, eres, ltab, rtab, lam, sec, sres, stab)


def _fig_energy(res: SyncStudyResult, paths: list) -> None:
    from matplotlib.figure import Figure

    er = res.energy_result
    fig = Figure(figsize=(12, 4))
    ax1, ax2, ax3 = fig.subplots(1, 3)
    for (beta, att), sub in er.frame.groupby(["beta", "attention"], sort=False):
        idx = sub.index.to_numpy()
        t = er.arrays["t"][idx[0]]
        e = np.stack([er.arrays["energy"][i] for i in idx])
        v = np.stack([er.arrays["variance"][i] for i in idx])
        lab = f"β = {beta:g}" if att else "noise only"
        mean = e.mean(axis=0)
        ax1.semilogy(t, mean / mean[0], label=lab)
        ax2.semilogy(t, v.mean(axis=0), label=lab)
    ax1.set_xlabel("t"), ax1.set_ylabel("E[E_β(μ_t)] / E[E_β(μ_0)]")
    ax1.set_title("gap energy (mean over replicas)")
    ax2.set_xlabel("t"), ax2.set_ylabel("E[1 - |∫x dμ_t|²]")
    ax2.set_title("variance")
    for a in (ax1, ax2):
        a.set_ylim(bottom=1e-12)
        a.legend(fontsize=8)
    r = res.rates
    x = np.arange(len(r))
    labels = [f"β={b:g}" if a else "noise" for b, a in zip(r["beta"], r["attention"])]
    ax3.errorbar(x - 0.1, r["rate_mean"], yerr=[r["rate_mean"] - r["ci_low"], r["ci_high"] - r["rate_mean"]],
                 fmt="o", capsize=3, label="rate of E[E_β] (95 % CI)")
    ax3.errorbar(x + 0.1, r["as_rate"], yerr=1.96 * r["as_se"], fmt="s", capsize=3, label="a.s. rate, one cluster")
    ax3.plot(x + 0.1, r["as_theory"], "k_", ms=14, label="a.s. theory 2(1-λ1) / -2λ1")
    ax3.set_xticks(x, labels)
    ax3.set_ylabel("decay rate")
    ax3.set_title("decay rates vs β")
    ax3.legend(fontsize=7)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)


def _fig_lyapunov(tab: pd.DataFrame, paths: list) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    for a, sub in tab.groupby("activation", sort=False):
        line = ax.plot(sub["d"], sub["lambda_closed"], "-", lw=1)[0]
        ax.errorbar(sub["d"], sub["lambda_sim"], yerr=2 * sub["se"], fmt="o", color=line.get_color(), capsize=3,
                    label=a)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("d"), ax.set_ylabel("λ_1")
    ax.set_title("top Lyapunov exponent: closed form (lines) vs simulation (±2 SE)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)


def write_sync_outputs(res: SyncStudyResult, out_dir) -> dict:
    """Write ``lyapunov.{csv,md,tex,png,pdf}`` and ``energy_rates.{csv,md,tex}``, ``energy.{png,pdf}``.

    Returns
    -------
    dict
        ``{name: [paths]}``.
    """
    from ..rates import export_table

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    if res.lyapunov is not None:
        files["lyapunov"] = list(export_table(res.lyapunov, out / "lyapunov").values())
        figs = [out / "lyapunov.png", out / "lyapunov.pdf"]
        _fig_lyapunov(res.lyapunov, figs)
        files["lyapunov_fig"] = figs
    if res.rates is not None:
        files["energy_rates"] = list(export_table(res.rates, out / "energy_rates").values())
        figs = [out / "energy.png", out / "energy.pdf"]
        _fig_energy(res, figs)
        files["energy_fig"] = figs
    if res.spde is not None:
        files["spde_energy"] = list(export_table(res.spde, out / "spde_energy").values())
        figs = [out / "spde_energy.png", out / "spde_energy.pdf"]
        _fig_spde(res.spde, figs)
        files["spde_fig"] = figs
    return files


def _fig_spde(tab: pd.DataFrame, paths: list) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6))
    ax1, ax2 = fig.subplots(1, 2)
    for rep, sub in tab.groupby("replica"):
        l1 = ax1.plot(sub["t"], sub["energy_spde"], "-", label=f"SPDE, path {rep}")[0]
        ax1.plot(sub["t"], sub["energy_particles"], "o", color=l1.get_color(), ms=4, label=f"particles, path {rep}")
        l2 = ax2.plot(sub["t"], sub["variance_spde"], "-")[0]
        ax2.plot(sub["t"], sub["variance_particles"], "o", color=l2.get_color(), ms=4)
    ax1.set_xlabel("t"), ax1.set_ylabel("E_β(μ_t)"), ax1.set_title("gap energy: SPDE (lines) vs particles")
    ax2.set_xlabel("t"), ax2.set_ylabel("1 - |∫x dμ_t|²"), ax2.set_title("variance")
    ax1.legend(fontsize=7)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=110)

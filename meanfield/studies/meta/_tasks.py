"""Task function of the metastability study and :func:`build` (the runner studies of a configuration)."""

from __future__ import annotations

import math
import time

import numpy as np

from meanfield._seeds import child_seeds
from meanfield.clusters import merge_heights, plateaus, spectral_cluster_count, time_to_one_cluster
from meanfield.kernels import ActivationKernel, lyapunov_exponent
from meanfield.noise import NoisePath
from meanfield.particles import solve_particles
from meanfield.runner import Study

from ._presets import check_part, noisy_step

__all__ = ["meta_run_task", "build", "make_study", "clustered_from", "first_metastable"]

#: The parts of a configuration, in run order.
PARTS = ("plateaus", "noise", "sizes")


def _uniform(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _mean_distance(x: np.ndarray) -> float:
    """Mean geodesic distance over pairs i < j (blocked, O(N) memory per block)."""
    n = x.shape[0]
    acc = 0.0
    for s in range(0, n, 512):
        g = np.clip(x[s : s + 512] @ x.T, -1.0, 1.0)
        acc += float(np.arccos(g).sum())
    return acc / (n * (n - 1))


def clustered_from(counts: np.ndarray, counts_tight: np.ndarray, n: int) -> int | None:
    """Index of the first save at which the cloud is a set of tight, separated clusters.

    That is: the single-linkage count at θ equals the count at θ / ``tight`` (no merge height
    in (θ / tight, θ]: every cluster is joined by steps <= θ / tight and clusters are more than
    θ apart), and it is below the number of tokens ``n`` (at least two tokens have joined: an
    initial cloud sparser than θ is not a clustered state). None if it never happens.

    Examples
    --------
    >>> clustered_from(np.array([20, 9, 5, 3, 3]), np.array([20, 20, 9, 3, 3]), 20)
    3
    """
    c = np.asarray(counts)
    hit = np.flatnonzero((c == np.asarray(counts_tight)) & (c < n))
    return int(hit[0]) if hit.size else None


def first_metastable(times, counts, start: int | None) -> tuple[float, bool, int]:
    """(duration, right-censored, k) of the first plateau with k >= 2 clusters from save ``start`` on.

    The plateau containing ``start`` counts from its own beginning. (nan, False, 0) when there
    is none (no clustered state, or the count is 1 from ``start`` on).

    Examples
    --------
    >>> first_metastable([0, 1, 2, 3, 4], [5, 3, 3, 2, 2], 1)
    (2.0, False, 3)
    """
    if start is None:
        return math.nan, False, 0
    p = plateaus(times, counts)
    t_start = float(np.asarray(times)[start])
    p = p[(p["t_end"] > t_start) & (p["count"] >= 2)]
    if p.empty:
        return math.nan, False, 0
    row = p.iloc[0]
    return float(row["duration"]), bool(row["right_censored"]), int(row["count"])


def meta_run_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One run of the metastability study: cluster counts along one particle trajectory.

    Parameters
    ----------
    params : dict
        Grid ``d``, ``N``, ``beta``, ``sigma`` and the fixed settings of a part (see
        :data:`meanfield.studies.meta.PRESETS`). ``sigma = 0`` is the deterministic equation.
    seed : SeedSequence
        Depends on (d, N, replica) only: every β and σ of a replica starts from the same
        uniform cloud and, for σ > 0, sees the same noise path times σ.

    Returns
    -------
    dict
        Scalars ``t_one`` (time to one cluster, inf = not by the horizon), ``t_clustered``
        (first save with tight separated clusters, inf if none), ``k_clustered``,
        ``lifetime`` / ``lifetime_censored`` / ``k_metastable`` (the first plateau with >= 2
        clusters from then on, :func:`first_metastable`), ``horizon``, ``dt``,
        ``spread0`` (mean geodesic distance of the initial pairs), ``kappa1``, ``lambda1``
        (closed-form Lyapunov exponent of the noise, σ² included; 0 without noise),
        ``seconds``; arrays ``counts``, ``counts_tight`` (single linkage at θ and θ / tight
        at every save) and, for N <= ``spectral_max_N``, ``spectral`` (the eigengap count).
    """
    d, n, beta, sigma = int(params["d"]), int(params["N"]), float(params["beta"]), float(params["sigma"])
    s_cloud, s_noise = child_seeds(seed, 2)
    x0 = _uniform(n, d, np.random.default_rng(s_cloud))
    T = float(params["T"])
    kern = ActivationKernel(params["activation"])
    noise = None
    kappa1 = lam1 = 0.0
    if sigma > 0:
        noise = NoisePath(kern, d, int(params["lmax"]), seed=s_noise, t_max=T, sigma=sigma)
        kappa1, lam1 = float(noise.kappa1), float(lyapunov_exponent(noise.kernel, d))
    dt = noisy_step(params, sigma, kappa1 / sigma**2 if sigma > 0 else 0.0)
    ts = np.arange(0.0, T + 0.5 * float(params["save_every"]), float(params["save_every"]))
    t0 = time.perf_counter()
    sol = solve_particles(x0, noise, beta, dt, ts)
    theta = float(params["theta"])
    tight = theta / int(params["tight"])
    heights = [merge_heights(x) for x in sol.x]
    counts = np.array([1 + np.count_nonzero(h > theta) for h in heights], dtype=np.int64)
    counts_tight = np.array([1 + np.count_nonzero(h > tight) for h in heights], dtype=np.int64)
    out = {"counts": counts, "counts_tight": counts_tight}
    if n <= int(params["spectral_max_N"]):
        out["spectral"] = np.array([spectral_cluster_count(x, beta).count for x in sol.x], dtype=np.int64)
    start = clustered_from(counts, counts_tight, n)
    life, censored, k = first_metastable(ts, counts, start)
    out.update({
        "t_one": time_to_one_cluster(ts, counts),
        "t_clustered": math.inf if start is None else float(ts[start]),
        "k_clustered": 0 if start is None else int(counts[start]),
        "lifetime": life, "lifetime_censored": censored, "k_metastable": k,
        "horizon": T, "dt": dt, "spread0": _mean_distance(x0), "kappa1": kappa1, "lambda1": lam1,
        "attention": str(sol.meta["attention"]), "seconds": time.perf_counter() - t0,
    })
    return out


def make_study(part: str, c: dict, root_seed: int = 0) -> Study:
    """The runner study of one part: grid d × N × β × σ, replicas seeded by (d, N) only."""
    check_part(c)
    c = dict(c)
    ns = c.pop("N")
    grid = {"d": [int(v) for v in c.pop("dims")], "N": [int(v) for v in (ns if isinstance(ns, list) else [ns])],
            "beta": [float(v) for v in c.pop("betas")], "sigma": [float(v) for v in c.pop("sigmas")]}
    replicas = int(c.pop("replicas"))
    return Study(f"meta-{part}", meta_run_task, grid=grid, replicas=replicas, root_seed=root_seed, fixed=c,
                 seed_by=("d", "N"))


def build(cfg: dict, root_seed: int = 0, parts=None) -> dict:
    """The runner studies of a resolved configuration: ``{"plateaus", "noise", "sizes"}`` -> Study.

    Examples
    --------
    >>> from meanfield.studies.meta import config
    >>> studies = build(config("test"))
    >>> list(studies), len(studies["noise"].tasks)
    (['plateaus', 'noise', 'sizes'], 6)
    """
    chosen = PARTS if parts is None else tuple(parts)
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown:
        raise ValueError(f"parts must be among {list(PARTS)}, got {unknown}")
    return {p: make_study(p, cfg[p], root_seed) for p in chosen}

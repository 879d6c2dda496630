"""Task functions of the depth/width study and :func:`build` (the runner studies of a configuration)."""

from __future__ import annotations

import time

import numpy as np

from meanfield._seeds import child_seeds, extend_seed
from meanfield.kernels import ActivationKernel
from meanfield.noise import NoisePath
from meanfield.particles import solve_particles
from meanfield.runner import Study
from meanfield.transformer import Transformer

from ._presets import _check_law, _check_strong, _check_width
from ._two_point import two_point_law, two_token_transformer, w1_to_law

#: Spawn-key word that separates the finite-width streams from the Gaussian-field ones.
_WIDTH_STREAM = 1_000_003

_X0_SEED = 20240601  # the fixed cloud of the width study


def _kernel(params: dict):
    return ActivationKernel(params["activation"], sigma_w=params["sigma_w"])


def _uniform(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# --------------------------------------------------------------------------------------
# task functions
# --------------------------------------------------------------------------------------


def strong_depth_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replica of the strong-error study: one noise path, one cloud, every L.

    Parameters
    ----------
    params : dict
        ``d`` (2 or 3), ``N``, ``T``, ``beta``, ``lmax``, ``L_values``, ``ref_log2``,
        ``activation``, ``sigma_w``.
    seed : SeedSequence
        Spawns the noise path's key and the generator of the N iid uniform tokens.

    Returns
    -------
    dict
        ``err_L<L>`` (RMS over tokens of ``|X_L - X_ref|``) for each L, ``kept_fraction``,
        ``ref_seconds``, ``transformer_seconds``.
    """
    d, T, beta = int(params["d"]), float(params["T"]), float(params["beta"])
    s_noise, s_x = child_seeds(seed, 2)
    kern = _kernel(params)
    noise = NoisePath(kern, d, int(params["lmax"]), seed=s_noise, t_max=T)
    x0 = _uniform(int(params["N"]), d, np.random.default_rng(s_x))
    t = time.perf_counter()
    ref = solve_particles(x0, noise, beta, T / 2 ** int(params["ref_log2"]), [T], attention="direct").final
    out = {"kept_fraction": float(noise.kept_fraction), "ref_seconds": time.perf_counter() - t}
    t = time.perf_counter()
    for L in params["L_values"]:
        xl = Transformer(d, int(L), None, T, beta, kern, noise=noise).run(x0).final
        out[f"err_L{int(L)}"] = float(np.sqrt(np.mean(np.sum((xl - ref) ** 2, axis=1))))
    out["transformer_seconds"] = time.perf_counter() - t
    return out


def _width_x0(params: dict) -> np.ndarray:
    return _uniform(int(params["N"]), int(params["d"]), np.random.default_rng(_X0_SEED))


def width_law_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One batch of the width study: ``n_draws`` independent transformers on the fixed cloud.

    ``width > 0``: finite-width MLP layers, weights from the draw's seed.
    ``width == 0``: Gaussian-field layers, the increments of a
    :class:`~meanfield.noise.NoisePath` of degree ``lmax`` keyed by the draw's seed — so
    Gaussian tasks of different L with the same seed see the same Brownian paths.

    Returns
    -------
    dict
        Arrays ``g`` (n_draws,) = mean_i <x_i(T), x_i(0)>, ``theta0`` (n_draws,) = angle of
        token 0 at T (d = 2) or ``x0_final`` (n_draws, d) (d = 3); scalar ``g_mean``,
        ``kept_fraction``.
    """
    d, T, beta, L, m = int(params["d"]), float(params["T"]), float(params["beta"]), int(params["L"]), int(params["width"])
    n = int(params["n_draws"])
    kern = _kernel(params)
    x0 = _width_x0(params)
    if m > 0:
        # finite widths get their own streams (independent ensembles across m); the Gaussian
        # cells keep the task seed, shared across L (seed_by=()), for paired weak errors in L
        seed = extend_seed(seed, _WIDTH_STREAM, m)
    seeds = child_seeds(seed, n)
    finals = np.empty((n, x0.shape[0], d))
    kept = 1.0
    if m > 0:
        model = Transformer(d, L, m, T, beta, kern)
        for k, s in enumerate(seeds):
            finals[k] = model.run(x0, seed=s).final
    else:
        base = NoisePath(kern, d, int(params["lmax"]), seed=seeds[0], t_max=T)
        kept = float(base.kept_fraction)
        for k, s in enumerate(seeds):
            noise = base if k == 0 else NoisePath(base.kernel, d, base.lmax, seed=s, t_max=T)
            finals[k] = Transformer(d, L, None, T, beta, kern, noise=noise).run(x0).final
    g = np.einsum("kid,id->ki", finals, x0).mean(axis=1)
    out = {"g": g, "g_mean": float(g.mean()), "kept_fraction": kept}
    if d == 2:
        out["theta0"] = np.arctan2(finals[:, 0, 1], finals[:, 0, 0])
    else:
        out["x0_final"] = finals[:, 0, :]
    return out


def _law_tokens(params: dict) -> tuple[np.ndarray, np.ndarray]:
    d, c0 = int(params["d"]), float(params["c0"])
    x0, y0 = np.zeros(d), np.zeros(d)
    x0[0] = 1.0
    y0[0], y0[1] = c0, np.sqrt(1.0 - c0 * c0)
    return x0, y0


def two_point_task(params: dict, seed: np.random.SeedSequence) -> dict:
    """One batch of the error-in-law study on two tokens against the exact law of c_T.

    ``width == 0``: ``n`` Gaussian-layer transformers of depth L; ``err_means`` are the
    means of c_T - E c_T (exact, :func:`two_point_law`) over ``n_sub`` equal sub-batches
    (iid replicas of the weak error), ``w1`` is W_1 between the batch's c_T and the exact
    law and ``w1_floor`` W_1 between ``n`` exact draws and the exact law (the sampling floor).
    ``width > 0``: ``n`` width-m transformers, each coupled to a Gaussian-layer one driven by
    the same normals; ``diff_means`` are sub-batch means of c_T(m) - c_T(∞) (the width
    effect), ``err_means`` of c_T(m) - E c_T.
    """
    law = two_point_law(params["activation"], sigma_w=float(params["sigma_w"]), d=int(params["d"]),
                        beta=float(params["beta"]), c0=float(params["c0"]), T=float(params["T"]))
    x0, y0 = _law_tokens(params)
    n, k = int(params["n"]), int(params["n_sub"])
    m = int(params["width"])
    s_run, s_floor = child_seeds(seed, 2)
    t = time.perf_counter()
    out = two_token_transformer(x0, y0, L=int(params["L"]), width=m, n=n, T=float(params["T"]),
                                beta=float(params["beta"]), activation=params["activation"],
                                sigma_w=float(params["sigma_w"]), seed=s_run, coupled=m > 0)
    c = out["c"]
    res = {"err_means": (c - law.mean).reshape(k, -1).mean(axis=1), "w1": w1_to_law(c, law),
           "w1_floor": w1_to_law(law.sample(n, np.random.default_rng(s_floor)), law),
           "exact_mean": law.mean, "law_accuracy": law.accuracy, "law_cdf_truncation": law.cdf_truncation}
    if m > 0:
        res["diff_means"] = (c - out["c_gauss"]).reshape(k, -1).mean(axis=1)
        res["diff_sd"] = float(np.std(c - out["c_gauss"], ddof=1))
    res["sd"] = float(np.std(c, ddof=1))
    res["seconds"] = time.perf_counter() - t
    return res


# --------------------------------------------------------------------------------------
# studies
# --------------------------------------------------------------------------------------


def make_strong_study(config: dict, root_seed: int = 0):
    """The :class:`~meanfield.runner.Study` of the strong error in L (one task per replica)."""
    c = dict(config)
    _check_strong(c)
    replicas = int(c.pop("replicas"))
    c["L_values"] = [int(v) for v in c["L_values"]]
    return Study("depth-strong", strong_depth_task, grid=None, replicas=replicas, root_seed=root_seed, fixed=c)


def make_width_study(config: dict, root_seed: int = 0):
    """The :class:`~meanfield.runner.Study` of the (L, m) grid plus the Gaussian run at ``L_ref``.

    ``seed_by=()``: batch r of every cell gets the same task seed, so the Gaussian cells of
    different L share their Brownian paths (paired weak errors in L); finite-width cells
    derive their own stream from it and the width, so cells of different m are independent.
    """
    c = dict(config)
    _check_width(c)
    Ls, ws, L_ref, batches = c.pop("L_values"), c.pop("widths"), int(c.pop("L_ref")), int(c.pop("batches"))
    grid = [{"L": int(L), "width": int(w)} for L in Ls for w in ws] + [{"L": L_ref, "width": 0}]
    return Study("depth-width", width_law_task, grid=grid, replicas=batches, root_seed=root_seed, fixed=c,
                 seed_by=())


def make_law_study(config: dict, root_seed: int = 0):
    """The :class:`~meanfield.runner.Study` of the error in law on two tokens: the Gaussian column
    (every L of ``L_values``) and the coupled width cells (``width_L`` × ``widths``).

    Draws per batch: ``n`` in the Gaussian column, ``n_width`` in the width cells and ``n_limit``
    (default the larger of the two) in the corner cells that give the iterated limits, the
    Gaussian cell at ``max(L_values)`` and the width cells at ``max(width_L)``.
    """
    c = dict(config)
    _check_law(c)
    Ls, ws, wL, batches = c.pop("L_values"), c.pop("widths"), c.pop("width_L"), int(c.pop("batches"))
    n, n_width = int(c.pop("n")), int(c.pop("n_width"))
    # the corner cells carry the iterated limits: more draws there, so that their CIs are small
    # against the effects the rest of the grid resolves
    n_limit = int(c.pop("n_limit", max(n, n_width)))
    Lmax, wLmax = max(int(L) for L in Ls), max(int(L) for L in wL)
    grid = [{"L": int(L), "width": 0, "n": n_limit if int(L) == Lmax else n} for L in Ls]
    grid += [{"L": int(L), "width": int(m), "n": n_limit if int(L) == wLmax else n_width} for L in wL for m in ws]
    return Study("depth-law", two_point_task, grid=grid, replicas=batches, root_seed=root_seed, fixed=c)


PARTS = ("strong", "width", "law")


def build(cfg: dict, root_seed: int = 0, parts=None) -> dict:
    """The runner studies of a resolved configuration: ``{"strong", "width", "law"}`` -> Study.

    ``parts`` selects some of them (default all those present in ``cfg``).
    """
    parts = tuple(p for p in PARTS if p in cfg) if parts is None else tuple(parts)
    if not parts or set(parts) - set(PARTS):
        raise ValueError(f"parts must be a non-empty subset of {PARTS}, got {parts}")
    makers = {"strong": make_strong_study, "width": make_width_study, "law": make_law_study}
    return {p: makers[p](cfg[p], root_seed) for p in PARTS if p in parts}

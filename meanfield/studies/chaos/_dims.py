"""Propagation of chaos across dimensions: d = 2, 3, 4, 5 on one table (the ``dims`` part of the chaos study).

The paper proves the N^{-1/2} rate of propagation of chaos for d < 4; the Wasserstein
distance of an empirical measure to its limit, however, depends on the dimension of the
sphere S^{d-1} on its own: for iid samples of a density, E W_2 ≍ N^{-1/2} on S^1,
sqrt(log N / N) on S^2 and N^{-1/(d-1)} on S^{d-1}, d >= 4. This part measures, on one
design for every d,

(a) the synchronous coupling error sqrt(mean_i |X_i(T) - X̄_i(T)|²) (expected N^{-1/2} in every d),
(b) W_2(μ^N_T, ρ_T) (expected the iid rate of the sphere above),
(c) the largest difference of the monomial moments of degree 1 and 2 (expected N^{-1/2}),

each fitted on log–log scale and judged against its own predicted rate with the
three-way verdicts of :mod:`meanfield.reporting`.

Design (one task per (d, replica)). The common noise is a random-feature MLP field of width
``width`` drawn afresh every step (:class:`~meanfield.noise.RandomFeatureNoise`, covariance
exactly κ of the activation in every d), the same family in every dimension; ρ_0 is a vMF
density about e_d. The mean-field reference is the characteristics solution of the SPDE
(:func:`~meanfield.spde.solve_characteristics`): ``M`` quadrature nodes moved by the
particles' own step map T_n(x) = Π(x + h v[ρ_n](x) + ΔW_n(x)), the attention velocity
v[ρ_n] being that of the node cloud (spectral on S^1, S^2; the direct sum in d >= 4). Then

* X̄_i = Φ_T(X_i(0)) with Φ_T the composition of the stored step maps
  (:meth:`~meanfield.spde.CharacteristicsSolution.push`): the mean-field paths of the
  coupling, and N iid samples of ρ_T (the control ``w2_iid``);
* ρ_T for W_2 and the moments is a finer rule of ``ref_n`` nodes per polar angle (S^1:
  ``ref_n`` nodes) carried by the same maps (:meth:`~meanfield.spde.CharacteristicsSolution.fine_cloud`):
  cell masses for W_2 (the quantisation that sends each image cell to its node), quadrature
  masses for the moments. W_2 is exact: the circle solver on S^1, POT's network simplex
  otherwise (N <= ``w2_max_N``).

Reference error, measured per replica: (a) the RMS distance of the X̄ paths of the largest
N driven by the M-node and the M/2-node solutions; (b) the change of W_2 when the reference
rule is replaced by the coarser rules ``ref_coarse`` (per N), and the first-order RMS cost
``ref_rms`` of the cell-to-node plan (an estimate of W_2(ρ_T, reference cloud) itself);
(c) the largest moment change between the reference rule and the M/2 solution's cloud.
Each is compared with the smallest mean particle error of its kind.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping

import numpy as np

from meanfield._seeds import extend_seed
from meanfield._validate import as_float, as_int

from ._presets import _exact_keys

#: Dimensions of the cross-dimension part.
DIMS = (2, 3, 4, 5)


def _dcfg(**kw) -> dict:
    return {"activation": "relu", "width": 256, "beta": 1.0, "kappa": 1.0, "T": 0.5, "dt": 0.03125, "obs_degree": 2,
            **kw}


_NS = [64, 128, 256, 512, 1024, 2048, 4096]
_NS_W2 = 512

#: Presets of the cross-dimension part: per d the N values, the driving nodes ``M``, the
#: reference rule ``ref_n`` (S^1: nodes; d >= 3: nodes per polar angle, 2 ref_n^{d-1} in all)
#: and the coarser rules ``ref_coarse`` of the reference check, the largest N for W_2, the
#: noise width and the horizon. The quick reference rules of d >= 3 have 4050 (S^2), 4394 (S^3)
#: and 4802 (S^4) nodes: measured on S^4 for 256 iid vMF(1) samples, W_2 to rules of 8192, 20000
#: and 41472 nodes is 0.3817, 0.3808 and 0.3804, i.e. the reference moves W_2 by far less than its
#: own quantisation distance (about 0.18; the W_2 of an empirical measure and that of a quantiser
#: nearly add in squares). In the quick run of the rules of 8192 nodes, replacing them by these
#: changed W_2 by 0.3-0.8 % and its fitted slope by at most 0.006 (against CI half-widths of
#: about 0.06) while the network simplex took 2.3 times less; the coarser rules ``ref_coarse``
#: measure that change again in every run. They are spaced by a factor of about 1.4 in nodes
#: per angle: with closer rules (13, 10, 8 on S^3) the two changes came out equal within their
#: noise and the geometric extrapolation of the remaining error had nothing to stand on.
DIMS_PRESETS: dict[str, dict] = {
    "tiny": {
        "replicas": 2,
        "dims": {
            "2": _dcfg(Ns=[16, 32, 64], M=256, ref_n=1024, ref_coarse=[512], w2_max_N=64, T=0.125, width=32,
                       kappa=0.25),
            "3": _dcfg(Ns=[16, 32, 64], M=200, ref_n=16, ref_coarse=[12], w2_max_N=32, T=0.125, width=32,
                       kappa=0.25),
            "4": _dcfg(Ns=[16, 32, 64], M=250, ref_n=6, ref_coarse=[5], w2_max_N=32, T=0.125, width=32,
                       kappa=0.25),
            "5": _dcfg(Ns=[16, 32, 64], M=162, ref_n=4, ref_coarse=[3], w2_max_N=32, T=0.125, width=32,
                       kappa=0.25),
        },
    },
    "quick": {
        "replicas": 8,
        "dims": {
            "2": _dcfg(Ns=_NS, M=4096, ref_n=16384, ref_coarse=[8192, 4096], w2_max_N=4096),
            "3": _dcfg(Ns=_NS, M=2048, ref_n=45, ref_coarse=[32, 23], w2_max_N=_NS_W2),
            "4": _dcfg(Ns=_NS, M=2000, ref_n=13, ref_coarse=[9, 6], w2_max_N=_NS_W2),
            "5": _dcfg(Ns=_NS, M=2592, ref_n=7, ref_coarse=[5, 4], w2_max_N=_NS_W2),
        },
    },
    "full": {
        "replicas": 24,
        "dims": {
            "2": _dcfg(Ns=_NS + [8192, 16384], M=8192, ref_n=65536, ref_coarse=[32768, 16384], w2_max_N=16384),
            "3": _dcfg(Ns=_NS + [8192], M=4608, ref_n=90, ref_coarse=[64, 45], w2_max_N=1024),
            "4": _dcfg(Ns=_NS + [8192], M=3456, ref_n=20, ref_coarse=[16, 13], w2_max_N=1024),
            "5": _dcfg(Ns=_NS + [8192], M=4802, ref_n=10, ref_coarse=[8, 7], w2_max_N=1024),
        },
    },
}

_DIMS_KEYS = set(DIMS_PRESETS["quick"]["dims"]["2"])


def check_dims_config(cfg: Mapping, d: int) -> dict:
    """Checked settings of one dimension of the cross-dimension part (see :data:`DIMS_PRESETS`)."""
    cfg = _exact_keys(cfg, _DIMS_KEYS, "cross-dimension chaos settings")
    Ns = [as_int(n, "N", min_value=2) for n in cfg["Ns"]]
    if len(set(Ns)) < 2:
        raise ValueError(f"Ns must hold at least 2 distinct values (a slope needs two points), got {Ns}")
    cfg["Ns"] = sorted(set(Ns))
    dt = as_float(cfg["dt"], "dt", min_value=0.0, strict_min=True)
    T = as_float(cfg["T"], "T", min_value=0.0, strict_min=True)
    k = round(T / dt)
    if k < 1 or abs(k * dt - T) > 1e-9 * T:
        raise ValueError(f"T = {T} must be a positive multiple of dt = {dt}")
    cfg["dt"], cfg["T"] = dt, T
    cfg["M"] = as_int(cfg["M"], "M", min_value=8)
    lo = 8 if d == 2 else 2
    cfg["ref_n"] = as_int(cfg["ref_n"], "ref_n", min_value=lo)
    cfg["ref_coarse"] = [as_int(n, "ref_coarse[]", min_value=lo, max_value=cfg["ref_n"] - 1) for n in cfg["ref_coarse"]]
    cfg["w2_max_N"] = as_int(cfg["w2_max_N"], "w2_max_N", min_value=0)
    if sum(n <= cfg["w2_max_N"] for n in cfg["Ns"]) == 1:
        raise ValueError(f"w2_max_N = {cfg['w2_max_N']} leaves a single N for W_2; allow none or at least two")
    cfg["width"] = as_int(cfg["width"], "width", min_value=1)
    cfg["beta"] = as_float(cfg["beta"], "beta", min_value=0.0)
    cfg["kappa"] = as_float(cfg["kappa"], "kappa", min_value=0.0)
    cfg["obs_degree"] = as_int(cfg["obs_degree"], "obs_degree", min_value=1, max_value=4)
    if not isinstance(cfg["activation"], str):
        raise TypeError(f"activation must be a string, got {cfg['activation']!r}")
    return cfg


def dims_config(preset: str, *, replicas: int | None = None, dims=DIMS, overrides: Mapping | None = None) -> dict:
    """``{"replicas", "dims", "configs"}`` of the cross-dimension part of a preset (``None`` if it has none).

    ``overrides`` replace settings for every d (``{"T": 0.25}``) or per d (``{"4": {"Ns": [64, 256]}}``).
    """
    if preset not in DIMS_PRESETS:
        return None
    base = copy.deepcopy(DIMS_PRESETS[preset])
    dims = sorted({as_int(d, "dims[]", min_value=2) for d in dims})
    unknown = [d for d in dims if str(d) not in base["dims"]]
    if unknown:
        raise ValueError(f"the cross-dimension part has the dimensions {sorted(map(int, base['dims']))}, got {unknown}")
    over = dict(overrides or {})
    per = {k: over.pop(k) for k in list(over) if k in base["dims"]}
    configs = {}
    for key, cfg in base["dims"].items():
        cfg.update(over)
        cfg.update(per.get(key, {}))
        configs[key] = check_dims_config(cfg, int(key))
    reps = base["replicas"] if replicas is None else as_int(replicas, "replicas", min_value=1)
    return {"replicas": reps, "dims": dims, "configs": configs}


def dims_theory_slopes(d: int, n_min_w2: int) -> tuple[dict, dict]:
    """Predicted slopes and tolerances of the three errors in dimension d.

    Coupling and observables: -1/2 in every d. W_2: -1/2 on S^1; on S^2 the band
    [-1/2, -1/2 + 1/(2 ln N_min)] of the local slopes of sqrt(log N / N) (as in
    :func:`theory_slopes`); -1/(d-1) for d >= 4.

    Examples
    --------
    >>> dims_theory_slopes(5, 64)[0]["w2"]
    -0.25
    """
    from ._analysis import theory_slopes

    if d <= 3:
        return theory_slopes(d - 1, n_min_w2)
    return ({"coupling": -0.5, "w2": -1.0 / (d - 1), "observable": -0.5},
            {"coupling": 0.0, "w2": 0.0, "observable": 0.0})


def _moments(x: np.ndarray, w: np.ndarray | None, degree: int) -> np.ndarray:
    from meanfield.sphere import monomials

    f = monomials(x, degree)
    return f.mean(axis=0) if w is None else (w / w.sum()) @ f


def _rms(a: np.ndarray, b: np.ndarray) -> float:
    return math.sqrt(float(np.mean(np.sum((a - b) ** 2, axis=1))))


def chaos_dims_replica(params: dict, seed: np.random.SeedSequence) -> dict:
    """One replica of the cross-dimension chaos part in dimension ``params["d"]`` (task function).

    Parameters
    ----------
    params : dict
        ``d``, ``configs`` (settings per d, :data:`DIMS_PRESETS`), ``replica``, ``preset``.
    seed : numpy.random.SeedSequence
        Noise: child keyed ``0``; sample for N: child keyed ``(1, N)``.

    Returns
    -------
    dict
        Arrays over N: ``Ns``, ``coupling``, ``w2`` (NaN for N > w2_max_N), ``observable``,
        ``w2_iid`` (X̄(T) = Φ_T(X(0)), N iid samples of ρ_T, against the same reference),
        ``w2_ref_coarse`` (len(ref_coarse) × len(Ns): the particles against the coarser
        reference rules). Scalars: ``spde_coupling`` (X̄ paths of the largest N, M vs M/2
        nodes), ``spde_observable`` (moments: reference rule vs the M/2 solution's cloud),
        ``ref_rms`` (first-order RMS cost of the reference's cell-to-node plan), ``ref_nodes``,
        ``M``, ``M_check``, ``variance`` (1 - ‖E x‖² of ρ_T), ``area_defect``, and the wall
        times ``spde_seconds``, ``reference_seconds``, ``particle_seconds``, ``coupling_seconds``,
        ``w2_seconds``.
    """
    from meanfield.kernels import ActivationKernel
    from meanfield.noise import RandomFeatureNoise
    from meanfield.particles import solve_particles
    from meanfield.spde import VonMisesFisher, solve_characteristics
    from meanfield.transport import wasserstein

    d = int(params["d"])
    cfg = check_dims_config(params["configs"][str(d)], d)
    Ns, T, dt, beta = cfg["Ns"], cfg["T"], cfg["dt"], cfg["beta"]
    deg = cfg["obs_degree"]

    def child(*key):
        return extend_seed(seed, *key)

    noise = RandomFeatureNoise(ActivationKernel(cfg["activation"]), d=d, width=cfg["width"], seed=child(0), t_max=T)
    mu = np.zeros(d)
    mu[-1] = 1.0
    rho0 = VonMisesFisher(mu, cfg["kappa"])

    def solve(M):
        return solve_characteristics(rho0, noise, beta, [0.0, T], dt, M=M, split=False, tol=None)

    def fine(sol, n, stride=1):
        return sol.fine_cloud(1, jac_stride=stride, **({"M": n} if d == 2 else {"n_lat": n}))

    t0 = time.perf_counter()
    sol = solve(cfg["M"])
    check = solve(cfg["M"] // 2)
    spde_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    # Jacobians (for the quantisation estimate ref_rms only) on a systematic sample of about 1024 cells
    n_ref = 2 * cfg["ref_n"] ** (d - 1) if d > 2 else cfg["ref_n"]
    ref = fine(sol, cfg["ref_n"], max(1, n_ref // 1024))
    coarse = [fine(sol, n, 10**9) for n in cfg["ref_coarse"]]
    reference_seconds = time.perf_counter() - t0

    def target(f):
        keep = f["cell_mass"] > 0
        return f["x"][keep], f["cell_mass"][keep] / f["cell_mass"][keep].sum()

    tgt = target(ref)
    tgts_c = [target(f) for f in coarse]
    ref_moments = _moments(ref["x"], ref["mass"], deg)

    samples = [rho0.sample(N, seed=child(1, N)) for N in Ns]
    t0 = time.perf_counter()
    allx = np.concatenate(samples)
    xbar_all = sol.push(allx, 1)
    coupling_seconds = time.perf_counter() - t0
    offsets = np.concatenate([[0], np.cumsum(Ns)])

    n = len(Ns)
    coupling, observable = np.empty(n), np.empty(n)
    w2, w2_iid = np.full(n, np.nan), np.full(n, np.nan)
    w2_c = np.full((len(coarse), n), np.nan)
    t_part = t_w2 = 0.0
    method = "direct" if d >= 4 else "auto"
    for k, (N, x0) in enumerate(zip(Ns, samples)):
        t0 = time.perf_counter()
        xN = solve_particles(x0, noise, beta, dt, [T], attention=method).final
        t_part += time.perf_counter() - t0
        xbar = xbar_all[offsets[k] : offsets[k + 1]]
        coupling[k] = _rms(xN, xbar)
        observable[k] = float(np.max(np.abs(_moments(xN, None, deg) - ref_moments)))
        if N <= cfg["w2_max_N"]:
            t0 = time.perf_counter()
            big = 10**6
            w2[k] = wasserstein(xN, tgt[0], None, tgt[1], p=2, max_exact=big)
            w2_iid[k] = wasserstein(xbar, tgt[0], None, tgt[1], p=2, max_exact=big)
            for j, tc in enumerate(tgts_c):
                w2_c[j, k] = wasserstein(xN, tc[0], None, tc[1], p=2, max_exact=big)
            t_w2 += time.perf_counter() - t0

    # the reference's own error: the same path with half the driving nodes
    t0 = time.perf_counter()
    xb_check = check.push(samples[-1], 1)
    coupling_seconds += time.perf_counter() - t0
    spde_coupling = _rms(xbar_all[offsets[-2] :], xb_check)
    spde_observable = float(np.max(np.abs(ref_moments - _moments(check.positions(1), check.masses(1), deg))))
    return {
        "Ns": np.asarray(Ns, dtype=np.int64),
        "coupling": coupling,
        "w2": w2,
        "observable": observable,
        "w2_iid": w2_iid,
        "w2_ref_coarse": w2_c,
        "spde_coupling": spde_coupling,
        "spde_observable": spde_observable,
        "ref_rms": float(ref["rms_cell"]),
        "ref_nodes": int(ref["x"].shape[0]),
        "M": int(sol.meta["M"]),
        "M_check": int(check.meta["M"]),
        "variance": float(sol.variance(1)),
        "area_defect": float(sol.diagnostics(1)["area_defect"]),
        "kappa1": float(noise.kappa1),
        "spde_seconds": spde_seconds,
        "reference_seconds": reference_seconds,
        "particle_seconds": t_part,
        "coupling_seconds": coupling_seconds,
        "w2_seconds": t_w2,
    }


def build_dims(dcfg: dict, preset: str, root_seed: int = 0):
    """The runner :class:`~meanfield.runner.Study` of the cross-dimension part: grid ``{"d": dims}``."""
    from meanfield.runner import Study

    return Study(f"chaos-dims-{preset}", chaos_dims_replica, grid={"d": list(dcfg["dims"])},
                 replicas=dcfg["replicas"], root_seed=root_seed, fixed={"preset": preset, "configs": dcfg["configs"]})


__all__ = ["DIMS", "DIMS_PRESETS", "check_dims_config", "dims_config", "dims_theory_slopes", "chaos_dims_replica",
           "build_dims"]

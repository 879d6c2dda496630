"""Presets and settings of the propagation-of-chaos study: ``PRESETS``, :func:`config`, :func:`parse_spheres`."""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np

from meanfield._validate import as_float, as_int

#: The three errors of theory §9, as columns of the long frame and rows of the rate tables.
ERRORS = ("coupling", "w2", "observable")

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
#: SPDEResolutionError (the task fails) instead of returning garbage. The quick preset solves
#: S^2 at degree 96 (check 192): at degree 64 the sharpest of its 8 replicas keeps a spectral
#: tail of 9e-5 and a W_2 gap to the check degree of 0.01, a fifth of the smallest particle
#: W_2; at 96 the gap is 0.002 (below a tenth).
#: Its S^2 W_2 reference is the 64 x 128 grid (8192 nodes) with N <= 1024, at least 8 nodes per
#: particle: against 48 x 96 and N <= 2048 the grid check left up to 8.1 % of W_2 to the grid,
#: here 1.4 %; the network simplex grows as N x nodes, so N stops at 1024.
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
            "2": _cfg(Ns=[32, 64, 128, 256, 512, 1024, 2048, 4096], T=0.125, dt=0.015625, lmax=96, check_lmax=192,
                      density_nodes=64, w2_max_N=1024),
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


def _long(**kw) -> dict:
    return {**_SPHERE_DEFAULTS, "split": False, "check": True, **kw}


#: Long-horizon part of each preset (:func:`chaos_long_replica`): per sphere the N values, the
#: horizons (errors are measured at each), the step, the number ``M`` of nodes of the
#: characteristics solution (S^2: rounded to 2 n_lat²), the largest N for W_2, ``check``
#: (solve again with 2M nodes to measure the reference's own error) and ``split`` (adaptive
#: cell splitting). The characteristics scheme has no degree, so the horizons are not limited
#: by resolution as those of the push-forward part are; the cost is one node cloud per step
#: kept in memory (M × 32 bytes per step: positions and log J; the masses, weights and starting
#: points are shared by all steps between cell splits).
LONG_PRESETS: dict[str, dict] = {
    "tiny": {
        "replicas": 2,
        "spheres": {
            "1": _long(Ns=[16, 64, 256], horizons=[1.0, 2.0], dt=0.0625, M=256, w2_max_N=256, check=False),
            "2": _long(Ns=[16, 64, 256], horizons=[1.0, 2.0], dt=0.0625, M=200, w2_max_N=64, check=False),
        },
    },
    "test": {
        "replicas": 4,
        "spheres": {
            "1": _long(Ns=[64, 256, 1024], horizons=[2.0, 8.0], dt=0.03125, M=1024, w2_max_N=1024),
            "2": _long(Ns=[64, 256, 1024], horizons=[2.0, 8.0], dt=0.03125, M=1152, w2_max_N=256),
        },
    },
    "quick": {
        "replicas": 24,
        "spheres": {
            "1": _long(Ns=[64, 128, 256, 512, 1024, 2048, 4096], horizons=[2.0, 8.0], dt=0.03125, M=4096,
                       w2_max_N=4096),
            "2": _long(Ns=[64, 128, 256, 512, 1024, 2048, 4096], horizons=[2.0, 8.0], dt=0.03125, M=4608,
                       w2_max_N=512),
        },
    },
    "full": {
        "replicas": 32,
        "spheres": {
            "1": _long(Ns=[2**k for k in range(6, 15)], horizons=[2.0, 8.0], dt=0.015625, M=16384,
                       w2_max_N=2**14),
            "2": _long(Ns=[2**k for k in range(6, 14)], horizons=[2.0, 8.0], dt=0.015625, M=18432,
                       w2_max_N=1024),
        },
    },
}

_LONG_KEYS = set(LONG_PRESETS["quick"]["spheres"]["1"])


def _check_long(cfg: Mapping, sphere: int) -> dict:
    """Checked long-horizon settings of one sphere (see :data:`LONG_PRESETS`)."""
    cfg = _exact_keys(cfg, _LONG_KEYS, "long-horizon chaos settings")
    Ns = [as_int(n, "N", min_value=2) for n in cfg["Ns"]]
    if len(set(Ns)) < 2:
        raise ValueError(f"Ns must hold at least 2 distinct values (a slope needs two points), got {Ns}")
    cfg["Ns"] = sorted(set(Ns))
    dt = as_float(cfg["dt"], "dt", min_value=0.0, strict_min=True)
    hs = sorted({as_float(h, "horizons[]", min_value=0.0, strict_min=True) for h in cfg["horizons"]})
    if not hs:
        raise ValueError("horizons is empty")
    for h in hs:
        k = round(h / dt)
        if k < 1 or abs(k * dt - h) > 1e-9 * h:
            raise ValueError(f"horizon {h} must be a positive multiple of dt = {dt}")
    cfg["dt"], cfg["horizons"] = dt, hs
    cfg["M"] = as_int(cfg["M"], "M", min_value=8)
    cfg["noise_lmax"] = as_int(cfg["noise_lmax"], "noise_lmax", min_value=0)
    cfg["w2_max_N"] = as_int(cfg["w2_max_N"], "w2_max_N", min_value=0)
    if sum(n <= cfg["w2_max_N"] for n in cfg["Ns"]) == 1:
        raise ValueError(f"w2_max_N = {cfg['w2_max_N']} leaves a single N for W_2; allow none or at least two")
    cfg["beta"] = as_float(cfg["beta"], "beta", min_value=0.0)
    cfg["kappa"] = as_float(cfg["kappa"], "kappa", min_value=0.0)
    cfg["obs_lmax"] = as_int(cfg["obs_lmax"], "obs_lmax", min_value=1)
    cfg["check"], cfg["split"] = bool(cfg["check"]), bool(cfg["split"])
    if not isinstance(cfg["activation"], str):
        raise TypeError(f"activation must be a string, got {cfg['activation']!r}")
    return cfg



def _exact_keys(cfg: Mapping, allowed: set, what: str) -> dict:
    """``cfg`` as a dict, with exactly the keys ``allowed`` (ValueError naming unknown or missing ones)."""
    cfg = dict(cfg)
    unknown = set(cfg) - allowed
    if unknown:
        raise ValueError(f"unknown {what} {sorted(unknown)}; allowed: {sorted(allowed)}")
    missing = allowed - set(cfg)
    if missing:
        raise ValueError(f"missing {what} {sorted(missing)}")
    return cfg


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
        For an unknown sphere (only S^1 and S^2 are supported: theory §6 solver).

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
    cfg = _exact_keys(cfg, _CONFIG_KEYS, "chaos settings")
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


def config(preset: str = "quick", spheres="both", *, replicas: int | None = None,
           overrides: Mapping | None = None, long: bool = True, long_overrides: Mapping | None = None,
           dims: bool = False, dims_overrides: Mapping | None = None) -> dict:
    """The resolved settings of a chaos run: ``preset``, ``spheres``, ``replicas``, ``configs``, ``long`` and ``dims``.

    ``dims`` (with ``dims=True``): ``{"replicas", "dims", "configs"}`` of the cross-dimension part
    (d = 2, 3, 4, 5, :data:`~meanfield.studies.chaos.DIMS_PRESETS`), overridden by ``dims_overrides``
    for every d (``{"T": 0.25}``) or per d (``{"4": {...}}``); ``replicas`` applies to it too.

    ``long`` (with ``long=True``, the default): ``{"replicas", "configs"}`` of the long-horizon
    part (:data:`LONG_PRESETS`, :func:`chaos_long_replica`), overridden by ``long_overrides``
    in the same way as ``overrides``; ``replicas`` applies to both parts.

    ``configs`` holds the checked settings of *both* spheres of the preset (so a store started
    with one sphere can be resumed with both); ``overrides`` replace settings for both spheres
    (``{"T": 0.125}``) or per sphere (``{"1": {"Ns": [64, 256]}}``).

    Examples
    --------
    >>> cfg = config("quick", spheres=2, replicas=3)
    >>> cfg["spheres"], cfg["replicas"], cfg["configs"]["2"]["Ns"][-1]
    ([2], 3, 4096)
    """
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
    out = {"preset": preset, "spheres": list(spheres), "replicas": reps, "configs": configs}
    if long and preset in LONG_PRESETS:
        lp = copy.deepcopy(LONG_PRESETS[preset])
        lover = dict(long_overrides or {})
        lper = {k: lover.pop(k) for k in list(lover) if k in ("1", "2")}
        for key in lp["spheres"]:
            lp["spheres"][key].update(lover)
            lp["spheres"][key].update(lper.get(key, {}))
            lp["spheres"][key] = _check_long(lp["spheres"][key], int(key))
        out["long"] = {"replicas": reps if replicas is not None else lp["replicas"], "configs": lp["spheres"]}
    if dims:
        from ._dims import dims_config

        dc = dims_config(preset, replicas=replicas, overrides=dims_overrides)
        if dc is not None:
            out["dims"] = dc
    return out

"""Presets and settings of the metastability study: ``PRESETS``, :func:`config` and the checks."""

from __future__ import annotations

import math

from meanfield._validate import as_beta, as_float, as_int

from .._presets import preset_config

_RUN = {"save_every": 1.0, "dt": 0.125, "noise_step": 0.05, "theta": 0.05, "tight": 8, "lmax": 8,
        "activation": "relu", "spectral_max_N": 256}

#: Presets of :func:`meanfield.studies.meta.run`, three parts with the same settings keys:
#: ``plateaus`` (deterministic runs, σ = 0, on a fine β grid: the plateau growth law),
#: ``noise`` (the same initial clouds with common noise of strength σ: escape times and time
#: to one cluster over (β, σ)) and ``sizes`` (the same measurement over N at one β). A replica
#: r of (d, N) starts every part, β and σ from the same uniform cloud and, for σ > 0, sees the
#: same noise path times σ. ``T`` is the horizon, saves every ``save_every``; the step is
#: :func:`noisy_step`.
PRESETS: dict[str, dict] = {
    "test": {
        "plateaus": {**_RUN, "dims": [2], "N": 16, "betas": [4.0, 8.0, 16.0], "sigmas": [0.0], "replicas": 3,
                     "T": 32.0, "dt": 0.25},
        "noise": {**_RUN, "dims": [2], "N": 16, "betas": [4.0, 16.0], "sigmas": [1.0], "replicas": 3, "T": 16.0,
                  "dt": 0.25},
        "sizes": {**_RUN, "dims": [2], "N": [16, 32], "betas": [8.0], "sigmas": [1.0], "replicas": 2, "T": 16.0,
                  "dt": 0.25},
    },
    "quick": {
        "plateaus": {**_RUN, "dims": [2, 3], "N": 32,
                     "betas": [4.0, 5.0, 6.0, 7.0, 8.0, 9.5, 11.0, 13.0, 16.0, 19.0, 23.0, 27.0, 32.0],
                     "sigmas": [0.0], "replicas": 8, "T": 512.0},
        "noise": {**_RUN, "dims": [2, 3], "N": 32, "betas": [4.0, 8.0, 16.0, 32.0], "sigmas": [0.25, 0.5, 1.0],
                  "replicas": 8, "T": 128.0},
        "sizes": {**_RUN, "dims": [2, 3], "N": [128, 256, 512, 1024], "betas": [16.0], "sigmas": [0.0, 0.5],
                  "replicas": 4, "T": 128.0},
    },
    "full": {
        "plateaus": {**_RUN, "dims": [2, 3], "N": 64, "betas": [4.0, 5.0, 6.0, 8.0, 10.0, 13.0, 16.0, 20.0, 25.0,
                                                                32.0, 40.0, 50.0, 64.0],
                     "sigmas": [0.0], "replicas": 24, "T": 4096.0},
        "noise": {**_RUN, "dims": [2, 3], "N": 64, "betas": [4.0, 8.0, 16.0, 32.0, 64.0],
                  "sigmas": [0.125, 0.25, 0.5, 1.0], "replicas": 32, "T": 512.0},
        "sizes": {**_RUN, "dims": [2, 3], "N": [32, 128, 256, 512, 1024], "betas": [16.0],
                  "sigmas": [0.0, 0.25, 0.5], "replicas": 8, "T": 512.0},
    },
}


def config(preset: str = "quick", **overrides) -> dict:
    """A copy of ``PRESETS[preset]`` with overrides ``plateaus={...}``, ``noise={...}``, ``sizes={...}``.

    Raises
    ------
    ValueError
        Unknown preset or key, or a setting out of range (named).

    Examples
    --------
    >>> config("test")["noise"]["betas"]
    [4.0, 16.0]
    >>> config("test", noise={"replicas": 5})["noise"]["replicas"]
    5
    """
    cfg = preset_config(PRESETS, preset, overrides)
    for part in cfg.values():
        check_part(part)
    return cfg


def _grid_list(values, name: str) -> list:
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name} must be a non-empty list, got {values!r}")
    return list(values)


def noisy_step(c: dict, sigma: float, kappa1: float) -> float:
    """Step of a run: ``dt`` without noise, else ``min(dt, noise_step / (σ² κ_σ(1)))`` rounded
    down to ``save_every / 2^k`` (so the save times lie on the step grid and on the noise path's
    dyadic grid).

    Examples
    --------
    >>> noisy_step({"dt": 0.125, "noise_step": 0.05, "save_every": 1.0}, 1.0, 0.5)
    0.0625
    """
    dt = float(c["dt"])
    if sigma > 0 and kappa1 > 0:
        dt = min(dt, float(c["noise_step"]) / (sigma**2 * kappa1))
    k = max(0, math.ceil(math.log2(float(c["save_every"]) / dt) - 1e-12))
    return float(c["save_every"]) / 2**k


def check_part(c: dict) -> None:
    """Validate one part of a configuration (names the offending setting)."""
    for d in _grid_list(c["dims"], "dims"):
        as_int(d, "dims[]", min_value=2, max_value=3)
    ns = c["N"] if isinstance(c["N"], (list, tuple)) else [c["N"]]
    for n in _grid_list(ns, "N"):
        as_int(n, "N", min_value=2)
    for b in _grid_list(c["betas"], "betas"):
        if as_beta(b, "betas[]") <= 0:
            raise ValueError(f"betas[] must be > 0 (metastable clusters need attention that favours nearby tokens), "
                             f"got {b}")
    for s in _grid_list(c["sigmas"], "sigmas"):
        as_float(s, "sigmas[]", min_value=0.0)
    as_int(c["replicas"], "replicas", min_value=2)
    save = as_float(c["save_every"], "save_every", min_value=0.0, strict_min=True)
    dt = as_float(c["dt"], "dt", min_value=0.0, strict_min=True, max_value=save)
    if abs(save / dt - round(save / dt)) > 1e-9 or round(save / dt) & (round(save / dt) - 1):
        raise ValueError(f"save_every / dt must be a power of 2, got {save / dt:g}")
    T = as_float(c["T"], "T", min_value=save)
    if abs(T / save - round(T / save)) > 1e-9:
        raise ValueError(f"T = {T} must be a multiple of save_every = {save}")
    as_float(c["noise_step"], "noise_step", min_value=0.0, strict_min=True)
    as_float(c["theta"], "theta", min_value=0.0, strict_min=True, max_value=math.pi)
    as_int(c["tight"], "tight", min_value=2)
    as_int(c["lmax"], "lmax", min_value=1)
    as_int(c["spectral_max_N"], "spectral_max_N", min_value=0)
    if not isinstance(c["activation"], str):
        raise TypeError(f"activation must be an activation name, got {c['activation']!r}")

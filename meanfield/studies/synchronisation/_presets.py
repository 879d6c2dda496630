"""Presets and settings of the synchronisation study: ``PRESETS``, :func:`config` and the checks."""

from __future__ import annotations

from meanfield._validate import as_beta, as_float, as_int

from .._presets import preset_config

#: Activation kernels of the Lyapunov table and the phase diagram: name -> (activation, σ_w).
ACTIVATIONS: dict[str, tuple[str, float]] = {
    "relu": ("relu", 1.0),
    "tanh": ("tanh", 1.0),
    "erf(sw=2)": ("erf", 2.0),
    "linear": ("linear", 1.0),
    "gelu": ("gelu", 1.0),
    "erf": ("erf", 1.0),
}

#: Estimators of the Lyapunov table: ``"tangent"`` (:func:`tangent_lyapunov`, the tangent flow of one
#: token, exact Gaussian increments, Richardson in dt; any d) and ``"pairs"``
#: (:func:`lyapunov_estimate`, pairs of nearby tokens moved by a noise source; O(dt) bias for d >= 4).
LYAPUNOV_ESTIMATORS = ("tangent", "pairs")

#: Presets of :func:`run` (``test``, ``quick``, ``full``): per part
#: (``lyapunov``, ``energy``, ``spde``, ``phase``) the parameters of its study; see :func:`config`.
PRESETS: dict[str, dict] = {
    "test": {
        "lyapunov": {"activations": ["relu", "erf(sw=2)"], "dims": [3, 8], "estimator": "tangent",
                     "n_tokens": 1024, "n_steps": 16, "levels": 3, "n_replicas": 6},
        "energy": {"d": 3, "N": 32, "T": 12.0, "dt": 2.0**-5, "save_every": 0.5, "lmax": 8, "betas": [0.0, 4.0],
                   "noise_only": True, "replicas": 8, "t_fit": 3.0, "activation": "relu"},
        "spde": {"d": 3, "betas": [1.0], "noise_only": False, "n_lat": 12, "split": False, "check": False,
                 "noise_lmax": 4, "dt": 2.0**-4, "T": 2.0, "save_every": 0.25, "N": 256, "kappa0": 2.0,
                 "activation": "relu", "replicas": 3, "t_fit": 0.5},
        "phase": {"activations": ["erf(sw=2)", "relu"], "n_tokens": 256, "max_tokens": 2048, "n_steps": 16,
                  "levels": 3, "n_replicas": 6, "se_ratio": 3.0, "d_none": 8},
    },
    "quick": {
        "lyapunov": {"activations": ["relu", "tanh", "erf(sw=2)", "linear"],
                     "dims": [2, 3, 4, 5, 8, 12, 16, 20, 24, 32], "estimator": "tangent", "n_tokens": 4096,
                     "n_steps": 32, "levels": 3, "n_replicas": 16},
        "energy": {"d": 3, "N": 64, "T": 24.0, "dt": 2.0**-5, "save_every": 0.5, "lmax": 8,
                   "betas": [0.0, 1.0, 4.0, 10.0], "noise_only": True, "replicas": 16, "t_fit": 4.0,
                   "activation": "relu"},
        "spde": {"d": 3, "betas": [0.0, 1.0, 4.0], "noise_only": True, "n_lat": 64, "split": False, "check": True,
                 "noise_lmax": 8, "dt": 2.0**-5, "T": 8.0, "save_every": 0.25, "N": 2048, "kappa0": 2.0,
                 "activation": "relu", "replicas": 8, "t_fit": 2.0},
        "phase": {"activations": list(ACTIVATIONS), "n_tokens": 4096, "max_tokens": 2**17, "n_steps": 32,
                  "levels": 3, "n_replicas": 16, "se_ratio": 3.0, "d_none": 32},
    },
    "full": {
        "lyapunov": {"activations": ["relu", "tanh", "erf(sw=2)", "linear"],
                     "dims": [2, 3, 4, 5, 6, 8, 12, 14, 16, 20, 24, 32], "estimator": "tangent", "n_tokens": 32768,
                     "n_steps": 32, "levels": 3, "n_replicas": 16},
        "energy": {"d": 3, "N": 128, "T": 32.0, "dt": 2.0**-6, "save_every": 0.5, "lmax": 12,
                   "betas": [0.0, 1.0, 2.0, 4.0, 10.0], "noise_only": True, "replicas": 48, "t_fit": 4.0,
                   "activation": "relu"},
        "spde": {"d": 3, "betas": [0.0, 1.0, 2.0, 4.0], "noise_only": True, "n_lat": 96, "split": True,
                 "check": True, "noise_lmax": 8, "dt": 2.0**-6, "T": 12.0, "save_every": 0.25, "N": 4096,
                 "kappa0": 2.0, "activation": "relu", "replicas": 24, "t_fit": 2.0},
        "phase": {"activations": list(ACTIVATIONS), "n_tokens": 16384, "max_tokens": 2**19, "n_steps": 32,
                  "levels": 3, "n_replicas": 16, "se_ratio": 4.0, "d_none": 32},
    },
}

#: Energies below this multiple of the initial energy are at the round-off floor of
#: <x, y> - 1 (the cosine of two unit vectors is known to ~1e-16) and are not fitted.
ENERGY_FLOOR = 1e-11
#: Linking distance (radians) of the one-cluster test of the almost-sure rate.
CLUSTER_TOL = 0.1


def config(preset: str = "quick", **overrides) -> dict:
    """A copy of ``PRESETS[preset]`` with ``lyapunov={...}`` / ``energy={...}`` / ``spde={...}`` / ``phase={...}`` overrides.

    Examples
    --------
    >>> config("test")["energy"]["betas"]
    [0.0, 4.0]
    """
    cfg = preset_config(PRESETS, preset, overrides)
    _check_lyapunov(cfg["lyapunov"])
    _check_energy(cfg["energy"])
    _check_spde(cfg["spde"])
    _check_phase(cfg["phase"])
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
    estimator = c.get("estimator", "pairs")
    if estimator not in LYAPUNOV_ESTIMATORS:
        raise ValueError(f"estimator must be one of {LYAPUNOV_ESTIMATORS}, got {estimator!r}")
    as_int(c["n_replicas"], "n_replicas", min_value=2)
    if estimator == "tangent":
        as_int(c["n_tokens"], "n_tokens", min_value=1)
        as_int(c["n_steps"], "n_steps", min_value=1)
        as_int(c.get("levels", 3), "levels", min_value=1, max_value=4)
        return
    as_float(c["t_total"], "t_total", min_value=0.0, strict_min=True)
    as_float(c["dt"], "dt", min_value=0.0, strict_min=True, max_value=0.5)
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
    betas = [as_beta(b, "betas[]") for b in c["betas"]]
    if not betas:
        raise ValueError("betas is empty")
    as_int(c["replicas"], "replicas", min_value=3)
    t_fit = as_float(c["t_fit"], "t_fit", min_value=0.0)
    if t_fit >= T - 2 * save:
        raise ValueError(f"t_fit = {t_fit} leaves fewer than 3 saved times before T = {T}")


def _check_spde(c: dict) -> None:
    """Settings of the SPDE-energy part (:func:`spde_energy_task`)."""
    as_int(c["d"], "d", min_value=2, max_value=3)
    as_int(c["n_lat"], "n_lat", min_value=2)
    as_int(c["N"], "N", min_value=2)
    as_int(c["noise_lmax"], "noise_lmax", min_value=0)
    as_float(c["kappa0"], "kappa0", min_value=0.0)
    T = as_float(c["T"], "T", min_value=0.0, strict_min=True)
    dt = as_float(c["dt"], "dt", min_value=0.0, strict_min=True)
    save = as_float(c["save_every"], "save_every", min_value=0.0, strict_min=True)
    for num, den, what in ((T, save, "T / save_every"), (save, dt, "save_every / dt")):
        k = round(num / den)
        if k < 1 or abs(k * den - num) > 1e-9 * num:
            raise ValueError(f"{what} must be a positive integer, got {num / den:.6g}")
    betas = [as_beta(b, "betas[]") for b in c["betas"]]
    if not betas and not c["noise_only"]:
        raise ValueError("betas is empty and noise_only is off: nothing to run")
    as_int(c["replicas"], "replicas", min_value=2)
    t_fit = as_float(c["t_fit"], "t_fit", min_value=0.0)
    if t_fit >= T - 2 * save:
        raise ValueError(f"t_fit = {t_fit} leaves fewer than 3 saved times before T = {T}")


def _check_phase(c: dict) -> None:
    """Settings of the phase-diagram part (:func:`phase_task`)."""
    acts = list(c["activations"])
    bad = [a for a in acts if a not in ACTIVATIONS]
    if not acts or bad:
        raise ValueError(f"phase activations must be a non-empty list of {sorted(ACTIVATIONS)}, got {acts}")
    n = as_int(c["n_tokens"], "phase n_tokens", min_value=1)
    as_int(c["max_tokens"], "phase max_tokens", min_value=n)
    as_int(c["n_steps"], "phase n_steps", min_value=1)
    as_int(c.get("levels", 3), "phase levels", min_value=1, max_value=4)
    as_int(c["n_replicas"], "phase n_replicas", min_value=2)
    as_float(c["se_ratio"], "phase se_ratio", min_value=0.0, strict_min=True)
    as_int(c["d_none"], "phase d_none", min_value=2)

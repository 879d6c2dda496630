"""Presets and settings of the circle study: ``PRESETS``, :func:`config` and the checks."""

from __future__ import annotations

from meanfield._validate import as_beta, as_float, as_int

from .._presets import preset_config

#: The parts of the study, in the order they run.
PARTS = ("circle_sync", "circle_stability", "circle_threshold")

#: β where arXiv 2507.22857 proves synchronisation from almost every state (β >= this) ...
BETA_SYNC = -0.16
#: ... and where it proves that global synchronisation fails (β < this).
BETA_NO_SYNC = -2.0 / 3.0

_SYNC_QUICK_BETAS = [-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 1.0, 2.0]
_SYNC_FULL_BETAS = [-4.0, -3.5, -3.0, -2.75, -2.5, -2.25, -2.0, -1.75, -1.5, -1.25, -1.0, -2.0 / 3.0, -0.5, -0.16,
                    0.0, 0.5, 1.0, 2.0]
_STAB_BETAS = [-4.0, -3.0, -2.0, -1.5, -1.0, -0.8, -0.6, -0.4, -0.16, 0.3, 0.7, 1.0, 2.0]

#: Presets of :func:`run` (``test``, ``quick``, ``full``): per part the parameters of its study; see :func:`config`.
PRESETS: dict[str, dict] = {
    "test": {
        "circle_sync": {"betas": [-4.0, -1.0, 1.0], "Ns": [16], "replicas": 4, "dt": 2.0**-4, "t_max": 200.0,
                 "segment": 5.0, "save_every": 0.5, "v_tol": 1e-8, "attention": "direct", "eig_margin": 1e-6, "cluster_tol": 0.05,
                 "dt_check_betas": [-4.0], "dt_check_N": 16},
        "circle_stability": {"ks": [2, 3, 4], "betas": [-3.0, -0.5, 1.0], "ns": [2], "dt": 2.0**-6, "t_total": 4.0,
                      "random_t_total": 16.0, "chunk": 1.0, "amplitude": 1e-7},
        "circle_threshold": {"ks": [3], "brackets": {"3": [-1.0, -0.5]}, "n": 2, "dt": 2.0**-6, "t_total": 4.0,
                      "chunk": 1.0, "xtol": 1e-6, "beta_range": [-4.0, 2.0], "eigen_range": [-8.0, 2.0], "eigen_ks": [2, 3, 4, 5, 6, 7]},
    },
    "quick": {
        "circle_sync": {"betas": _SYNC_QUICK_BETAS, "Ns": [16, 64], "replicas": 16, "dt": 2.0**-4, "t_max": 400.0,
                 "segment": 5.0, "save_every": 0.5, "v_tol": 1e-8, "attention": "direct", "eig_margin": 1e-6, "cluster_tol": 0.05,
                 "dt_check_betas": [-3.0, -2.0], "dt_check_N": 16},
        "circle_stability": {"ks": [2, 3, 4], "betas": _STAB_BETAS, "ns": [2], "dt": 2.0**-6, "t_total": 8.0,
                      "random_t_total": 32.0, "chunk": 1.0, "amplitude": 1e-7},
        "circle_threshold": {"ks": [3, 5], "brackets": {"3": [-1.0, -0.5], "5": [-3.0, -1.5]}, "n": 2, "dt": 2.0**-6,
                      "t_total": 8.0, "chunk": 1.0, "xtol": 1e-7, "beta_range": [-4.0, 2.0], "eigen_range": [-8.0, 2.0],
                      "eigen_ks": [2, 3, 4, 5, 6, 7]},
    },
    "full": {
        "circle_sync": {"betas": _SYNC_FULL_BETAS, "Ns": [16, 32, 64, 128, 256], "replicas": 40, "dt": 2.0**-4,
                 "t_max": 1000.0, "segment": 5.0, "save_every": 0.5, "v_tol": 1e-8, "attention": "direct", "eig_margin": 1e-6,
                 "cluster_tol": 0.05, "dt_check_betas": [-3.0, -2.5, -2.0, -1.5], "dt_check_N": 64},
        "circle_stability": {"ks": [2, 3, 4], "betas": _STAB_BETAS, "ns": [2, 6], "dt": 2.0**-6, "t_total": 8.0,
                      "random_t_total": 32.0, "chunk": 1.0, "amplitude": 1e-7},
        "circle_threshold": {"ks": [3, 5], "brackets": {"3": [-1.0, -0.5], "5": [-3.0, -1.5]}, "n": 2, "dt": 2.0**-7,
                      "t_total": 8.0, "chunk": 1.0, "xtol": 1e-8, "beta_range": [-4.0, 2.0], "eigen_range": [-8.0, 2.0],
                      "eigen_ks": [2, 3, 4, 5, 6, 7]},
    },
}


def config(preset: str = "quick", **overrides) -> dict:
    """A copy of ``PRESETS[preset]`` with ``circle_sync={...}`` / ``circle_stability={...}`` /
    ``circle_threshold={...}`` overrides (the part names are prefixed so that the parts can join
    the other parts of the metastability study in one configuration).

    Examples
    --------
    >>> config("test", circle_sync={"Ns": [16, 32]})["circle_sync"]["Ns"]
    [16, 32]
    """
    cfg = preset_config(PRESETS, preset, overrides)
    check_sync(cfg["circle_sync"])
    check_stability(cfg["circle_stability"])
    check_threshold(cfg["circle_threshold"])
    return cfg


def _multiple(num: float, den: float, what: str) -> None:
    k = round(num / den)
    if k < 1 or abs(k * den - num) > 1e-9 * num:
        raise ValueError(f"{what} must be a positive integer, got {num / den:.6g}")


def check_sync(c: dict) -> None:
    """Settings of the fraction-synchronised part (:func:`sync_task`)."""
    betas = [as_beta(b, "betas[]") for b in c["betas"]]
    if not betas:
        raise ValueError("betas is empty")
    if not c["Ns"]:
        raise ValueError("Ns is empty")
    for n in c["Ns"]:
        as_int(n, "Ns[]", min_value=2)
    as_int(c["replicas"], "replicas", min_value=1)
    dt = as_float(c["dt"], "dt", min_value=0.0, strict_min=True, max_value=0.5)
    seg = as_float(c["segment"], "segment", min_value=0.0, strict_min=True)
    save = as_float(c["save_every"], "save_every", min_value=0.0, strict_min=True)
    t_max = as_float(c["t_max"], "t_max", min_value=0.0, strict_min=True)
    _multiple(seg, save, "segment / save_every")
    _multiple(save, dt / 2, "save_every / (dt / 2)")
    _multiple(t_max, seg, "t_max / segment")
    as_float(c["v_tol"], "v_tol", min_value=0.0, strict_min=True)
    if c["attention"] not in ("direct", "auto", "spectral"):
        raise ValueError(f"attention must be 'direct', 'auto' or 'spectral', got {c['attention']!r}")
    as_float(c["eig_margin"], "eig_margin", min_value=0.0)
    as_float(c["cluster_tol"], "cluster_tol", min_value=0.0, strict_min=True, max_value=3.14)
    for b in c["dt_check_betas"]:
        as_beta(b, "dt_check_betas[]")
    as_int(c["dt_check_N"], "dt_check_N", min_value=2)


def check_stability(c: dict) -> None:
    """Settings of the perturbation-run part (:func:`perturbation_task`)."""
    if not c["ks"] or not c["betas"] or not c["ns"]:
        raise ValueError("ks, betas and ns must be non-empty")
    for k in c["ks"]:
        as_int(k, "ks[]", min_value=2)
    for n in c["ns"]:
        as_int(n, "ns[]", min_value=2)
    for b in c["betas"]:
        as_beta(b, "betas[]")
    chunk = as_float(c["chunk"], "chunk", min_value=0.0, strict_min=True)
    _multiple(as_float(c["t_total"], "t_total", min_value=0.0, strict_min=True), chunk, "t_total / chunk")
    _multiple(as_float(c["random_t_total"], "random_t_total", min_value=0.0, strict_min=True), 2 * chunk,
              "random_t_total / (2 chunk)")
    _multiple(chunk, as_float(c["dt"], "dt", min_value=0.0, strict_min=True), "chunk / dt")
    as_float(c["amplitude"], "amplitude", min_value=0.0, strict_min=True, max_value=1e-4)


def check_threshold(c: dict) -> None:
    """Settings of the threshold part (:func:`threshold_task`)."""
    for k in c["ks"]:
        k = as_int(k, "ks[]", min_value=2)
        if str(k) not in c["brackets"]:
            raise ValueError(f"brackets has no entry for k = {k} (keys are strings: {sorted(c['brackets'])})")
        lo, hi = (as_beta(b, f"brackets[{k}][]") for b in c["brackets"][str(k)])
        if not lo < hi:
            raise ValueError(f"brackets[{k}] must be increasing, got {[lo, hi]}")
    as_int(c["n"], "n", min_value=1)
    chunk = as_float(c["chunk"], "chunk", min_value=0.0, strict_min=True)
    _multiple(as_float(c["t_total"], "t_total", min_value=0.0, strict_min=True), chunk, "t_total / chunk")
    _multiple(chunk, as_float(c["dt"], "dt", min_value=0.0, strict_min=True), "chunk / dt")
    as_float(c["xtol"], "xtol", min_value=0.0, strict_min=True)
    for name in ("beta_range", "eigen_range"):
        lo, hi = (as_beta(b, f"{name}[]") for b in c[name])
        if not lo < hi:
            raise ValueError(f"{name} must be increasing, got {[lo, hi]}")
    for k in c["eigen_ks"]:
        as_int(k, "eigen_ks[]", min_value=2)

"""Presets and settings of the depth/width study: ``PRESETS``, :func:`config` and the checks."""

from __future__ import annotations

from meanfield._validate import as_beta, as_float, as_int

from .._presets import preset_config

#: Presets of :func:`run_depth_study`. ``strong``: the L study; ``width``: the (L, m) study.
#: ``width`` value 0 in ``widths`` means the Gaussian-field layers (m = ∞).
PRESETS: dict[str, dict] = {
    "test": {
        "strong": {"d": 3, "N": 8, "T": 1.0, "beta": 1.0, "lmax": 8, "L_values": [4, 16, 64], "ref_log2": 9,
                   "replicas": 6, "activation": "relu", "sigma_w": 1.0},
        "width": {"d": 2, "N": 4, "T": 1.0, "beta": 1.0, "lmax": 64, "L_values": [1, 4], "widths": [1, 4, 16, 0],
                  "L_ref": 16, "n_draws": 400, "batches": 2, "activation": "relu", "sigma_w": 1.0},
        "law": {"d": 3, "T": 1.0, "beta": 1.0, "c0": 0.0, "activation": "relu", "sigma_w": 1.0,
                "L_values": [1, 4, 16], "n": 4000, "widths": [1, 4], "width_L": [1, 4], "n_width": 4000,
                "n_limit": 4000, "n_sub": 20, "batches": 2},
    },
    "quick": {
        "strong": {"d": 3, "N": 8, "T": 1.0, "beta": 1.0, "lmax": 8, "L_values": [4, 8, 16, 32, 64, 128, 256, 512, 1024],
                   "ref_log2": 13, "replicas": 16, "activation": "relu", "sigma_w": 1.0},
        "width": {"d": 2, "N": 4, "T": 1.0, "beta": 1.0, "lmax": 64, "L_values": [1, 4, 16],
                  "widths": [1, 2, 4, 8, 16, 64, 0], "L_ref": 32, "n_draws": 600, "batches": 4,
                  "activation": "relu", "sigma_w": 1.0},
        "law": {"d": 3, "T": 1.0, "beta": 1.0, "c0": 0.0, "activation": "relu", "sigma_w": 1.0,
                "L_values": [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024], "n": 25000, "widths": [1, 4, 16, 64],
                "width_L": [1, 4, 16, 64], "n_width": 40000, "n_limit": 150000, "n_sub": 25, "batches": 4},
    },
    "full": {
        "strong": {"d": 3, "N": 16, "T": 1.0, "beta": 1.0, "lmax": 8, "L_values": [4, 8, 16, 32, 64, 128, 256, 512],
                   "ref_log2": 13, "replicas": 32, "activation": "relu", "sigma_w": 1.0},
        "width": {"d": 2, "N": 4, "T": 1.0, "beta": 1.0, "lmax": 64, "L_values": [1, 2, 4, 8, 16, 32],
                  "widths": [1, 2, 4, 8, 16, 32, 64, 256, 0], "L_ref": 256, "n_draws": 2000, "batches": 8,
                  "activation": "relu", "sigma_w": 1.0},
        "law": {"d": 3, "T": 1.0, "beta": 1.0, "c0": 0.0, "activation": "relu", "sigma_w": 1.0,
                "L_values": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], "n": 100000,
                "widths": [1, 4, 16, 64, 256], "width_L": [1, 4, 16, 64, 256], "n_width": 100000,
                "n_limit": 400000, "n_sub": 25, "batches": 8},
    },
}

#: Allowed distance between the theory slope and the bootstrap CI of the fitted slope.
#: Strong error: the smallest depths are pre-asymptotic (the error saturates at O(1) on the
#: sphere for L = 4) and the CI covers replica noise only, not this curvature: 0.1.
STRONG_TOLERANCE = 0.1
#: Power threshold of the three-way verdicts: a slope CI wider than ±POWER·|theory| is inconclusive.
POWER = 0.5
#: Width: the fit is on |Δg| of a few widths whose smallest values are near the MC floor: 0.25.
WIDTH_TOLERANCE = 0.25

def config(preset: str = "quick", **overrides) -> dict:
    """A copy of ``PRESETS[preset]`` with ``overrides`` of the form ``strong={...}``/``width={...}``.

    Raises
    ------
    ValueError
        Unknown preset or override key.

    Examples
    --------
    >>> config("test")["strong"]["L_values"]
    [4, 16, 64]
    """
    cfg = preset_config(PRESETS, preset, overrides)
    _check_strong(cfg["strong"])
    _check_width(cfg["width"])
    if "law" in cfg:
        _check_law(cfg["law"])
    return cfg


def _check_strong(c: dict) -> None:
    as_int(c["d"], "d", min_value=2, max_value=3)
    as_int(c["N"], "N", min_value=1)
    as_float(c["T"], "T", min_value=0.0, strict_min=True)
    as_beta(c["beta"])
    as_int(c["replicas"], "replicas", min_value=2)
    ref = as_int(c["ref_log2"], "ref_log2", min_value=1, max_value=20)
    Ls = [as_int(v, "L_values[]", min_value=1) for v in c["L_values"]]
    if len(set(Ls)) < 2:
        raise ValueError(f"L_values needs at least 2 distinct depths, got {c['L_values']}")
    if max(Ls) * 4 > 2**ref:
        raise ValueError(f"the reference step T/2^{ref} must be at least 4 times finer than T/L_max = T/{max(Ls)}")
    for L in Ls:
        if (2**ref) % L:
            raise ValueError(f"L = {L} must divide 2^ref_log2 = {2**ref} (layer times on the reference grid)")


def _check_law(c: dict) -> None:
    as_int(c["d"], "d", min_value=2)
    as_float(c["T"], "T", min_value=0.0, strict_min=True)
    as_beta(c["beta"])
    as_float(c["c0"], "c0", min_value=-1.0, max_value=1.0)
    k = as_int(c["n_sub"], "n_sub", min_value=2)
    as_int(c["batches"], "batches", min_value=1)
    for key in ("n", "n_width", "n_limit"):
        if key not in c:  # n_limit is optional (default: the larger of n and n_width)
            continue
        if as_int(c[key], key, min_value=k) % k:
            raise ValueError(f"{key} = {c[key]} must be a multiple of n_sub = {k}")
    Ls = [as_int(v, "L_values[]", min_value=1) for v in c["L_values"]]
    if len(set(Ls)) < 2:
        raise ValueError(f"L_values needs at least 2 distinct depths, got {c['L_values']}")
    [as_int(v, "widths[]", min_value=1) for v in c["widths"]]
    [as_int(v, "width_L[]", min_value=1) for v in c["width_L"]]


def _check_width(c: dict) -> None:
    as_int(c["d"], "d", min_value=2, max_value=3)
    as_int(c["N"], "N", min_value=1)
    as_float(c["T"], "T", min_value=0.0, strict_min=True)
    as_beta(c["beta"])
    as_int(c["n_draws"], "n_draws", min_value=10)
    as_int(c["batches"], "batches", min_value=2)
    Ls = [as_int(v, "L_values[]", min_value=1) for v in c["L_values"]]
    ws = [as_int(v, "widths[]", min_value=0) for v in c["widths"]]
    if 0 not in ws or len([w for w in ws if w > 0]) < 2:
        raise ValueError(f"widths needs the Gaussian layers (0) and at least 2 finite widths, got {c['widths']}")
    if not Ls:
        raise ValueError("L_values is empty")
    if as_int(c["L_ref"], "L_ref", min_value=1) <= max(Ls):
        raise ValueError(f"L_ref = {c['L_ref']} must exceed max(L_values) = {max(Ls)}")


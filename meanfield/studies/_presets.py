"""Preset handling shared by the studies: copy a named preset and apply checked overrides."""

from __future__ import annotations


def preset_config(presets: dict, preset: str, overrides: dict) -> dict:
    """A deep-enough copy of ``presets[preset]`` (a dict of parts, each a dict of settings)
    with ``overrides`` ({part: {name: value}}) applied; unknown presets, parts or names raise
    ``ValueError`` naming the allowed values."""
    if preset not in presets:
        raise ValueError(f"preset must be one of {sorted(presets)}, got {preset!r}")
    cfg = {k: dict(v) for k, v in presets[preset].items()}
    for part, values in overrides.items():
        if part not in cfg:
            allowed = " or ".join(repr(p) for p in cfg)
            raise ValueError(f"override must be {allowed}, got {part!r}")
        unknown = set(values) - set(cfg[part])
        if unknown:
            raise ValueError(f"unknown {part} parameters {sorted(unknown)}; allowed {sorted(cfg[part])}")
        cfg[part].update(values)
    return cfg

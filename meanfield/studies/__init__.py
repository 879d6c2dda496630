"""Validation studies of SPEC §9, each a :class:`meanfield.runner.Study` with presets.

- :mod:`meanfield.studies.chaos`: propagation of chaos (particles vs the SPDE on one
  common noise path) on S^1 and S^2.
"""

from __future__ import annotations

__all__ = ["chaos"]

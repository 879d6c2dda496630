"""Validation studies of SPEC §9, each built on :class:`meanfield.runner.Study` with presets.

- :mod:`meanfield.studies.chaos`: propagation of chaos (particles vs the SPDE on one
  common noise path) on S^1 and S^2.
- :mod:`meanfield.studies.depth`: depth and width convergence of the discrete transformer.
- :mod:`meanfield.studies.synchronisation`: Lyapunov exponents and energy decay.
"""

from __future__ import annotations

__all__ = ["chaos", "depth", "synchronisation"]

"""Validation studies (theory §9), each built on :class:`meanfield.runner.Study` with presets.

- :mod:`meanfield.studies.chaos`: propagation of chaos (particles vs the SPDE on one
  common noise path) on S^1 and S^2.
- :mod:`meanfield.studies.depth`: depth and width convergence of the discrete transformer.
- :mod:`meanfield.studies.synchronisation`: Lyapunov exponents and energy decay.
- :mod:`meanfield.studies.meta`: metastable cluster plateaus and their escape under common noise.
- :mod:`meanfield.studies.circle`: synchronisation thresholds of the attention dynamics on the
  circle (a reproduction of arXiv 2507.22857); its parts are named ``circle_*``.

Every study is a subpackage with the same parts and the same names:

- ``PRESETS`` (named settings) and ``config(preset, ...) -> dict`` (checked settings);
- ``build(config, root_seed=0, parts=None) -> {part: Study}`` and the task functions;
- ``analyse(results, config, ...) -> Report`` (tables and verdicts of ``{part: StudyResult}``);
- ``write_outputs(report, out, extra=None, settings=None)`` (tables, figures, ``summary.md``,
  ``config.json``) and ``console_summary(report)``;
- ``run(preset, ...) -> Report``: all of the above but the outputs, in one call.

The former names (``run_chaos``, ``run_depth_study``, ``DEPTH_PRESETS``, ``sync_config``,
``SyncStudyResult``, ...) remain importable.
"""

from __future__ import annotations

__all__ = ["chaos", "depth", "synchronisation", "meta", "circle"]

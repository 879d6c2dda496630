"""Parts shared by the studies: running their runner studies, timing them, writing tables and configurations.

Every study package (:mod:`meanfield.studies.chaos`, :mod:`meanfield.studies.depth`,
:mod:`meanfield.studies.synchronisation`) follows one convention:

- ``PRESETS`` and ``config(preset, ...) -> dict`` (``_presets.py``);
- ``build(config, root_seed=0, parts=None) -> {part: Study}`` and the task functions
  (``_tasks.py``);
- ``analyse(results, config, ...) -> Report`` (``_analysis.py``);
- ``write_outputs(report, out) -> dict`` and ``console_summary(report) -> str``
  (``_report.py``);
- ``run(preset, ...) -> Report``: config, build, run every part, analyse.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np


__all__ = ["run_parts", "plain", "write_config", "write_summary_and_config"]


def run_parts(studies: dict, *, store=None, substores: bool = True, **execution) -> tuple[dict, dict]:
    """Run each :class:`~meanfield.runner.Study` of ``studies`` ({part: Study}) in order.

    ``store``: with ``substores`` each part gets the sub-store ``store/<part>``; without, the
    only part uses ``store`` itself. Returns ``({part: StudyResult}, {part: seconds})``.
    """
    # imported here: the runner needs pandas, which the light helpers below (used by the demo) do not
    from meanfield.runner import run_study

    if not substores and len(studies) != 1:
        raise ValueError("one store without sub-stores needs exactly one part")
    results, seconds = {}, {}
    for part, study in studies.items():
        where = None if store is None else (Path(store) / part if substores else store)
        t = time.perf_counter()
        results[part] = run_study(study, store=where, **execution)
        seconds[part] = time.perf_counter() - t
    return results, seconds


def plain(value):
    """``value`` with numpy scalars/arrays, tuples and paths turned into JSON types (NaN/inf as strings)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def write_config(path, config: dict) -> Path:
    """Write ``config`` as indented JSON to ``path`` and return the path."""
    path = Path(path)
    path.write_text(json.dumps(plain(config), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def write_summary_and_config(out, summary: str, config: dict, settings=None) -> dict:
    """Write ``out/summary.md`` and ``out/config.json`` (``config`` updated with ``settings``);
    returns ``{"summary": [path], "config": [path]}``."""
    out = Path(out)
    (out / "summary.md").write_text(summary, encoding="utf-8")
    return {"summary": [out / "summary.md"],
            "config": [write_config(out / "config.json", {**config, **dict(settings or {})})]}

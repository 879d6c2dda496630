"""Synchronisation of the attention dynamics on the circle: a reproduction of arXiv 2507.22857.

Polyanskiy, Rigollet and Yao ("Synchronization of mean-field models on the circle") prove that
the self-attention dynamics on S¹ synchronises from almost every initial state for β >= -0.16
and that global synchronisation fails for β < -2/3. Three parts, run with the package's particle
solver and :mod:`meanfield.circle_stability` only:

1. ``circle_threshold``: the stability threshold of k equally spaced clusters located by perturbation runs
   (root finding of a measured growth rate in β), next to the roots of the closed-form top eigenvalue;
2. ``circle_stability``: growth rates of eigenvector and random perturbations of the k-cluster states
   (k = 2, 3, 4) against the eigenvalues of the linearisation;
3. ``circle_sync``: the fraction of random initial states that reach one cluster vs β and N, with exact
   binomial intervals, each run certified synchronised (all tokens in an open half circle), stuck
   (a stable non-synchronised equilibrium) or unresolved.

The convention of the package (softmax-normalised attention) and its relation to the paper's
(1/n) are in :mod:`meanfield.circle_stability`. The study follows the package's convention
(``PRESETS``, :func:`config`, :func:`build`, :func:`run`, :func:`analyse`, :func:`write_outputs`,
``Report``); every output file is named ``circle_*`` so that it can share a directory with the
other parts of the metastability study.
"""

from __future__ import annotations

from .._common import run_parts
from . import _presets
from ._analysis import (
    CLAIM_NO_SYNC,
    CLAIM_NONE,
    CLAIM_SYNC,
    THRESHOLD_TOL,
    CircleReport,
    analyse,
    claim,
    dt_check_table,
    spectrum_curves,
    stability_table,
    sync_table,
    sync_verdict,
    threshold_verdict,
    thresholds_table,
)
from ._presets import BETA_NO_SYNC, BETA_SYNC, PARTS, PRESETS, config
from ._report import REFERENCE, console_summary, resolved_config, summary_markdown, write_outputs
from ._tasks import (
    OUTCOMES,
    build,
    make_stability_study,
    make_sync_study,
    make_threshold_study,
    perturbation_task,
    sync_task,
    threshold_task,
)

#: The analysed study (the common name of the report class of every study).
Report = CircleReport

# task functions are recorded in result stores as ``module:qualname``: keep the public path
sync_task.__module__ = perturbation_task.__module__ = threshold_task.__module__ = __name__

__all__ = [
    "PRESETS", "PARTS", "OUTCOMES", "BETA_SYNC", "BETA_NO_SYNC", "THRESHOLD_TOL", "REFERENCE",
    "CLAIM_SYNC", "CLAIM_NO_SYNC", "CLAIM_NONE",
    "Report", "CircleReport", "config", "build", "run", "analyse", "write_outputs", "console_summary",
    "summary_markdown", "resolved_config",
    "sync_task", "perturbation_task", "threshold_task", "make_sync_study", "make_stability_study",
    "make_threshold_study", "sync_table", "dt_check_table", "stability_table", "thresholds_table",
    "spectrum_curves", "claim", "sync_verdict", "threshold_verdict",
]


def run(preset: str = "quick", *, config: dict | None = None, root_seed: int = 0, parts=PARTS,
        **execution) -> CircleReport:
    """Run the parts of a preset (or ``config``) and analyse them.

    Parameters
    ----------
    preset : {"test", "quick", "full"}
    config : dict, optional
        From :func:`config` (overrides ``preset``).
    parts : sequence of {"circle_sync", "circle_stability", "circle_threshold"}
    **execution
        Passed to :func:`meanfield.runner.run_study`; failed tasks raise. A ``store`` gets one
        sub-store per part.

    Examples
    --------
    >>> rep = run("test", executor="serial", progress=False)                 # doctest: +SKIP
    >>> rep.thresholds[["k", "eigen_thresholds", "runs_threshold"]]         # doctest: +SKIP
    """
    cfg = config if config is not None else _presets.config(preset)
    _presets.check_sync(cfg["circle_sync"])
    _presets.check_stability(cfg["circle_stability"])
    _presets.check_threshold(cfg["circle_threshold"])
    execution.setdefault("raise_on_failure", True)
    results, seconds = run_parts(build(cfg, root_seed, parts), **execution)
    return analyse(results, cfg, seconds=seconds, preset=None if config is not None else preset)

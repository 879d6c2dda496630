"""Metastability and escape: does the common noise beat the multi-cluster states of attention?

Agazzi, Bruno, Mosig García, Saviozzi, Romito, "Stochastic Scaling Limits and
Synchronization by Noise in Deep Transformer Models", arXiv 2604.26898, put at the centre of
the synchronisation analysis the question whether the common noise can overcome the
metastable states (saddle points) of the deterministic attention dynamics and force the
tokens into one cluster. This study measures it on the particle system (softmax attention
with Q = K = V = I, MLP noise of strength σ, :class:`~meanfield.noise.NoiseSource`):

1. **Plateaus without noise** (part ``plateaus``). From a uniform cloud at large β the
   tokens collapse into k clusters which then merge one pair at a time, each k-cluster state
   lasting longer than the last (a staircase). The single-linkage count
   (:mod:`meanfield.clusters`) along each run gives the plateaus; their Kaplan–Meier median
   duration per (k, β) is fitted by ``log T = a + b β`` (exponential in β, as an activation
   barrier β(1 - cos φ) between clusters at angle φ would give) and by ``log T = a + b log β``
   (power law), with bootstrap intervals over the runs and a three-way choice between them
   (:func:`growth_table`).
2. **Escape with noise** (part ``noise``): the same initial clouds with a common noise of
   strength σ. Escape times from the k-cluster states (plateau durations) and the time to one
   cluster per (β, σ), with Kaplan–Meier medians and intervals (right-censored at the
   horizon), beside the noise timescale τ(σ) = log(D_0/θ) / abs(σ² λ_1) of the top Lyapunov
   exponent λ_1 of the noise flow and the σ = 0 plateau medians.
3. **Number of tokens** (part ``sizes``): the time to one cluster over N at one β.

Every replica r of (d, N) uses one initial cloud and one noise path for every β and σ (the
task seed depends on d, N and r only), so the comparisons across β and σ are paired.

Task functions are module-level (``fn(params, seed) -> dict``) and run through
:func:`meanfield.runner.run_study`; :func:`run` runs a preset and :func:`write_outputs`
writes the tables (CSV, Markdown, LaTeX), figures, summary and configuration.

Examples
--------
>>> cfg = config("test")
>>> sorted(build(cfg))
['noise', 'plateaus', 'sizes']
>>> res = run("test", executor="serial", progress=False)                 # doctest: +SKIP
>>> res.sync[["d", "beta", "sigma", "median_t_one"]]                     # doctest: +SKIP
"""

from __future__ import annotations

from .._common import run_parts
from . import _presets
from ._analysis import (
    MetaReport,
    analyse,
    count_bands,
    escape_table,
    growth_table,
    plateau_table,
    spectral_table,
    sync_table,
)
from ._presets import PRESETS, config, noisy_step
from ._report import console_summary, resolved_config, summary_markdown, write_outputs
from ._survival import kaplan_meier, km_median
from ._tasks import PARTS, build, clustered_from, first_metastable, make_study, meta_run_task

#: The analysed study (the common name of the report class of every study).
Report = MetaReport

# task functions are recorded in result stores as ``module:qualname``: keep the public path
meta_run_task.__module__ = __name__

__all__ = [
    "PRESETS",
    "PARTS",
    "Report",
    "MetaReport",
    "config",
    "build",
    "run",
    "analyse",
    "write_outputs",
    "console_summary",
    "summary_markdown",
    "resolved_config",
    "meta_run_task",
    "make_study",
    "noisy_step",
    "clustered_from",
    "first_metastable",
    "plateau_table",
    "growth_table",
    "escape_table",
    "sync_table",
    "spectral_table",
    "count_bands",
    "kaplan_meier",
    "km_median",
]


def run(preset: str = "quick", *, config: dict | None = None, root_seed: int = 0, parts=None,
        **execution) -> MetaReport:
    """Run the parts of the metastability study of a preset (or ``config``) and analyse them.

    Parameters
    ----------
    preset : {"test", "quick", "full"}
    config : dict, optional
        From :func:`config` (overrides ``preset``).
    root_seed : int
    parts : sequence of {"plateaus", "noise", "sizes"}, optional
        Default all three.
    **execution
        Passed to :func:`meanfield.runner.run_study` (``executor``, ``workers``, ``store``,
        ``progress``...); failed tasks raise. A ``store`` gets one sub-store per part.

    Returns
    -------
    MetaReport
    """
    cfg = config if config is not None else _presets.config(preset)
    for part in cfg.values():
        _presets.check_part(part)
    execution.setdefault("raise_on_failure", True)
    results, seconds = run_parts(build(cfg, root_seed, parts), **execution)
    return analyse(results, cfg, seconds=seconds, preset=None if config is not None else preset)

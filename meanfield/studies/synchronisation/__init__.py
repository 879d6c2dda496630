"""Synchronisation by common noise and attention (Agazzi, Bruno, Mosig García, Saviozzi, Romito,
"Stochastic Scaling Limits and Synchronization by Noise in Deep Transformer Models",
arXiv 2604.26898: Thm 1.4, Prop. 1.5).

Four measurements:

1. **Lyapunov table** (activations × d). For each activation kernel κ and dimension d:
   the closed form λ_1 = ½ [(d-3) κ'(1) - (d-1) κ(1)], the Monte Carlo estimate of
   :func:`tangent_lyapunov` (the tangent flow of one token driven by exact Gaussian
   increments of the field and its derivative, Richardson in dt; any d — the default) or
   of :func:`lyapunov_estimate` (two nearby tokens with renormalisation; NoisePath +
   Richardson in dt for d <= 3, finite-width random-feature noise with an O(dt) bias for
   d >= 4) with its SE over replicas, "synchronises?" from both, and a χ² test of the
   whole table (``table.attrs``: ``chi2``, ``dof``, ``p_value``).
   The simulated verdict is "yes" if mean + 2 SE < 0, "no" if mean - 2 SE > 0, and
   "unresolved" otherwise.

2. **Energy decay** along particle runs (d = 3, N iid uniform tokens, ReLU noise path,
   softmax attention at several β, plus a noise-only run without attention). Along each
   run: the gap energy E_β(μ_t) = (1/2β) ∫∫ (e^β - e^{β<x,y>}) dμ dμ and the variance
   ``1 - |∫ x dμ|²``. Two rates are fitted per β:

   * the decay rate of the **mean** E[E_β(μ_t)] over replicas (least squares of
     log mean E on the late window t >= t_fit, above the round-off floor), with a
     percentile-bootstrap CI over replicas (Thm 1.4: exponential decay);
   * the **almost-sure** rate: per replica, the slope of log E_β(μ_t) over the times at
     which the cloud is one cluster (single linkage at 0.1 rad) and E_β is above the
     round-off floor; mean over replicas ± SE. Theory for a single tight cluster: the
     separation of two tokens follows the linearised flow, whose noise part has top
     exponent λ_1 and whose attention part is -I (inside a tight cluster
     A(x_i) ≈ mean token, for every β), so E_β ∝ spread² decays at
     **2 (1 - λ_1)** with attention and **-2 λ_1** without.

   Noise "dominates" attention when the noise-only mean rate is comparable to the
   rates with attention; large β slows the *mean* decay (metastable multi-cluster
   states that only the noise can merge) even though the a.s. rate inside one cluster
   does not depend on β.

3. The β-dependence of both rates (table + figure), and the same decay along an SPDE
   solution (characteristics scheme) and particles on the same noise paths.

4. **Phase diagram** (:func:`phase_table`, :func:`phase_task`): for each activation the
   critical dimension d_c = (3r - 1)/(r - 1), r = κ'(1)/κ(1), where λ_1 changes sign
   (:func:`meanfield.kernels.critical_dimension`; none when r <= 1), and λ_1 simulated by
   :func:`tangent_lyapunov` at the integer dimensions just below and above it, each cell
   sized so that its SE is at most ``|λ_1| / se_ratio``; a three-way verdict on whether the
   simulation confirms the sign change (figure: λ_1 vs d per activation, d_c marked).

Task functions are module-level (``fn(params, seed) -> dict``) and run through
:func:`meanfield.runner.run_study`; :func:`run` runs a preset and :func:`write_outputs`
writes the tables, figures, summary and configuration. The simulation estimator of λ_1,
:func:`lyapunov_estimate`, lives here too (also importable from :mod:`meanfield.sync`).
"""

from __future__ import annotations

from .._common import run_parts
from . import _presets
from ._analysis import (
    SyncStudyResult,
    analyse,
    energy_rates,
    fit_decay_rate,
    lyapunov_chi2,
    lyapunov_table,
    noise_lambda1,
    spde_rates,
    spde_table,
)
from ._linear_flow import LinearFlowLyapunov, linear_flow_lyapunov
from ._lyapunov import LyapunovEstimate, lyapunov_estimate, tangent_lyapunov
from ._phase import make_phase_study, phase_dimensions, phase_table, phase_task
from ._presets import ACTIVATIONS, CLUSTER_TOL, ENERGY_FLOOR, PRESETS, config
from ._report import console_summary, resolved_config, summary_markdown, write_outputs
from ._tasks import (
    PARTS,
    build,
    energy_task,
    lyapunov_step,
    lyapunov_task,
    make_energy_study,
    make_lyapunov_study,
    make_spde_study,
    signed_gap_energy,
    spde_energy_task,
)

#: The analysed study (the common name of the report class of every study).
Report = SyncStudyResult
#: Former names, kept importable.
SYNC_PRESETS = PRESETS
sync_config = config
write_sync_outputs = write_outputs

# task functions are recorded in result stores as ``module:qualname``: keep the public path
lyapunov_task.__module__ = energy_task.__module__ = spde_energy_task.__module__ = phase_task.__module__ = __name__

__all__ = [
    "PRESETS",
    "PARTS",
    "ACTIVATIONS",
    "ENERGY_FLOOR",
    "CLUSTER_TOL",
    "Report",
    "SyncStudyResult",
    "config",
    "build",
    "run",
    "analyse",
    "write_outputs",
    "console_summary",
    "summary_markdown",
    "resolved_config",
    "LyapunovEstimate",
    "lyapunov_estimate",
    "tangent_lyapunov",
    "LinearFlowLyapunov",
    "linear_flow_lyapunov",
    "lyapunov_chi2",
    "lyapunov_task",
    "lyapunov_step",
    "energy_task",
    "spde_energy_task",
    "signed_gap_energy",
    "make_lyapunov_study",
    "make_energy_study",
    "make_spde_study",
    "make_phase_study",
    "phase_task",
    "phase_table",
    "phase_dimensions",
    "spde_table",
    "spde_rates",
    "lyapunov_table",
    "energy_rates",
    "fit_decay_rate",
    "noise_lambda1",
    "SYNC_PRESETS",
    "sync_config",
    "run_sync_study",
    "write_sync_outputs",
]


def run(preset: str = "quick", *, config: dict | None = None, root_seed: int = 0, parts=None,
        **execution) -> SyncStudyResult:
    """Run the parts of the synchronisation study of a preset (or ``config``) and analyse them.

    Parameters
    ----------
    preset : {"test", "quick", "full"}
    config : dict, optional
        From :func:`config` (overrides ``preset``).
    parts : sequence of {"lyapunov", "energy", "spde", "phase"}
        Which parts to run (the others' fields are None). "spde": E_β and the variance along
        an SPDE run and N particles on the same path (:func:`spde_energy_task`). "phase": the
        critical dimension of each activation and λ_1 on both sides of it (:func:`phase_task`).
    **execution
        Passed to :func:`meanfield.runner.run_study`; failed tasks raise. A ``store`` gets
        one sub-store per part (``lyapunov``, ``energy``, ``spde``, ``phase``).

    Examples
    --------
    >>> res = run("test", executor="serial", progress=False)              # doctest: +SKIP
    >>> res.rates[["beta", "rate_mean", "ci_low", "ci_high"]]              # doctest: +SKIP
    """
    cfg = config if config is not None else _presets.config(preset)
    _presets._check_lyapunov(cfg["lyapunov"])
    _presets._check_energy(cfg["energy"])
    _presets._check_spde(cfg["spde"])
    if "phase" in cfg:
        _presets._check_phase(cfg["phase"])
    execution.setdefault("raise_on_failure", True)
    results, seconds = run_parts(build(cfg, root_seed, parts), **execution)
    return analyse(results, cfg, seconds=seconds, preset=None if config is not None else preset)


#: Former name of :func:`run`.
run_sync_study = run

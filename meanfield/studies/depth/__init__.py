"""Depth and width convergence of the discrete transformer to the limiting SDE (theory §9, Thm 1.1).

Three measurements, all with softmax attention (Q = K = V = I) and ReLU MLP noise:

1. **Strong error in depth L** (Gaussian-field layers, one coupled noise path). The layer
   fields of the L-layer transformer are the increments of one refinable
   :class:`~meanfield.noise.NoisePath` over [lT/L, (l+1)T/L]; the reference is the particle
   SDE (projected Euler) on the *same* path with a much finer step T / 2^k. The error is

       ``e_L = sqrt( mean_i |X_i^L - X_i^ref|² )``        (RMS over tokens, one path),

   averaged over replicas (paths and initial clouds). Each layer is one projected Euler
   step x <- Π(x + α1 A + ΔW(x)) with the field evaluated at the current point only: the
   Milstein terms (σ_k·∇)σ_j ΔB_k ΔB_j, whose off-diagonal part involves Lévy areas, are
   missing and the noise of theory §3 is not commutative, so the scheme has strong order
   1/2 and the theory slope is **-1/2** in L. Because the coarse and fine errors are
   nearly orthogonal martingale sums, E|X_L - X_ref|² ≈ C (T/L - T/2^k): the reference
   step biases the slope by a relative O(L/2^k) only.
   The bound O(log L / L + 1/m) of Thm 1.1 concerns the *law* (a weak error). It is not
   what the strong error measures: one path converges at L^{-1/2} while laws converge at
   (almost) L^{-1}. The weak error in L is measured in 3 on paired Gaussian runs.

2. **Error in law in the width m at fixed L.** A fixed small cloud x0 (N tokens on S^1)
   goes through ``n_draws`` independent weight draws of finite-width MLP layers and
   through as many Gaussian-field layers (the m -> ∞ limit). Every layer field has the
   exact covariance α2² κ for every m (theory §2); the difference is non-Gaussianity:
   conditionally on (W, b) the field is Gaussian with the empirical kernel
   (1/m) Σ_k h_k(x) h_k(y), so its excess kurtosis is O(1/m). Per layer this moves
   expectations by O(α2⁴/m) = O(T²/(L² m)); over L layers by O(T²/(L m)). Theory slope in
   m: **-1** at fixed L (with a constant that shrinks like 1/L). Measured: the
   observable g = mean_i <x_i(T), x_i(0)> (mean and MC standard error), its difference
   to the Gaussian ensemble Δg(L, m), and W_2 between the laws of token 0 (exact circle
   solver) together with its sampling floor (W_2 between the two halves of the Gaussian
   ensemble divided by sqrt 2, i.e. what two independent samples of equal law and full
   size give under the n^{-1/2} scaling of W_2 on S^1).

3. **Iterated limits on an (L, m) grid.** E g(L, m) with CIs for every cell, plus a
   Gaussian run at L_ref >> L_max as the SDE value. lim_L lim_m is the Gaussian column
   as L grows; lim_m lim_L is the largest-L row as m grows: both must end at the SDE
   value within CI. The Gaussian column is run on coupled paths (refinable NoisePath,
   the same seeds for every L), so its weak error in L, E g(L, ∞) - E g(L_ref, ∞), is a
   paired difference with a small standard error; theory slope -1 (weak order 1 of
   projected Euler for this smooth observable; the log L of Thm 1.1 is a bound).

Task functions are module-level (``fn(params, seed) -> dict``) and run through
:func:`meanfield.runner.run_study`. :func:`run` runs a preset and :func:`write_outputs`
writes the tables (CSV, Markdown, LaTeX), figures, summary and configuration.
"""

from __future__ import annotations

from .._common import run_parts
from . import _presets
from ._analysis import DepthStudyResult, analyse, strong_table, width_tables
from ._presets import PRESETS, STRONG_TOLERANCE, WIDTH_TOLERANCE, config
from ._report import console_summary, resolved_config, summary_markdown, write_outputs
from ._tasks import build, make_law_study, make_strong_study, make_width_study, strong_depth_task, width_law_task

#: The analysed study (the common name of the report class of every study).
Report = DepthStudyResult
#: Former names, kept importable.
DEPTH_PRESETS = PRESETS
depth_config = config
write_depth_outputs = write_outputs

# task functions are recorded in result stores as ``module:qualname``: keep the public path
strong_depth_task.__module__ = width_law_task.__module__ = __name__

__all__ = [
    "PRESETS",
    "STRONG_TOLERANCE",
    "WIDTH_TOLERANCE",
    "Report",
    "DepthStudyResult",
    "config",
    "build",
    "run",
    "analyse",
    "write_outputs",
    "console_summary",
    "summary_markdown",
    "resolved_config",
    "strong_depth_task",
    "width_law_task",
    "make_strong_study",
    "make_law_study",
    "make_width_study",
    "strong_table",
    "width_tables",
    "DEPTH_PRESETS",
    "depth_config",
    "run_depth_study",
    "write_depth_outputs",
]


def run(preset: str = "quick", *, config: dict | None = None, root_seed: int = 0, **execution) -> DepthStudyResult:
    """Run the strong-L study and the (L, m) study of a preset (or ``config``) and analyse them.

    Parameters
    ----------
    preset : {"test", "quick", "full"}
    config : dict, optional
        A full configuration as returned by :func:`config` (overrides ``preset``).
    root_seed : int
    **execution
        Passed to :func:`meanfield.runner.run_study` (``executor``, ``workers``,
        ``store``, ``progress``...); failed tasks raise. A ``store`` directory gets the two
        sub-stores ``strong`` and ``width``.

    Returns
    -------
    DepthStudyResult

    Examples
    --------
    >>> res = run("test", executor="serial", progress=False)              # doctest: +SKIP
    >>> res.strong_table.attrs["fits"]["strong_error"]["slope"]            # doctest: +SKIP
    -0.47...
    """
    cfg = config if config is not None else _presets.config(preset)
    _presets._check_strong(cfg["strong"])
    _presets._check_width(cfg["width"])
    execution.setdefault("raise_on_failure", True)
    results, seconds = run_parts(build(cfg, root_seed), **execution)
    return analyse(results, cfg, seconds=seconds, preset=None if config is not None else preset)


#: Former name of :func:`run`.
run_depth_study = run

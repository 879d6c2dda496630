"""Convergence studies as data: log–log slope fits, rate tables, exports, figures.

A study's errors are fitted on a log–log scale with a confidence interval for
the slope; the rate table lists the parameter, the mean error with its CI,
the fitted slope with its CI, the theory slope and whether theory is met.

* fits and tables (``_fits``): :class:`SlopeFit`, :func:`fit_slope`,
  :func:`rate_table`, :func:`slope_summary`, :data:`RATE_COLUMNS`;
* verdicts (``_verdicts``): :func:`verdict`, :class:`Verdict`,
  :class:`SlopeIntervals` — three outcomes, "consistent", "inconsistent" and
  "inconclusive", on a studentized bootstrap interval cross-checked by a
  delta-method interval (rules below);
* exports (``_tables``): :func:`to_csv`, :func:`to_markdown`,
  :func:`to_latex`, :func:`export_table` — CSV (full table, full precision),
  Markdown and LaTeX (a per-point table and a slope table; both formatters are
  written here, so neither ``tabulate`` nor ``jinja2`` is needed);
* figures (``_figures``): :func:`plot_rates`, the log–log figure on
  matplotlib's Agg canvas.

Data contract
-------------
A study produces a long-form :class:`pandas.DataFrame` with one row per
(parameter value, replica): a parameter column (``"N"``, ``"L"``, ``"h"``,
... — the name is an argument), usually a ``"replica"`` column, and one or
more positive error columns, e.g. ``"w2"``, ``"coupling"``, ``"moment"``.

:func:`rate_table` turns it into a *rate table*: one row per (error column,
parameter value) with the columns of :data:`RATE_COLUMNS`; the slope fit of
each error column is repeated on its rows (so CSV keeps it) and stored in
``table.attrs["fits"]``.  :func:`slope_summary` gives one row per error
column.

Intervals and verdicts
----------------------
One interval method everywhere a verdict is given:

* **studentized bootstrap** (bootstrap-t) over replicas within groups: in each
  of ``n_boot`` resamples the rows of every group are drawn with replacement
  within that group, the slope ``s*`` and its delta-method standard error
  ``SE*`` are recomputed, and ``t* = (s* - s) / SE*``; the interval is
  ``[s - q_{(1+ci)/2}(t*) SE, s - q_{(1-ci)/2}(t*) SE]``;
* cross-checked by the **delta-method** interval ``s ± z_{(1+ci)/2} SE`` with

  .. math::
      SE^2 = \\sum_g c_g^2 \\frac{v_g}{n_g \\bar y_g^2},\\qquad
      c_g = \\frac{\\log x_g - \\overline{\\log x}}{\\sum_h (\\log x_h - \\overline{\\log x})^2},

  ``v_g`` the sample variance of the ``n_g`` replicas of group g.  Both are reported.

A verdict (:func:`verdict`) is one of ``"consistent"``, ``"inconsistent"`` or
``"inconclusive"``:

1. **inconclusive** if a point is unresolved: fewer than 2 replicas, or its
   mean error within ``resolution`` (2) standard errors of zero;
2. **inconclusive** if the design lacks power: the studentized interval's
   half-width exceeds ``power`` (0.5) times ``|theory_slope|``;
3. **inconclusive** if the two intervals disagree on whether the theory slope
   (widened by ``tolerance``) is inside;
4. otherwise **consistent** if ``ci_low - tolerance <= theory_slope <=
   ci_high + tolerance``, else **inconsistent**.

``rate_table(..., verdicts="three-way")`` and :meth:`SlopeFit.verdict` give
these verdicts.  The two-way verdict of the default
``rate_table(..., verdicts="two-way")`` and :meth:`SlopeFit.consistent_with`
("consistent" / "not consistent" on the percentile bootstrap interval
``SlopeFit.ci_low, ci_high``) are kept unchanged for existing results; they
are blind to power and to unresolved points.

Signed effects (a difference of means that should shrink like x^s, e.g. a width
effect E g(m) - E g(∞)) are fitted by :func:`fit_effect_slope` with the same two
intervals, and :func:`effect_verdict` adds one rule: **inconclusive if the effect changes
sign** across the parameter values.  :func:`fit_linear_model` fits a model linear in its
parameters (e.g. ``A log L / L + C / m``) by weighted least squares on group means, with
both intervals per parameter and a χ² goodness of fit.

Proportions (the fraction of runs with an outcome) get a binomial interval from
:func:`proportion_interval` (exact Clopper–Pearson, or Wilson score).

``meanfield.rates`` is an alias of this package kept for existing imports.
"""

from __future__ import annotations

from ._effects import EffectFit, ModelFit, effect_verdict, fit_effect_slope, fit_linear_model
from ._figures import plot_rates
from ._proportions import PROPORTION_METHODS, proportion_interval
from ._fits import RATE_COLUMNS, THREE_WAY_COLUMNS, SlopeFit, fit_slope, rate_table, slope_summary
from ._tables import export_table, to_csv, to_latex, to_markdown
from ._verdicts import CONSISTENT, INCONCLUSIVE, INCONSISTENT, SlopeIntervals, Verdict, verdict

__all__ = [
    "RATE_COLUMNS",
    "THREE_WAY_COLUMNS",
    "SlopeFit",
    "SlopeIntervals",
    "Verdict",
    "verdict",
    "CONSISTENT",
    "INCONSISTENT",
    "INCONCLUSIVE",
    "fit_slope",
    "rate_table",
    "slope_summary",
    "to_csv",
    "to_markdown",
    "to_latex",
    "export_table",
    "plot_rates",
    "EffectFit",
    "fit_effect_slope",
    "effect_verdict",
    "ModelFit",
    "fit_linear_model",
    "proportion_interval",
    "PROPORTION_METHODS",
]

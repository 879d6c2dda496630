"""Convergence studies as data: log–log slope fits, rate tables, exports, figures.

A study's errors are fitted on a log–log scale with a confidence interval for
the slope; the rate table lists the parameter, the mean error with its CI,
the fitted slope with its CI, the theory slope and whether theory is met.

* fits and tables (``_fits``): :class:`SlopeFit`, :func:`fit_slope`,
  :func:`rate_table`, :func:`slope_summary`, :data:`RATE_COLUMNS`;
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

``meanfield.rates`` is an alias of this package kept for existing imports.
"""

from __future__ import annotations

from ._figures import plot_rates
from ._fits import RATE_COLUMNS, SlopeFit, fit_slope, rate_table, slope_summary
from ._tables import export_table, to_csv, to_latex, to_markdown

__all__ = [
    "RATE_COLUMNS",
    "SlopeFit",
    "fit_slope",
    "rate_table",
    "slope_summary",
    "to_csv",
    "to_markdown",
    "to_latex",
    "export_table",
    "plot_rates",
]

"""Log–log figures of rate tables, drawn on matplotlib's Agg canvas (pyplot is never touched)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ._fits import _is_rate_table, _param_of, rate_table
from ._tables import _as_formats

__all__ = ["plot_rates"]

_FIGURE_FORMATS = ("png", "pdf", "svg")


def plot_rates(
    table_or_df: pd.DataFrame,
    param: str | None = None,
    error=None,
    theory_slope=None,
    *,
    path_stem=None,
    formats=("png", "pdf"),
    ax=None,
    title: str | None = None,
    **table_kwargs,
) -> Figure:
    """Log–log plot of mean error with CI bars, the fitted line and the theory line.

    Accepts a rate table (from :func:`rate_table`, or its CSV read back) or a
    long-form study DataFrame, in which case ``param``, ``error`` and
    ``theory_slope`` are passed to :func:`rate_table` with ``table_kwargs``.
    For each error column: markers at the mean with CI error bars (a lower CI
    end <= 0 is clipped at the axis), the fit ``exp(intercept) x^slope``
    (dashed) with its confidence band (shaded: the lines of slope
    ``slope_ci_low`` and ``slope_ci_high`` through the fit at the geometric
    mean of x — the interval the verdict uses) and the theory line ``mean_0 (x/x_0)^theory_slope`` anchored at
    the first point (dotted).  Uses a matplotlib ``Figure`` with the Agg
    canvas; pyplot and the display are never touched.  theory §9.

    Parameters
    ----------
    table_or_df : DataFrame
        Rate table or long-form study data.
    param : str, optional
        Parameter column (taken from the rate table if omitted).
    error : str or sequence of str, optional
        Error column(s) of long-form data; for a rate table, a subset to plot.
    theory_slope : float or dict, optional
        Needed for long-form data.
    path_stem : str or Path, optional
        Write ``<path_stem>.<fmt>`` for each format; parent directories are created.
    formats : sequence of {"png", "pdf", "svg"}
        Output formats.
    ax : matplotlib Axes, optional
        Draw into it instead of a new figure.
    title : str, optional
        Axes title.
    **table_kwargs
        ``ci``, ``n_boot``, ``seed``, ``tolerance``, ``mean_ci`` for :func:`rate_table`.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import pandas as pd
    >>> from meanfield.reporting import plot_rates
    >>> df = pd.DataFrame({"N": [10, 10, 100, 100], "e": [1.0, 1.2, 0.1, 0.12]})
    >>> fig = plot_rates(df, "N", "e", -1.0)
    >>> fig.axes[0].get_xscale()
    'log'
    """
    if _is_rate_table(table_or_df):
        if table_kwargs:
            raise TypeError(f"table options {sorted(table_kwargs)} only apply to long-form data")
        table = table_or_df
        param = _param_of(table, param)
        if error is not None:
            wanted = [error] if isinstance(error, str) else list(error)
            unknown = [e for e in wanted if e not in set(table["error"])]
            if unknown:
                raise ValueError(f"error column(s) {unknown} not in the rate table")
            table = table[table["error"].isin(wanted)]
    else:
        if param is None or error is None or theory_slope is None:
            raise ValueError("long-form data needs param, error and theory_slope (or pass a rate table)")
        table = rate_table(table_or_df, param, error, theory_slope, **table_kwargs)
    fmts = _as_formats(formats, _FIGURE_FORMATS) if path_stem is not None else ()
    if ax is None:
        fig = Figure(figsize=(8.0, 4.2), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    _draw_rates(ax, table, param)
    if title is not None:
        ax.set_title(title)
    if path_stem is not None:
        stem = Path(path_stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        for fmt in fmts:
            fig.savefig(stem.with_name(stem.name + "." + fmt), format=fmt)
    return fig


def _draw_rates(ax, table: pd.DataFrame, param: str) -> None:
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, (name, block) in enumerate(table.groupby("error", sort=False)):
        block = block.sort_values(param)
        x = block[param].to_numpy(dtype=np.float64)
        mean = block["mean"].to_numpy()
        lower = np.nan_to_num(mean - block["ci_low"].to_numpy(), nan=0.0)
        upper = np.nan_to_num(block["ci_high"].to_numpy() - mean, nan=0.0)
        color = colors[i % len(colors)]
        first = block.iloc[0]
        ax.errorbar(x, mean, yerr=[lower, upper], fmt="o", color=color, capsize=3, label=f"{name}: mean, CI")
        grid = np.geomspace(x.min(), x.max(), 50)
        fit_line = np.exp(first["intercept"]) * grid ** first["slope"]
        ax.plot(
            grid,
            fit_line,
            "--",
            color=color,
            label=f"fit {first['slope']:.3f} [{first['slope_ci_low']:.3f}, {first['slope_ci_high']:.3f}]",
        )
        lo_s, hi_s = first["slope_ci_low"], first["slope_ci_high"]
        if np.isfinite(lo_s) and np.isfinite(hi_s):
            # the slope interval as a band: lines of slope ci_low and ci_high through the fit at the
            # geometric mean of x (where the fitted line is least uncertain)
            xm = float(np.exp(np.mean(np.log(x))))
            ym = float(np.exp(first["intercept"]) * xm ** first["slope"])
            band = [ym * (grid / xm) ** s for s in (lo_s, hi_s)]
            ax.fill_between(grid, np.minimum(*band), np.maximum(*band), color=color, alpha=0.15, linewidth=0)
        ax.plot(
            grid,
            mean[0] * (grid / x[0]) ** first["theory_slope"],
            ":",
            color=color,
            label=f"theory {first['theory_slope']:.3g} ({first['verdict']})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log", nonpositive="clip")
    ax.set_xlabel(param)
    ax.set_ylabel("error")
    ax.grid(True, which="both", alpha=0.3)
    # outside the axes: with several error columns an inside legend hides the data
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)

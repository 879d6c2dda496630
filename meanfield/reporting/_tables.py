"""Rate tables and other DataFrames as CSV, Markdown and LaTeX (no ``tabulate``, no ``jinja2``)."""

from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np
import pandas as pd

from ._fits import _is_rate_table, _param_of, slope_summary

__all__ = ["to_csv", "to_markdown", "to_latex", "export_table"]

_TABLE_FORMATS = ("csv", "md", "tex")


def _fmt(value, floatfmt: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return "nan" if not np.isfinite(value) else format(float(value), floatfmt)
    return str(value)


def _display_frames(table: pd.DataFrame, floatfmt: str) -> list[pd.DataFrame]:
    """Readable blocks: per-point rows with a CI column, then the slope summary."""
    if not _is_rate_table(table):
        return [table]
    param = _param_of(table, None)
    level = table.attrs.get("ci", 0.95)
    ci_name = f"{level:.0%} CI" if isinstance(level, float) else "CI"
    points = pd.DataFrame(
        {
            "error": table["error"],
            param: table[param],
            "replicas": table["n_replicas"],
            "mean": table["mean"],
            ci_name: [
                f"[{_fmt(a, floatfmt)}, {_fmt(b, floatfmt)}]" for a, b in zip(table["ci_low"], table["ci_high"])
            ],
        }
    )
    summary = slope_summary(table)
    slopes = pd.DataFrame(
        {
            "error": summary["error"],
            "slope": summary["slope"],
            f"slope {ci_name}": [
                f"[{_fmt(a, floatfmt)}, {_fmt(b, floatfmt)}]"
                for a, b in zip(summary["slope_ci_low"], summary["slope_ci_high"])
            ],
            "theory": summary["theory_slope"],
            "tolerance": summary["tolerance"],
            "verdict": summary["verdict"],
        }
    )
    return [points, slopes]


def _markdown_block(df: pd.DataFrame, floatfmt: str) -> str:
    def cell(v):
        return _fmt(v, floatfmt).replace("|", "\\|")

    header = "| " + " | ".join(str(c).replace("|", "\\|") for c in df.columns) + " |"
    align = "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(df[c]) else ":---" for c in df.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False, name=None)]
    return "\n".join([header, align, *rows])


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex_block(df: pd.DataFrame, floatfmt: str) -> str:
    spec = "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)
    lines = [
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(_latex_escape(str(c)) for c in df.columns) + r" \\",
        r"\midrule",
    ]
    lines += [
        " & ".join(_latex_escape(_fmt(v, floatfmt)) for v in row) + r" \\"
        for row in df.itertuples(index=False, name=None)
    ]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines)


def _check_table(table) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    return table


def _write_text(text: str, path) -> str:
    """Write ``text`` to ``path`` (parents created) unless it is None; return the text."""
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return text


def to_csv(table: pd.DataFrame, path) -> Path:
    """Write a table as CSV (all columns, full float precision, no index).

    Parameters
    ----------
    table : DataFrame
        Any table; a rate table keeps its slope columns.
    path : str or Path
        Output file; parent directories are created.

    Returns
    -------
    Path

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> from meanfield.reporting import to_csv
    >>> p = to_csv(pd.DataFrame({"N": [1, 2]}), pathlib.Path(tempfile.mkdtemp()) / "t.csv")
    >>> p.read_text().splitlines()
    ['N', '1', '2']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_table(table).to_csv(path, index=False, float_format="%.17g")
    return path


def to_markdown(table: pd.DataFrame, path=None, *, floatfmt: str = ".4g") -> str:
    """Pipe (GitHub) Markdown for a table, without ``tabulate``.

    A rate table becomes two pipe tables: per point (error, parameter,
    replicas, mean, CI) and per error (slope, slope CI, theory, tolerance,
    verdict).  Any other DataFrame is written as one table.  Numbers use
    ``format(value, floatfmt)``; ``|`` in cells is escaped.

    Parameters
    ----------
    table : DataFrame
    path : str or Path, optional
        Also write the text there.
    floatfmt : str
        Format spec for floats.

    Returns
    -------
    str

    Examples
    --------
    >>> import pandas as pd
    >>> from meanfield.reporting import to_markdown
    >>> print(to_markdown(pd.DataFrame({"N": [10], "err": [0.5]})))
    | N | err |
    |---:|---:|
    | 10 | 0.5 |
    <BLANKLINE>
    """
    text = "\n\n".join(_markdown_block(b, floatfmt) for b in _display_frames(_check_table(table), floatfmt)) + "\n"
    return _write_text(text, path)


def to_latex(table: pd.DataFrame, path=None, *, floatfmt: str = ".4g") -> str:
    """Booktabs LaTeX ``tabular`` code for a table, without ``jinja2``.

    Same layout as :func:`to_markdown` (two tabulars for a rate table);
    needs ``\\usepackage{booktabs}``.  Special characters are escaped.

    Parameters
    ----------
    table : DataFrame
    path : str or Path, optional
        Also write the text there.
    floatfmt : str
        Format spec for floats.

    Returns
    -------
    str

    Examples
    --------
    >>> import pandas as pd
    >>> from meanfield.reporting import to_latex
    >>> print(to_latex(pd.DataFrame({"N": [10], "w_2": [0.5]})))
    \\begin{tabular}{rr}
    \\toprule
    N & w\\_2 \\\\
    \\midrule
    10 & 0.5 \\\\
    \\bottomrule
    \\end{tabular}
    <BLANKLINE>
    """
    text = "\n\n".join(_latex_block(b, floatfmt) for b in _display_frames(_check_table(table), floatfmt)) + "\n"
    return _write_text(text, path)


def _as_formats(formats, allowed: tuple[str, ...]) -> tuple[str, ...]:
    fmts = (formats,) if isinstance(formats, str) else tuple(formats)
    bad = [f for f in fmts if f not in allowed]
    if not fmts or bad:
        raise ValueError(f"formats must be a non-empty subset of {allowed}, got {formats!r}")
    return fmts


def export_table(table: pd.DataFrame, path_stem, formats=("csv", "md", "tex"), *, floatfmt: str = ".4g") -> dict:
    """Write a (rate) table as ``<path_stem>.csv``, ``.md`` and ``.tex``.

    Parameters
    ----------
    table : DataFrame
        Usually from :func:`rate_table`.
    path_stem : str or Path
        Output path without suffix; parent directories are created.
    formats : sequence of {"csv", "md", "tex"}
        Which files to write.
    floatfmt : str
        Float format of the Markdown and LaTeX files (CSV keeps full precision).

    Returns
    -------
    dict
        ``{format: Path}`` of the files written.

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> from meanfield.reporting import export_table
    >>> out = export_table(pd.DataFrame({"N": [1]}), pathlib.Path(tempfile.mkdtemp()) / "t")
    >>> sorted(p.suffix for p in out.values())
    ['.csv', '.md', '.tex']
    """
    table = _check_table(table)
    stem = Path(path_stem)
    written = {}
    for fmt in _as_formats(formats, _TABLE_FORMATS):
        path = stem.with_name(stem.name + "." + fmt)
        if fmt == "csv":
            written[fmt] = to_csv(table, path)
        elif fmt == "md":
            to_markdown(table, path, floatfmt=floatfmt)
            written[fmt] = path
        else:
            to_latex(table, path, floatfmt=floatfmt)
            written[fmt] = path
    return written

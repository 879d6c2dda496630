"""Sphinx directive ``md-table``: render a pipe table of a committed Markdown result file.

Usage::

    .. md-table:: ../benchmarks/results_attention.md
       :section: Attention drift
       :index: 0

``:section:`` selects the first ``## `` heading that starts with the given text and
``:index:`` the n-th pipe table under it (default 0). Without ``:section:`` the tables of
the whole file are counted (for result files that hold bare tables without headings). The table is rendered as a docutils
table, so a regenerated result file updates the documentation without editing it.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _is_rule(cells: list[str]) -> bool:
    return all(c and set(c) <= set("-: ") for c in cells)


def read_tables(path: Path, section: str | None) -> list[list[list[str]]]:
    """The pipe tables under the first ``## `` heading starting with ``section`` (all if None)."""
    tables: list[list[list[str]]] = []
    inside = section is None
    current: list[list[str]] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if section is not None and line.startswith("## "):
            if inside:
                break
            inside = line[3:].startswith(section)
            continue
        if not inside:
            continue
        if line.startswith("|"):
            cells = _cells(line)
            if current is None:
                current = []
                tables.append(current)
            if not _is_rule(cells):
                current.append(cells)
        else:
            current = None
    return tables


class MarkdownTable(Directive):
    required_arguments = 1
    option_spec = {"section": directives.unchanged_required, "index": directives.nonnegative_int}

    def run(self):
        env = self.state.document.settings.env
        rel, path = env.relfn2path(self.arguments[0])
        env.note_dependency(rel)
        section = self.options.get("section")
        index = self.options.get("index", 0)
        tables = read_tables(Path(path), section)
        if index >= len(tables):
            where = "in the file" if section is None else f"under a heading starting with {section!r}"
            raise self.error(f"{self.arguments[0]}: no table {index} {where}")
        rows = tables[index]
        ncols = len(rows[0])
        table = nodes.table(classes=["md-table"])
        group = nodes.tgroup(cols=ncols)
        table += group
        for _ in range(ncols):
            group += nodes.colspec(colwidth=1)
        for part, body in ((nodes.thead(), rows[:1]), (nodes.tbody(), rows[1:])):
            for cells in body:
                if len(cells) != ncols:
                    raise self.error(f"{self.arguments[0]}: row with {len(cells)} cells, header has {ncols}")
                row = nodes.row()
                for text in cells:
                    entry = nodes.entry()
                    entry += nodes.paragraph(text=text.replace("`", "").replace("S^1", "S¹").replace("S^2", "S²"))
                    row += entry
                part += row
            group += part
        return [table]


def setup(app):
    app.add_directive("md-table", MarkdownTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

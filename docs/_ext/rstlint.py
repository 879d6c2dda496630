"""Sphinx extension ``rstlint``: warn about markup that parsed as something else.

reStructuredText accepts many mistakes silently: a table whose border line is glued to a
directive (``=====.. list-table::``) renders as a *definition list*, a Markdown pipe table
as a *line block* or a paragraph, a directive without its blank line as plain text. None of
these is an error for docutils, so ``sphinx -W`` passes. This extension walks every doctree
after it is read and emits a warning (an error under ``-W``) for

* a definition-list term, paragraph or line block that starts with a table border or a
  section rule (a run of three or more ``= - ~ ^ + # *``);
* a definition-list term, paragraph or line block that contains a directive marker
  (``.. name::``);
* a line of a paragraph or line block that looks like a Markdown table row (``| a | b |``)
  or rule (``|---|``).

:func:`suspicious` is the check itself, usable on any docutils doctree (the test suite runs
it on the documentation sources parsed by plain docutils).
"""

from __future__ import annotations

import re

from docutils import nodes

__all__ = ["suspicious", "setup"]

_BORDER = re.compile(r"^\s*[=\-~^+#*]{3,}")
_DIRECTIVE = re.compile(r"(^|\s|[=\-~^+#*])\.\.\s+[A-Za-z][\w:-]*::")
_MD_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*\|")
_MD_ROW = re.compile(r"^\s*\|[^|\n]+\|[^|\n]+\|\s*$")


def _text(node) -> str:
    return node.astext()


def _line_problem(text: str) -> str | None:
    for line in text.splitlines() or [text]:
        if _MD_RULE.match(line) or _MD_ROW.match(line):
            return f"a Markdown table row {line.strip()[:40]!r} (use list-table or a grid/simple table)"
    return None


def suspicious(doctree) -> list[tuple[nodes.Node, str]]:
    """Nodes of ``doctree`` whose markup most likely did not parse as intended, with the reason.

    Parameters
    ----------
    doctree : docutils.nodes.document
        A parsed document.

    Returns
    -------
    list of (node, str)
        Empty for clean markup.

    Examples
    --------
    >>> from docutils.core import publish_doctree
    >>> bad = publish_doctree("Options:\\n\\n=====.. list-table::\\n   :header-rows: 1\\n")
    >>> [(node.astext(), why.split(" looks")[0]) for node, why in suspicious(bad)]
    [('=====.. list-table::', "a definition list whose term '=====.. list-table::'")]
    >>> suspicious(publish_doctree("``executor='serial'``\\n   one task at a time.\\n"))
    []
    """
    found = []
    for term in doctree.findall(nodes.term):
        text = _text(term)
        if _BORDER.match(text) or _DIRECTIVE.search(text):
            found.append((term, f"a definition list whose term {text[:40]!r} looks like a table border or a "
                                "directive that did not parse (a missing blank line or a glued border?)"))
    for kind in (nodes.paragraph, nodes.line_block):
        for node in doctree.findall(kind):
            if isinstance(node.parent, (nodes.system_message, nodes.literal_block)):
                continue
            text = _text(node)
            if _BORDER.match(text) and not text.strip().startswith("---"):
                found.append((node, f"a paragraph starting with a table border {text[:40]!r} (a malformed table?)"))
            elif _DIRECTIVE.search(text):
                found.append((node, f"a directive marker inside running text {text[:40]!r} (a missing blank line?)"))
            else:
                why = _line_problem(text)
                if why:
                    found.append((node, why))
    return found


def _check(app, doctree) -> None:
    from sphinx.util import logging

    logger = logging.getLogger("rstlint")
    for node, why in suspicious(doctree):
        logger.warning(f"suspicious markup: {why}", location=node, type="rstlint")


def setup(app):
    app.connect("doctree-read", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

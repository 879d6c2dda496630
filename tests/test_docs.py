"""Checks of the documentation sources that the Sphinx build itself does not make: markup that
parses as something else (a table rendered as a definition list), and the user guide's claims
about the command line matching the parsers."""

from __future__ import annotations

import doctest
import re
import sys
from pathlib import Path

import pytest
from docutils.core import publish_doctree

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import rstlint  # noqa: E402

SOURCES = sorted(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts and "generated" not in p.parts)


def _parse(text: str, source: str = "<snippet>"):
    # Sphinx's roles and directives are unknown to plain docutils: their errors are silenced,
    # the structure around them (tables, lists, paragraphs) parses as in the real build.
    return publish_doctree(text, source_path=source, settings_overrides={
        "report_level": 5, "halt_level": 5, "file_insertion_enabled": False, "raw_enabled": False})


def test_the_check_catches_the_table_glued_to_a_directive():
    broken = "Options:\n\n=====.. list-table::\n   :header-rows: 1\n\n   * - a\n     - b\n"
    assert [why for _, why in rstlint.suspicious(_parse(broken))]
    fixed = broken.replace("=====.. list-table::", ".. list-table::")
    assert rstlint.suspicious(_parse(fixed)) == []


@pytest.mark.parametrize("text", [
    "Codes:\n\n| code | meaning |\n| --- | --- |\n| 0 | ok |\n",          # a Markdown table
    "Text\n.. note:: glued to the paragraph\n",                          # a directive without its blank line
])
def test_the_check_catches_other_misparsed_markup(text):
    assert rstlint.suspicious(_parse(text)), text


@pytest.mark.parametrize("text", [
    "``executor='serial'``\n   one task at a time.\n",
    "====  ====\na     b\n====  ====\n",
    "Title\n=====\n\nBody with a -- dash and --- rule words.\n",
    ".. code-block:: bash\n\n   | not | a | table |\n",
])
def test_the_check_leaves_intended_markup_alone(text):
    assert rstlint.suspicious(_parse(text)) == [], text


def test_the_check_examples_run():
    assert doctest.testmod(rstlint).failed == 0


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(DOCS)))
def test_documentation_sources_have_no_misparsed_markup(path):
    found = rstlint.suspicious(_parse(path.read_text(encoding="utf-8"), str(path)))
    assert not found, [(node.line, why) for node, why in found]


def test_guide_names_the_study_commands_with_test_presets():
    from meanfield.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    with_test = sorted(name for name, p in sub.choices.items()
                       if any("--test" in a.option_strings for a in p._actions))
    assert with_test == ["chaos", "depth", "meta", "sync"]
    text = (DOCS / "guide" / "studies.rst").read_text(encoding="utf-8")
    assert "``--test`` (all four" in text
    rows = re.findall(r"\* - ``meanfield (\w+)``\n(?:.*\n)*?     - (``--quick``.*)", text)
    assert sorted(name for name, presets in rows if "``--test``" in presets) == with_test

"""Sphinx configuration for the meanfield documentation."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("_ext"))

import meanfield  # noqa: E402

project = "meanfield"
author = "the meanfield developers"
copyright = "2026, the meanfield developers"
release = meanfield.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "mdtables",
]
autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
doctest_global_setup = "import numpy as np"
templates_path = []
exclude_patterns = ["_build", "_ext"]
html_theme = "sphinx_rtd_theme" if __import__("importlib").util.find_spec("sphinx_rtd_theme") else "alabaster"
html_static_path = []
nitpicky = False

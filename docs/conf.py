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
    "rstlint",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
doctest_global_setup = "import numpy as np"
templates_path = []
exclude_patterns = ["_build", "_ext", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip"]
html_theme = "sphinx_rtd_theme" if __import__("importlib").util.find_spec("sphinx_rtd_theme") else "alabaster"
html_static_path = []
nitpicky = False

# The gallery: every script examples/plot_*.py is executed at build time (in this process,
# so with the package of this checkout) and becomes a page with its output and figures.
# Unchanged scripts are not run again by a later build in the same checkout (sphinx-gallery
# keeps an md5 of each); a fresh clone, as in CI, runs them all.
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "min_reported_time": 0,
    "show_memory": False,
    "show_signature": False,
    "capture_repr": (),
}

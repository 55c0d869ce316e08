"""Sphinx configuration for sklmoo."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import sklmoo  # noqa: E402

project = "sklmoo"
version = release = sklmoo.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
numpydoc_show_class_members = False
exclude_patterns = ["_build", "auto_examples/*.ipynb"]
html_static_path = ["_static"]
html_theme = "pydata_sphinx_theme"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_title = "sklmoo"
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
}

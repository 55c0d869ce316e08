"""Sphinx configuration for sklmoo."""

import importlib
import inspect
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
    # MathJax 3 served with the docs (_static/mathjax/, set as mathjax_path) instead of from a
    # CDN, so that offline and air-gapped copies render the math (the ``docs`` extra installs it)
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "sphinx_copybutton",
]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext"}
# The benchmark tables (docs/benchmarks/*.md, written by benchmarks/*.py) are not pages of their
# own: the benchmark pages include them with the MyST parser.
exclude_patterns = ["_build", "auto_examples/*.ipynb", "benchmarks/*.md", "benchmarks/*.json"]
# their "## ..." headings become sections of the including page (the "# ..." title is skipped)
suppress_warnings = ["myst.header"]

# -- API pages ------------------------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": False, "inherited-members": False}
# The class template (docs/_templates/autosummary/class.rst) documents the methods listed
# below; numpydoc must not add its own member tables (they listed every skorch internal).
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

# Methods of a skorch net that a user calls; every other method a net inherits from skorch
# (callback hooks, initialize_*, notify, get_iterator, ...) or overrides is internal.
_USER_METHODS = ("fit", "partial_fit", "predict", "predict_proba", "score", "get_params",
                 "set_params", "save_params", "load_params")
_API_MODULES = ("sklmoo", "sklmoo.metrics", "sklmoo.samplers", "sklmoo.nn", "sklmoo.meta",
                "sklmoo.datasets", "sklmoo.diagnostics")


def _defining_module(cls, name):
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass.__module__
    return ""


def _documented_methods(cls):
    """Public methods written in sklmoo, plus the user-facing methods it inherits."""
    try:
        from skorch import NeuralNet
        skorch_names = set(dir(NeuralNet)) if issubclass(cls, NeuralNet) else set()
    except ImportError:  # pragma: no cover
        skorch_names = set()
    names = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        if not inspect.isfunction(attr):
            continue  # properties, data and descriptors that hide a method
        try:
            getattr(cls, name)
        except AttributeError:
            continue
        own = _defining_module(cls, name).startswith("sklmoo")
        if name in _USER_METHODS and (own or skorch_names):
            names.append(name)
        elif own and name not in skorch_names:
            names.append(name)
    return names


def _api_methods():
    table = {}
    for modname in _API_MODULES:
        module = importlib.import_module(modname)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isclass(obj):
                table[f"{modname}.{name}"] = _documented_methods(obj)
    return table


# plain strings only: the context is pickled with the environment
autosummary_context = {"sklmoo_methods": _api_methods()}

# -- HTML ------------------------------------------------------------------------------------
html_static_path = ["_static"]
html_css_files = ["sklmoo.css"]
html_theme = "pydata_sphinx_theme"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # the benchmark pages hold wide tables: give them the full width
    "secondary_sidebar_items": {"benchmarks/*": []},
}
html_title = "sklmoo"
# single pages: no empty "Section Navigation" column; benchmark pages: the width for their tables
html_sidebars = {page: [] for page in ("install", "faq", "changelog", "citing", "benchmarks/*")}
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# -- Gallery ---------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # "Examples using X" on every API page (the templates' minigallery directive)
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("sklmoo",),
}

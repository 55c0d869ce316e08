"""Every public object has a docstring with a runnable example (the doctests themselves run
through ``--doctest-modules``); the estimators' API docstrings stay a reference (short, linking
to the user guide for the evidence) and their methods document sklmoo, not skorch."""

import importlib
import inspect

import pytest

MODULES = ["sklmoo", "sklmoo.samplers", "sklmoo.nn", "sklmoo.metrics", "sklmoo.datasets", "sklmoo.pipeline",
           "sklmoo.diagnostics", "sklmoo.meta", "sklmoo.estimators"]


def _public_objects():
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield f"{name}.{attr}", obj


@pytest.mark.parametrize("name, obj", list(_public_objects()), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_public_object_has_a_runnable_example(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert "Examples\n--------" in doc and ">>>" in doc, f"{name} has no Examples section"


ESTIMATORS = ["MTSGDMultiTaskClassifier", "MTSGDRegressor", "L2ESamplerClassifier"]


@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_docstring_is_a_reference_not_a_research_log(name):
    """As short as scikit-learn's LogisticRegression's; benchmark figures, earlier defaults and
    commit hashes live in the user guide and the benchmark pages, which it links to."""
    import re

    from sklearn.linear_model import LogisticRegression

    import sklmoo

    doc, reference = getattr(sklmoo, name).__doc__, LogisticRegression.__doc__
    assert len(doc.split()) <= len(reference.split())
    assert len(doc.splitlines()) <= len(reference.splitlines())
    assert ":ref:`" in doc
    for pattern in (r"docs/benchmarks", r"\bcommit\b", r"\b[0-9a-f]{7,40}\b", r"\d\.\d{3}",
                    r"\bprevious\b", r"\bearlier\b", r"\blooser\b"):
        assert not re.search(pattern, doc), (name, pattern)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_inherited_skorch_methods_users_call_have_sklmoo_docstrings(name):
    import sklmoo

    cls = getattr(sklmoo, name)
    for method in ("save_params", "load_params", "partial_fit", "fit", "get_params"):
        assert getattr(cls, method).__module__.startswith("sklmoo"), (name, method)
    assert "NeuralNetClassifier" not in inspect.getdoc(cls.save_params)


def test_regressor_methods_say_nothing_of_classes_or_draws():
    from sklmoo import MTSGDRegressor

    assert "classes" not in inspect.signature(MTSGDRegressor.partial_fit).parameters
    assert "classes" not in inspect.getdoc(MTSGDRegressor.partial_fit)
    assert "draw" not in inspect.getdoc(MTSGDRegressor.load_params)
    assert "draw" not in inspect.getdoc(MTSGDRegressor.save_params)

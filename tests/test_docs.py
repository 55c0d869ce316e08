"""Every public object has a docstring with a runnable example (the doctests themselves run
through ``--doctest-modules``)."""

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

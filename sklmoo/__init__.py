"""sklmoo: scikit-learn estimators for multi-target (MT-SGD) and learned SG-MCMC (L2E) sampling.

The estimators are imported lazily, so that ``import sklmoo.samplers`` (pure torch) does not
pull in scikit-learn or skorch.
"""

__version__ = "0.1.0.dev0"

_ESTIMATORS = {"MTSGDMultiTaskClassifier": "sklmoo.estimators",
               "MTSGDRegressor": "sklmoo.estimators",
               "L2ESamplerClassifier": "sklmoo.estimators"}

__all__ = sorted(_ESTIMATORS)


def __getattr__(name):
    if name in _ESTIMATORS:
        import importlib

        return getattr(importlib.import_module(_ESTIMATORS[name]), name)
    raise AttributeError(f"module 'sklmoo' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)

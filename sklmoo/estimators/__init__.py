"""scikit-learn / skorch estimators."""

from ._l2e_classifier import L2ESamplerClassifier
from ._multitask import MTSGDMultiTaskClassifier
from ._regressor import MTSGDRegressor

__all__ = ["L2ESamplerClassifier", "MTSGDMultiTaskClassifier", "MTSGDRegressor"]

"""scikit-learn / skorch estimators, and the validation split and early stopping they use."""

from ._l2e_classifier import L2ESamplerClassifier
from ._multitask import MTSGDMultiTaskClassifier
from ._regressor import MTSGDRegressor
from ._validation import RestoreBestEarlyStopping, ValidationSplit

__all__ = ["L2ESamplerClassifier", "MTSGDMultiTaskClassifier", "MTSGDRegressor",
           "RestoreBestEarlyStopping", "ValidationSplit"]

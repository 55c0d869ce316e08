"""scikit-learn / skorch estimators."""

from ._multitask import MTSGDMultiTaskClassifier

__all__ = ["MTSGDMultiTaskClassifier"]

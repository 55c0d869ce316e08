"""Calibration metrics, scikit-learn scorers and displays, for classifiers and regressors."""

from ._calibration import (brier_score, classwise_calibration_error, expected_calibration_error,
                           negative_log_likelihood, pairwise_kl_diversity)
from ._regression import gaussian_nll, interval_coverage, miscalibration_area
from ._regression_display import RegressionCalibrationDisplay
from ._reliability import ReliabilityDiagramDisplay
from ._uncertainty import entropy_decomposition
from ._scorers import (CalibrationScorer, RegressionScorer, brier_scorer, ece_scorer,
                       gaussian_nll_scorer, make_calibration_scorer, make_regression_scorer,
                       miscalibration_area_scorer, nll_scorer)

__all__ = [
    "expected_calibration_error", "classwise_calibration_error", "brier_score",
    "negative_log_likelihood", "pairwise_kl_diversity", "make_calibration_scorer",
    "CalibrationScorer", "ece_scorer", "brier_scorer", "nll_scorer",
    "ReliabilityDiagramDisplay", "entropy_decomposition",
    "gaussian_nll", "interval_coverage", "miscalibration_area", "make_regression_scorer",
    "RegressionScorer", "gaussian_nll_scorer", "miscalibration_area_scorer",
    "RegressionCalibrationDisplay", "multitask_accuracy_score", "multitask_accuracy_scorer",
    "per_task_scorer",
]

# the multi-task scorers are built on scikit-learn's make_scorer / get_scorer: imported on first
# use, so that the metrics (and sklmoo.diagnostics above them) stay importable without
# scikit-learn
_LAZY = {"multitask_accuracy_score", "multitask_accuracy_scorer", "per_task_scorer"}


def __getattr__(name):
    if name in _LAZY:
        from . import _multitask

        return getattr(_multitask, name)
    raise AttributeError(f"module 'sklmoo.metrics' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))

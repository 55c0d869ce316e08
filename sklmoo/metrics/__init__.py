"""Calibration metrics, scikit-learn scorers and the reliability diagram."""

from ._calibration import (brier_score, classwise_calibration_error, expected_calibration_error,
                           negative_log_likelihood, pairwise_kl_diversity)
from ._reliability import ReliabilityDiagramDisplay
from ._uncertainty import entropy_decomposition
from ._scorers import (CalibrationScorer, brier_scorer, ece_scorer, make_calibration_scorer,
                       nll_scorer)

__all__ = [
    "expected_calibration_error", "classwise_calibration_error", "brier_score",
    "negative_log_likelihood", "pairwise_kl_diversity", "make_calibration_scorer",
    "CalibrationScorer", "ece_scorer", "brier_scorer", "nll_scorer",
    "ReliabilityDiagramDisplay", "entropy_decomposition",
]

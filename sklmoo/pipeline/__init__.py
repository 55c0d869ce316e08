"""Pipelines that also forward sklmoo's uncertainty methods to the final estimator."""

from ._pipeline import FORWARDED_METHODS, Pipeline, make_pipeline

__all__ = ["Pipeline", "make_pipeline", "FORWARDED_METHODS"]

"""Offline data sets and toy target densities."""

from ._inverse_dynamics import inverse_dynamics_torques, make_inverse_dynamics
from ._multi_digits import make_multi_digits
from ._toy_targets import (ZDT3_BOUNDS, ZDT3_FRONT_SEGMENTS, GaussianMixture,
                           gaussian_mixture_statistics, make_gaussian_mixture_targets, make_zdt3_targets, zdt3_g,
                           zdt3_objectives, zdt3_pareto_front, zdt3_segment)

__all__ = [
    "make_multi_digits", "make_inverse_dynamics", "inverse_dynamics_torques",
    "GaussianMixture", "make_gaussian_mixture_targets", "gaussian_mixture_statistics", "make_zdt3_targets", "zdt3_g",
    "zdt3_objectives", "zdt3_pareto_front", "zdt3_segment", "ZDT3_BOUNDS", "ZDT3_FRONT_SEGMENTS",
]

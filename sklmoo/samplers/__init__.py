"""Pure-torch particle samplers: kernels, simplex QP, SVGD, MT-SGD, MOO-SVGD, MGDA.

Nothing here imports scikit-learn or skorch.
"""

from ._kernels import RBFKernel, pairwise_sq_dists
from ._sampling import METHODS, SamplingResult, make_direction_rule, sample_multi_target, scores_of
from ._simplex_qp import min_norm_weights, project_to_simplex
from ._stein import MGDA, MOOSVGD, MTSGD, SVGD, DirectionInfo, LinearScalarization, stein_gram

__all__ = [
    "RBFKernel", "pairwise_sq_dists", "min_norm_weights", "project_to_simplex",
    "stein_gram", "DirectionInfo", "SVGD", "MTSGD", "MOOSVGD", "MGDA", "LinearScalarization",
    "METHODS", "make_direction_rule", "sample_multi_target", "scores_of", "SamplingResult",
]

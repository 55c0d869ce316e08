"""Pure-torch samplers: kernels, simplex QP, SVGD, MT-SGD, MOO-SVGD, MGDA, SGHMC, L2E.

Nothing here imports scikit-learn or skorch.
"""

from ._l2e import L2E, L2EState, MetaSampler, l2e_features, meta_mlp
from ._kernels import (LogDensityRBFKernel, PrecomputedKernel, RBFKernel, SteinKernelTerms,
                       pairwise_sq_dists)
from ._sampling import MULTI_TARGET_METHODS, METHODS, SamplingResult, make_direction_rule, sample_multi_target, scores_of
from ._optim import ParameterAverage, SamplerOptimizer
from ._registry import DEFAULT_STEP_SIZES, SGMCMC_SAMPLERS, make_sgmcmc
from ._sgmcmc import SGHMC, CyclicalSGHMC, SGHMCState
from ._simplex_qp import min_norm_weights, project_to_simplex
from ._stein import (MGDA, MOOSVGD, MTSGD, SVGD, TASK_NORMALIZATIONS, DirectionInfo,
                     LinearScalarization, normalize_task_scores, stein_gram)

__all__ = [
    "RBFKernel", "LogDensityRBFKernel", "PrecomputedKernel", "MULTI_TARGET_METHODS", "SteinKernelTerms", "pairwise_sq_dists", "min_norm_weights", "project_to_simplex",
    "stein_gram", "normalize_task_scores", "TASK_NORMALIZATIONS", "DirectionInfo", "SVGD", "MTSGD", "MOOSVGD", "MGDA", "LinearScalarization",
    "METHODS", "SamplerOptimizer", "ParameterAverage", "SGMCMC_SAMPLERS", "DEFAULT_STEP_SIZES", "make_sgmcmc", "SGHMC", "CyclicalSGHMC", "SGHMCState", "L2E", "L2EState", "MetaSampler",
    "l2e_features", "meta_mlp", "make_direction_rule", "sample_multi_target", "scores_of", "SamplingResult",
]

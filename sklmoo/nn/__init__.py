"""Particle ensembles of networks, batched with torch.func (no sklearn / skorch here)."""

from ._ensemble import (LinearLogits, LinearMean, MultiTaskParticleNet, StackedGaussianHead, StackedLinear, StackedModules, flatten_particles,
                        member_factory, unflatten_like)
from ._chains import ChainEnsemble, SampleStore, TrunkClassifier
from ._feature_noise import fit_feature_noise
from ._function_kernel import function_space_terms
from ._kernel_mean import KernelMean
from ._multitask_update import (METHODS, FunctionSpace, StepInfo, make_update_rules,
                               multitask_particle_step)
from ._trunks import LeNetTrunk, MLPTrunk

__all__ = ["StackedModules", "StackedLinear", "StackedGaussianHead", "LinearMean", "LinearLogits", "KernelMean", "MultiTaskParticleNet", "member_factory",
           "flatten_particles", "unflatten_like", "MLPTrunk", "LeNetTrunk", "METHODS", "make_update_rules",
           "multitask_particle_step", "FunctionSpace", "StepInfo", "function_space_terms", "fit_feature_noise", "ChainEnsemble", "SampleStore", "TrunkClassifier"]

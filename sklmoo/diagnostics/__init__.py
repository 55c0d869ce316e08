"""MCMC convergence diagnostics (pure numpy / scipy): rank-normalised split-R-hat and bulk ESS
(Vehtari et al., 2021), and their function-space form for samplers of neural networks."""

from ._convergence import ess_bulk, function_space_diagnostics, rhat

__all__ = ["rhat", "ess_bulk", "function_space_diagnostics"]

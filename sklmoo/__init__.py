"""sklmoo: scikit-learn estimators for multi-target and learned SG-MCMC sampling."""

__version__ = "0.1.0.dev0"

"""One registry of SG-MCMC sampler names with a factory (laplace-torch's enum style)."""

from ._l2e import L2E
from ._sgmcmc import SGHMC, CyclicalSGHMC, check_sampler_settings, time_step

#: SG-MCMC samplers by name: 'l2e' (meta-learned), 'sghmc', 'csgmcmc' (cyclical SGHMC)
SGMCMC_SAMPLERS = ("l2e", "sghmc", "csgmcmc")

#: step size each sampler uses when none is given: L2E's is the one it was meta-trained at;
#: the SGHMC ones are the middle of the grid tuned in docs/benchmarks/l2e_classifier.md
DEFAULT_STEP_SIZES = {"l2e": 1.0, "sghmc": 0.03, "csgmcmc": 0.1}

#: per-step momentum decay (epsilon * friction) of the SGHMC samplers when no friction is given:
#: momentum 0.9, as in SGD. (L2E's default friction is its meta-training value, 0.1.)
DEFAULT_MOMENTUM_DECAY = 0.1


def make_sgmcmc(name, *, n_data, step_size=None, friction=None, temperature=1.0,
                weight_decay=0.0, meta=None, n_steps=None, n_cycles=4, batch_dims=0):
    """Build the sampler called ``name`` (one of :data:`SGMCMC_SAMPLERS`).

    ``meta`` (a :class:`MetaSampler`) is required for ``'l2e'``; ``n_steps`` (the length the
    cosine schedule spans) for ``'csgmcmc'``. ``step_size=None`` takes
    :data:`DEFAULT_STEP_SIZES`.

    Examples
    --------
    >>> from sklmoo.samplers import make_sgmcmc
    >>> type(make_sgmcmc("sghmc", n_data=100)).__name__
    'SGHMC'
    """
    if name not in SGMCMC_SAMPLERS:
        raise ValueError(f"sampler must be one of {SGMCMC_SAMPLERS}, got {name!r}")
    step = DEFAULT_STEP_SIZES[name] if step_size is None else step_size
    # before the default friction divides by them: the sampler's own message
    check_sampler_settings(step, n_data, 0.0 if friction is None else friction, temperature,
                           weight_decay)
    if friction is None:
        friction = 0.1 if name == "l2e" else DEFAULT_MOMENTUM_DECAY / time_step(step, n_data)
    common = dict(friction=friction, temperature=temperature, weight_decay=weight_decay)
    if name == "l2e":
        if meta is None:
            raise ValueError("the 'l2e' sampler needs meta-parameters (meta=MetaSampler)")
        return L2E(meta, step, n_data, batch_dims=batch_dims, **common)
    if name == "csgmcmc":
        if n_steps is None:
            raise ValueError("the 'csgmcmc' sampler needs n_steps (the schedule's length)")
        return CyclicalSGHMC(step, n_data, n_steps=n_steps, n_cycles=n_cycles, **common)
    return SGHMC(step, n_data, **common)

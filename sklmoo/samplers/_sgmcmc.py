"""SG-MCMC transitions as small functional transforms: ``init(params) -> state``,
``update(state, grads) -> state`` (posteriors / optax style).

``params`` is a tensor or a dict of tensors (a flat "tree"); ``grads`` has the same structure
and holds the gradient of the *mean* mini-batch loss (plus any prior term divided by N), so
``N * grads`` estimates the gradient of the potential :math:`U(\\theta) = -\\log p(\\theta|D)`.
Leading ``batch_dims`` axes of every tensor index independent chains.
"""

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import torch


def as_tree(params):
    """A tensor becomes ``{'': tensor}``; a dict is returned as is."""
    if torch.is_tensor(params):
        return {"": params}
    if isinstance(params, dict) and all(torch.is_tensor(v) for v in params.values()):
        return dict(params)
    raise TypeError("params must be a tensor or a dict of tensors")


def all_finite(x):
    """Whether every entry of ``x`` is finite: one reduction first (a finite sum means every
    entry is; one inf or NaN makes it inf or NaN), the entry-wise test only when the sum is not
    finite (a sum of finite entries can still overflow). One host synchronisation when all
    are finite."""
    if torch.isfinite(x.sum()):
        return True
    return bool(torch.isfinite(x).all())


def checked_gradients(params, grads, step):
    """``grads`` as a tree matching ``params`` key by key and shape by shape, all finite.

    Raises ``TypeError`` for a parameter that is not floating point, ``ValueError`` for a
    missing key or a shape that would only broadcast, and ``FloatingPointError`` naming the
    tensor and the step for NaN / inf (one NaN would
    otherwise spread through the whole tensor and, in L2E, stay in the running means). One
    host synchronisation for all of them when they are finite (their sums first, as
    :func:`checked_state`)."""
    g = as_tree(grads)
    for k, theta in params.items():
        if not theta.is_floating_point():
            raise TypeError(f"parameter {k!r} holds {theta.dtype} values: the samplers move "
                            "floating-point tensors")
        if k not in g:
            raise ValueError(f"no gradient for parameter {k!r}")
        if g[k].shape != theta.shape:
            raise ValueError(f"gradient for {k!r} has shape {tuple(g[k].shape)}, the parameter "
                             f"{tuple(theta.shape)}")
    # in float32 whatever the tensors' types (a sum beyond its range is checked entry-wise);
    # the sum of the sums read once (torch.isfinite and all: five operations more a step)
    if params and math.isfinite(torch.stack([g[k].sum().float() for k in params]).sum().item()):
        return g
    for k in params:
        if not all_finite(g[k]):
            raise FloatingPointError(f"non-finite gradient for {k!r} at step {step}")
    return g


def checked_state(params, momentum, step):
    """``FloatingPointError`` naming the first parameter whose new value or momentum after
    ``step`` is NaN or inf (a parameter given that was not finite, or a transition that
    overflowed); one host synchronisation for all of them."""
    sums = torch.stack([params[k].sum() + momentum[k].sum() for k in params])
    if torch.isfinite(sums).all():
        return
    for k in params:
        if not (all_finite(params[k]) and all_finite(momentum[k])):
            name = f"parameter {k!r}" if k else "the parameter"
            raise FloatingPointError(
                f"{name} is NaN or inf after step {step}: a parameter given was not "
                "finite, or the transition overflowed (lower step_size, or scale the loss)")


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_sampler_settings(step_size, n_data, friction, temperature, weight_decay):
    """Reject settings that would give a silent NaN or a meaningless chain."""
    for name, value in (("step_size", step_size), ("n_data", n_data)):
        if not (_is_real(value) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    for name, value in (("friction", friction), ("temperature", temperature),
                        ("weight_decay", weight_decay)):
        if not (_is_real(value) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite non-negative number, got {value!r}")


def like_input(tree, template):
    """Undo :func:`as_tree` for outputs shaped like ``template``."""
    return tree[""] if torch.is_tensor(template) else tree


def _noise(x, generator):
    """Standard normal noise shaped like ``x``. ``generator`` may be one torch generator or a
    sequence of them, one per slice of ``x``'s leading (chain) dimension: every chain then has
    its own noise stream, and chains batched together draw exactly what they would draw run
    one by one."""
    if isinstance(generator, (list, tuple)):
        if len(generator) != x.shape[0]:
            raise ValueError(f"{len(generator)} noise generators for {x.shape[0]} chains")
        return torch.stack([torch.randn(x.shape[1:], dtype=x.dtype, device=x.device, generator=g)
                            for g in generator])
    return torch.randn(x.shape, dtype=x.dtype, device=x.device, generator=generator)


def time_step(step_size, n_data):
    r""":math:`\epsilon = \sqrt{\text{step\_size}/N}`, the L2E code's parametrisation."""
    return math.sqrt(step_size / n_data)


def add_thermal_noise(r, friction, eps, temperature, generator=None):
    r"""``r + sqrt(2 a eps T) xi`` with :math:`\xi\sim\mathcal N(0, I)`; ``r`` unchanged at T = 0."""
    if temperature > 0:
        return r + math.sqrt(2 * friction * eps * temperature) * _noise(r, generator)
    return r


@dataclass
class SGHMCState:
    """State of an SGHMC chain: parameters, momentum and step count.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import SGHMC
    >>> state = SGHMC(step_size=0.1, n_data=100).init({"w": torch.zeros(3)})
    >>> state.momentum["w"], state.step
    (tensor([0., 0., 0.]), 0)
    """

    params: Any
    momentum: Any
    step: int = 0


class SGHMC:
    r"""Stochastic-gradient Hamiltonian Monte Carlo (Chen et al., 2014; Eq. 2 of the L2E paper),
    in the discretisation of the L2E code with a Gaussian kinetic energy:

    .. math::

        r &\leftarrow r - \epsilon\,(N g + a\, r) + \sqrt{2 a \epsilon T}\,\xi, \\
        \theta &\leftarrow \theta + \epsilon\, r,

    with :math:`\epsilon = \sqrt{\text{step\_size}/N}`, friction :math:`a`, temperature
    :math:`T` and :math:`\xi \sim \mathcal N(0, I)`. (The L2E code's ``noise_mult`` is
    :math:`\epsilon T`.)

    Parameters
    ----------
    step_size : float, default=1.0
        The L2E code's ``step_mult``; :math:`\epsilon = \sqrt{\text{step\_size}/N}`.
    n_data : int
        N, the training-set size.
    friction : float, default=0.1
    temperature : float, default=1.0
        0 gives deterministic momentum descent.
    weight_decay : float, default=0.0
        Adds ``weight_decay * theta`` to the mean-loss gradient (a Gaussian prior / N).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import SGHMC
    >>> sampler = SGHMC(step_size=0.01, n_data=1, temperature=0.0)
    >>> state = sampler.init(torch.tensor([3.0]))
    >>> for _ in range(2000):
    ...     state = sampler.update(state, state.params)  # U = theta^2 / 2
    >>> bool(abs(float(state.params)) < 0.1)
    True
    """

    def __init__(self, step_size=1.0, n_data=1, *, friction=0.1, temperature=1.0,
                 weight_decay=0.0):
        check_sampler_settings(step_size, n_data, friction, temperature, weight_decay)
        self.step_size = step_size
        self.n_data = n_data
        self.friction = friction
        self.temperature = temperature
        self.weight_decay = weight_decay

    def epsilon(self, step):
        """The time step :math:`\\epsilon` used at ``step`` (constant here)."""
        return time_step(self.step_size, self.n_data)

    def temperature_at(self, step):
        return self.temperature

    def init(self, params):
        """Zero momentum for ``params`` (tensor or dict of tensors)."""
        tree = as_tree(params)
        return SGHMCState(params=params,
                          momentum=like_input({k: torch.zeros_like(v) for k, v in tree.items()},
                                              params))

    def update(self, state, grads, generator=None, check_state=True):
        """One transition given the mean-loss gradients at ``state.params``: a
        ``FloatingPointError`` for a non-finite gradient and, with ``check_state``, for a new
        parameter or momentum that is NaN or inf (a caller that tracks diverging chains
        itself, as meta-training does, passes False)."""
        params, momentum = as_tree(state.params), as_tree(state.momentum)
        g = checked_gradients(params, grads, state.step)
        eps = self.epsilon(state.step)
        temp = self.temperature_at(state.step)
        a, n = self.friction, self.n_data
        new_p, new_r = {}, {}
        for k, theta in params.items():
            grad = g[k] + self.weight_decay * theta
            r = momentum[k] - eps * (n * grad + a * momentum[k])
            new_r[k] = r = add_thermal_noise(r, a, eps, temp, generator)
            new_p[k] = theta + eps * r
        if check_state:
            checked_state(new_p, new_r, state.step)
        return SGHMCState(params=like_input(new_p, state.params),
                          momentum=like_input(new_r, state.params), step=state.step + 1)


class CyclicalSGHMC(SGHMC):
    r"""Cyclical SG-MCMC (Zhang et al., 2020) on the SGHMC transition.

    The step size follows a cosine schedule restarted every cycle,
    :math:`s_k = \frac{s_0}{2}[\cos(\pi\, \mathrm{mod}(k, L)/L) + 1]` with
    :math:`L = \lceil K / \text{n\_cycles} \rceil`; during the first ``exploration_fraction`` of
    each cycle the chain runs without noise (exploration), afterwards at ``temperature``
    (sampling): collect samples from the sampling phases.

    Parameters
    ----------
    n_steps : int
        Total number of steps K the schedule spans.
    n_cycles : int, default=4
    exploration_fraction : float, default=0.8
    Other parameters as :class:`SGHMC`.

    Examples
    --------
    >>> from sklmoo.samplers import CyclicalSGHMC
    >>> s = CyclicalSGHMC(step_size=1.0, n_data=1, n_steps=100, n_cycles=2)
    >>> round(s.epsilon(0) ** 2, 3), round(s.epsilon(25) ** 2, 3), s.temperature_at(45)
    (1.0, 0.5, 1.0)
    """

    def __init__(self, step_size=1.0, n_data=1, *, n_steps, n_cycles=4,
                 exploration_fraction=0.8, friction=0.1, temperature=1.0, weight_decay=0.0):
        super().__init__(step_size, n_data, friction=friction, temperature=temperature,
                         weight_decay=weight_decay)
        for name, value in (("n_steps", n_steps), ("n_cycles", n_cycles)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0 <= exploration_fraction < 1:
            raise ValueError(f"exploration_fraction must be in [0, 1), got "
                             f"{exploration_fraction!r}")
        self.n_steps = n_steps
        self.n_cycles = n_cycles
        self.exploration_fraction = exploration_fraction
        length = math.ceil(n_steps / n_cycles)
        if (length - 1) / length < exploration_fraction:
            warnings.warn(f"cycles of {length} step(s) (n_steps={n_steps}, n_cycles={n_cycles}) "
                          f"never reach the sampling phase (the last "
                          f"{1 - exploration_fraction:.0%} of a cycle): every step explores, "
                          "at temperature 0; raise n_steps or lower n_cycles", UserWarning,
                          stacklevel=2)

    def _phase(self, step):
        length = math.ceil(self.n_steps / self.n_cycles)
        return (step % length) / length

    def epsilon(self, step):
        s = self.step_size / 2 * (math.cos(math.pi * self._phase(step)) + 1)
        return time_step(s, self.n_data)

    def temperature_at(self, step):
        return 0.0 if self._phase(step) < self.exploration_fraction else self.temperature

    def is_sampling(self, step):
        """Whether ``step`` lies in a sampling phase (collect samples there)."""
        return self._phase(step) >= self.exploration_fraction

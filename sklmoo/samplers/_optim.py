"""A functional SG-MCMC transition driven through the ``torch.optim.Optimizer`` interface."""

import dataclasses

import torch

from ._sgmcmc import checked_gradients

#: devices with a fused Adam (torch has one for CPU tensors since 2.4)
FUSED_ADAM_DEVICES = ("cpu", "cuda") if torch.__version__ >= "2.4" else ("cuda",)


def grad_like(param, grad):
    """``grad`` with ``param``'s strides (a copy when they differ). torch's fused Adam reads a
    gradient's memory in its parameter's order whatever the gradient's strides (on the CPU,
    torch 2.13: silently wrong steps); an autograd gradient of a weight used transposed has the
    transposed strides. ``backward()`` lays a gradient out like its parameter; a gradient
    assigned to ``.grad`` must be laid out so too."""
    return grad if grad.stride() == param.stride() else torch.empty_like(param).copy_(grad)


class SamplerOptimizer(torch.optim.Optimizer):
    """Run a functional sampler (``init`` / ``update``, e.g. :class:`SGHMC` or :class:`L2E`) as a
    ``torch.optim.Optimizer``: ``step()`` reads the gradients in ``.grad`` (of the *mean*
    mini-batch loss), applies one ``sampler.update`` and writes the new parameters in place.

    The sampler's state (momentum, running gradient means, step count) lives in the optimiser's
    ``state`` / ``param_groups``, so ``state_dict`` / ``load_state_dict`` (and anything built on
    them, such as skorch's ``save_params(f_optimizer=...)`` and ``Checkpoint``) continue a chain
    exactly, including its noise generator.

    Non-finite gradients are refused at every step (``FloatingPointError`` naming the tensor);
    the new parameters are not checked every step (a host synchronisation each): check them
    where the training loop can act on it, e.g. at each epoch's end, as sklmoo's estimators do.

    Parameters
    ----------
    named_params : iterable of (str, Parameter)
        The tensors the sampler moves; the names are the keys of the sampler's parameter dict.
    sampler : object with ``init(params)`` and ``update(state, grads, generator)``
        May be replaced between steps (:meth:`set_sampler`) with one whose state has the same
        fields. The param group's ``'lr'`` is the sampler's ``step_size``: a torch (or skorch)
        learning-rate scheduler that changes it schedules the step size.
    seed : int, optional
        Seeds the generator of the sampler's noise (on the parameters' device).

    Notes
    -----
    :meth:`set_warmup` makes the first steps plain Adam steps on the mean loss (an optimised
    burn-in); the sampler then starts from where they end, with its fresh initial state.

    Raises
    ------
    FloatingPointError
        From ``step`` when a gradient is non-finite (naming the tensor and the step); the
        parameters are then left unchanged.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import SGHMC, SamplerOptimizer
    >>> theta = torch.nn.Parameter(torch.tensor([3.0]))
    >>> opt = SamplerOptimizer([("theta", theta)], SGHMC(0.01, n_data=1, temperature=0.0))
    >>> for _ in range(2000):
    ...     opt.zero_grad()
    ...     (0.5 * theta ** 2).sum().backward()
    ...     _ = opt.step()
    >>> bool(abs(float(theta.detach())) < 0.1)
    True
    """

    def __init__(self, named_params, sampler, seed=None):
        named = list(named_params)
        if not named:
            raise ValueError("SamplerOptimizer got no parameters")
        super().__init__([p for _, p in named], {"sampler_step": 0, "lr": None})
        self.names = [n for n, _ in named]
        self.warmup = None
        self.warmup_steps = 0
        self.set_sampler(sampler)
        device = named[0][1].device
        self.generator = torch.Generator(device=device)
        if seed is not None:
            self.generator.manual_seed(int(seed))
        else:
            self.generator.seed()

    def set_sampler(self, sampler):
        """Use ``sampler`` from the next step on; the param group's ``'lr'`` becomes its step
        size."""
        self.sampler = sampler
        self.param_groups[0]["lr"] = getattr(sampler, "step_size", None)
        return self

    def set_warmup(self, n_steps, lr=1e-3, weight_decay=0.0):
        """Make the next ``n_steps`` steps Adam steps (``lr``; ``weight_decay``: the prior's
        precision over the data size, the L2 term of the mean loss), counted as sampler steps;
        the sampler takes over after them. ``n_steps=0`` removes a pending warm-up. Adam is
        torch's fused implementation where the parameters' device has one (CUDA; CPU from
        torch 2.4): the same steps up to rounding, in one kernel for all tensors."""
        start = int(self.param_groups[0]["sampler_step"])
        self.warmup_steps = start + int(n_steps)
        params = self._params()
        fused = params[0].device.type in FUSED_ADAM_DEVICES
        self.warmup = (torch.optim.Adam(params, lr=lr, weight_decay=weight_decay,
                                        fused=fused or None)
                       if n_steps > 0 else None)
        return self

    def _params(self):
        return self.param_groups[0]["params"]

    def _current_state(self, tree):
        """The sampler's state object for ``tree``, from the stored per-parameter state (a
        fresh ``sampler.init`` when none is stored or the sampler's state has other fields)."""
        step = int(self.param_groups[0]["sampler_step"])
        params = self._params()
        kind, cls, fields = getattr(self, "_state_layout", (None, None, ()))
        if kind is not type(self.sampler) or not all(f in self.state[p] for p in params for f in fields):
            template = self.sampler.init(tree)
            cls = type(template)
            fields = tuple(f.name for f in dataclasses.fields(template)
                           if f.name not in ("params", "step"))
            self._state_layout = (type(self.sampler), cls, fields)
            if not all(f in self.state[p] for p in params for f in fields):
                return dataclasses.replace(template, step=step)
        stored = {f: {n: self.state[p][f] for n, p in zip(self.names, params)} for f in fields}
        return cls(params=tree, step=step, **stored)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        group = self.param_groups[0]
        params = self._params()
        grads = {name: torch.zeros_like(p) if p.grad is None else p.grad
                 for name, p in zip(self.names, params)}
        if self.warmup is not None and group["sampler_step"] < self.warmup_steps:
            # the sampler's own check, before Adam moves anything
            checked_gradients(dict(zip(self.names, params)), grads, int(group["sampler_step"]))
            for p in params:                    # a fused Adam needs them laid out like p
                if p.grad is not None:
                    p.grad = grad_like(p, p.grad)
            self.warmup.step()
            group["sampler_step"] += 1
            if group["sampler_step"] >= self.warmup_steps:
                self.warmup = None               # its moments are not needed any more
            return loss
        if group["lr"] is not None and group["lr"] != getattr(self.sampler, "step_size", None):
            self.sampler.step_size = float(group["lr"])     # set by an LR scheduler
        # the sampler rejects non-finite gradients (naming the tensor) before anything moves;
        # the new state is not checked every step (one more host synchronisation): an
        # estimator checks its parameters at each epoch's end
        state = self._current_state({n: p.detach() for n, p in zip(self.names, params)})
        new = self.sampler.update(state, grads, generator=self.generator, check_state=False)
        for name, p in zip(self.names, params):
            p.copy_(new.params[name])
            for f in self._state_layout[2]:
                self.state[p][f] = getattr(new, f)[name]
        group["sampler_step"] = new.step
        return loss

    def __getstate__(self):
        # torch's Optimizer pickles only defaults / state / param_groups: keep what the chain
        # needs to continue exactly (names, sampler, noise generator) in a copy or a pickle too
        state = super().__getstate__()
        state.update(names=list(self.names), sampler=self.sampler, warmup=self.warmup,
                     warmup_steps=self.warmup_steps,
                     generator_device=str(self.generator.device),
                     generator_state=self.generator.get_state())
        return state

    def __setstate__(self, state):
        state = dict(state)
        gen_device = state.pop("generator_device", "cpu")
        gen_state = state.pop("generator_state", None)
        state.setdefault("warmup", None)         # pickled before the Adam burn-in existed
        state.setdefault("warmup_steps", 0)
        super().__setstate__(state)
        self.generator = torch.Generator(device=gen_device)
        if gen_state is not None:
            self.generator.set_state(gen_state)

    def state_dict(self):
        out = super().state_dict()
        out["generator_state"] = self.generator.get_state()
        return out

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        gen = state_dict.pop("generator_state", None)
        super().load_state_dict(state_dict)
        if gen is not None:
            self.generator.set_state(gen.cpu() if self.generator.device.type == "cpu" else gen)


class ParameterAverage:
    """An exponential moving average of tensors that an optimiser moves (Polyak averaging), to
    evaluate and keep the averaged values instead of the last iterate.

    After ``k`` calls of :meth:`update` the average is the values seen at those calls weighted
    by ``decay ** (k - i)`` (call ``i``), normalised: the bias-corrected moving average of Adam's
    moments, so that a short run is not averaged towards the tensors' starting values (the
    average starts at the first update). :meth:`swap` exchanges the tensors' values with the
    averages' in place (the optimiser keeps its parameters and its state).

    Parameters
    ----------
    tensors : list of Tensor
        The tensors averaged: their values at each :meth:`update` (the average is held in
        their dtype and on their device).
    decay : float
        In [0, 1): each update's values weigh ``decay`` times the next update's.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import ParameterAverage
    >>> p = torch.zeros(2)
    >>> average = ParameterAverage([p], decay=0.9)
    >>> for value in (1.0, 2.0):
    ...     _ = p.fill_(value)
    ...     average.update()
    >>> average.average[0]                  # (0.9 * 1 + 2) / 1.9
    tensor([1.5263, 1.5263])
    >>> average.swap()
    >>> p
    tensor([1.5263, 1.5263])
    """

    def __init__(self, tensors, decay):
        decay = float(decay)
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}")
        self.tensors = [t.detach() for t in tensors]
        self.decay = decay
        self.average = [t.clone() for t in self.tensors]
        self.n_updates = 0

    def update(self):
        """Move the average towards the tensors' current values."""
        self.n_updates += 1
        k = self.n_updates
        # a_k = d_k a_(k-1) + (1 - d_k) p_k with d_k = decay (1 - decay^(k-1)) / (1 - decay^k)
        weight = 1.0 - self.decay * (1.0 - self.decay ** (k - 1)) / (1.0 - self.decay ** k)
        if self.tensors:
            torch._foreach_lerp_(self.average, self.tensors, weight)

    def swap(self):
        """Exchange the tensors' values and the averages' in place."""
        for tensor, average in zip(self.tensors, self.average):
            held = tensor.clone()
            tensor.copy_(average)
            average.copy_(held)

"""Driver: move a particle set toward K log-densities with any direction rule."""

from dataclasses import dataclass, field
from typing import List

import math

import numpy as np
import torch

from ._optim import grad_like
from ._stein import MGDA, MOOSVGD, MTSGD, SVGD, TASK_NORMALIZATIONS, LinearScalarization

#: the multi-target update rules (the MT-SGD paper's method and its baselines), one registry for
#: the samplers, the network update, the estimators, the demo and the benchmarks
MULTI_TARGET_METHODS = ("mtsgd", "moo_svgd", "mgda", "linear")
#: every direction rule by name: the multi-target ones and single-target SVGD
METHODS = MULTI_TARGET_METHODS + ("svgd",)


def make_direction_rule(method, kernel=None, repulsion=1.0, task_normalization="none",
                        normalize_drive=True):
    """The direction rule object for a method name (see :data:`METHODS`); every rule rescales
    the scores by ``task_normalization`` first (see :func:`normalize_task_scores`).

    Examples
    --------
    >>> from sklmoo.samplers import make_direction_rule
    >>> type(make_direction_rule("mtsgd", repulsion=0.5)).__name__
    'MTSGD'
    """
    norm = dict(task_normalization=task_normalization, normalize_drive=normalize_drive)
    if method == "mtsgd":
        return MTSGD(kernel=kernel, repulsion=repulsion, **norm)
    if method == "svgd":
        return SVGD(kernel=kernel, repulsion=repulsion, **norm)
    if method == "moo_svgd":
        return MOOSVGD(kernel=kernel, repulsion=repulsion, **norm)
    if method == "mgda":
        return MGDA(**norm)
    if method == "linear":       # fixed weights: only the drive can be rescaled
        return LinearScalarization(
            task_normalization=task_normalization if normalize_drive else "none")
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


@dataclass
class SamplingResult:
    """Output of :func:`sample_multi_target`.

    Attributes
    ----------
    particles : Tensor (M, d)
        Final particles (detached).
    trace : list of Tensor (M, d)
        Particles after every ``trace_every`` steps (empty unless ``trace=True``); the first entry
        is the initial set.
    weights : list of Tensor
        The rule's target weights at the traced steps.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import sample_multi_target
    >>> res = sample_multi_target([lambda t: -(t ** 2).sum(-1)], torch.randn(4, 2), n_steps=3)
    >>> res.particles.shape
    torch.Size([4, 2])
    """

    particles: torch.Tensor
    trace: List[torch.Tensor] = field(default_factory=list)
    weights: List[torch.Tensor] = field(default_factory=list)


def scores_of(log_probs, particles, return_log_probs=False):
    """Stack :math:`\\nabla_\\theta \\log p_k` of each callable at the particles -> (K, M, d).

    With ``return_log_probs=True`` also return the values :math:`\\log p_k` as (M, K).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import scores_of
    >>> x = torch.tensor([[1.0, 2.0]])
    >>> scores_of([lambda t: -(t ** 2).sum(-1) / 2], x)   # grad log N(0, I) = -x
    tensor([[[-1., -2.]]])
    """
    x = particles.detach().requires_grad_(True)
    grads, values = [], []
    for k, log_prob in enumerate(log_probs):
        value = log_prob(x)
        if value.shape != (x.shape[0],):
            raise ValueError(
                f"log_probs[{k}] must return shape ({x.shape[0]},) for {x.shape[0]} particles, "
                f"got {tuple(value.shape)}"
            )
        grads.append(torch.autograd.grad(value.sum(), x)[0])
        # a target computed in another precision must not change the particles' dtype
        values.append(value.detach().to(x.dtype))
    if return_log_probs:
        return torch.stack(grads), torch.stack(values, dim=1)
    return torch.stack(grads)


def _project_scores_to_box(scores, particles, bounds):
    # At an active box constraint a score component pointing out of the box cannot be followed;
    # left in, clipping undoes the move but the component still skews the min-norm weights.
    x = particles.detach()
    outward = ((x <= bounds[0])[None] & (scores < 0)) | ((x >= bounds[1])[None] & (scores > 0))
    return scores.masked_fill(outward, 0.0)


def _make_optimizer(optimizer, params, lr, optimizer_kwargs):
    kwargs = dict(optimizer_kwargs or {})
    if isinstance(optimizer, str):
        table = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}
        if optimizer not in table:
            raise ValueError(f"optimizer must be 'adam', 'sgd' or a torch optimizer class, "
                             f"got {optimizer!r}")
        optimizer = table[optimizer]
    return optimizer([params], lr=lr, **kwargs)


def sample_multi_target(log_probs, init, n_steps, *, method="mtsgd", optimizer="adam", lr=1e-2,
                        kernel=None, repulsion=1.0, task_normalization="none",
                        normalize_drive=True, bounds=None, trace=False, trace_every=1,
                        optimizer_kwargs=None):
    r"""Move particles toward several unnormalised densities at once.

    Each step computes the scores :math:`s_k = \nabla\log p_k` at every particle by autograd,
    asks the direction rule of ``method`` for :math:`\phi` (M, d), and hands :math:`-\phi` to the
    optimiser as the particles' gradient (plain SGD with ``lr=eps`` is
    :math:`\theta \leftarrow \theta + \epsilon\phi`).

    Parameters
    ----------
    log_probs : callable or sequence of callables
        ``log_prob_k(particles) -> (M,)`` differentiable in ``particles``; a single callable means
        one target (use ``method='svgd'``).
    init : Tensor (M, d)
        Initial particles; its dtype and device are kept (float32/float64, CPU or CUDA).
    n_steps : int
    method : {'mtsgd', 'moo_svgd', 'mgda', 'linear', 'svgd'}, default='mtsgd'
    optimizer : {'adam', 'sgd'} or torch.optim.Optimizer subclass, default='adam'
    lr : float, default=1e-2
    kernel : RBFKernel or LogDensityRBFKernel, optional
        Default ``RBFKernel('median')`` (on the parameters).
        ``LogDensityRBFKernel`` measures distances between the particles' log-density values
        instead (objective space, as MOO-SVGD does to profile Pareto fronts); the driver passes
        it the values. With ``bounds``, its Jacobian is the projected scores.
    repulsion : float, default=1.0
        Coefficient of the repulsive kernel-gradient term (kernel methods only).
    task_normalization : {'none', 'l2', 'loss', 'loss+'}, default='none'
        Rescale each target's score at each particle before the rule combines them
        (:func:`~sklmoo.samplers.normalize_task_scores`): ``'l2'`` to unit norm, ``'loss'`` /
        ``'loss+'`` by :math:`-\log p_k` (which must then not be negative). ``'none'`` samples the
        targets themselves; see the docs' math page for what the others sample.
    normalize_drive : bool, default=True
        With a ``task_normalization``: follow the rescaled scores (True) or take only the
        weights from them and follow the unscaled ones (False).
    bounds : (float, float), optional
        Box constraint (e.g. ZDT3's ``(0, 1)``): score components pointing out of the box at a
        particle on its boundary are zeroed before the direction is formed, and particles are
        clipped into the box after each step.
    trace : bool, default=False
        Keep the particles (and weights) every ``trace_every`` steps.
    trace_every : int, default=1
    optimizer_kwargs : dict, optional

    Returns
    -------
    SamplingResult

    Raises
    ------
    FloatingPointError
        If a score becomes NaN/inf; the message names the step.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import sample_multi_target
    >>> targets = [lambda x: -0.5 * ((x - 1.0) ** 2).sum(1), lambda x: -0.5 * ((x + 1.0) ** 2).sum(1)]
    >>> init = torch.randn(20, 2, generator=torch.Generator().manual_seed(0)) * 3
    >>> res = sample_multi_target(targets, init, 300, method="mtsgd", lr=0.05)
    >>> bool(res.particles.mean(0).abs().max() < 0.5)  # between the two targets
    True
    """
    if callable(log_probs):
        log_probs = [log_probs]
    log_probs = list(log_probs)
    if not log_probs:
        raise ValueError("log_probs must hold at least one callable")
    if not torch.is_tensor(init) or init.ndim != 2 or not init.is_floating_point():
        raise ValueError("init must be a floating-point tensor of shape (M, d)")
    if not torch.isfinite(init).all():
        raise ValueError("init contains NaN or inf")
    if (isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer))
            or n_steps < 0):
        raise ValueError(f"n_steps must be an integer >= 0, got {n_steps!r}")
    n_steps = int(n_steps)
    if isinstance(trace_every, bool) or not isinstance(trace_every, int) or trace_every < 1:
        raise ValueError(f"trace_every must be a positive integer, got {trace_every!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite positive number, got {lr!r}")
    if not (isinstance(repulsion, (int, float)) and math.isfinite(repulsion) and repulsion >= 0):
        raise ValueError(f"repulsion must be a finite non-negative number, got {repulsion!r}")
    if bounds is not None:
        try:
            lo, hi = (float(b) for b in bounds)
        except (TypeError, ValueError):
            raise ValueError(f"bounds must be (low, high), got {bounds!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds must be finite with low < high, got {bounds!r}")
    if task_normalization not in TASK_NORMALIZATIONS:
        raise ValueError(f"task_normalization must be one of {TASK_NORMALIZATIONS}, "
                         f"got {task_normalization!r}")
    rule = make_direction_rule(method, kernel=kernel, repulsion=repulsion,
                               task_normalization=task_normalization,
                               normalize_drive=normalize_drive)
    particles = init.detach().clone()
    opt = _make_optimizer(optimizer, particles, lr, optimizer_kwargs)
    result = SamplingResult(particles=particles)
    if trace:
        result.trace.append(particles.clone())
    for step in range(1, n_steps + 1):
        try:
            scores, values = scores_of(log_probs, particles, return_log_probs=True)
            if bounds is not None:
                scores = _project_scores_to_box(scores, particles, bounds)
            phi, info = rule.direction(particles, scores, log_densities=values)
        except FloatingPointError as exc:
            raise FloatingPointError(f"step {step}: {exc}") from exc
        particles.grad = grad_like(particles, -phi)     # a fused optimizer needs its layout
        opt.step()
        if bounds is not None:
            with torch.no_grad():
                particles.clamp_(bounds[0], bounds[1])
        if trace and step % trace_every == 0:
            result.trace.append(particles.detach().clone())
            result.weights.append(info.weights.detach().clone())
    result.particles = particles.detach()
    return result

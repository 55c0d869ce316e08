"""One MT-SGD-family update of a :class:`MultiTaskParticleNet` (the paper's Algorithm 2).

Pure torch: scores by autograd, directions from :mod:`sklmoo.samplers`, written into ``.grad``
as ``-phi`` so any torch optimiser takes the step.
"""

from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from ..samplers import (MGDA, MOOSVGD, MTSGD, SVGD, LinearScalarization, PrecomputedKernel,
                        RBFKernel)
from ..samplers import MULTI_TARGET_METHODS as METHODS
from ..samplers._optim import grad_like
from ._ensemble import flatten_particles, unflatten_like
from ._function_kernel import function_space_terms


def make_update_rules(method, kernel, repulsion, head_repulsion, head_kernel=None,
                      task_normalization="none", normalize_drive=True, smooth_drive=True):
    """``(trunk_rule, head_rule)`` for a method name (``head_kernel`` defaults to ``kernel``).

    ``task_normalization`` rescales each particle's per-task trunk score before the trunk rule
    weighs the tasks (:func:`~sklmoo.samplers.normalize_task_scores`; ``'l2'`` is the MT-SGD
    authors' unit norm); ``normalize_drive=False`` takes only the task weights from the rescaled
    scores and moves the trunks along the unscaled ones. The heads, one task each, are never
    rescaled. ``smooth_drive=False`` moves every particle (trunk and heads of the kernel rules)
    along its own scores instead of their kernel-weighted average; the kernel then only sets
    the repulsion.

    * ``'mtsgd'``: trunk by MT-SGD over the T task posteriors (Eq. 7), heads by SVGD (Eq. 9);
    * ``'moo_svgd'``: trunk by MOO-SVGD, heads by SVGD;
    * ``'mgda'``: trunk by per-particle MGDA, heads by plain gradient (independent particles);
    * ``'linear'``: trunk by the mean task gradient, heads by plain gradient (an independent
      ensemble).

    Examples
    --------
    >>> from sklmoo.nn import make_update_rules
    >>> from sklmoo.samplers import RBFKernel
    >>> trunk, head = make_update_rules("mtsgd", RBFKernel(), 1e-3, 1e-2)
    >>> type(trunk).__name__, type(head).__name__
    ('MTSGD', 'SVGD')
    """
    head_kernel = kernel if head_kernel is None else head_kernel
    norm = dict(task_normalization=task_normalization, normalize_drive=normalize_drive)
    head = SVGD(head_kernel, head_repulsion, smooth_drive=smooth_drive)
    if method == "mtsgd":
        return MTSGD(kernel, repulsion, smooth_drive=smooth_drive, **norm), head
    if method == "moo_svgd":
        return MOOSVGD(kernel, repulsion, smooth_drive=smooth_drive, **norm), head
    if method == "mgda":
        return MGDA(**norm), LinearScalarization()
    if method == "linear":
        # fixed weights: a rescaling can only change the drive, so without normalize_drive
        # 'linear' stays the plain independent ensemble whatever task_normalization says
        scaled = task_normalization if normalize_drive else "none"
        return LinearScalarization(task_normalization=scaled), LinearScalarization()
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _set_grads(params, phi):
    # each block negated straight into a tensor laid out like its parameter, without first
    # negating the whole (M, d) matrix: for the usual contiguous parameters one foreach call
    # (a step's tensor operations on small networks cost more than their arithmetic)
    blocks = unflatten_like(phi.detach(), params)
    if all(p.is_contiguous() for p in params):
        for p, g in zip(params, torch._foreach_neg(blocks)):
            p.grad = g
        return
    for p, g in zip(params, blocks):
        p.grad = torch.neg(g, out=torch.empty_like(p))


def _flat_values(params):
    """The parameters' values as one (M, d) matrix, outside autograd (no graph to build and
    detach)."""
    with torch.no_grad():
        return flatten_particles(params)


def _reads_log_densities(rule):
    """Whether a direction rule may read the targets' log-density values: a loss-based
    ``task_normalization``, a kernel other than the parameter-space RBF / precomputed ones, or
    a rule of another kind."""
    if not isinstance(rule, (MTSGD, MOOSVGD, MGDA, LinearScalarization)):
        return True
    if rule.task_normalization in ("loss", "loss+"):
        return True
    kernel = getattr(rule, "kernel", None)
    return kernel is not None and type(kernel) not in (RBFKernel, PrecomputedKernel)


def _is_plain_average(rule):
    return (isinstance(rule, LinearScalarization) and rule.weights is None
            and rule.task_normalization == "none")


def _independent_ensemble_step(net, task_losses, active):
    # Linear scalarisation needs no per-task trunk scores: one backward pass of the summed task
    # losses gives every head its own gradient and the trunk the sum, averaged here.
    total = torch.stack([task_losses[t].sum() for t in active]).sum()
    params = net.trunk.member_parameters()
    heads = [p for t in active for p in net.heads[t].member_parameters()]
    grads = torch.autograd.grad(total, params + heads)
    for p, g in zip(params, grads[:len(params)]):
        p.grad = torch.div(g, len(active), out=torch.empty_like(p))
    for p, g in zip(heads, grads[len(params):]):
        p.grad = grad_like(p, g)
    weights = torch.zeros(len(task_losses), dtype=grads[0].dtype, device=grads[0].device)
    weights[active] = 1.0 / len(active)
    return weights


@dataclass
class FunctionSpace:
    """Network outputs for function-space kernels in :func:`multitask_particle_step`:
    ``features`` (M, batch, n_features) from the trunks and ``logits`` (one (batch, M, C_t)
    tensor per task), attached to the graph; the rules' kernels must then be
    :class:`~sklmoo.samplers.PrecomputedKernel` objects.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import FunctionSpace, MLPTrunk, MultiTaskParticleNet, member_factory
    >>> net = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=4, hidden_units=(8,)),
    ...                            n_particles=3, n_classes=[2])
    >>> fs = FunctionSpace(*net.forward_with_features(torch.randn(16, 4)))
    >>> fs.features.shape, fs.logits[0].shape
    (torch.Size([3, 16, 8]), torch.Size([16, 3, 2]))
    """

    features: torch.Tensor
    logits: Sequence[torch.Tensor]
    bandwidth: object = "median"
    smooth_drive: bool = True
    #: the batch given to the network's forward: with it, the repulsion of a plain dense
    #: trunk and of sklmoo's heads is computed by batched products
    #: (:meth:`MultiTaskParticleNet.trunk_pullback`, :meth:`~MultiTaskParticleNet.head_pullback`)
    #: instead of a batched backward pass, the same numbers up to rounding
    inputs: Optional[torch.Tensor] = None


@dataclass
class StepInfo:
    """What one particle step computed: the trunk rule's task weights ((T,) or (M, T), zero
    for tasks left out), the repulsion / drive norm ratios of the trunk and of the heads
    (mean over tasks; None for rules without repulsion) and the norms themselves (the heads':
    mean over tasks): a ratio above 1 is harmless when the drive has vanished because the task
    is fitted, and a warning when the repulsion outweighs the drive's scale.

    Every field is a tensor on the parameters' device (the ratios and norms 0-d), so that a
    step does not wait for the device to read them; ``float()`` reads one.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import StepInfo
    >>> StepInfo(torch.tensor([0.25, 0.75])).trunk_repulsion_ratio is None   # e.g. 'linear'
    True
    """

    weights: torch.Tensor
    trunk_repulsion_ratio: Optional[torch.Tensor] = None
    head_repulsion_ratio: Optional[torch.Tensor] = None
    trunk_drive_norm: Optional[torch.Tensor] = None
    trunk_repulsion_norm: Optional[torch.Tensor] = None
    head_drive_norm: Optional[torch.Tensor] = None
    head_repulsion_norm: Optional[torch.Tensor] = None


def multitask_particle_step(net, task_losses, trunk_rule, head_rule, function_space=None):
    """Write ``-phi`` into the ``.grad`` of every trunk and head parameter of ``net``.

    Parameters
    ----------
    net : MultiTaskParticleNet
    task_losses : list of T tensors or None
        Task t's loss per particle, (M,) (each particle's own mean mini-batch loss), or its sum
        over the particles (a scalar); one backward pass of the sum gives every particle its own
        gradient. None for a task with no labelled sample in the batch (its head is left without
        a gradient and it is left out of the QP). The loss-based ``task_normalization`` of the
        trunk rule needs the (M,) form.
    trunk_rule, head_rule : direction rules (see :func:`make_update_rules`)
    function_space : FunctionSpace, optional
        Use RBF kernels on the trunks' features and on each task's logits (pulled back to the
        parameters, :func:`~sklmoo.nn.function_space_terms`) instead of on the parameters.

    Returns
    -------
    StepInfo

    Notes
    -----
    The score of task t is :math:`-\\nabla` of the mean loss, i.e. :math:`\\nabla\\log p_t / N`
    for :math:`\\log p_t = -N\\,\\text{mean loss}`: the rules' repulsion coefficients therefore
    act as a temperature relative to 1/N.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import MLPTrunk, MultiTaskParticleNet, make_update_rules, member_factory
    >>> from sklmoo.nn import multitask_particle_step
    >>> from sklmoo.samplers import RBFKernel
    >>> net = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=4, hidden_units=(8,)),
    ...                            n_particles=3, n_classes=[2, 2])
    >>> X, y = torch.randn(16, 4), torch.randint(0, 2, (16, 2))
    >>> losses = [torch.nn.functional.cross_entropy(out.transpose(1, 2),
    ...                                             y[:, t, None].expand(-1, 3))
    ...           * 3 for t, out in enumerate(net(X))]    # summed over the 3 particles
    >>> info = multitask_particle_step(net, losses, *make_update_rules("mtsgd", RBFKernel(),
    ...                                                                 1e-3, 1e-2))
    >>> info.weights.shape, net.heads[0].weight.grad.shape  # any torch optimiser can now step
    (torch.Size([2]), torch.Size([3, 2, 8]))
    """
    trunk_params = net.trunk.member_parameters()
    active = [t for t, loss in enumerate(task_losses) if loss is not None]
    if not active:
        raise ValueError("no task has a labelled sample in this batch")
    if (function_space is None and _is_plain_average(trunk_rule)
            and _is_plain_average(head_rule)):
        return StepInfo(_independent_ensemble_step(net, task_losses, active))
    fs = function_space
    n_trunk = len(trunk_params)
    per_particle = all(task_losses[t].ndim == 1 for t in active)
    # log p_t / N = -mean loss per particle, (M, T): what the loss-based normalisations and
    # kernels on the log-density values read (formed only for such a rule)
    log_densities = (torch.stack([-task_losses[t].detach() for t in active], dim=1)
                     if per_particle and _reads_log_densities(trunk_rule) else None)
    trunk_scores, head_ratios, head_norms = [], [], []
    for i, t in enumerate(active):
        head_params = net.heads[t].member_parameters()
        grads = torch.autograd.grad(task_losses[t].sum(), trunk_params + head_params,
                                    retain_graph=fs is not None or i < len(active) - 1)
        trunk_scores.append(-flatten_particles(grads[:n_trunk]))
        head_scores = -flatten_particles(grads[n_trunk:])
        if fs is not None:
            outputs = fs.logits[t].transpose(0, 1)
            pullback = (net.head_pullback(t, fs.features, outputs)
                        if fs.inputs is not None and hasattr(net, "head_pullback") else None)
            head_rule.kernel.use(function_space_terms(outputs, head_params, fs.bandwidth,
                                                      fs.smooth_drive, pullback=pullback))
        phi_head, head_info = head_rule.direction(_flat_values(head_params), head_scores[None])
        head_ratios.append(head_info.repulsion_ratio_tensor())
        head_norms.append((getattr(head_info, "drive_norm", None),
                           getattr(head_info, "repulsion_norm", None)))
        _set_grads(head_params, phi_head)
    if fs is not None:
        pullback = None
        if fs.inputs is not None and hasattr(net, "trunk_pullback"):
            pullback = net.trunk_pullback(fs.inputs)
        trunk_rule.kernel.use(function_space_terms(fs.features, trunk_params, fs.bandwidth,
                                                   fs.smooth_drive, pullback=pullback))
    # one task: its scores as a (1, M, d) view, not a copy
    scores = trunk_scores[0][None] if len(trunk_scores) == 1 else torch.stack(trunk_scores)
    phi, info = trunk_rule.direction(_flat_values(trunk_params), scores,
                                     log_densities=log_densities)
    _set_grads(trunk_params, phi)
    weights = info.weights
    if len(active) < len(task_losses):
        weights = weights.new_zeros(weights.shape[:-1] + (len(task_losses),))
        weights[..., active] = info.weights
    norms = [(d, r) for d, r in head_norms if d is not None and r is not None]
    return StepInfo(weights, info.repulsion_ratio_tensor(), _mean(head_ratios),
                    info.drive_norm, info.repulsion_norm,
                    _mean([d for d, _ in norms]), _mean([r for _, r in norms]))


def _mean(values):
    """Mean of 0-d tensors in double precision (None when there are none; one value as it is)."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return values[0] if values else None
    return torch.stack(values).double().mean()

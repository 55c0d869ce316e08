"""RBF kernels on what particle networks compute, pulled back to their parameters."""

import torch

from ..samplers import RBFKernel, SteinKernelTerms
from ._ensemble import flatten_particles


def function_space_terms(outputs, params, bandwidth="median", smooth_drive=True,
                         pullback=None):
    r""":class:`~sklmoo.samplers.SteinKernelTerms` of the RBF kernel on the particles' outputs.

    The kernel compares what the networks compute on the current mini-batch instead of their
    weights: :math:`k(\theta_a, \theta_b) = \exp(-\|f_a - f_b\|^2 / 2\sigma^2)` with
    :math:`f_a = f(\theta_a; X_{\text{batch}})` flattened (features for a trunk, logits for a
    head), median-heuristic bandwidth on those distances. It is a valid kernel on the parameters
    (an RBF after a feature map), so the Stein directions and MT-SGD's Gram matrix keep their
    meaning. Its repulsive field is pulled back to the parameters by autograd:

    .. math::

        R_b = \sum_a \nabla_{\theta_a} k(\theta_a, \theta_b)
            = -\frac{1}{\sigma^2}\sum_a k_{ab}\, J_a^\top (f_a - f_b),

    with :math:`J_a = \partial f_a / \partial\theta_a`, all M x M vector-Jacobian products in
    one batched backward pass through the graph that produced ``outputs``. The trace term of
    U (:func:`~sklmoo.samplers.stein_gram`) would need the full Jacobians; it adds the same
    constant to every entry of U, so it is omitted (``trace_sum=None``): the QP weights, the
    directions and Lemma 1 are exact.

    Parameters
    ----------
    outputs : Tensor (M, ...)
        Particle m's outputs on the batch, still attached to the graph of ``params``.
    params : list of Tensor
        Stacked parameters (leading dimension M) that the kernel's gradient is taken for.
    bandwidth : 'median' or float, default='median'
    smooth_drive : bool, default=True
        True: the drive is the kernel-weighted average of the particles' scores (Stein / SVGD).
        False: each particle follows its own score (the kernel matrix is replaced by
        :math:`M I`), the repulsion alone couples the particles, and U is then the Gram matrix
        of the directions in :math:`L^2` over the particles (up to the same constant).
    pullback : callable, optional
        Computes the repulsion without autograd: maps the cotangents (M, M, ...) whose
        ``[a, b]`` entry is :math:`\partial k(\theta_a, \theta_b) / \partial f_a` to, per
        tensor of ``params``, the (M, ...) sums over a of particle a's vector-Jacobian
        products (:meth:`StackedModules.dense_pullback` for plain dense networks: batched
        products, a fraction of the batched backward pass's cost). The same numbers up to
        rounding.

    Returns
    -------
    SteinKernelTerms with ``repulsive`` of shape (M, d), d the flattened size of ``params``.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import StackedModules, function_space_terms
    >>> net = StackedModules([torch.nn.Linear(3, 2) for _ in range(4)])
    >>> out = net(torch.randn(10, 3))                         # (M, batch, 2), on the graph
    >>> terms = function_space_terms(out, net.member_parameters())
    >>> terms.matrix.shape, terms.repulsive.shape             # 8 parameters per particle
    (torch.Size([4, 4]), torch.Size([4, 8]))
    """
    m = outputs.shape[0]
    flat = outputs.detach().reshape(m, -1)
    k, _, sigma2 = RBFKernel(bandwidth).evaluate(flat)
    if pullback is not None:
        # [a, b]: d k(theta_a, theta_b) / d f_a = -(k_ab / sigma^2) (f_a - f_b)
        cotangent = (flat[:, None, :] - flat[None, :, :]) * (k / -sigma2)[:, :, None]
        repulsive = flatten_particles(pullback(cotangent.reshape(m, m, *outputs.shape[1:])))
    else:
        # V[b, a] = d k(theta_a, theta_b) / d f_a, for every target particle b
        diff = flat[None, :, :] - flat[:, None, :]                     # f_a - f_b at [b, a]
        v = -(k.T[:, :, None] * diff) / sigma2                           # k_ab at [b, a]
        grads = torch.autograd.grad(outputs, params,
                                    grad_outputs=v.reshape(m, *outputs.shape).to(outputs.dtype),
                                    is_grads_batched=True, retain_graph=True,
                                    allow_unused=True)
        # R_b sums particle a's gradient blocks over a: summed per tensor (m targets, ...),
        # then flattened once
        repulsive = flatten_particles([
            torch.zeros((m, *p.shape[1:]), dtype=p.dtype, device=p.device) if g is None
            else g.sum(1) for g, p in zip(grads, params)])
    matrix = k if smooth_drive else m * torch.eye(m, dtype=k.dtype, device=k.device)
    return SteinKernelTerms(matrix=matrix, sigma2=sigma2, repulsive=repulsive.detach(),
                            trace_sum=None)

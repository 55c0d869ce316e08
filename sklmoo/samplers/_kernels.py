"""Kernels for particle methods, with the derivatives Stein directions need."""

import functools
import math
from dataclasses import dataclass
from typing import Optional

import torch


@functools.lru_cache(maxsize=64)
def _upper_pairs(m, device):
    """Flat indices of the M (M - 1) / 2 entries above the diagonal of an (M, M) matrix."""
    rows, cols = torch.triu_indices(m, m, offset=1, device=device)
    return rows * m + cols


def pairwise_sq_dists(x):
    """Squared Euclidean distances between the rows of ``x`` (M, d) -> (M, M).

    Uses the Gram-matrix expansion so memory stays O(M^2 + M d) for network-sized particles.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import pairwise_sq_dists
    >>> pairwise_sq_dists(torch.tensor([[0.0, 0.0], [3.0, 4.0]]))
    tensor([[ 0., 25.],
            [25.,  0.]])
    """
    gram = x @ x.T
    sq_norms = gram.diagonal()
    sq = (sq_norms.unsqueeze(1) + sq_norms).sub_(gram, alpha=2.0)
    # exact zeros on the diagonal, which the expansion only approximates
    return sq.clamp_min(0.0).fill_diagonal_(0.0)


@dataclass
class SteinKernelTerms:
    r"""The kernel quantities a Stein direction and the MT-SGD Gram matrix need.

    Attributes
    ----------
    matrix : Tensor (M, M)
        :math:`k_{ab} = k(\theta_a, \theta_b)`.
    sigma2 : 0-d Tensor
        The squared bandwidth used.
    repulsive : Tensor (M, d)
        :math:`R_b = \sum_a \nabla_{\theta_a} k(\theta_a, \theta_b)`, the repulsive field of
        SVGD at every particle.
    trace_sum : 0-d Tensor or None
        :math:`\sum_{a,b} \mathrm{tr}\,\partial^2 k(\theta_a, \theta_b) / \partial\theta_a
        \partial\theta_b`; None when not requested (only the MT-SGD Gram matrix needs it).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import RBFKernel
    >>> x = torch.randn(4, 3)
    >>> terms = RBFKernel().stein_terms(x, scores=-x)   # what SVGD / MT-SGD read
    >>> terms.matrix.shape, terms.repulsive.shape
    (torch.Size([4, 4]), torch.Size([4, 3]))
    """

    matrix: torch.Tensor
    sigma2: torch.Tensor
    repulsive: torch.Tensor
    trace_sum: Optional[torch.Tensor]


class RBFKernel:
    r"""Gaussian RBF kernel :math:`k(\theta, \theta') = \exp(-\|\theta-\theta'\|^2 / 2\sigma^2)`.

    Parameters
    ----------
    bandwidth : "median" or float, default="median"
        The length scale :math:`\sigma`. ``"median"`` recomputes it from the particles at every
        call with the median heuristic of the official SVGD / MT-SGD code,
        :math:`\sigma^2 = \mathrm{med}_{a<b}\|\theta_a-\theta_b\|^2 / (2 \log(M+1))`
        (torch's median: the lower of the two middle values for an even count). With a
        single particle, or coincident particles, the heuristic falls back to :math:`\sigma = 1`.
        The bandwidth is treated as a constant: no gradient flows through it.

    Notes
    -----
    The quantities the Stein directions and the MT-SGD Gram matrix need are closed forms:

    * :math:`\nabla_{\theta_a} k(\theta_a, \theta_b) = -k_{ab} (\theta_a - \theta_b)/\sigma^2`,
      so :math:`\sum_a \nabla_{\theta_a} k(\theta_a, \theta_b) = D_b / \sigma^2` with
      :math:`D_b = \sum_a k_{ab} (\theta_b - \theta_a)` (:meth:`displacement`).
    * :math:`\mathrm{tr}\, \partial^2 k / \partial\theta_a \partial\theta_b
      = k_{ab} (d/\sigma^2 - \|\theta_a-\theta_b\|^2/\sigma^4)` (:meth:`cross_trace_sum`).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import RBFKernel
    >>> x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    >>> k, sq, sigma2 = RBFKernel(bandwidth=1.0).evaluate(x)
    >>> k.shape, float(sigma2)
    (torch.Size([3, 3]), 1.0)
    >>> round(float(k[0, 1]), 4)  # exp(-1/2)
    0.6065
    """

    def __init__(self, bandwidth="median"):
        self.bandwidth = bandwidth

    def __repr__(self):
        return f"RBFKernel(bandwidth={self.bandwidth!r})"

    def sigma2(self, sq_dists):
        """Squared bandwidth for the given (M, M) squared distances (a 0-d tensor)."""
        if isinstance(self.bandwidth, str):
            if self.bandwidth != "median":
                raise ValueError(
                    f"bandwidth must be 'median' or a positive float, got {self.bandwidth!r}"
                )
            m = sq_dists.shape[0]
            if m < 2:
                return sq_dists.new_tensor(1.0)
            pairs = (sq_dists.detach() if sq_dists.requires_grad else sq_dists).take(
                _upper_pairs(m, sq_dists.device))
            med = pairs.median()
            sigma2 = med / (2.0 * math.log(m + 1))
            return torch.where(sigma2 > 0, sigma2, 1.0)
        bw = float(self.bandwidth)
        if not (bw > 0 and math.isfinite(bw)):
            raise ValueError(f"bandwidth must be 'median' or a positive float, got {self.bandwidth!r}")
        return sq_dists.new_tensor(bw * bw)

    def evaluate(self, x):
        """Kernel matrix of the particles ``x`` (M, d).

        Returns
        -------
        k : Tensor (M, M)
        sq_dists : Tensor (M, M)
        sigma2 : 0-d Tensor, the squared bandwidth used.
        """
        sq = pairwise_sq_dists(x)
        sigma2 = self.sigma2(sq)
        return torch.exp(sq * (-0.5 / sigma2)), sq, sigma2

    def stein_terms(self, particles, scores=None, log_densities=None, trace=True):
        """:class:`SteinKernelTerms` at the particles (M, d), with the trace sum if ``trace``;
        ``scores`` and ``log_densities`` are not needed by this kernel and ignored."""
        k, sq, sigma2 = self.evaluate(particles)
        trace_sum = self.cross_trace_sum(k, sq, sigma2, particles.shape[1]) if trace else None
        return SteinKernelTerms(matrix=k, sigma2=sigma2,
                                repulsive=self.displacement(particles, k) / sigma2,
                                trace_sum=trace_sum)

    @staticmethod
    def displacement(x, k):
        r""":math:`D_b = \sum_a k_{ab}(\theta_b - \theta_a)` for every particle b -> (M, d)."""
        return torch.addmm(k.sum(dim=1, keepdim=True) * x, k, x, alpha=-1.0)

    @staticmethod
    def cross_trace_sum(k, sq_dists, sigma2, dim):
        r""":math:`\sum_{a,b} \mathrm{tr}(\partial^2 k(\theta_a,\theta_b)/\partial\theta_a\partial\theta_b)`."""
        return (k * (dim / sigma2 - sq_dists / (sigma2 * sigma2))).sum()


class LogDensityRBFKernel:
    r"""RBF kernel on the targets' log-density values (objective space), not on the parameters.

    :math:`k(\theta, \theta') = \exp(-\|\ell(\theta) - \ell(\theta')\|^2 / 2\sigma^2)` with
    :math:`\ell(\theta) = (\log p_1(\theta), \dots, \log p_K(\theta))`: for targets
    :math:`p_k \propto e^{-f_k}` it measures how far apart two particles are in the space of
    the objectives :math:`(f_1, \dots, f_K)`. The MOO-SVGD paper (Liu et al., 2021) profiles
    Pareto fronts with this kernel: the repulsion spreads particles *along the front* instead of
    over the (often high-dimensional) parameter space.

    Its derivatives go through the Jacobian of :math:`\ell`, which is exactly the stacked
    scores :math:`(s_1, \dots, s_K)`, so no extra gradient evaluation is needed. With
    :math:`u_a = \ell(\theta_a)`, :math:`\Delta_{ab} = u_a - u_b` and
    :math:`B_{pq}(a, b) = \langle s_p(\theta_a), s_q(\theta_b)\rangle`:

    * :math:`\nabla_{\theta_a} k(\theta_a, \theta_b) = -\frac{k_{ab}}{\sigma^2}
      \sum_p \Delta_{ab,p}\, s_p(\theta_a)`;
    * :math:`\mathrm{tr}\,\partial^2 k / \partial\theta_a\partial\theta_b
      = \frac{k_{ab}}{\sigma^2}\big[\sum_p B_{pp}(a,b)
      - \frac{1}{\sigma^2}\sum_{p,q}\Delta_{ab,p}\Delta_{ab,q} B_{pq}(a,b)\big]`.

    The kernel is positive semi-definite (an RBF kernel of a feature map), so the MT-SGD Gram
    matrix stays a Gram matrix and Lemma 1 still holds. The rules need the log-density values:
    pass ``log_densities`` (M, K) to ``direction``, or use
    :func:`~sklmoo.samplers.sample_multi_target`, which supplies them.

    Parameters
    ----------
    bandwidth : "median" or float, default="median"
        :math:`\sigma` in log-density units; ``"median"`` applies :class:`RBFKernel`'s median
        heuristic to the distances between the particles' log-density vectors. Pareto
        profiling wants a sharp kernel (small float, e.g. 0.01 for ZDT3), so that the
        repulsion acts along the front without holding particles off it.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import LogDensityRBFKernel, MOOSVGD
    >>> x = torch.rand(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> log_densities = torch.stack([-x[:, 0], -(x ** 2).sum(1)], dim=1)      # (M, K)
    >>> scores = torch.stack([torch.zeros_like(x).index_fill(1, torch.tensor([0]), -1.0),
    ...                       -2 * x])                                         # (K, M, d)
    >>> phi, info = MOOSVGD(kernel=LogDensityRBFKernel(0.5)).direction(
    ...     x, scores, log_densities=log_densities)
    >>> phi.shape
    torch.Size([5, 3])
    """

    def __init__(self, bandwidth="median"):
        self.bandwidth = bandwidth

    def __repr__(self):
        return f"LogDensityRBFKernel(bandwidth={self.bandwidth!r})"

    def stein_terms(self, particles, scores=None, log_densities=None, trace=True):
        """:class:`SteinKernelTerms` from the log-density values (M, K) and scores (K, M, d),
        with the trace sum (the costly O(K^2 M^2 d) part) if ``trace``."""
        if log_densities is None or scores is None:
            raise ValueError(
                "LogDensityRBFKernel needs the log-density values and scores: call "
                "direction(particles, scores, log_densities=...) or use sample_multi_target"
            )
        u = torch.as_tensor(log_densities, dtype=scores.dtype, device=scores.device).detach()
        n_targets, m = scores.shape[0], scores.shape[1]
        if u.shape != (m, n_targets):
            raise ValueError(f"log_densities must be (M, K) = ({m}, {n_targets}), "
                             f"got shape {tuple(u.shape)}")
        if not torch.isfinite(u).all():
            raise FloatingPointError("log_densities contain NaN or inf: the sampler has diverged")
        k, _, sigma2 = RBFKernel(self.bandwidth).evaluate(u)
        # R_b = sum_a k_ab sum_p (u_bp - u_ap) s_p(a) / sigma^2
        kernel_jac = torch.einsum("ab,pad->pbd", k, scores)
        weighted = torch.einsum("ab,ap,pad->bd", k, u, scores)
        repulsive = (torch.einsum("bp,pbd->bd", u, kernel_jac) - weighted) / sigma2
        trace_sum = None
        if trace:
            cross = torch.einsum("pad,qbd->abpq", scores, scores)
            delta = u[:, None, :] - u[None, :, :]
            quad = torch.einsum("abp,abq,abpq->ab", delta, delta, cross)
            diag = torch.diagonal(cross, dim1=2, dim2=3).sum(-1)
            trace_sum = (k * (diag - quad / sigma2)).sum() / sigma2
        return SteinKernelTerms(matrix=k, sigma2=sigma2, repulsive=repulsive,
                                trace_sum=trace_sum)


class PrecomputedKernel:
    """A kernel whose :class:`SteinKernelTerms` were computed elsewhere -- e.g. an RBF on each
    particle network's outputs, pulled back to the parameters by autograd -- handed to the
    direction rules through :meth:`use` before each step.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import MTSGD, PrecomputedKernel, SteinKernelTerms
    >>> kernel = PrecomputedKernel()
    >>> rule = MTSGD(kernel)
    >>> x = torch.zeros(3, 2)
    >>> _ = kernel.use(SteinKernelTerms(torch.eye(3) * 3, torch.tensor(1.0), torch.zeros(3, 2), None))
    >>> phi, info = rule.direction(x, torch.ones(1, 3, 2))   # k = M I: each particle's own score
    >>> phi
    tensor([[1., 1.],
            [1., 1.],
            [1., 1.]])
    """

    def __init__(self):
        self.terms = None

    def __repr__(self):
        return "PrecomputedKernel()"

    def use(self, terms):
        """Set the terms the next ``stein_terms`` call returns."""
        self.terms = terms
        return self

    def stein_terms(self, particles, scores, log_densities=None, trace=True):
        t = self.terms
        if t is None:
            raise RuntimeError("PrecomputedKernel.use(terms) must be called before a step")
        m, d = particles.shape
        if t.matrix.shape != (m, m) or t.repulsive.shape != (m, d):
            raise ValueError(f"precomputed terms are for matrix {tuple(t.matrix.shape)} and "
                             f"repulsive field {tuple(t.repulsive.shape)}, the particles are "
                             f"{(m, d)}")
        return t

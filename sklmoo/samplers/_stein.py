"""Stein variational directions for one or several targets: SVGD, MT-SGD, MOO-SVGD, MGDA.

Every rule maps ``particles`` (M, d) and ``scores`` (K, M, d) -- the gradients of the K
log-densities at each particle -- to a velocity field ``phi`` (M, d) that the caller follows
(``theta <- theta + eps * phi``, or hands ``-phi`` to an optimiser as a gradient).
"""

import functools
import math
from dataclasses import replace
from typing import Optional

import torch

from ._kernels import RBFKernel
from ._sgmcmc import all_finite
from ._simplex_qp import min_norm_weights

#: how each task's score is rescaled at each particle before the task weights and the drive are
#: formed: 'none' (the paper's equations), 'l2' (unit norm, as the MT-SGD authors' training
#: script), 'loss' and 'loss+' (divided by the loss, resp. loss times norm: Sener & Koltun 2018)
TASK_NORMALIZATIONS = ("none", "l2", "loss", "loss+")


class DirectionInfo:
    """What a direction rule computed on the way.

    Attributes
    ----------
    gram : Tensor
        The QP matrix: (K, K) for MT-SGD and SVGD (the RKHS Gram matrix U of the per-target
        Stein directions), (M, K, K) for MOO-SVGD and MGDA (per-particle score Gram matrices),
        None for linear scalarisation. With one target (SVGD) the weights do not need it: it is
        computed when first read.
    weights : Tensor
        The target weights: (K,) for MT-SGD / SVGD / linear, (M, K) for MOO-SVGD / MGDA.
    sigma2 : Tensor or None
        The squared kernel bandwidth used, None for kernel-free rules.
    drive_norm, repulsion_norm : Tensor or None
        Norms of the driving and repulsive parts of phi (kernel rules), else None.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import MTSGD
    >>> x = torch.randn(5, 2, dtype=torch.float64)
    >>> phi, info = MTSGD().direction(x, torch.stack([-x, -(x - 2)]))
    >>> info.weights.shape, float(info.weights.sum())             # the QP's task weights
    (torch.Size([2]), 1.0)
    """

    def __init__(self, gram, weights, sigma2=None, drive_norm=None, repulsion_norm=None):
        self._gram = gram               # a tensor, None, or a function computing it on demand
        self.weights = weights
        self.sigma2 = sigma2
        self.drive_norm = drive_norm
        self.repulsion_norm = repulsion_norm

    @property
    def gram(self):
        if callable(self._gram):
            self._gram = self._gram()
        return self._gram

    def __repr__(self):
        fields = ("gram", "weights", "sigma2", "drive_norm", "repulsion_norm")
        return f"DirectionInfo({', '.join(f'{f}={getattr(self, f)!r}' for f in fields)})"

    @property
    def repulsion_ratio(self):
        """``||repulsive part|| / ||driving part||`` of phi (kernel rules), else None: above 1
        the particles mostly push each other apart instead of following the targets."""
        ratio = self.repulsion_ratio_tensor()
        return None if ratio is None else float(ratio)

    def repulsion_ratio_tensor(self):
        """:attr:`repulsion_ratio` as a 0-d tensor on the particles' device (read without
        waiting for it), else None."""
        if self.drive_norm is None or self.repulsion_norm is None:
            return None
        return self.repulsion_norm / self.drive_norm.clamp_min(1e-30)


def _n_targets(scores):
    """K for scores (K, M, d), 1 for (M, d) (and for a malformed shape, which the single-target
    path then refuses with the shape error)."""
    return scores.shape[0] if scores.ndim == 3 else 1


def _check_shapes(particles, scores):
    if particles.ndim != 2:
        raise ValueError(f"particles must be (M, d), got shape {tuple(particles.shape)}")
    if scores.ndim == 2:
        scores = scores[None]
    if scores.ndim != 3 or scores.shape[1:] != particles.shape:
        raise ValueError(
            f"scores must be (K, M, d) matching particles {tuple(particles.shape)}, "
            f"got shape {tuple(scores.shape)}"
        )
    # attributes only: no tensor operation (this runs every training step)
    if 0 in scores.shape:
        raise ValueError(f"a direction needs at least one target, particle and coordinate: "
                         f"scores of shape {tuple(scores.shape)}")
    if not (particles.is_floating_point() and particles.dtype == scores.dtype):
        raise TypeError(f"particles and scores must be floating point of one dtype, got "
                        f"{particles.dtype} and {scores.dtype}")
    return scores


@functools.lru_cache(maxsize=None)
def _sqrt_max(dtype):
    """The largest norm whose square is finite in ``dtype``."""
    return math.sqrt(torch.finfo(dtype).max)


def _detached(x):
    return x.detach() if x.requires_grad else x


def _check_inputs(particles, scores):
    scores = _check_shapes(particles, scores)
    # one host synchronisation when both are finite (a NaN or inf in either makes the sum so);
    # only then are they looked at one by one (a sum of finite entries can overflow)
    if not torch.isfinite(scores.sum() + particles.sum()):
        if not all_finite(scores):
            raise FloatingPointError("scores contain NaN or inf: the sampler has diverged")
        if not all_finite(particles):
            raise FloatingPointError("particles contain NaN or inf: the sampler has diverged")
    return particles.detach(), scores.detach()


def _check_task_normalization(task_normalization):
    if task_normalization not in TASK_NORMALIZATIONS:
        raise ValueError(f"task_normalization must be one of {TASK_NORMALIZATIONS}, "
                         f"got {task_normalization!r}")
    return task_normalization


def normalize_task_scores(scores, task_normalization="none", log_densities=None):
    r"""Rescale each task's score at each particle: :math:`\tilde s_k(\theta_m) =
    s_k(\theta_m) / n_{km}`.

    * ``'none'``: :math:`n_{km} = 1` (the scores are returned unchanged);
    * ``'l2'``: :math:`n_{km} = \|s_k(\theta_m)\|` (unit norm per particle and task, as the
      MT-SGD authors' training script does before it builds U);
    * ``'loss'``: :math:`n_{km} = L_k(\theta_m) = -\log p_k(\theta_m)`, which must not be
      negative;
    * ``'loss+'``: :math:`n_{km} = L_k(\theta_m)\,\|s_k(\theta_m)\|` (Sener & Koltun's
      "loss+" normalisation of MGDA-UB).

    A zero scale leaves its score unscaled (a zero score stays zero; a loss of exactly 0 -- a
    fitted task, in floating point -- comes with a vanishing score). Why: the min-norm weights
    favour the task whose score is small (typically the easy, nearly converged one); after
    ``'l2'`` only the directions of the scores matter, so a task with a 100x smaller gradient
    is not starved, and scaling one task's loss by any positive constant leaves the weights
    unchanged.

    Parameters
    ----------
    scores : Tensor (K, M, d)
    task_normalization : {'none', 'l2', 'loss', 'loss+'}, default='none'
    log_densities : Tensor (M, K), optional
        :math:`\log p_k(\theta_m)` (for a network: minus each particle's mean loss); needed
        by the loss-based normalisations only.

    Returns
    -------
    Tensor (K, M, d)

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import normalize_task_scores
    >>> scores = torch.tensor([[[3.0, 4.0]], [[0.0, 0.01]]])          # K=2, M=1, d=2
    >>> normalize_task_scores(scores, "l2")
    tensor([[[0.6000, 0.8000]],
    <BLANKLINE>
            [[0.0000, 1.0000]]])
    """
    _check_task_normalization(task_normalization)
    if task_normalization == "none":
        return scores
    if task_normalization == "l2":
        scale = scores.norm(dim=-1)
        return scores / torch.where(scale > 0, scale, 1.0)[..., None]
    scale = torch.ones(scores.shape[:2], dtype=scores.dtype, device=scores.device)
    if task_normalization == "loss+":
        scale = scale * scores.norm(dim=-1)
    if task_normalization in ("loss", "loss+"):
        if log_densities is None:
            raise ValueError(f"task_normalization={task_normalization!r} needs the losses: "
                             "pass log_densities (M, K) = -loss to direction()")
        losses = -torch.as_tensor(log_densities, dtype=scores.dtype,
                                  device=scores.device).detach()
        if losses.ndim == 1:
            losses = losses[:, None]
        if losses.shape != scores.shape[1::-1]:
            raise ValueError(f"log_densities must be (M, K) = {tuple(scores.shape[1::-1])}, "
                             f"got {tuple(losses.shape)}")
        if not (torch.isfinite(losses).all() and (losses >= 0).all()):
            raise ValueError(f"task_normalization={task_normalization!r} needs finite "
                             "non-negative losses (-log_densities); use 'l2' for losses that "
                             "can be negative")
        scale = scale * losses.T
    # a zero score has no direction, a zero loss no scale: leave them instead of dividing by 0
    return scores / torch.where(scale > 0, scale, torch.ones_like(scale))[..., None]


def stein_gram(terms, scores, repulsion=1.0):
    r"""Gram matrix :math:`U_{ij} = \langle\phi_i, \phi_j\rangle_{\mathcal H_k^d}` of the Stein directions.

    With :math:`\phi_i = \frac1M\sum_a [k(\theta_a,\cdot)\, s_i(\theta_a) + c\,\nabla_{\theta_a}
    k(\theta_a,\cdot)]` (repulsion coefficient c),

    .. math::

        U_{ij} = \frac{1}{M^2}\Big[\sum_{a,b} k_{ab}\langle s_i(a), s_j(b)\rangle
        + c\sum_a \langle s_i(a) , R_a\rangle + c\sum_b\langle R_b, s_j(b)\rangle
        + c^2 \sum_{a,b}\mathrm{tr}\frac{\partial^2 k(\theta_a,\theta_b)}
        {\partial\theta_a\partial\theta_b}\Big],

    :math:`R_b = \sum_a \nabla_{\theta_a}k(\theta_a, \theta_b)` (the kernel's
    :class:`~sklmoo.samplers.SteinKernelTerms`). For the RBF kernel this is Eq. (4) of the MT-SGD
    paper with the sign of the trace term corrected:

    .. math::

        U_{ij} = \frac{1}{M^2}\sum_{a,b} k_{ab}\Big[\langle s_i(a), s_j(b)\rangle
        + \frac{c}{\sigma^2}\langle s_i(a) - s_j(b), \theta_a - \theta_b\rangle
        + c^2\Big(\frac{d}{\sigma^2} - \frac{\|\theta_a-\theta_b\|^2}{\sigma^4}\Big)\Big].

    Computed in O(K M^2 d + K^2 M d) with no loop over particles or task pairs. The trace term
    adds the same constant to every entry of U, which changes neither the simplex minimiser
    nor Lemma 1's inequality; a kernel may omit it (``trace_sum=None``) when it is too costly
    (:class:`PrecomputedKernel` from network outputs).

    Parameters
    ----------
    terms : SteinKernelTerms
        From ``kernel.stein_terms(particles, scores, log_densities)``.
    scores : Tensor (K, M, d)
    repulsion : float, default=1.0

    Returns
    -------
    gram : Tensor (K, K), symmetric PSD.
    kernel_scores : Tensor (K, M, d), :math:`\sum_b k_{ab} s_i(b)` (reused by the direction).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import RBFKernel, stein_gram
    >>> particles = torch.randn(6, 2, dtype=torch.float64)
    >>> scores = torch.stack([-particles, -(particles - 1)])      # two Gaussian targets
    >>> U, _ = stein_gram(RBFKernel().stein_terms(particles, scores=scores), scores)
    >>> U.shape, bool(torch.allclose(U, U.T)), bool(torch.linalg.eigvalsh(U).min() > -1e-10)
    (torch.Size([2, 2]), True, True)
    """
    return _stein_gram(terms, scores, repulsion, torch.matmul(terms.matrix, scores))


def _stein_gram(terms, scores, repulsion, kernel_scores):
    r""":func:`stein_gram` given ``kernel_scores`` (K, M, d), :math:`\sum_b k_{ab} s_i(b)`."""
    n_targets, m = scores.shape[:2]
    # as matrix products of the (K, M d) flattened scores: einsum's reshapes copied them
    flat = scores.reshape(n_targets, -1)
    drive = flat @ kernel_scores.reshape(n_targets, -1).T
    cross = flat @ terms.repulsive.reshape(-1)
    gram = drive + repulsion * (cross[:, None] + cross[None, :])
    if terms.trace_sum is not None:       # None: a kernel that omits this task-free constant
        gram = gram + repulsion**2 * terms.trace_sum
    gram = gram / (m * m)
    return 0.5 * (gram + gram.T), kernel_scores


class _KernelRule:
    def __init__(self, kernel=None, repulsion=1.0, task_normalization="none",
                 normalize_drive=True, smooth_drive=True):
        self.kernel = RBFKernel() if kernel is None else kernel
        self.repulsion = float(repulsion)
        if not (math.isfinite(self.repulsion) and self.repulsion >= 0):
            raise ValueError(f"repulsion must be a finite number >= 0, got {repulsion!r}")
        self.task_normalization = _check_task_normalization(task_normalization)
        self.normalize_drive = bool(normalize_drive)
        self.smooth_drive = bool(smooth_drive)

    def __repr__(self):
        extra = ("" if self.task_normalization == "none"
                 else f", task_normalization={self.task_normalization!r}")
        extra += "" if self.normalize_drive else ", normalize_drive=False"
        extra += "" if self.smooth_drive else ", smooth_drive=False"
        return (f"{type(self).__name__}(kernel={self.kernel!r}, repulsion={self.repulsion}"
                f"{extra})")

    def _stein_terms(self, particles, scores, log_densities, trace=True):
        """The kernel's Stein terms; without ``smooth_drive`` the matrix that weighs the
        particles' scores in the drive (and in U) is :math:`MI`: each particle follows its own
        score and the kernel only sets the repulsion."""
        terms = self.kernel.stein_terms(particles, scores, log_densities, trace=trace)
        if self.smooth_drive:
            return terms
        m = particles.shape[0]
        return replace(terms, matrix=m * torch.eye(m, dtype=terms.matrix.dtype,
                                                   device=terms.matrix.device))

    def _weigh(self, matrix, scores):
        """:math:`\\sum_b k_{ab} s_k(\\theta_b)` for every target k, (K, M, d); without
        ``smooth_drive`` the matrix is :math:`MI` and this is :math:`M s_k(\\theta_a)`, with
        no product (the same numbers)."""
        if self.smooth_drive:
            return torch.matmul(matrix, scores)
        return matrix.shape[0] * scores


class MTSGD(_KernelRule):
    r"""Multi-target sampling gradient descent (Phan et al., 2022, Algorithm 1).

    One step: form the Gram matrix U of the K per-target Stein directions
    (:func:`stein_gram`), solve :math:`w^* = \arg\min_{w\in\Delta_K} w^\top U w` once, and
    return :math:`\phi^* = \sum_k w^*_k \phi_k` evaluated at every particle:

    .. math::

        \phi^*(\theta_b) = \frac1M \sum_a \Big[k_{ab} \sum_k w^*_k s_k(\theta_a)
        + c\, \nabla_{\theta_a} k(\theta_a, \theta_b)\Big].

    By Lemma 1, :math:`\langle\phi^*, \phi_k\rangle \ge \|\phi^*\|^2` for every target k: the
    step decreases all K KL divergences to first order.

    Parameters
    ----------
    kernel : RBFKernel or LogDensityRBFKernel, default=RBFKernel("median")
        Any object with ``stein_terms(particles, scores, log_densities, trace=True)``
        returning :class:`~sklmoo.samplers.SteinKernelTerms`.
    repulsion : float, default=1.0
        Coefficient c of the kernel-gradient (repulsive) term, used consistently in U and in
        the direction (1.0 is exact MT-SGD).
    task_normalization : {'none', 'l2', 'loss', 'loss+'}, default='none'
        Rescale each score at each particle first (:func:`normalize_task_scores`); U and the
        drive then use the rescaled scores :math:`\tilde s_k`, so Lemma 1 holds for the Stein
        directions :math:`\tilde\phi_k` of the rescaled fields. ``'none'`` is exact MT-SGD.
    normalize_drive : bool, default=True
        With a ``task_normalization``: whether the drive follows the rescaled scores (the MT-SGD
        authors' script; Lemma 1 then holds for the rescaled directions) or only the weights
        come from them and the drive is :math:`\sum_k w_k` times the *unscaled* Stein
        directions (MGDA-UB's use of its normalisations: a task whose gradient has vanished
        because it is fitted, or overfitted, stops driving the particles).
    smooth_drive : bool, default=True
        Whether the drive at particle b is the kernel-weighted average
        :math:`\frac1M\sum_a k_{ab} s(\theta_a)` (SVGD's form, exact MT-SGD) or b's own score
        :math:`s(\theta_b)` (the kernel matrix replaced by :math:`MI`: the kernel then only sets
        the repulsion, and U is the Gram matrix of the directions in :math:`L^2` over the
        particles, for which Lemma 1 holds in the same form). With the median bandwidth every
        other particle weighs about :math:`1/(M+1)` of a particle's own score in the smoothed
        drive.

    Notes
    -----
    With one particle the kernel is 1 and U equals MGDA's matrix
    :math:`\langle s_i, s_j\rangle` plus the constant :math:`c^2 d/\sigma^2`, which does not
    change the simplex minimiser, so MT-SGD reduces to MGDA (the paper's "single particle"
    case).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import MTSGD
    >>> particles = torch.randn(10, 2, generator=torch.Generator().manual_seed(0))
    >>> scores = torch.stack([-(particles - 1.0), -(particles + 1.0)])  # two Gaussians
    >>> phi, info = MTSGD().direction(particles, scores)
    >>> phi.shape, info.gram.shape, round(float(info.weights.sum()), 6)
    (torch.Size([10, 2]), torch.Size([2, 2]), 1.0)
    """

    def direction(self, particles, scores, log_densities=None):
        """Return ``(phi, info)``: the common direction (M, d) and a :class:`DirectionInfo`.

        ``log_densities`` (M, K), the targets' log-density values at the particles, is needed
        only by kernels on those values (:class:`~sklmoo.samplers.LogDensityRBFKernel`).
        """
        if _n_targets(scores) == 1:
            return self._single_target(particles, scores, log_densities)
        # the scores' finiteness is read from U's (a NaN or inf score makes U so): one check,
        # one host synchronisation, in the QP
        particles, raw = _detached(particles), _detached(_check_shapes(particles, scores))
        m = particles.shape[0]
        # the kernel sees the true scores (a log-density kernel's Jacobian), U and the drive
        # the rescaled ones
        terms = self._stein_terms(particles, raw, log_densities)
        scores = normalize_task_scores(raw, self.task_normalization, log_densities)
        # without smooth_drive the kernel matrix is M I: M s, not a product with it
        gram, kernel_scores = _stein_gram(terms, scores, self.repulsion,
                                          self._weigh(terms.matrix, scores))
        try:
            weights = min_norm_weights(gram)
        except FloatingPointError:
            _check_inputs(particles, raw)           # names NaN or inf scores when they are
            raise
        if not self.normalize_drive and scores is not raw:
            kernel_scores = self._weigh(terms.matrix, raw)
        drive = (weights @ kernel_scores.flatten(1)).view_as(particles) / m
        repulsive = self.repulsion * terms.repulsive / m
        return drive + repulsive, DirectionInfo(gram=gram, weights=weights, sigma2=terms.sigma2,
                                                drive_norm=drive.norm(),
                                                repulsion_norm=repulsive.norm())

    def _single_target(self, particles, scores, log_densities):
        """The direction for one target (SVGD): its weight is 1 whatever U is, so U (with the
        kernel's trace) is computed only when read. Written with few tensor operations: a
        network's training takes one such step per task head and trunk every mini-batch."""
        _check_shapes(particles, scores)
        particles, raw = _detached(particles), _detached(scores)
        if raw.ndim == 2:
            raw = raw[None]
        m = particles.shape[0]
        # the kernel's own terms (the kernel sees the true scores); without smooth_drive the
        # drive needs no M I
        terms = self.kernel.stein_terms(particles, raw, log_densities, trace=False)

        def gram():
            return stein_gram(self._stein_terms(particles, raw, log_densities),
                              normalize_task_scores(raw, self.task_normalization,
                                                    log_densities), self.repulsion)[0]

        scores = raw if not self.normalize_drive else normalize_task_scores(
            raw, self.task_normalization, log_densities)
        drive = terms.matrix @ scores[0] / m if self.smooth_drive else scores[0]
        drive_norm = drive.norm()
        # one test for both failures: a NaN or inf score reaches the drive (its own particle
        # weighs it by k_aa = 1), and |phi|^2 beyond the floating-point range (scores of 1e19
        # and up, e.g. from unscaled features) is what U's finiteness check catches with
        # several targets; NaN fails the comparison too
        if not drive_norm <= _sqrt_max(drive_norm.dtype):
            _check_inputs(particles, raw)           # names NaN or inf scores or particles
            raise FloatingPointError("the direction's squared norm overflows: the scores "
                                     "(gradients of the log-densities) or the particles "
                                     "have diverged")
        repulsive = terms.repulsive * (self.repulsion / m)
        return drive + repulsive, DirectionInfo(gram=gram, weights=raw.new_ones(1),
                                                sigma2=terms.sigma2, drive_norm=drive_norm,
                                                repulsion_norm=repulsive.norm())


class SVGD(MTSGD):
    r"""Stein variational gradient descent (Liu & Wang, 2016): MT-SGD with one target.

    :math:`\phi(\theta_b) = \frac1M\sum_a [k_{ab} s(\theta_a) + c\,\nabla_{\theta_a}k(\theta_a,
    \theta_b)]`. ``scores`` may be (M, d) or (1, M, d); ``info.gram`` is the 1x1 matrix
    :math:`\|\phi\|^2_{\mathcal H}` (the squared kernel Stein discrepancy of the particles).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import SVGD
    >>> particles = torch.zeros(3, 1) + torch.tensor([[-1.0], [0.0], [1.0]])
    >>> phi, info = SVGD(repulsion=0.0).direction(particles, -particles)  # N(0, 1), no repulsion
    >>> bool(phi[1].abs() < 1e-6)
    True
    """

    def direction(self, particles, scores, log_densities=None):
        """Return ``(phi, info)`` for a single target; see the class docstring."""
        if scores.ndim == 3 and scores.shape[0] != 1:
            raise ValueError(f"SVGD takes one target, got scores for {scores.shape[0]}")
        if log_densities is not None and log_densities.ndim == 1:
            log_densities = log_densities[:, None]
        return super().direction(particles, scores, log_densities)


def _per_particle_min_norm(scores):
    grams = torch.einsum("kmd,lmd->mkl", scores, scores)
    weights = min_norm_weights(grams)                                   # (M, K)
    combined = torch.einsum("mk,kmd->md", weights, scores)
    return combined, grams, weights


class MGDA:
    r"""Per-particle multiple-gradient descent (Désidéri 2012; Sener & Koltun 2018).

    Each particle m independently follows the min-norm element of the convex hull of its own
    scores: :math:`\phi(\theta_m) = \sum_k w_{mk} s_k(\theta_m)` with
    :math:`w_m = \arg\min_{w\in\Delta_K}\|\sum_k w_k s_k(\theta_m)\|^2`. No interaction between
    particles: an ensemble of independent MGDA runs.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import MGDA
    >>> scores = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])  # K=2, M=1, d=2
    >>> phi, info = MGDA().direction(torch.zeros(1, 2), scores)
    >>> phi
    tensor([[0.5000, 0.5000]])
    """

    def __init__(self, task_normalization="none", normalize_drive=True):
        self.task_normalization = _check_task_normalization(task_normalization)
        self.normalize_drive = bool(normalize_drive)

    def __repr__(self):
        if self.task_normalization == "none":
            return "MGDA()"
        return (f"MGDA(task_normalization={self.task_normalization!r}"
                f"{'' if self.normalize_drive else ', normalize_drive=False'})")

    def direction(self, particles, scores, log_densities=None):
        """Return ``(phi, info)``; ``info.weights`` is (M, K), ``info.gram`` (M, K, K).

        With ``task_normalization`` the scores are first rescaled by
        :func:`normalize_task_scores` (``log_densities`` (M, K) for the loss-based ones)."""
        particles, scores = _check_inputs(particles, scores)
        raw, scores = scores, normalize_task_scores(scores, self.task_normalization,
                                                    log_densities)
        combined, grams, weights = _per_particle_min_norm(scores)
        if not self.normalize_drive:
            combined = torch.einsum("mk,kmd->md", weights, raw)
        return combined, DirectionInfo(gram=grams, weights=weights)


class MOOSVGD(_KernelRule):
    r"""Multi-objective SVGD (Liu, Tong & Liu, 2021), the MT-SGD paper's main baseline.

    Per particle, the MGDA min-norm combination :math:`g_m = \sum_k w_{mk} s_k(\theta_m)`
    (one small QP per particle, solved for all particles in one batched call); then one SVGD
    step on the combined scores:
    :math:`\phi(\theta_b) = \frac1M\sum_a[k_{ab} g_a + c\,\nabla_{\theta_a}k(\theta_a,\theta_b)]`.
    The repulsion is not coordinated with the targets, so particles spread along the Pareto
    front (over the modes) rather than into the joint high-density region.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import MOOSVGD
    >>> particles = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    >>> scores = torch.stack([-(particles - 1.0), -(particles + 1.0), -particles])
    >>> phi, info = MOOSVGD().direction(particles, scores)
    >>> phi.shape, info.weights.shape
    (torch.Size([6, 2]), torch.Size([6, 3]))
    """

    def direction(self, particles, scores, log_densities=None):
        """Return ``(phi, info)``; ``info.weights`` is (M, K), ``info.gram`` (M, K, K).

        ``log_densities`` (M, K) is needed only by kernels on the log-density values and by
        the loss-based ``task_normalization``.
        """
        particles, scores = _check_inputs(particles, scores)
        terms = self._stein_terms(particles, scores, log_densities, trace=False)
        raw, scores = scores, normalize_task_scores(scores, self.task_normalization,
                                                    log_densities)
        combined, grams, weights = _per_particle_min_norm(scores)
        if not self.normalize_drive:
            combined = torch.einsum("mk,kmd->md", weights, raw)
        drive = terms.matrix @ combined / particles.shape[0]
        repulsive = self.repulsion * terms.repulsive / particles.shape[0]
        return drive + repulsive, DirectionInfo(gram=grams, weights=weights, sigma2=terms.sigma2,
                                                drive_norm=drive.norm(),
                                                repulsion_norm=repulsive.norm())


class LinearScalarization:
    r"""Fixed-weight combination :math:`\phi(\theta_m) = \sum_k w_k s_k(\theta_m)`.

    With the default uniform weights :math:`w_k = 1/K` and no kernel, every particle follows the
    average score on its own: an independent ensemble, the usual multi-task baseline.

    Parameters
    ----------
    weights : array-like of shape (K,) or (M, K), optional
        Non-negative task weights (normalised to sum to one), shared by all particles or one
        row per particle (particle m follows :math:`\sum_k w_{mk} s_k(\theta_m)`; the warm-up
        of the MT-SGD authors' code spreads the rows over the simplex). Default uniform.
    task_normalization : {'none', 'l2', 'loss', 'loss+'}, default='none'
        Rescale the scores first (:func:`normalize_task_scores`).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import LinearScalarization
    >>> scores = torch.tensor([[[2.0, 0.0]], [[0.0, 2.0]]])
    >>> LinearScalarization().direction(torch.zeros(1, 2), scores)[0]
    tensor([[1., 1.]])
    """

    def __init__(self, weights=None, task_normalization="none"):
        self.weights = weights
        self.task_normalization = _check_task_normalization(task_normalization)

    def __repr__(self):
        extra = ("" if self.task_normalization == "none"
                 else f", task_normalization={self.task_normalization!r}")
        return f"LinearScalarization(weights={self.weights!r}{extra})"

    def direction(self, particles, scores, log_densities=None):
        """Return ``(phi, info)`` with the fixed weights in ``info.weights``."""
        particles, scores = _check_inputs(particles, scores)
        scores = normalize_task_scores(scores, self.task_normalization, log_densities)
        n_targets = scores.shape[0]
        if self.weights is None:
            w = torch.full((n_targets,), 1.0 / n_targets, dtype=scores.dtype, device=scores.device)
        else:
            w = torch.as_tensor(self.weights, dtype=scores.dtype, device=scores.device)
            shapes = ((n_targets,), (scores.shape[1], n_targets))
            if (w.shape not in shapes or not torch.isfinite(w).all() or (w < 0).any()
                    or not (w.sum(-1) > 0).all()):
                raise ValueError(
                    f"weights must have shape {shapes[0]} or {shapes[1]}, be finite, "
                    f"non-negative and sum to a positive number, got {self.weights!r}"
                )
            w = w / w.sum(-1, keepdim=True)
            if w.ndim == 2:
                return torch.einsum("mk,kmd->md", w, scores), DirectionInfo(gram=None, weights=w)
        return torch.einsum("k,kmd->md", w, scores), DirectionInfo(gram=None, weights=w)

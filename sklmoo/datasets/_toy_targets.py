"""Toy target densities of the MT-SGD paper (Section 4.1 and Appendix B.1)."""

import math

import numpy as np
import torch


class GaussianMixture:
    r"""Log-density of a Gaussian mixture with diagonal covariances, as a torch callable.

    Parameters
    ----------
    weights : array-like (C,)
        Mixing proportions (normalised to sum to one).
    means : array-like (C, d)
    variances : float or array-like (C, d)
        Diagonal covariances.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.datasets import GaussianMixture
    >>> p = GaussianMixture([1.0], [[0.0, 0.0]], 1.0)
    >>> round(float(p(torch.zeros(1, 2))[0]), 4)  # -log(2 pi)
    -1.8379
    """

    def __init__(self, weights, means, variances):
        weights = np.atleast_1d(np.asarray(weights, dtype=np.float64))
        if not (np.isfinite(weights).all() and (weights >= 0).all() and weights.sum() > 0):
            raise ValueError(f"weights must be finite, non-negative, with a positive sum, got "
                             f"{weights.tolist()}")
        self.weights = weights / weights.sum()
        self.means = np.atleast_2d(np.asarray(means, dtype=np.float64))
        if len(self.weights) != len(self.means) or not np.isfinite(self.means).all():
            raise ValueError(f"means must be finite, one row per weight: {len(self.weights)} "
                             f"weights, means of shape {self.means.shape}")
        self.variances = np.broadcast_to(np.asarray(variances, dtype=np.float64),
                                         self.means.shape).copy()
        if not (np.isfinite(self.variances).all() and (self.variances > 0).all()):
            raise ValueError("variances must be finite and positive")
        self._cache = {}

    def _tensors(self, x):
        key = (x.dtype, x.device)
        if key not in self._cache:
            t = dict(dtype=x.dtype, device=x.device)
            var = torch.as_tensor(self.variances, **t)
            self._cache[key] = (
                torch.as_tensor(self.means, **t), 1.0 / var,
                torch.as_tensor(np.log(self.weights), **t)
                - 0.5 * torch.log(2 * math.pi * var).sum(-1),
            )
        return self._cache[key]

    def __repr__(self):
        return (f"GaussianMixture(weights={self.weights.tolist()}, means={self.means.tolist()}, "
                f"variances={self.variances.tolist()})")

    def __call__(self, x):
        """``log p(x)`` for particles ``x`` (M, d) -> (M,); integer particles are taken as
        floating point (the default dtype)."""
        if not x.is_floating_point():
            x = x.to(torch.get_default_dtype())
        means, inv_var, log_const = self._tensors(x)
        diff = x[:, None, :] - means[None]                                  # (M, C, d)
        return torch.logsumexp(log_const - 0.5 * (diff * diff * inv_var).sum(-1), dim=1)


def make_gaussian_mixture_targets():
    """The paper's three two-component mixtures (Section 4.1.1), as log-density callables.

    :math:`p_i = 0.7\\,\\mathcal N(\\mu_{i1}, 0.5 I) + 0.3\\,\\mathcal N(\\mu_{i2}, 0.5 I)` with
    :math:`\\mu_{11}=(4,-4)`, :math:`\\mu_{12}=(0,0.5)`, :math:`\\mu_{21}=(-4,4)`,
    :math:`\\mu_{22}=(0.5,0)`, :math:`\\mu_{31}=(-3,-3)`, :math:`\\mu_{32}=(0,0)`. Their joint
    high-density region surrounds the origin; each has its major mode elsewhere.

    Returns
    -------
    list of GaussianMixture

    Examples
    --------
    >>> import torch
    >>> from sklmoo.datasets import make_gaussian_mixture_targets
    >>> targets = make_gaussian_mixture_targets()
    >>> [t(torch.zeros(1, 2)).shape for t in targets]
    [torch.Size([1]), torch.Size([1]), torch.Size([1])]
    """
    comps = [([4.0, -4.0], [0.0, 0.5]), ([-4.0, 4.0], [0.5, 0.0]), ([-3.0, -3.0], [0.0, 0.0])]
    return [GaussianMixture([0.7, 0.3], list(c), 0.5) for c in comps]


def gaussian_mixture_statistics(particles, targets, radius=1.5):
    r"""Where particles sit relative to several Gaussian-mixture targets (Figure 3's reading).

    Parameters
    ----------
    particles : Tensor (M, d)
    targets : list of GaussianMixture
        E.g. :func:`make_gaussian_mixture_targets`; each target's major mode is the mean of its
        heaviest component.
    radius : float, default=1.5

    Returns
    -------
    dict with ``near_origin`` (fraction of particles within ``radius`` of the origin),
    ``on_major_mode`` (fraction within ``radius`` of some target's major mode),
    ``joint_log_density`` (mean over particles of :math:`\sum_k \log p_k`) and ``spread``
    (mean over coordinates of the particles' standard deviation).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.datasets import gaussian_mixture_statistics, make_gaussian_mixture_targets
    >>> stats = gaussian_mixture_statistics(torch.zeros(4, 2), make_gaussian_mixture_targets())
    >>> stats["near_origin"], stats["on_major_mode"], stats["spread"]
    (1.0, 0.0, 0.0)
    """
    if particles.ndim != 2 or len(particles) < 2:
        raise ValueError(f"particles must be (M, d) with at least 2 particles (their spread is "
                         f"a standard deviation), got shape {tuple(particles.shape)}")
    if not particles.is_floating_point():
        particles = particles.to(torch.get_default_dtype())
    if not torch.isfinite(particles).all():
        raise ValueError("particles hold NaN or inf: the sampler that produced them diverged")
    if (isinstance(radius, bool) or not isinstance(radius, (int, float, np.number))
            or not (np.isfinite(radius) and radius > 0)):
        raise ValueError(f"radius must be a positive finite number, got {radius!r}")
    majors = torch.as_tensor(np.stack([t.means[np.argmax(t.weights)] for t in targets]),
                             dtype=particles.dtype, device=particles.device)
    near_major = torch.cdist(particles, majors).min(dim=1).values < radius
    return dict(near_origin=float((particles.norm(dim=1) < radius).double().mean()),
                on_major_mode=float(near_major.double().mean()),
                joint_log_density=float(sum(t(particles) for t in targets).mean()),
                spread=float(particles.std(dim=0).mean()))


#: f1-intervals of ZDT3's five disconnected Pareto-front segments (with g = 1).
ZDT3_FRONT_SEGMENTS = (
    (0.0, 0.0830015349), (0.1822287280, 0.2577623634), (0.4093136748, 0.4538821041),
    (0.6183967944, 0.6525117038), (0.8233317983, 0.8518328654),
)


def zdt3_g(theta):
    r"""ZDT3's :math:`g = 1 + \frac{9}{n-1}\sum_{i\ge2}\theta_i` at ``theta`` (M, n) -> (M,).

    :math:`g = 1` exactly on the Pareto front; how far above 1 it is measures how far a particle
    is from the front.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.datasets import zdt3_g
    >>> zdt3_g(torch.tensor([[0.3] + [0.0] * 29, [0.3] + [1.0] * 29])).tolist()
    [1.0, 10.0]
    """
    if theta.ndim != 2 or theta.shape[1] < 2:
        raise ValueError(f"ZDT3 needs theta of shape (M, n) with n >= 2 variables, got shape "
                         f"{tuple(theta.shape)}")
    return 1.0 + 9.0 * theta[:, 1:].sum(dim=1) / (theta.shape[1] - 1)


def zdt3_objectives(theta):
    r"""ZDT3's two objectives at ``theta`` (M, n) with entries in [0, 1] -> (f1, f2), each (M,).

    :math:`f_1 = \theta_1`, :math:`g = 1 + \frac{9}{n-1}\sum_{i\ge2}\theta_i`,
    :math:`f_2 = g\,(1 - \sqrt{f_1/g} - (f_1/g)\sin(10\pi f_1))`.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.datasets import zdt3_objectives
    >>> f1, f2 = zdt3_objectives(torch.zeros(1, 30))
    >>> float(f1[0]), round(float(f2[0]), 4)
    (0.0, 1.0)
    """
    f1 = theta[:, 0]
    g = zdt3_g(theta)
    ratio = f1 / g
    # sqrt's derivative is infinite at 0; the floor keeps the score finite at the boundary
    h = 1.0 - torch.sqrt(ratio.clamp_min(1e-12)) - ratio * torch.sin(10.0 * math.pi * f1)
    return f1, g * h


def make_zdt3_targets():
    """ZDT3 (Appendix B.1.2) as two log-densities :math:`\\log p_k = -f_k`, for use with
    ``bounds=ZDT3_BOUNDS`` (the box :math:`[0, 1]^{30}`).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.datasets import make_zdt3_targets
    >>> [round(float(t(torch.zeros(1, 30))[0]), 4) for t in make_zdt3_targets()]
    [-0.0, -1.0]
    """
    return [lambda x: -zdt3_objectives(x)[0], lambda x: -zdt3_objectives(x)[1]]


#: ZDT3's box constraint, for ``sample_multi_target(..., bounds=ZDT3_BOUNDS)``.
ZDT3_BOUNDS = (0.0, 1.0)


def zdt3_pareto_front(n_points=500):
    """``n_points`` points (f1, f2) on ZDT3's true Pareto front, for plotting -> array
    (n_points, 2): evenly spaced along f1 within each of its five segments, at least two per
    segment (``n_points`` >= 10).

    Examples
    --------
    >>> from sklmoo.datasets import zdt3_pareto_front
    >>> zdt3_pareto_front(100).shape
    (100, 2)
    """
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 10:
        raise ValueError(f"n_points must be an integer >= 10 (two per segment), got "
                         f"{n_points!r}")
    per = [n_points // 5 + (i < n_points % 5) for i in range(5)]
    f1 = np.concatenate([np.linspace(a, b, k) for (a, b), k in zip(ZDT3_FRONT_SEGMENTS, per)])
    return np.column_stack([f1, 1.0 - np.sqrt(f1) - f1 * np.sin(10 * np.pi * f1)])


def zdt3_segment(f1):
    """Index (0-4) of the Pareto segment whose f1-interval is nearest to each ``f1`` value.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.datasets import zdt3_segment
    >>> zdt3_segment(np.array([0.0, 0.85]))
    array([0, 4])
    """
    f1 = np.asarray(f1, dtype=np.float64)
    if not np.isfinite(f1).all():
        raise ValueError("f1 must be finite (no NaN or inf)")
    centres = np.array([(a + b) / 2 for a, b in ZDT3_FRONT_SEGMENTS])
    return np.abs(f1[:, None] - centres[None]).argmin(axis=1)

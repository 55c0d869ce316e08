"""Exact Gaussian-process regression for small tables: the regressor's kernel mean function.

A GP per output with kernel ``constant + linear + ARD RBF + noise`` on standardised inputs, its
hyperparameters at the posterior mode under weak priors (maximum marginal likelihood alone lets
ten length scales over-fit 24 rows: scikit-learn's ARD GP is worse than a constant on two panel
tables). The priors:

* length scales: log-normal about :math:`\\sqrt d` times ``LENGTHSCALE_PRIOR_FACTOR``
  (Hvarfner et al. 2024, "Vanilla Bayesian optimization performs great in high dimensions":
  the expected distance between points grows like :math:`\\sqrt d`), so an input only gets a
  short length scale when the data ask for it, and the RBF part is smooth by default;
* the RBF and linear variances and the noise: log-normal, broad, about a fraction of the
  standardised target's unit variance (the variances' log-scale spread ``LOG_PRIOR_SD`` = 3
  lets a noise-free curve take a signal variance a hundred times the target's: with 1.5 the
  19-row ``pressure`` curve extrapolated 0.38 NLL worse than scikit-learn's GP).

No sklearn here. Float64 throughout; Cholesky with growing jitter.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import trim_mean
from torch import nn

from ._ensemble import gaussian_map_pullback

#: prior medians (standardised inputs and targets) and the prior's log-scale spread
LENGTHSCALE_PRIOR_FACTOR = 2.0
LOG_PRIOR_SD = 3.0
SIGNAL_PRIOR_MEDIAN = 0.5
LINEAR_PRIOR_MEDIAN = 0.5
NOISE_PRIOR_MEDIAN = 0.1
NOISE_PRIOR_SD = 3.0
LENGTHSCALE_PRIOR_SD = 1.0
#: variance of the constant part (the unknown level of the standardised target)
CONSTANT_VARIANCE = 1.0
NOISE_FLOOR = 1e-6
OFF_LOG_VARIANCE = -1000.0
#: each log hyperparameter stays within this of its prior median (e^12: 1.6e5 times)
PARAM_RANGE = 12.0


@dataclass
class KernelFit:
    """A fitted GP for one output, on standardised inputs ``(X - x_mean) / x_scale``.

    The GP is fitted to the standardised target ``(y - y_offset) / y_scale`` (its priors are
    on that scale); ``noise`` is in the target's units.
    ``train_x`` (n, d) standardised training inputs, ``alpha`` (n,) = K^-1 (standardised y),
    ``chol`` (n, n) lower Cholesky factor of K (noise included), ``log_params`` the fitted
    hyperparameters (log length scales (d,), log RBF variance, log linear variance, log noise
    variance), ``y_offset`` / ``y_scale`` the target's weighted mean and standard deviation,
    ``noise`` the noise variance per unit weight, ``neg_log_posterior`` the optimum's value."""

    train_x: np.ndarray
    x_mean: np.ndarray
    x_scale: np.ndarray
    alpha: np.ndarray
    chol: np.ndarray
    log_params: np.ndarray
    y_offset: float
    y_scale: float
    noise: float
    neg_log_posterior: float
    rbf: bool = True
    ard: bool = True


@dataclass
class KernelMixture:
    """Two :class:`KernelFit` of one output (with and without the RBF part) predicting together:
    the mixture of their predictive distributions with weights ``weights``, summarised by its
    mean and variance (:func:`kernel_predict`). ``noise`` is the weighted mean of the
    components' noise variances; the rest of the mixture's variance counts as latent."""

    fits: list
    weights: np.ndarray
    rbf: bool = True
    ard: bool = True

    @property
    def noise(self):
        return float(np.dot(self.weights, [fit.noise for fit in self.fits]))

    @property
    def y_scale(self):
        return self.fits[0].y_scale


def components(fit):
    """[(weight, KernelFit)] of a :class:`KernelFit` (one, weight 1) or a :class:`KernelMixture`."""
    if isinstance(fit, KernelMixture):
        return [(float(w), f) for w, f in zip(fit.weights, fit.fits)]
    return [(1.0, fit)]


def mix_moments(weights, means, variances, noises):
    """The mean, latent variance and noise of a mixture of Gaussians whose component c has mean
    ``means[c]``, latent variance ``variances[c]`` and noise ``noises[c]`` (weights summing to
    1): latent = sum w (v + (m - mean)^2), so that latent + noise is the mixture's variance."""
    mean = sum(w * m for w, m in zip(weights, means))
    latent = sum(w * (v + (m - mean) ** 2) for w, m, v in zip(weights, means, variances))
    return mean, latent, sum(w * n for w, n in zip(weights, noises))


def _unpack(theta, d):
    return theta[:d], theta[d], theta[d + 1], theta[d + 2]


def _scaled_sq_dists(A, B, log_ls):
    """``(a, b, sq)``: the inputs over their length scales and the squared distances between
    their rows (n, m), the RBF part's argument; ``B is A``: the (n, n) distances of A's rows,
    ``b`` is ``a``."""
    ls = torch.exp(log_ls)
    a = A / ls
    b = a if B is A else B / ls
    norms_a = (a * a).sum(1)
    norms_b = norms_a if b is a else (b * b).sum(1)
    return a, b, (norms_a[:, None] + norms_b[None, :] - 2.0 * a @ b.T).clamp_min(0.0)


def kernel_matrix(theta, A, B):
    """Noise-free kernel between standardised inputs A (n, d) and B (m, d), torch float64."""
    d = A.shape[1]
    log_ls, log_sig, log_lin, _ = _unpack(theta, d)
    _, _, sq = _scaled_sq_dists(A, B, log_ls)
    return (torch.exp(log_sig) * torch.exp(-0.5 * sq)
            + torch.exp(log_lin) * (A @ B.T) / max(d, 1) + CONSTANT_VARIANCE)


def kernel_diag(theta, A):
    d = A.shape[1]
    _, log_sig, log_lin, _ = _unpack(theta, d)
    return (torch.exp(log_sig) + torch.exp(log_lin) * (A * A).sum(1) / max(d, 1)
            + CONSTANT_VARIANCE)


def _prior_means(d):
    return np.concatenate([np.full(d, math.log(LENGTHSCALE_PRIOR_FACTOR * math.sqrt(d))),
                           [math.log(SIGNAL_PRIOR_MEDIAN), math.log(LINEAR_PRIOR_MEDIAN),
                            math.log(NOISE_PRIOR_MEDIAN)]])


def _cholesky(K):
    n = K.shape[0]
    eye = torch.eye(n, dtype=K.dtype)
    jitter = 0.0
    for _ in range(8):
        L, info = torch.linalg.cholesky_ex(K + jitter * eye)
        if int(info) == 0:
            return L
        jitter = 1e-8 if jitter == 0.0 else jitter * 10
    raise np.linalg.LinAlgError("kernel matrix is not positive definite")


def _factor(K, y):
    """``(L, alpha)``: the Cholesky factor of K and ``alpha = K^-1 y``."""
    L = _cholesky(K)
    return L, torch.cholesky_solve(y[:, None], L)[:, 0]


class _KernelNLL(torch.autograd.Function):
    """``0.5 y' K^-1 y + log|L|`` of the full kernel (noise included) as a function of the
    log hyperparameters theta, with their gradient in closed form: with
    ``G = 0.5 (K^-1 - alpha alpha')``, ``E`` the RBF part's exp(-0.5 |a_i - a_k|^2) (``a`` the
    inputs over their length scales) and ``M = G * exp(log_sig) E``: sum(M) for the RBF
    variance, ``lin / d * sum(X * (G X))`` for the linear one, the noise times
    ``sum(diag(G) / w)``, and ``2 (rowsum(M) a^2 - a * (M a))`` summed over rows for the log
    length scales. The same gradient as autograd through the kernel matrix (to rounding) at
    a few n x n x d products instead of a dozen elementwise passes over n x n tensors."""

    @staticmethod
    def forward(ctx, theta, X, y, inv_w):
        d = X.shape[1]
        log_ls, log_sig, log_lin, log_noise = _unpack(theta, d)
        a, _, sq = _scaled_sq_dists(X, X, log_ls)
        rbf = sq.mul_(-0.5).exp_()                                     # E, in place of sq
        K = torch.exp(log_sig) * rbf
        K.addmm_(X, X.T, alpha=float(torch.exp(log_lin)) / max(d, 1)).add_(CONSTANT_VARIANCE)
        K.diagonal().add_((torch.exp(log_noise) + NOISE_FLOOR) * inv_w)
        L, alpha = _factor(K, y)
        ctx.save_for_backward(theta, X, inv_w, a, rbf, L, alpha)
        return 0.5 * y @ alpha + torch.log(torch.diagonal(L)).sum()

    @staticmethod
    def backward(ctx, grad):
        theta, X, inv_w, a, rbf, L, alpha = ctx.saved_tensors
        d = X.shape[1]
        _, log_sig, log_lin, log_noise = _unpack(theta, d)
        G = torch.cholesky_inverse(L)
        G.sub_(torch.outer(alpha, alpha)).mul_(0.5)
        out = torch.empty_like(theta)
        out[d + 1] = torch.exp(log_lin) * (X * (G @ X)).sum() / max(d, 1)
        out[d + 2] = torch.exp(log_noise) * (torch.diagonal(G) * inv_w).sum()
        M = G.mul_(rbf).mul_(torch.exp(log_sig))                      # G is not needed again
        out[d] = M.sum()
        out[:d] = 2.0 * (M.sum(1) @ (a * a) - (a * (M @ a)).sum(0))
        return grad * out, None, None, None


def _linear_statistics(X, y, inv_w):
    """What the linear model's likelihood needs of the data, computed once per fit:
    ``(Phi' W Phi, Phi' W y, y' W y, sum log w, n)`` for ``Phi = [1, X]`` and ``W = diag(w)``,
    ``w = 1 / inv_w`` (torch float64)."""
    w = 1.0 / inv_w
    phi = torch.cat([torch.ones(len(X), 1, dtype=X.dtype), X], dim=1)
    weighted = phi * w[:, None]
    return weighted.T @ phi, weighted.T @ y, (w * y * y).sum(), torch.log(w).sum(), len(y)


def _linear_gaussian_nll(theta, statistics):
    """``0.5 y' K^-1 y + 0.5 log|K|`` of the kernel without its RBF part, ``K = Phi P Phi' +
    noise W^-1`` (P: the constant's and the linear part's prior variances), in the
    (d + 1)-dimensional weight space (Woodbury and the matrix determinant lemma) instead of
    through the n x n matrix: the same value to rounding, at a cost that does not grow with
    the rows."""
    gram, cross, y_wy, sum_log_w, n = statistics
    d = gram.shape[0] - 1
    noise = torch.exp(theta[d + 2]) + NOISE_FLOOR
    prior_var = torch.cat([theta.new_tensor([CONSTANT_VARIANCE]),
                           (torch.exp(theta[d + 1]) / max(d, 1)).expand(d)])
    A = torch.diag(1.0 / prior_var) + gram / noise
    L = _cholesky(A)
    b = cross / noise
    quad = y_wy / noise - b @ torch.cholesky_solve(b[:, None], L)[:, 0]
    log_det = (2.0 * torch.log(torch.diagonal(L)).sum() + torch.log(prior_var).sum()
               + n * torch.log(noise) - sum_log_w)
    return 0.5 * quad + 0.5 * log_det


def _neg_log_posterior(theta, X, y, inv_w, prior_mean, prior_weight, linear=None):
    """The GP's negative log posterior in theta; ``linear``: the data's
    :func:`_linear_statistics` when the RBF part is off (the likelihood then in weight
    space)."""
    d = X.shape[1]
    if linear is not None:
        nll = _linear_gaussian_nll(theta, linear)
    else:
        nll = _KernelNLL.apply(theta, X, y, inv_w)
    nll = nll + 0.5 * len(y) * math.log(2 * math.pi)
    sd = torch.full_like(theta, LOG_PRIOR_SD)
    sd[:d] = LENGTHSCALE_PRIOR_SD
    sd[-1] = NOISE_PRIOR_SD
    # a part held at -inf (the RBF variance of the linear model) has weight 0 and no prior
    counted = prior_weight > 0
    prior = 0.5 * (prior_weight[counted] * ((theta - prior_mean)[counted] / sd[counted]) ** 2).sum()
    return nll + prior


def fit_kernel_regression(X, y, weight=None, rbf=True, ard=True, n_restarts=1,
                          random_state=None, max_iter=200, start=None):
    """Fit the GP of the module docstring to (X (n, d), y (n,)) with optional positive row
    weights (a weight w divides the row's noise variance by w: w identical rows' worth).
    Returns a :class:`KernelFit`, the posterior on every row.

    The hyperparameters are those at the posterior mode, the lowest of the optima reached from
    the prior medians and from ``n_restarts`` random perturbations of them, or from ``start``
    alone (log parameters, as ``KernelFit.log_params``) when given."""
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    y = np.asarray(y, dtype=np.float64)
    n, d = X.shape
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
    w = w / w.mean()
    x_mean = np.average(X, axis=0, weights=w)
    x_scale = np.sqrt(np.average((X - x_mean) ** 2, axis=0, weights=w))
    x_scale = np.where(x_scale > 0, x_scale, 1.0)
    Z = (X - x_mean) / x_scale
    y_offset = float(np.average(y, weights=w))
    y_scale = float(np.sqrt(np.average((y - y_offset) ** 2, weights=w)))
    if not (np.isfinite(y_scale) and y_scale > 0):
        y_scale = 1.0
    Xt, yt = torch.from_numpy(Z), torch.from_numpy((y - y_offset) / y_scale)
    inv_w = torch.from_numpy(1.0 / w)
    prior_mean = _prior_means(d)
    prior_t = torch.from_numpy(prior_mean)
    rng = np.random.RandomState(_seed(random_state))
    # theta (d + 3,) from the free parameters: ``index`` maps each entry of theta to one of
    # them (-1: held at ``fixed``); ``prior_weight`` counts each free parameter's prior once
    index = np.arange(d + 3)
    prior_weight = np.ones(d + 3)
    if not ard:                       # one length scale for every input
        index = np.concatenate([np.zeros(d, dtype=np.int64), np.arange(1, 4)])
        prior_weight[:d] = 1.0 / d
    if not rbf:                       # the RBF part switched off: a Bayesian linear model
        index = np.concatenate([np.full(d + 1, -1), np.arange(2)])
        prior_weight[:d + 1] = 0.0
    # a part switched off has log variance OFF_LOG_VARIANCE: exactly 0 once exponentiated,
    # and finite (a saved state holds no inf)
    fixed = torch.from_numpy(np.where(index >= 0, 0.0, OFF_LOG_VARIANCE))
    fixed[:d] = 0.0
    taken = torch.from_numpy(index >= 0)
    gather = torch.from_numpy(np.maximum(index, 0))
    weight_t = torch.from_numpy(prior_weight)
    first = {}
    for position, k in enumerate(index):
        first.setdefault(int(k), position)
    free_positions = [first[k] for k in sorted(first) if k >= 0]
    if start is not None:
        # the prior medians only if that start fails (duplicated rows and a near-zero noise
        # can make every kernel matrix along its line search singular)
        starts = [np.asarray(start, dtype=np.float64), prior_mean]
    else:
        starts = [prior_mean] + [prior_mean + rng.normal(0.0, 1.0, prior_mean.shape)
                                 for _ in range(n_restarts if rbf else 0)]
    low, high = prior_t - PARAM_RANGE, prior_t + PARAM_RANGE
    linear = None if rbf else _linear_statistics(Xt, yt, inv_w)
    best = None
    fallback_only = start is not None       # later starts only if the earlier ones failed
    for start in starts:
        if fallback_only and best is not None:
            break
        params = torch.tensor(start[free_positions], dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([params], lr=1.0, max_iter=max_iter, tolerance_grad=1e-7,
                                tolerance_change=1e-10, line_search_fn="strong_wolfe")

        def full():
            # bounded: a line search step to exp(400) overflows the kernel matrix
            return torch.where(taken, torch.clamp(params[gather], low, high), fixed)

        def closure():
            opt.zero_grad()
            loss = _neg_log_posterior(full(), Xt, yt, inv_w, prior_t, weight_t, linear)
            loss.backward()
            return loss

        try:
            opt.step(closure)
            with torch.no_grad():
                theta = full()
                value = float(_neg_log_posterior(theta, Xt, yt, inv_w, prior_t, weight_t,
                                                 linear))
        except (np.linalg.LinAlgError, RuntimeError, IndexError):
            # IndexError: torch's strong-Wolfe line search on a non-finite loss
            continue
        if np.isfinite(value) and (best is None or value < best[0]):
            best = (value, theta.detach().clone())
    if best is None:
        raise np.linalg.LinAlgError("the kernel mean function could not be fitted")
    value, theta = best
    with torch.no_grad():
        noise = float(torch.exp(theta[d + 2])) + NOISE_FLOOR
        K = kernel_matrix(theta, Xt, Xt) + torch.diag(noise * inv_w)
        L, alpha = _factor(K, yt)
    return KernelFit(train_x=Z, x_mean=x_mean, x_scale=x_scale, alpha=alpha.numpy(),
                     chol=L.numpy(), log_params=theta.numpy(), y_offset=y_offset, y_scale=y_scale,
                     noise=noise * y_scale ** 2, neg_log_posterior=value, rbf=rbf, ard=ard)


def kernel_predict(fit, X):
    """Posterior mean and variance of the latent function (noise excluded) at X, numpy; of a
    :class:`KernelMixture`, the mixture's mean and its variance less ``fit.noise``."""
    if isinstance(fit, KernelMixture):
        parts = [(w, f, kernel_predict(f, X)) for w, f in components(fit)]
        mean, latent, _ = mix_moments([w for w, _, _ in parts], [p[0] for _, _, p in parts],
                                      [p[1] for _, _, p in parts], [f.noise for _, f, _ in parts])
        return mean, latent
    Z = (np.asarray(X, dtype=np.float64).reshape(len(X), -1) - fit.x_mean) / fit.x_scale
    theta = torch.from_numpy(fit.log_params)
    Zt, Xt = torch.from_numpy(Z), torch.from_numpy(fit.train_x)
    with torch.no_grad():
        Ks = kernel_matrix(theta, Zt, Xt)
        mean = (Ks @ torch.from_numpy(fit.alpha)) * fit.y_scale + fit.y_offset
        v = torch.linalg.solve_triangular(torch.from_numpy(fit.chol), Ks.T, upper=False)
        var = (kernel_diag(theta, Zt) - (v * v).sum(0)).clamp_min(0.0) * fit.y_scale ** 2
    return mean.numpy(), var.numpy()


SELECTION_FOLDS = 5
#: up to this many rows the selection leaves one row out at a time, and the RBF part has one
#: length scale for every input (ten ARD length scales fitted to 24 rows over-fit their
#: marginal likelihood: test NLL 2.7 against 1.1 for the isotropic kernel on one mtcars split)
LOO_MAX_ROWS = 60
#: share of the paired leave-one-out differences cut from each end before they are averaged:
#: on tens of rows one or two outlying rows decide a plain mean (MASS::hills: +0.6 +- 0.8
#: against the RBF part, which predicts the other rows better)
LOO_TRIM = 0.1
#: above ``LOO_MAX_ROWS``, a stacking weight (on the RBF model) beyond ``1 - STACK_SNAP`` or
#: below ``STACK_SNAP`` keeps one model alone; in between the two predict together (a few
#: per cent of a poor linear model widen a good RBF model's intervals: mcycle +0.016 NLL)
STACK_SNAP = 0.1


def _fold_losses(X, y, w, folds, start, **kernel):
    """Held-out NLL of every row, each fold's hyperparameters refitted from ``start`` (the
    optimum on every row: deterministic, and near the fold's own optimum)."""
    losses = np.empty(len(y))
    for test in folds:
        train = np.setdiff1d(np.arange(len(y)), test)
        fit = fit_kernel_regression(X[train], y[train], w[train], start=start, **kernel)
        mean, var = kernel_predict(fit, X[test])
        var = var + fit.noise / (w[test] / w[train].mean())
        losses[test] = 0.5 * np.log(2 * np.pi * var) + 0.5 * (y[test] - mean) ** 2 / var
    return losses


def fit_kernel_mean(X, y, weight=None, random_state=None):
    """The kernel mean function of one output: :func:`fit_kernel_regression` with or without
    its RBF part (without: a Bayesian linear model), chosen on the held-out rows of a
    cross-validation (hyperparameters refitted per fold, from their optimum on every row).

    * Up to ``LOO_MAX_ROWS`` rows: leave-one-out, an isotropic RBF part (one length scale)
      fitted from the prior medians alone (a random restart finds over-fitting short length
      scales on tens of rows), kept when the trimmed mean (``LOO_TRIM`` cut from each end) of
      the paired per-row differences in held-out NLL favours it.
    * Above: ``SELECTION_FOLDS`` folds, an ARD RBF part; the two models are stacked by their
      held-out log densities (:func:`stacking_weight`): a weight within ``STACK_SNAP`` of 0 or
      1 keeps one model, otherwise both predict, as a :class:`KernelMixture` (on caschools the
      linear model alone predicted better than the RBF one the folds preferred, and the
      mixture better than either).

    Returns the :class:`KernelFit` (``rbf`` and ``ard`` set) or :class:`KernelMixture`."""
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64)
    n = len(y)
    rbf, ard = True, n > LOO_MAX_ROWS
    if n >= 2 * SELECTION_FOLDS:
        if not ard:                        # leave-one-out: no fold draw to be lucky in
            folds = [np.array([i]) for i in range(n)]
        else:
            order = np.random.RandomState(_seed(random_state)).permutation(n)
            folds = np.array_split(order, SELECTION_FOLDS)
        fits = {rbf: fit_kernel_regression(X, y, w, rbf=rbf, ard=ard, random_state=random_state,
                                           n_restarts=int(ard))
                for rbf in (True, False)}
        losses_rbf = _fold_losses(X, y, w, folds, fits[True].log_params, rbf=True, ard=ard)
        losses_linear = _fold_losses(X, y, w, folds, fits[False].log_params, rbf=False)
        diff = losses_rbf - losses_linear     # per row, paired
        if not ard:
            rbf = bool(trim_mean(diff, LOO_TRIM) < 0)
        else:
            weight = stacking_weight(losses_rbf, losses_linear)
            if STACK_SNAP <= weight <= 1 - STACK_SNAP:
                return KernelMixture([fits[True], fits[False]], np.array([weight, 1 - weight]),
                                     rbf=True, ard=ard)
            rbf = bool(weight > STACK_SNAP)
        return fits[rbf]
    return fit_kernel_regression(X, y, w, rbf=rbf, ard=ard, random_state=random_state)


def refit_kernel_mean(fit, X, y, weight=None):
    """``fit`` (a :func:`fit_kernel_mean` result) fitted again to ``(X, y)``: the same model
    (with or without the RBF part, or the mixture with the same weights), its hyperparameters
    re-optimised from ``fit``'s; no cross-validation."""
    if isinstance(fit, KernelMixture):
        return KernelMixture([refit_kernel_mean(part, X, y, weight) for part in fit.fits],
                             np.array(fit.weights), rbf=fit.rbf, ard=fit.ard)
    return fit_kernel_regression(X, y, weight, rbf=fit.rbf, ard=fit.ard, start=fit.log_params)


def stacking_weight(losses_a, losses_b):
    """The weight w in [0, 1] maximising sum_i log(w exp(-a_i) + (1 - w) exp(-b_i)): the
    stacking of two predictive distributions by their held-out log densities (Yao et al.
    2018), ``losses_*`` the per-row held-out negative log densities. Concave in w: bisection
    on the derivative."""
    a, b = np.asarray(losses_a, dtype=np.float64), np.asarray(losses_b, dtype=np.float64)
    ratio = np.exp(np.clip(b - a, -700.0, 700.0))    # p_a / p_b per row

    def slope(w):                                    # d/dw sum log(w ratio + 1 - w)
        return float(np.sum((ratio - 1.0) / (w * ratio + (1.0 - w))))   # > 0 (no 1 + r - 1)

    if slope(0.0) <= 0.0:
        return 0.0
    if slope(1.0) >= 0.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if slope(mid) > 0 else (low, mid)
    return 0.5 * (low + high)


def _seed(random_state):
    return int(random_state) if isinstance(random_state, (int, np.integer)) else 0


class KernelMean(nn.Module):
    r"""A fixed Gaussian-process mean function under Gaussian particle heads (the kernel
    counterpart of :class:`~sklmoo.nn.LinearMean`, with the same ``forward``).

    Per task t, :math:`\mu_t(x)` and :math:`v_t(x)` are the posterior mean and variance of the
    latent function of a GP fitted by :func:`fit_kernel_mean` (of a mixture of two GPs: the
    mixture's mean, and its variance less the mean noise :math:`n_t`); each particle's mean and
    standard deviation become :math:`\mu_t(x) + g_t s_t m` and
    :math:`\sqrt{g_t s_t^2 \sigma^2 + (1 - g_t) n_t + v_t(x)}`, with :math:`s_t` the noise
    standard deviation (floored), :math:`n_t` the noise variance and :math:`g_t`, the
    networks' gate, 1 (they add their output) or 0 (the GP's predictive distribution alone).
    The third channel is :math:`\sqrt{v_t(x)}`, the part every particle shares (epistemic).
    Each task has ``N_COMPONENTS`` slots for GPs (with their weights); slots with fewer
    training rows are zero-padded. Buffers are resized when a state dict of another fit is
    loaded (after :meth:`check_state_dict`).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklmoo.nn import KernelMean
    >>> from sklmoo.nn._kernel_mean import fit_kernel_mean
    >>> x = np.linspace(-3, 3, 9)[:, None]
    >>> gp = KernelMean(1, n_tasks=1)
    >>> gp.set([fit_kernel_mean(x, np.sin(x[:, 0]), random_state=0)])
    >>> gp.set_gate([0.0])                                # the GP's predictive alone
    >>> heads = (torch.zeros(2, 3, 2),)                   # 2 rows, 3 particles: N(0, 0)
    >>> out = gp(torch.tensor([[0.5], [1.5]]), heads)[0]
    >>> out.shape                                        # (rows, particles, 3 channels)
    torch.Size([2, 3, 3])
    >>> np.round(out[:, 0, 0].numpy(), 2)                 # close to sin(0.5), sin(1.5)
    array([0.48, 1.  ], dtype=float32)
    """

    #: GP slots per task (a :class:`KernelMixture` has two components)
    N_COMPONENTS = 2
    _BUFFERS = ("train_x", "x_mean", "x_scale", "log_params", "alpha", "chol_inv", "y_offset",
                "y_scale", "noise", "mix", "scale", "gate", "n_rows")

    def __init__(self, in_features, n_tasks):
        super().__init__()
        d, T, C = in_features, n_tasks, self.N_COMPONENTS
        for name, shape in (("train_x", (T, C, 0, d)), ("x_mean", (T, C, d)),
                            ("x_scale", (T, C, d)), ("log_params", (T, C, d + 3)),
                            ("alpha", (T, C, 0)), ("chol_inv", (T, C, 0, 0)),
                            ("y_offset", (T, C)), ("y_scale", (T, C)), ("noise", (T, C)),
                            ("mix", (T, C)), ("scale", (T,)), ("gate", (T,))):
            self.register_buffer(name, torch.zeros(shape, dtype=torch.float64))
        self.x_scale.fill_(1.0)
        self.y_scale.fill_(1.0)
        self.noise.fill_(1.0)
        self.mix[:, 0] = 1.0
        self.scale.fill_(1.0)
        self.gate.fill_(1.0)
        self.register_buffer("n_rows", torch.zeros(T, C, dtype=torch.int64))
        self.register_buffer("fitted", torch.tensor(False))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in self._BUFFERS:
            key = prefix + name
            if key in state_dict and state_dict[key].shape != getattr(self, name).shape:
                setattr(self, name, torch.zeros_like(state_dict[key]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def check_state_dict(self, state_dict, prefix=""):
        """Refuse a state dict whose training rows do not fit this module (other outputs or
        features, inconsistent row counts), before anything is resized.

        Raises
        ------
        ValueError
            Naming the buffer.
        """
        T, C, d = self.x_mean.shape
        shapes = {name: tuple(state_dict[prefix + name].shape)
                  for name in ("train_x", "alpha", "chol_inv", "n_rows")
                  if prefix + name in state_dict}
        if len(shapes) < 4:
            return                          # missing keys are named by the caller
        k = shapes["alpha"][2] if len(shapes["alpha"]) == 3 else -1
        expected = {"train_x": (T, C, k, d), "alpha": (T, C, k), "chol_inv": (T, C, k, k),
                    "n_rows": (T, C)}
        wrong = [f"{prefix}{name} {shapes[name]} (expected {expected[name]})"
                 for name in expected if shapes[name] != expected[name]]
        if k < 0 or wrong:
            raise ValueError(f"a kernel mean function of other shapes than this estimator's "
                             f"({T} outputs, {d} features): {', '.join(wrong)}")
        n_rows = state_dict[prefix + "n_rows"]
        if n_rows.is_floating_point() or bool(((n_rows < 0) | (n_rows > k)).any()):
            raise ValueError(f"{prefix}n_rows must be row counts between 0 and {k}, got "
                             f"{n_rows.tolist()}")

    def set(self, fits, scale_floor=0.0):
        """Copy one :class:`KernelFit` or :class:`KernelMixture` per task in: None keeps what
        that task holds (zero mean and unit noise before any fit). The mean noise standard
        deviation, floored at ``scale_floor`` times the target's standard deviation, is the
        networks' unit."""
        T, C, d = self.x_mean.shape
        parts = [None if fit is None else components(fit) for fit in fits]
        n = max([len(f.alpha) for p in parts if p is not None for _, f in p]
                + [int(self.n_rows[t].max()) for t in range(T) if parts[t] is None] + [0])
        dev = self.x_mean.device
        train_x = torch.zeros(T, C, n, d, dtype=torch.float64, device=dev)
        alpha = torch.zeros(T, C, n, dtype=torch.float64, device=dev)
        chol_inv = torch.eye(n, dtype=torch.float64, device=dev).repeat(T, C, 1, 1)
        with torch.no_grad():
            for t, part in enumerate(parts):
                if part is None:
                    k = int(self.n_rows[t].max())
                    train_x[t, :, :k] = self.train_x[t, :, :k]
                    alpha[t, :, :k] = self.alpha[t, :, :k]
                    chol_inv[t, :, :k, :k] = self.chol_inv[t, :, :k, :k]
                    continue
                self.mix[t] = 0.0
                self.n_rows[t] = 0
                for c, (weight, fit) in enumerate(part):
                    k = len(fit.alpha)
                    train_x[t, c, :k] = torch.from_numpy(fit.train_x)
                    alpha[t, c, :k] = torch.from_numpy(fit.alpha)
                    L = torch.from_numpy(fit.chol)
                    chol_inv[t, c, :k, :k] = torch.linalg.solve_triangular(
                        L, torch.eye(k, dtype=torch.float64), upper=False).to(dev)
                    self.x_mean[t, c] = torch.from_numpy(fit.x_mean)
                    self.x_scale[t, c] = torch.from_numpy(fit.x_scale)
                    self.log_params[t, c] = torch.from_numpy(fit.log_params)
                    self.y_offset[t, c] = fit.y_offset
                    self.y_scale[t, c] = fit.y_scale
                    self.noise[t, c] = fit.noise
                    self.mix[t, c] = weight
                    self.n_rows[t, c] = k
                noise = float((self.mix[t] * self.noise[t]).sum())
                self.scale[t] = max(math.sqrt(noise), scale_floor * part[0][1].y_scale)
            self.train_x, self.alpha, self.chol_inv = train_x, alpha, chol_inv
            self.fitted.fill_(True)

    def set_gate(self, gate):
        """Turn the networks' contribution on (1) or off (0), per task."""
        with torch.no_grad():
            self.gate.copy_(torch.as_tensor(gate, dtype=torch.float64))

    def _component(self, x, t, c):
        k = int(self.n_rows[t, c])
        z = (x - self.x_mean[t, c]) / self.x_scale[t, c]
        theta = self.log_params[t, c]
        Ks = kernel_matrix(theta, z, self.train_x[t, c, :k])                  # (b, k)
        mean = (Ks @ self.alpha[t, c, :k]) * self.y_scale[t, c] + self.y_offset[t, c]
        v = Ks @ self.chol_inv[t, c, :k, :k].T                                 # (b, k)
        var = (kernel_diag(theta, z) - (v * v).sum(1)).clamp_min(0.0) * self.y_scale[t, c] ** 2
        return mean, var

    def moments(self, x):
        """The GP posterior mean, latent variance and noise variance, (batch, n_tasks) each,
        float64 (of a mixture: its mean, its variance less the mean noise, the mean noise)."""
        x = x.reshape(x.shape[0], -1).double()
        T, C, _ = self.x_mean.shape
        means, variances, noises = [], [], []
        zeros = torch.zeros(len(x), dtype=torch.float64, device=x.device)
        for t in range(T):
            used = [c for c in range(C) if int(self.n_rows[t, c]) > 0 and float(self.mix[t, c]) > 0]
            if not used:
                means.append(zeros)
                variances.append(zeros)
                noises.append(zeros + self.noise[t, 0])
                continue
            parts = [self._component(x, t, c) for c in used]
            mean, var, noise = mix_moments([self.mix[t, c] for c in used], [m for m, _ in parts],
                                           [v for _, v in parts],
                                           [self.noise[t, c] for c in used])
            means.append(mean)
            variances.append(var)
            noises.append(zeros + noise)
        return torch.stack(means, 1), torch.stack(variances, 1), torch.stack(noises, 1)

    def forward(self, x, outputs):
        """The particles' per-task outputs with the GP under them (see the class description):
        T tensors (batch, M, 3) of mean, standard deviation, and the GP's latent standard
        deviation."""
        if not bool(self.fitted):
            return tuple(torch.cat([o, torch.zeros_like(o[..., :1])], -1) for o in outputs)
        mean, var, noise = self.moments(x)
        result = []
        for t, out in enumerate(outputs):
            m, sd = out[..., 0], out[..., 1]
            g, s = self.gate[t], self.scale[t]
            mu = mean[:, t:t + 1]
            v = var[:, t:t + 1]
            total = g * (s * sd.double()) ** 2 + (1 - g) * noise[:, t:t + 1] + v
            result.append(torch.stack([(mu + g * s * m.double()).to(m.dtype),
                                       total.sqrt().to(m.dtype),
                                       v.sqrt().expand_as(m).to(m.dtype)], -1))
        return tuple(result)

    def variance_coefficient(self, t):
        r"""c in task t's variance :math:`c\,\sigma^2 + \text{rest}(x)` (:meth:`forward`):
        :math:`g_t s_t^2`, 1 before the GP is fitted."""
        if not bool(self.fitted):
            return 1.0
        return float(self.gate[t]) * float(self.scale[t]) ** 2

    def task_pullback(self, t, head_outputs, mapped, cotangent):
        """Task t's :func:`~sklmoo.nn._ensemble.gaussian_map_pullback` (mean coefficient
        g s, variance g s^2; 1 and 1 before the GP is fitted)."""
        if not bool(self.fitted):
            one = torch.ones((), dtype=cotangent.dtype, device=cotangent.device)
            return gaussian_map_pullback(one, one, head_outputs, mapped, cotangent)
        g, s = self.gate[t], self.scale[t]
        return gaussian_map_pullback(g * s, g * s ** 2, head_outputs, mapped, cotangent)

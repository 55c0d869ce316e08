"""Bayesian multinomial logistic regression with an evidence-tuned prior, streamed over X.

What :class:`~sklmoo.nn.LinearLogits` is fitted with: a softmax regression whose weights
have an isotropic Gaussian prior of precision ``lambda_`` (the intercepts a flat one), its
posterior approximated by Laplace's method at the MAP (found by Newton's method), and
``lambda_`` set by MacKay's fixed-point update of the Laplace evidence,
:math:`\\lambda \\leftarrow \\gamma / \\lVert w \\rVert^2` with
:math:`\\gamma = p - \\lambda\\, \\mathrm{tr}\\, \\Sigma_{ww}` the well-determined parameters
(MacKay 1992, "The evidence framework applied to classification networks"): the
classification counterpart of :func:`~sklmoo.nn._evidence.fit_evidence_ridge`. Class 0 is the
reference (its logit 0), so the C - 1 other classes' weights and intercepts are identified.
Each pass reads ``X`` in chunks of rows in float64: memory O(p^2), p = (C - 1)(d + 1), never
a copy of ``X``. NumPy only.
"""

from dataclasses import dataclass

import numpy as np

from ._evidence import _chunks

#: rows per chunk of the passes over X (a torch Dataset's rows are read at most this many at
#: a time, as its batches are)
CHUNK_ROWS = 1024

#: convergence of Newton's method (largest parameter change) and of the evidence's prior
#: precision (relative change), and the cap on Newton's steps
_NEWTON_TOL, _NEWTON_MAX_ITER = 1e-4, 200
_EVIDENCE_TOL = 1e-2
#: the prior precision's bounds (inputs standardised: 1e-6 is a nearly flat prior, 1e6 a
#: model that predicts the weighted class frequencies)
_LAMBDA_MIN, _LAMBDA_MAX = 1e-6, 1e6
#: the intercepts' prior precision: nearly flat, enough to keep the Hessian invertible when a
#: class is absent from the rows
_INTERCEPT_PRECISION = 1e-6


@dataclass
class EvidenceLogistic:
    """A fitted model: per class, ``coef`` (C, d) and ``intercept`` (C,) of its logit about
    the inputs' weighted mean ``center`` (d,) (class 0's row zero); ``lambda_`` the weights'
    prior precision; ``covariance`` (p, p) the Laplace posterior covariance of the
    parameters of classes 1..C-1, each class's d weights then its intercept."""

    coef: np.ndarray
    intercept: np.ndarray
    lambda_: float
    center: np.ndarray
    covariance: np.ndarray

    def parameter_draws(self, z):
        """``(coef, intercept)`` of posterior draws: ``z`` (M, p) standard normal draws
        -> (M, C, d) and (M, C), class 0's rows zero."""
        C, d = self.coef.shape
        factor = np.linalg.cholesky(self.covariance)
        mean = np.concatenate([self.coef[1:], self.intercept[1:, None]], axis=1).ravel()
        theta = (mean + z @ factor.T).reshape(len(z), C - 1, d + 1)
        coef = np.zeros((len(z), C, d))
        intercept = np.zeros((len(z), C))
        coef[:, 1:], intercept[:, 1:] = theta[..., :d], theta[..., d]
        return coef, intercept


def _softmax_rest(logits):
    """(b, K) logits of classes 1..K against class 0's zero -> their (b, K) probabilities and
    the (b,) log normaliser."""
    top = np.maximum(logits.max(axis=1), 0.0)
    e = np.exp(logits - top[:, None])
    norm = np.exp(-top) + e.sum(axis=1)
    return e / norm[:, None], top + np.log(norm)


def fit_evidence_logistic(X, codes, n_classes, rows=None, sample_weight=None, input_dtype=None):
    """Fit on the rows ``rows`` (a boolean mask; None: all) of ``X`` (n, d) (any float dtype
    or a memory map; ``X`` of more dimensions is flattened), with labels ``codes`` (n,)
    in ``0..n_classes-1`` (negative: no label, left out), weighted by ``sample_weight``
    (n,; None: unit weights); ``input_dtype``: each chunk of rows is first cast to it (the
    estimators' float32, so that a float64 memory map fits as its float32 copy would).
    Returns an :class:`EvidenceLogistic`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.nn._logistic import fit_evidence_logistic
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2))
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-(2 * X[:, 0] - X[:, 1])))).astype(int)
    >>> fit = fit_evidence_logistic(X, y, 2)
    >>> np.round(fit.coef[1], 1).tolist()
    [2.0, -1.1]
    """
    n, d = X.shape[0], int(np.prod(X.shape[1:]))
    codes = np.asarray(codes).reshape(n)
    C = int(n_classes)
    if C < 2:
        raise ValueError(f"a logistic regression needs at least 2 classes, got {C}")
    keep = codes >= 0
    if rows is not None:
        keep &= np.asarray(rows, dtype=bool)
    weight = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    weight = np.where(keep, weight, 0.0)
    total = weight.sum()
    if not total > 0:
        raise ValueError("no labelled row with a positive weight to fit")
    K, width = C - 1, d + 1
    p = K * width
    def read(part):
        rows_ = np.asarray(X[part], dtype=input_dtype)
        return rows_.astype(np.float64, copy=False).reshape(-1, d)

    center = np.zeros(d)
    for part in _chunks(n, CHUNK_ROWS):
        center += weight[part] @ read(part)
    center /= total

    def chunk(part):
        w = weight[part]
        used = w > 0
        z = read(part)[used] - center
        onehot = np.zeros((int(used.sum()), K))
        c = codes[part][used]
        onehot[c > 0, c[c > 0] - 1] = 1.0
        return np.concatenate([z, np.ones((len(z), 1))], axis=1), onehot, w[used]

    def penalty(lambda_):
        diagonal = np.full((K, width), lambda_)
        diagonal[:, d] = _INTERCEPT_PRECISION
        return diagonal.ravel()

    def data_value(theta):
        """The weighted NLL of the rows at ``theta`` (a pass without derivatives)."""
        W = theta.reshape(K, width)
        value = 0.0
        for part in _chunks(n, CHUNK_ROWS):
            z1, onehot, w = chunk(part)
            logits = z1 @ W.T
            value += np.dot(w, _softmax_rest(logits)[1] - np.sum(onehot * logits, axis=1))
        return value

    def data_terms(theta):
        """The weighted NLL of the rows, its gradient and Hessian at ``theta``: one pass.
        The Hessian is sum_i (diag(p_i) - p_i p_i^T) (x) z_i z_i^T: K blocks of the first
        term on the diagonal, less one product of the rows' p_i (x) z_i."""
        W = theta.reshape(K, width)
        value, grad, hess = 0.0, np.zeros(p), np.zeros((p, p))
        for part in _chunks(n, CHUNK_ROWS):
            z1, onehot, w = chunk(part)
            if not len(w):
                continue
            logits = z1 @ W.T
            prob, lognorm = _softmax_rest(logits)
            value += np.dot(w, lognorm - np.sum(onehot * logits, axis=1))
            grad += (((prob - onehot) * w[:, None]).T @ z1).ravel()
            outer = ((np.sqrt(w)[:, None] * prob)[:, :, None] * z1[:, None, :]).reshape(len(w), p)
            hess -= outer.T @ outer
            for k in range(K):
                hess[k * width:(k + 1) * width, k * width:(k + 1) * width] += (
                    z1.T @ (z1 * (w * prob[:, k])[:, None]))
        return value, grad, hess

    def penalised(terms, theta, prior):
        return terms[0] + 0.5 * np.sum(prior * theta ** 2)

    # start from the weighted class frequencies: intercepts their log-odds against class 0
    freq = np.bincount(codes[keep], weights=weight[keep], minlength=C) + 1e-3
    theta = np.zeros((K, width))
    theta[:, d] = np.log(freq[1:] / freq[0])
    theta = theta.ravel()
    weights_index = np.ones((K, width), dtype=bool)
    weights_index[:, d] = False
    weights_index = weights_index.ravel()
    # Newton's steps on the penalised loss, each followed by MacKay's update of the prior
    # precision from the Hessian there: the data's terms are kept apart from the prior's, so
    # that a new precision needs no pass over X (a pass per step, a few dozen in all)
    lambda_ = 1.0
    terms = data_terms(theta)
    for _ in range(_NEWTON_MAX_ITER):
        prior = penalty(lambda_)
        value = penalised(terms, theta, prior)
        step = np.linalg.solve(terms[2] + np.diag(prior), terms[1] + prior * theta)
        size = 1.0
        while True:
            # damped: halve the step until the penalised loss does not rise (it is convex, so
            # a full step is taken near the optimum)
            candidate = theta - size * step
            if (data_value(candidate) + 0.5 * np.sum(prior * candidate ** 2)
                    <= value + 1e-12 * abs(value) or size < 1e-8):
                break
            size /= 2
        theta, terms = candidate, data_terms(candidate)
        covariance = np.linalg.inv(terms[2] + np.diag(prior))
        gamma = float(np.sum(1.0 - lambda_ * np.diag(covariance)[weights_index]))
        norm = float(np.sum(theta[weights_index] ** 2))
        new = float(np.clip(max(gamma, 0.0) / max(norm, 1e-300), _LAMBDA_MIN, _LAMBDA_MAX))
        if (abs(new - lambda_) <= _EVIDENCE_TOL * lambda_
                and np.max(np.abs(size * step)) < _NEWTON_TOL):
            # theta is the MAP of this precision, the covariance its posterior's
            break
        lambda_ = new
    else:
        covariance = np.linalg.inv(terms[2] + np.diag(penalty(lambda_)))
    covariance = (covariance + covariance.T) / 2
    W = theta.reshape(K, width)
    coef, intercept = np.zeros((C, d)), np.zeros(C)
    coef[1:], intercept[1:] = W[:, :d], W[:, d]
    return EvidenceLogistic(coef=coef, intercept=intercept, lambda_=lambda_, center=center,
                            covariance=covariance)

"""Bayesian linear regression with evidence-tuned precisions, from streamed statistics.

What :class:`~sklmoo.nn.LinearMean` is fitted with: scikit-learn's ``BayesianRidge`` (MacKay's
updates of the noise precision alpha and the weight precision lambda, Gamma(1e-6, 1e-6)
hyperpriors, the same initial values, tolerance and iteration cap), computed from the
weighted sufficient statistics -- the weighted means and the centred Gram matrix
:math:`X^\\top W X` -- accumulated over chunks of rows in float64. scikit-learn's fit copies
``X`` to float64, centres it and takes its SVD: several times the memory of ``X`` for a large
table. This needs two passes over ``X`` and O(d^2) memory. The eigenvalues of the Gram matrix
are the squared singular values of the (weighted, centred) ``X``, so the updates are
scikit-learn's. NumPy only.
"""

from dataclasses import dataclass

import numpy as np

#: rows per chunk of the passes over X
CHUNK_ROWS = 8192
_TOL, _MAX_ITER, _HYPER = 1e-3, 300, 1e-6


@dataclass
class EvidenceRidge:
    """A fitted model: ``coef`` (d,), ``intercept``, the noise and weight precisions
    ``alpha`` and ``lambda_``, the inputs' weighted mean ``center`` (d,) and the weights'
    posterior covariance ``sigma`` (d, d) (as ``BayesianRidge``'s ``coef_``, ``intercept_``,
    ``alpha_``, ``lambda_``, ``X_offset_``, ``sigma_``)."""

    coef: np.ndarray
    intercept: float
    alpha: float
    lambda_: float
    center: np.ndarray
    sigma: np.ndarray


def _chunks(n, size=None):
    """Slices of ``size`` rows (None: ``CHUNK_ROWS``) covering ``n`` rows."""
    size = size or CHUNK_ROWS
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def fit_evidence_ridge(X, y, rows=None, sample_weight=None):
    """Fit on the rows ``rows`` (a boolean mask; None: all) of ``X`` (n, d), any float dtype
    or a memory map, and ``y`` (n,), weighted by ``sample_weight`` (n,; None: unit weights).

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.nn._evidence import fit_evidence_ridge
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> fit = fit_evidence_ridge(X, X @ [1.0, -2.0, 0.5] + 3.0)
    >>> np.round(fit.coef, 3).tolist(), round(fit.intercept, 3)
    ([1.0, -2.0, 0.5], 3.0)
    """
    n, d = X.shape[0], int(np.prod(X.shape[1:]))
    rows = np.ones(n, dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
    weight = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    weight = np.where(rows, weight, 0.0)
    y = np.where(rows, np.asarray(y, dtype=np.float64), 0.0)
    total = weight.sum()
    # pass 1: weighted means
    center, y_mean = np.zeros(d), float(np.dot(weight, y) / total)
    for part in _chunks(n):
        xb = np.asarray(X[part], dtype=np.float64).reshape(-1, d)
        center += weight[part] @ xb
    center /= total
    # pass 2: the centred Gram matrix and X^T W y
    gram, xty = np.zeros((d, d)), np.zeros(d)
    for part in _chunks(n):
        w = weight[part]
        xb = np.asarray(X[part], dtype=np.float64).reshape(-1, d) - center
        xw = xb * w[:, None]
        gram += xb.T @ xw
        xty += xw.T @ (y[part] - y_mean)
    yty = float(np.dot(weight, (y - y_mean) ** 2))
    eigen, vectors = np.linalg.eigh((gram + gram.T) / 2)
    eigen = np.clip(eigen, 0.0, None)
    projected = vectors.T @ xty

    def solve(alpha, lambda_):
        coef = vectors @ (projected / (eigen + lambda_ / alpha))
        sse = max(yty - 2 * coef @ xty + coef @ gram @ coef, 0.0)
        return coef, sse

    alpha, lambda_ = 1.0 / (yty / total + np.finfo(np.float64).eps), 1.0
    previous = None
    for step in range(_MAX_ITER):
        coef, sse = solve(alpha, lambda_)
        gamma = np.sum(alpha * eigen / (lambda_ + alpha * eigen))
        lambda_ = (gamma + 2 * _HYPER) / (np.sum(coef ** 2) + 2 * _HYPER)
        alpha = (total - gamma + 2 * _HYPER) / (sse + 2 * _HYPER)
        if step and np.sum(np.abs(previous - coef)) < _TOL:
            break
        previous = coef
    coef, _ = solve(alpha, lambda_)
    sigma = (vectors / (alpha * eigen + lambda_)) @ vectors.T
    return EvidenceRidge(coef=coef, intercept=float(y_mean - center @ coef), alpha=float(alpha),
                         lambda_=float(lambda_), center=center, sigma=sigma)

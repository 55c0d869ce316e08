"""The classifiers' linear model (:func:`sklmoo.nn._logistic.fit_evidence_logistic`): its MAP
equals scikit-learn's and scipy's penalised fits at its prior precision (independent
references), that precision maximises the Laplace evidence, and rows, chunks, weights and
unlabelled rows act as documented."""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.linear_model import LogisticRegression

from sklmoo.nn import _logistic
from sklmoo.nn._logistic import fit_evidence_logistic


def _data(n, d, C, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, d) + rng.normal(size=d)
    W = rng.normal(size=(C, d))
    logits = X @ W.T
    p = np.exp(logits - logsumexp(logits, axis=1, keepdims=True))
    y = (p.cumsum(1) > rng.random((n, 1))).argmax(1)
    return X, y


def _penalised(theta, X, y, C, lam, w=None):
    """The reference-class softmax regression's penalised NLL (scipy's objective)."""
    d = X.shape[1]
    W = theta.reshape(C - 1, d + 1)
    logits = np.concatenate([np.zeros((len(X), 1)), X @ W[:, :d].T + W[:, d]], axis=1)
    nll = logsumexp(logits, axis=1) - logits[np.arange(len(X)), y]
    w = np.ones(len(X)) if w is None else w
    return w @ nll + 0.5 * lam * np.sum(W[:, :d] ** 2)


def _laplace_evidence(X, y, C, lam):
    """log p(y | lambda) by Laplace's method, with scipy's MAP and a numerical Hessian (up to
    a constant in lambda)."""
    d = X.shape[1]
    p = (C - 1) * (d + 1)
    res = minimize(_penalised, np.zeros(p), args=(X, y, C, lam), method="BFGS",
                   options={"gtol": 1e-9})
    eps = 1e-4
    H = np.zeros((p, p))
    for i in range(p):
        e = np.zeros(p)
        e[i] = eps
        H[i] = (_grad(res.x + e, X, y, C, lam) - _grad(res.x - e, X, y, C, lam)) / (2 * eps)
    H = (H + H.T) / 2
    return -res.fun + 0.5 * (C - 1) * d * np.log(lam) - 0.5 * np.linalg.slogdet(H)[1]


def _grad(theta, X, y, C, lam, eps=1e-6):
    out = np.zeros_like(theta)
    for i in range(len(theta)):
        e = np.zeros_like(theta)
        e[i] = eps
        out[i] = (_penalised(theta + e, X, y, C, lam) - _penalised(theta - e, X, y, C, lam)) / (2 * eps)
    return out


def test_binary_map_equals_scikit_learn_at_its_precision():
    X, y = _data(400, 4, 2, 0)
    fit = fit_evidence_logistic(X, y, 2)
    ref = LogisticRegression(C=1 / fit.lambda_, tol=1e-12, max_iter=10000).fit(
        X - fit.center, y)
    np.testing.assert_allclose(fit.coef[1], ref.coef_[0], rtol=1e-6, atol=1e-8)
    assert fit.intercept[1] == pytest.approx(ref.intercept_[0], rel=1e-6, abs=1e-8)
    assert np.all(fit.coef[0] == 0) and fit.intercept[0] == 0


def test_multiclass_map_equals_scipy_at_its_precision():
    X, y = _data(600, 3, 4, 1)
    fit = fit_evidence_logistic(X, y, 4)
    Xc = X - fit.center
    res = minimize(_penalised, np.zeros(3 * 4), args=(Xc, y, 4, fit.lambda_), method="BFGS",
                   options={"gtol": 1e-10})
    W = res.x.reshape(3, 4)
    np.testing.assert_allclose(fit.coef[1:], W[:, :3], atol=1e-4)
    np.testing.assert_allclose(fit.intercept[1:], W[:, 3], atol=1e-4)


def test_precision_maximises_the_laplace_evidence():
    """MacKay's fixed point is the evidence's maximum: the evidence at the fitted precision is
    above that at half and twice it (computed independently, scipy's MAP and a numerical
    Hessian)."""
    X, y = _data(150, 3, 3, 2)
    fit = fit_evidence_logistic(X, y, 3)
    Xc = X - fit.center
    at = _laplace_evidence(Xc, y, 3, fit.lambda_)
    assert at > _laplace_evidence(Xc, y, 3, fit.lambda_ / 2)
    assert at > _laplace_evidence(Xc, y, 3, fit.lambda_ * 2)


def test_covariance_is_the_inverse_hessian_of_the_posterior():
    X, y = _data(200, 2, 2, 3)
    fit = fit_evidence_logistic(X, y, 2)
    Xc = X - fit.center
    theta = np.r_[fit.coef[1], fit.intercept[1]]
    p = 1 / (1 + np.exp(-(Xc @ fit.coef[1] + fit.intercept[1])))
    Z = np.c_[Xc, np.ones(len(X))]
    H = Z.T @ (Z * (p * (1 - p))[:, None]) + np.diag([fit.lambda_] * 2 + [1e-6])
    np.testing.assert_allclose(np.linalg.inv(fit.covariance), H, rtol=1e-6)
    assert theta.shape == (3,)


def test_rows_unlabelled_rows_weights_and_chunks(monkeypatch):
    X, y = _data(500, 3, 3, 4)
    rows = np.random.default_rng(0).random(500) < 0.6
    ref = fit_evidence_logistic(X[rows], y[rows], 3)
    masked = fit_evidence_logistic(X, y, 3, rows=rows)
    unlabelled = fit_evidence_logistic(X, np.where(rows, y, -1), 3)
    monkeypatch.setattr(_logistic, "CHUNK_ROWS", 37)
    chunked = fit_evidence_logistic(X, y, 3, rows=rows)
    for other in (masked, unlabelled, chunked):
        np.testing.assert_allclose(other.coef, ref.coef, rtol=1e-7, atol=1e-10)
        assert other.lambda_ == pytest.approx(ref.lambda_, rel=1e-7)
    # an integer weight is a repeated row
    counts = np.random.default_rng(1).integers(0, 3, 500)
    weighted = fit_evidence_logistic(X, y, 3, sample_weight=counts)
    repeated = fit_evidence_logistic(np.repeat(X, counts, 0), np.repeat(y, counts), 3)
    np.testing.assert_allclose(weighted.coef, repeated.coef, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(weighted.center, repeated.center, rtol=1e-10)


def test_draws_are_centred_on_the_map_with_its_covariance():
    X, y = _data(300, 2, 3, 5)
    fit = fit_evidence_logistic(X, y, 3)
    z = np.random.default_rng(0).standard_normal((20000, fit.covariance.shape[0]))
    coef, intercept = fit.parameter_draws(z)
    assert np.all(coef[:, 0] == 0) and np.all(intercept[:, 0] == 0)
    flat = np.concatenate([coef[:, 1:], intercept[:, 1:, None]], axis=2).reshape(len(z), -1)
    np.testing.assert_allclose(flat.mean(0), np.r_[np.c_[fit.coef[1:], fit.intercept[1:]]
                                                   .ravel()], atol=0.05 * np.sqrt(
                                                       fit.covariance.diagonal()).max() + 1e-3)
    np.testing.assert_allclose(np.cov(flat.T), fit.covariance, rtol=0.1,
                               atol=0.05 * fit.covariance.diagonal().max())


def test_refuses_what_it_cannot_fit():
    X, y = _data(50, 2, 2, 6)
    with pytest.raises(ValueError, match="at least 2 classes"):
        fit_evidence_logistic(X, y, 1)
    with pytest.raises(ValueError, match="no labelled row"):
        fit_evidence_logistic(X, np.full(50, -1), 2)

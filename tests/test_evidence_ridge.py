"""The linear mean function's fit from streamed statistics equals scikit-learn's
BayesianRidge (the independent reference), and trains from a read-only memory map."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import BayesianRidge

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.nn import _evidence
from sklmoo.nn._evidence import fit_evidence_ridge


@pytest.mark.parametrize("n, d, weighted", [(200, 5, False), (200, 5, True), (30, 50, False),
                                            (30, 50, True)])
def test_equals_bayesian_ridge(n, d, weighted):
    rng = np.random.default_rng(n + d)
    # uncentred features of unequal scales: the centring and the Gram matrix must hold up
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, d) + 5 * rng.normal(size=d)
    y = X[:, :3] @ [1.0, -0.5, 0.2] + rng.normal(size=n)
    w = rng.uniform(0, 3, n) if weighted else None
    ref = BayesianRidge().fit(X, y, sample_weight=w)
    fit = fit_evidence_ridge(X, y, sample_weight=w)
    tol = 1e-9 if n > d else 1e-5          # n < d: scikit-learn solves it another way
    np.testing.assert_allclose(fit.coef, ref.coef_, rtol=tol, atol=tol)
    assert fit.intercept == pytest.approx(ref.intercept_, rel=tol, abs=tol)
    assert fit.alpha == pytest.approx(ref.alpha_, rel=tol)
    assert fit.lambda_ == pytest.approx(ref.lambda_, rel=tol)
    np.testing.assert_allclose(fit.center, ref.X_offset_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fit.sigma, ref.sigma_, rtol=tol, atol=tol * np.abs(ref.sigma_).max())


def test_rows_are_a_mask_and_chunks_change_nothing(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 4)).astype(np.float32)
    y = X @ [1.0, 2.0, 0.0, -1.0] + rng.normal(size=500)
    rows = rng.random(500) < 0.7
    ref = BayesianRidge().fit(X[rows].astype(np.float64), y[rows])
    whole = fit_evidence_ridge(X, np.where(rows, y, np.nan), rows)
    monkeypatch.setattr(_evidence, "CHUNK_ROWS", 37)
    chunked = fit_evidence_ridge(X, np.where(rows, y, np.nan), rows)
    np.testing.assert_allclose(whole.coef, ref.coef_, rtol=1e-9)
    np.testing.assert_allclose(chunked.coef, whole.coef, rtol=1e-12)
    assert chunked.alpha == pytest.approx(whole.alpha, rel=1e-12)


def test_a_read_only_memory_map_trains_without_a_copy_warning(tmp_path):
    """np.load(..., mmap_mode='r') gives a read-only array: the estimators gather batches
    from it (no whole copy) and fit exactly as on the array in memory."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=300)
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    assert not mapped.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        on_map = MTSGDRegressor(n_particles=2, max_epochs=3, random_state=0).fit(mapped, y)
        mean_map, std_map = on_map.predict(mapped, return_std=True)
    in_memory = MTSGDRegressor(n_particles=2, max_epochs=3, random_state=0).fit(X, y)
    mean, std = in_memory.predict(X, return_std=True)
    np.testing.assert_array_equal(mean_map, mean)
    np.testing.assert_array_equal(std_map, std)


@pytest.mark.parametrize("make", [
    lambda: MTSGDMultiTaskClassifier(n_particles=2, max_epochs=3, random_state=0),
    lambda: L2ESamplerClassifier(n_chains=2, max_epochs=6, n_draws=3, random_state=0),
])
def test_classifiers_train_from_a_read_only_memory_map(tmp_path, make):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 6)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        proba_map = make().fit(mapped, y).predict_proba(mapped)
    np.testing.assert_array_equal(proba_map, make().fit(X, y).predict_proba(X))

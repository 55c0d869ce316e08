"""sklmoo.pipeline forwards the uncertainty methods through the transformers."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.pipeline import FORWARDED_METHODS, Pipeline, make_pipeline


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return X * 10.0 + 3.0, y                  # far from standardised: the scaler matters


def _check_forwarded(pipe, X, methods, **params):
    Xt = pipe[:-1].transform(X)
    for method in methods:
        got = getattr(pipe, method)(X, **params.get(method, {}))
        want = getattr(pipe[-1], method)(Xt, **params.get(method, {}))
        if isinstance(want, dict):
            assert got.keys() == want.keys()
            for k in want:
                np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]))
        elif isinstance(want, tuple):
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(got, want)


def test_l2e_methods_pass_through(iris):
    X, y = iris
    pipe = make_pipeline(StandardScaler(), L2ESamplerClassifier(
        sampler="sghmc", n_chains=2, max_epochs=8, n_draws=4, random_state=0)).fit(X, y)
    assert isinstance(pipe, Pipeline)
    _check_forwarded(pipe, X[:20], ["predict_uncertainty", "predict_proba_samples"])
    report = pipe.diagnose(X[:20])
    assert "rhat" in report
    assert not hasattr(pipe, "predict_members")          # the final estimator has none


def test_mtsgd_methods_pass_through(iris):
    X, y = iris
    clf = make_pipeline(StandardScaler(), MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=2, random_state=0)).fit(X, y)
    _check_forwarded(clf, X[:20], ["predict_uncertainty", "predict_proba_members"])
    reg = make_pipeline(StandardScaler(), MTSGDRegressor(
        n_particles=2, max_epochs=2, random_state=0)).fit(X[:, 1:], X[:, 0])
    _check_forwarded(reg, X[:20, 1:], ["predict_uncertainty", "predict_members"],
                     predict_members={"return_std": True})


def test_it_is_a_scikit_learn_pipeline(iris):
    X, y = iris
    pipe = make_pipeline(StandardScaler(), LogisticRegression())
    assert not any(hasattr(pipe, m) for m in FORWARDED_METHODS)
    copy = clone(make_pipeline(StandardScaler(), MTSGDMultiTaskClassifier(max_epochs=1)))
    assert isinstance(copy, Pipeline)
    search = GridSearchCV(make_pipeline(StandardScaler(), MTSGDMultiTaskClassifier(
        n_particles=2, random_state=0)), {"mtsgdmultitaskclassifier__max_epochs": [1, 2]},
        cv=2).fit(X, y)
    assert isinstance(search.best_estimator_, Pipeline)
    assert search.best_estimator_.predict_uncertainty(X[:3])["total"].shape == (3,)

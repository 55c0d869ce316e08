"""sklmoo's estimators inside scikit-learn's and MAPIE's recalibration / conformal wrappers."""

import warnings

import numpy as np
import pytest
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_wine
from sklearn.frozen import FrozenEstimator
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.metrics import negative_log_likelihood


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    return train_test_split(X, y, test_size=0.4, stratify=y, random_state=0)


@pytest.mark.parametrize("make", [
    lambda: MTSGDMultiTaskClassifier(n_particles=3, max_epochs=20, calibration=None,
                                     random_state=0),
    lambda: L2ESamplerClassifier(max_epochs=20, n_draws=4, calibration=None, random_state=0),
], ids=["mtsgd", "l2e"])
def test_calibrated_classifier_cv_temperature_on_a_frozen_estimator(wine, make):
    Xtr, Xte, ytr, yte = wine
    Xcal, Xtest, ycal, ytest = train_test_split(Xte, yte, test_size=0.5, stratify=yte,
                                                random_state=0)
    est = make().fit(Xtr, ytr)
    cal = CalibratedClassifierCV(FrozenEstimator(est), method="temperature").fit(Xcal, ycal)
    proba = cal.predict_proba(Xtest)
    assert proba.shape == (len(Xtest), 3) and np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(cal.classes_, est.classes_)
    # a temperature does not change the ranking of the classes
    np.testing.assert_array_equal(proba.argmax(1), est.predict_proba(Xtest).argmax(1))
    assert negative_log_likelihood(ytest, proba) < 1.0


def test_calibrated_classifier_cv_on_the_default_classifier_re_tempers_its_log_linear_pool(wine):
    # scikit-learn tempers log(predict_proba); on the default classifier that is the particles'
    # log-linear pool again, at one combined temperature per task
    Xtr, Xte, ytr, yte = wine
    est = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=20, random_state=0).fit(Xtr, ytr)
    cal = CalibratedClassifierCV(FrozenEstimator(est), method="temperature").fit(Xte, yte)
    proba = cal.predict_proba(Xtr)
    logpool = np.log(est.predict_proba_members(Xtr)).mean(axis=0)
    # log-odds against class 0: the composed map's are the pool's times one factor
    ratio = (np.log(proba[:, 1:]) - np.log(proba[:, :1])) / (logpool[:, 1:] - logpool[:, :1])
    np.testing.assert_allclose(ratio, np.median(ratio), rtol=1e-4)


def test_calibrated_classifier_cv_clones_and_fits_an_unfitted_estimator(wine):
    Xtr, Xte, ytr, yte = wine
    cal = CalibratedClassifierCV(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=10,
                                                          random_state=0),
                                 method="temperature", cv=2).fit(Xtr, ytr)
    assert cal.predict_proba(Xte).shape == (len(Xte), 3)
    assert cal.score(Xte, yte) > 0.8


def test_mapie_split_conformal_around_the_regressor():
    mapie = pytest.importorskip("mapie.regression")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 4)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=900)
    reg = MTSGDRegressor(n_particles=3, max_epochs=30, random_state=0).fit(X[:400], y[:400])
    conformal = mapie.SplitConformalRegressor(reg, confidence_level=0.9, prefit=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        conformal.conformalize(X[400:650], y[400:650])
        point, intervals = conformal.predict_interval(X[650:])
    lower, upper = intervals[:, 0, 0], intervals[:, 1, 0]
    np.testing.assert_allclose(point, reg.predict(X[650:]), rtol=1e-6)
    covered = np.mean((y[650:] >= lower) & (y[650:] <= upper))
    assert 0.82 <= covered <= 0.97

"""What the estimators' ``score`` and sklmoo's scorers read (a fifth hostile-input audit): targets
as ``fit`` reads them (a DataFrame's columns by name), weights checked as scikit-learn checks
them, and labels of another type refused rather than counted as wrong."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.metrics import (ReliabilityDiagramDisplay, brier_scorer, ece_scorer,
                            gaussian_nll_scorer, multitask_accuracy_scorer, negative_log_likelihood,
                            nll_scorer, per_task_scorer)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(150, 4).astype(np.float32)
    # two tasks of different difficulty, so that swapping them changes every score
    labels = pd.DataFrame({"easy": (X[:, 0] > 0).astype(int),
                           "hard": (X[:, 1] + rng.randn(150) > 0.5).astype(int)})
    targets = pd.DataFrame({"a": X[:, 0] + 0.1 * rng.randn(150),
                            "b": -3.0 * X[:, 1] + rng.randn(150)}).astype(np.float32)
    return X, labels, targets


@pytest.fixture(scope="module")
def classifier(data):
    X, labels, _ = data
    return _fit(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=3, random_state=0), X, labels)


@pytest.fixture(scope="module")
def regressor(data):
    X, _, targets = data
    return _fit(MTSGDRegressor(n_particles=2, max_epochs=3, mean_function="linear",
                               random_state=0), X, targets)


@pytest.mark.parametrize("score", [
    lambda est, X, y: est.score(X, y),
    nll_scorer,
    multitask_accuracy_scorer,
    per_task_scorer("accuracy", task="hard"),
    per_task_scorer("neg_log_loss", task="easy"),
])
def test_a_frame_of_labels_is_scored_by_column_name(data, classifier, score):
    X, labels, _ = data
    assert score(classifier, X, labels[["hard", "easy"]]) == score(classifier, X, labels)


@pytest.mark.parametrize("score", [lambda est, X, y: est.score(X, y), gaussian_nll_scorer])
def test_a_frame_of_targets_is_scored_by_column_name(data, regressor, score):
    X, _, targets = data
    assert score(regressor, X, targets[["b", "a"]]) == score(regressor, X, targets)


def test_columns_are_matched_through_a_pipeline_and_other_names_refused(data):
    X, labels, _ = data
    pipe = _fit(make_pipeline(StandardScaler(), MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=2, random_state=0)), X, labels)
    assert nll_scorer(pipe, X, labels[["hard", "easy"]]) == nll_scorer(pipe, X, labels)
    renamed = labels.rename(columns={"easy": "other"})
    with pytest.raises(ValueError, match=r"y's columns \['other', 'hard'\] are not the fit's"):
        pipe.score(X, renamed)
    with pytest.raises(ValueError, match="are not the fit's"):
        nll_scorer(pipe, X, renamed)


def test_unnamed_targets_are_read_by_position(data):
    X, labels, _ = data
    est = _fit(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0), X,
               labels.to_numpy())
    assert est.score(X, pd.DataFrame(labels.to_numpy())) == est.score(X, labels.to_numpy())


def test_labels_of_another_type_are_refused_not_counted_wrong(data):
    X, labels, _ = data
    est = _fit(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0), X,
               labels.astype(str))
    assert est.score(X, labels.astype(str)) > 0.5
    with pytest.raises(ValueError, match="task 'easy': y_true holds number labels and the "
                                         "fitted classes_ string labels"):
        est.score(X, labels)
    with pytest.raises(ValueError, match="mix of label input types"):
        multitask_accuracy_scorer(est, X, labels)


@pytest.mark.parametrize("score", [
    nll_scorer, ece_scorer, brier_scorer,
    lambda est, X, y: ReliabilityDiagramDisplay.from_estimator(est, X, y),
    lambda est, X, y: negative_log_likelihood(y, est.predict_proba(X), labels=est.classes_,
                                              unknown_labels="count_as_wrong"),
])
def test_calibration_scores_refuse_labels_of_another_type(data, score):
    # numbers against a fit on strings were counted as unseen labels: NLL 36 instead of 0.35
    X, labels, _ = data
    y = labels["easy"].to_numpy()
    est = _fit(L2ESamplerClassifier(n_chains=2, max_epochs=3, n_draws=1, random_state=0), X,
               y.astype(str))
    score(est, X, y.astype(str))
    with pytest.raises(ValueError, match="y_true holds number labels and the classes string "
                                         "labels"):
        score(est, X, y)


@pytest.mark.parametrize("weight, match", [
    (np.r_[np.nan, np.ones(149)], "contains NaN"),
    (np.r_[np.inf, np.ones(149)], "infinity"),
    (np.ones(149), r"shape == \(149,\), expected \(150,\)"),
    (np.ones((150, 2)), "1D array"),
    (np.r_[-1.0, np.ones(149)], "Negative values"),
    (np.zeros(150), "non-zero"),
])
def test_the_regressor_score_checks_its_weights(data, regressor, weight, match):
    X, _, targets = data
    with pytest.raises(ValueError, match=f"sample_weight: .*{match}"):
        regressor.score(X, targets, sample_weight=weight)


def test_the_regressor_score_refuses_targets_of_another_shape(data, regressor):
    X, _, targets = data
    y = targets.to_numpy()
    with pytest.raises(ValueError, match=r"y has shape \(2, 150\) but the predictions"):
        regressor.score(X, y.T)
    with pytest.raises(ValueError, match=r"y has shape \(300,\)"):
        regressor.score(X, y.T.ravel())
    one = _fit(MTSGDRegressor(n_particles=2, max_epochs=2, mean_function="linear",
                              random_state=0), X, y[:, 0])
    # a column vector is the same single output, as scikit-learn reads it
    assert one.score(X, y[:, :1]) == one.score(X, y[:, 0])
    np.testing.assert_allclose(one.score(X, y[:, 0]), r2_score(y[:, 0], one.predict(X)),
                               rtol=1e-6)


def test_displays_name_what_they_need(data, classifier, regressor):
    from sklearn.linear_model import LinearRegression

    from sklmoo.metrics import RegressionCalibrationDisplay
    X, labels, targets = data
    with pytest.raises(TypeError, match="LinearRegression.predict does not accept "
                                        "return_std=True; the regression calibration display"):
        RegressionCalibrationDisplay.from_estimator(LinearRegression().fit(X, targets), X,
                                                    targets)
    with pytest.raises(ValueError, match="task_names has 1 names for 2 tasks"):
        ReliabilityDiagramDisplay.from_estimator(classifier, X, labels, task_names=["a"])
    # the estimators' displays read a DataFrame's columns by name, as their scores do
    swapped = ReliabilityDiagramDisplay.from_estimator(classifier, X, labels[["hard", "easy"]])
    straight = ReliabilityDiagramDisplay.from_estimator(classifier, X, labels)
    np.testing.assert_array_equal(np.concatenate(swapped.accuracy),
                                  np.concatenate(straight.accuracy))
    swapped = RegressionCalibrationDisplay.from_estimator(regressor, X, targets[["b", "a"]])
    straight = RegressionCalibrationDisplay.from_estimator(regressor, X, targets)
    np.testing.assert_array_equal(swapped.miscalibration_area, straight.miscalibration_area)


def test_ragged_inputs_to_the_metrics_are_named():
    from sklmoo.metrics import entropy_decomposition, multitask_accuracy_score
    with pytest.raises(ValueError, match="y_true is ragged: its rows hold different numbers"):
        multitask_accuracy_score([[0, 1], [1]], [[0, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"member_proba must be an array of numbers \(n_members"):
        entropy_decomposition([[[0.5, 0.5]], [[1.0, 0.0], [0.0, 1.0]]])

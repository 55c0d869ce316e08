"""Scorers inside scikit-learn's model selection, and the reliability display."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_digits, load_iris  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import brier_score_loss, get_scorer, make_scorer  # noqa: E402
from sklearn.model_selection import (GridSearchCV, KFold, cross_val_score,  # noqa: E402
                                     cross_validate)
from sklearn.multioutput import MultiOutputClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sklmoo.metrics import (ReliabilityDiagramDisplay, brier_score, brier_scorer,  # noqa: E402
                            ece_scorer, expected_calibration_error, make_calibration_scorer,
                            negative_log_likelihood, nll_scorer)


def _lr():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


def test_cross_val_score_equals_direct_metric():
    X, y = load_iris(return_X_y=True)
    cv = KFold(3, shuffle=True, random_state=0)
    scores = cross_val_score(LogisticRegression(max_iter=1000), X, y, scoring=ece_scorer, cv=cv)
    res = cross_validate(LogisticRegression(max_iter=1000), X, y, cv=cv, return_estimator=True,
                         scoring=ece_scorer, return_indices=True)
    for score, est, test in zip(scores, res["estimator"], res["indices"]["test"]):
        direct = expected_calibration_error(y[test], est.predict_proba(X[test]))
        assert np.isfinite(score) and score == pytest.approx(-direct)


def test_grid_search_multi_metric_with_pipeline():
    X, y = load_breast_cancer(return_X_y=True)
    y = np.where(y == 1, "benign", "malignant")  # string labels
    grid = GridSearchCV(_lr(), {"logisticregression__C": [0.01, 1.0]}, cv=3,
                        scoring={"ece": ece_scorer, "brier": brier_scorer, "nll": nll_scorer},
                        refit="brier")
    grid.fit(X, y)
    for key in ("mean_test_ece", "mean_test_brier", "mean_test_nll"):
        assert np.isfinite(grid.cv_results_[key]).all() and (grid.cv_results_[key] <= 0).all()
    assert grid.best_index_ == int(np.argmax(grid.cv_results_["mean_test_brier"]))
    proba = grid.best_estimator_.predict_proba(X)
    assert -brier_scorer(grid.best_estimator_, X, y) == pytest.approx(brier_score(y, proba))


@pytest.mark.parametrize("load", [load_breast_cancer, load_iris])
def test_brier_scorer_equals_sklearn_neg_brier_score(load):
    # issue 20: the binary brier_scorer was twice scikit-learn's neg_brier_score
    X, y = load(return_X_y=True)
    sk = get_scorer("neg_brier_score")
    clf = _lr().fit(X, y)
    assert brier_scorer(clf, X, y) == pytest.approx(sk(clf, X, y), rel=1e-12)
    cv = KFold(3, shuffle=True, random_state=0)
    np.testing.assert_allclose(cross_val_score(_lr(), X, y, scoring=brier_scorer, cv=cv),
                               cross_val_score(_lr(), X, y, scoring=sk, cv=cv), rtol=1e-12)
    if load is load_breast_cancer:
        # string labels: scikit-learn's scorer needs pos_label (either gives the same value)
        ys = np.where(y == 1, "benign", "malignant")
        clf = _lr().fit(X, ys)
        for pos in ("benign", "malignant"):
            sk_pos = make_scorer(brier_score_loss, response_method="predict_proba",
                                 greater_is_better=False, pos_label=pos)
            assert brier_scorer(clf, X, ys) == pytest.approx(sk_pos(clf, X, ys), rel=1e-12)
    summed = make_calibration_scorer("brier", scale_by_half=False)
    ratio = summed(clf, X, clf.predict(X)) / brier_scorer(clf, X, clf.predict(X))
    assert ratio == pytest.approx(2.0 if load is load_breast_cancer else 1.0)


def test_fold_missing_a_class_uses_classes_():
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=1000).fit(X, y)
    sub = y != 2  # the test set lacks class 2; columns still map through classes_
    direct = negative_log_likelihood(y[sub], clf.predict_proba(X[sub]), labels=[0, 1, 2])
    assert -nll_scorer(clf, X[sub], y[sub]) == pytest.approx(direct)


def _multitask_digits():
    X, digit = load_digits(return_X_y=True)
    y = np.column_stack([digit, np.where(digit % 2 == 0, "even", "odd"), (digit > 4).astype(int)])
    return X[:600] / 16.0, y[:600]


def test_multioutput_classifier_with_mixed_tasks():
    X, y = _multitask_digits()
    clf = MultiOutputClassifier(LogisticRegression(max_iter=300)).fit(X[:400], y[:400])
    probas = clf.predict_proba(X[400:])
    for scorer, fn in ((ece_scorer, expected_calibration_error), (brier_scorer, brier_score),
                       (nll_scorer, negative_log_likelihood)):
        value = scorer(clf, X[400:], y[400:])
        assert np.isfinite(value)
        assert value == pytest.approx(-fn(y[400:], probas, labels=clf.classes_))
    scores = cross_val_score(MultiOutputClassifier(LogisticRegression(max_iter=300)), X, y,
                             scoring=ece_scorer, cv=2)
    assert np.isfinite(scores).all()


def test_metrics_work_through_sklearn_make_scorer_shapes():
    """scikit-learn hands a predict_proba scorer a 1-D vector (binary), an (n, T) array (all
    tasks binary) or the raw list (mixed tasks)."""
    sk_ece = make_scorer(expected_calibration_error, response_method="predict_proba",
                         greater_is_better=False)
    X, y = _multitask_digits()
    # binary single task -> 1-D positive-class probabilities
    yb = y[:, 2].astype(int)
    clf = LogisticRegression(max_iter=300).fit(X, yb)
    assert sk_ece(clf, X, yb) == pytest.approx(-expected_calibration_error(
        yb, clf.predict_proba(X)))
    # all-binary multi-output -> (n, T) array
    yy = np.column_stack([yb, (y[:, 0].astype(int) % 3 == 0).astype(int)])
    mo = MultiOutputClassifier(LogisticRegression(max_iter=300)).fit(X, yy)
    assert sk_ece(mo, X, yy) == pytest.approx(ece_scorer(mo, X, yy))
    # mixed multi-output -> raw list
    mixed = MultiOutputClassifier(LogisticRegression(max_iter=300)).fit(X, y)
    assert sk_ece(mixed, X, y) == pytest.approx(ece_scorer(mixed, X, y))


def test_make_calibration_scorer_options():
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=1000).fit(X, y)
    proba = clf.predict_proba(X)
    s = make_calibration_scorer("ece", n_bins=15, strategy="quantile", norm="max")
    assert s(clf, X, y) == pytest.approx(-expected_calibration_error(
        y, proba, n_bins=15, strategy="quantile", norm="max"))
    assert "n_bins=15" in repr(s) and s.name == "neg_expected_calibration_error"
    with pytest.raises(ValueError, match="metric must be one of"):
        make_calibration_scorer("auc")
    with pytest.raises(AttributeError, match="classes_"):
        ece_scorer(StandardScaler().fit(X), X, y)


def test_reliability_display_single_and_multitask(tmp_path):
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=1000).fit(X, y)
    disp = ReliabilityDiagramDisplay.from_estimator(clf, X, y, n_bins=5)
    ece = expected_calibration_error(y, clf.predict_proba(X), n_bins=5)
    assert disp.ece[0] == pytest.approx(ece)
    assert f"ECE = {ece:.3f}" in disp.line_.get_label()
    assert disp.ax_.get_xlim() == (0, 1) and disp.figure_ is disp.ax_.figure
    np.testing.assert_allclose(disp.line_.get_ydata(), disp.accuracy[0])
    # one panel per task, titled by the DataFrame's columns; user-given axes are used
    Xd, yd = _multitask_digits()
    frame = pd.DataFrame(yd, columns=["digit", "parity", "high"])
    mo = MultiOutputClassifier(LogisticRegression(max_iter=300)).fit(Xd, frame)
    fig, axes = plt.subplots(1, 3)
    disp = ReliabilityDiagramDisplay.from_predictions(frame, mo.predict_proba(Xd),
                                                      labels=mo.classes_, ax=axes, name="LR")
    assert [a.get_title() for a in disp.ax_] == ["digit", "parity", "high"]
    assert disp.figure_ is fig and len(disp.line_) == 3
    raw = expected_calibration_error(frame, mo.predict_proba(Xd), labels=mo.classes_,
                                     multioutput="raw_values")
    np.testing.assert_allclose(disp.ece, raw)
    out = tmp_path / "reliability.png"
    disp.figure_.savefig(out)
    assert out.stat().st_size > 1000
    with pytest.raises(ValueError, match="one Axes per task"):
        ReliabilityDiagramDisplay.from_predictions(frame, mo.predict_proba(Xd),
                                                   labels=mo.classes_, ax=axes[:2])
    plt.close("all")

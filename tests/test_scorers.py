"""Scorers inside scikit-learn's model selection, and the reliability display."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.datasets import (load_breast_cancer, load_digits, load_iris,  # noqa: E402
                              load_wine, make_classification)
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import (balanced_accuracy_score, brier_score_loss, f1_score,  # noqa: E402
                             get_scorer, log_loss, make_scorer, roc_auc_score)
from sklearn.model_selection import (GridSearchCV, KFold, cross_val_score,  # noqa: E402
                                     cross_validate)
from sklearn.multioutput import MultiOutputClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sklmoo.metrics import (ReliabilityDiagramDisplay, brier_score, brier_scorer,  # noqa: E402
                            ece_scorer, expected_calibration_error, make_calibration_scorer,
                            multitask_accuracy_score, multitask_accuracy_scorer,
                            negative_log_likelihood, nll_scorer, per_task_scorer)


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


# -- multi-task scoring (issue 20) ---------------------------------------------------------

def _mo_lr():
    return MultiOutputClassifier(LogisticRegression(max_iter=300))


def test_multitask_accuracy_score_by_hand_and_missing_labels():
    y_true = np.array([[0, "cat"], [1, "dog"], [2, None], [1, "dog"]], dtype=object)
    y_pred = np.array([[0, "cat"], [2, "cat"], [2, "dog"], [1, "cat"]], dtype=object)
    raw = multitask_accuracy_score(y_true, y_pred, multioutput="raw_values")
    np.testing.assert_allclose(raw, [3 / 4, 1 / 3])
    assert multitask_accuracy_score(y_true, y_pred) == pytest.approx((3 / 4 + 1 / 3) / 2)
    w = np.array([1.0, 2.0, 1.0, 0.0])
    np.testing.assert_allclose(multitask_accuracy_score(y_true, y_pred, sample_weight=w,
                                                        multioutput="raw_values"),
                               [2 / 4, 1 / 3])
    frame = pd.DataFrame({"digit": [0.0, 1.0, np.nan], "animal": ["cat", None, "dog"]})
    pred = pd.DataFrame({"digit": [0, 2, 1], "animal": ["cat", "cat", "cat"]})
    np.testing.assert_allclose(multitask_accuracy_score(frame, pred, multioutput="raw_values"),
                               [1 / 2, 1 / 2])
    # one task: plain accuracy
    assert multitask_accuracy_score([1, 2, 3], [1, 2, 4]) == pytest.approx(2 / 3)
    with pytest.warns(UserWarning, match="no labelled sample"):
        assert multitask_accuracy_score(np.array([[1, None], [2, None]], dtype=object),
                                        np.array([[1, 0], [3, 0]])) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="shape"):
        multitask_accuracy_score(y_true, y_pred[:, :1])
    with pytest.raises(ValueError, match="no labelled sample"):
        multitask_accuracy_score([None, None], [1, 2])


def test_multitask_accuracy_refuses_a_mix_of_string_and_number_labels():
    """Labels read as text ('0', '1') against predicted numbers would score 0 silently:
    refused like scikit-learn's accuracy_score does."""
    from sklearn.metrics import accuracy_score

    y = np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match="Mix of label input types"):
        accuracy_score(y.astype(str), y)
    with pytest.raises(ValueError, match="string labels and y_pred number labels"):
        multitask_accuracy_score(y.astype(str), y)
    pred = np.empty((4, 2), dtype=object)
    pred[:, 0], pred[:, 1] = y, y.astype(str)
    with pytest.raises(ValueError, match="task 1: y_true holds number labels and y_pred string"):
        multitask_accuracy_score(np.column_stack([y, y]), pred)
    # the same types compare as before, objects included
    assert multitask_accuracy_score(y.astype(object), y) == 1.0


def test_sklearn_accuracy_fails_on_multiclass_multioutput_and_multitask_scorers_work():
    X, y = _multitask_digits()
    X, y = X[:300], y[:300]
    cv = KFold(2, shuffle=True, random_state=0)
    with pytest.raises(ValueError, match="multiclass-multioutput"):
        cross_val_score(_mo_lr(), X, y, scoring="accuracy", cv=cv, error_score="raise")
    scoring = {"acc": multitask_accuracy_scorer,
               "digit_acc": per_task_scorer("accuracy", task=0),
               "parity_nll": per_task_scorer("neg_log_loss", task=1),
               "high_auc": per_task_scorer("roc_auc", task=2),
               "digit_f1": per_task_scorer(make_scorer(f1_score, average="macro"), task=0),
               "digit_bal": per_task_scorer(balanced_accuracy_score, task=0),   # a metric
               "high_ece": per_task_scorer(ece_scorer, task=2)}
    res = cross_validate(_mo_lr(), X, y, scoring=scoring, cv=cv, return_estimator=True,
                         return_indices=True, error_score="raise")
    for i, (est, test) in enumerate(zip(res["estimator"], res["indices"]["test"])):
        pred, proba = est.predict(X[test]), est.predict_proba(X[test])
        yt = y[test]
        accs = [np.mean(pred[:, t] == yt[:, t]) for t in range(3)]
        assert res["test_acc"][i] == pytest.approx(np.mean(accs))
        assert res["test_digit_acc"][i] == pytest.approx(accs[0])
        assert res["test_parity_nll"][i] == pytest.approx(
            -log_loss(yt[:, 1], proba[1], labels=est.classes_[1]))
        assert res["test_high_auc"][i] == pytest.approx(
            roc_auc_score(yt[:, 2] == est.classes_[2][1], proba[2][:, 1]))
        assert res["test_digit_f1"][i] == pytest.approx(
            f1_score(yt[:, 0], pred[:, 0], average="macro"))
        assert res["test_digit_bal"][i] == pytest.approx(
            balanced_accuracy_score(yt[:, 0], pred[:, 0]))
        assert res["test_high_ece"][i] == pytest.approx(
            -expected_calibration_error(yt[:, 2], proba[2], labels=est.classes_[2]))
    grid = GridSearchCV(_mo_lr(), {"estimator__C": [0.01, 1.0]}, cv=cv,
                        scoring={"acc": multitask_accuracy_scorer,
                                 "parity": per_task_scorer("accuracy", task=1)},
                        refit="acc", error_score="raise").fit(X, y)
    assert np.isfinite(grid.cv_results_["mean_test_acc"]).all()
    assert np.isfinite(grid.cv_results_["mean_test_parity"]).all()
    assert grid.best_params_ == {"estimator__C": 1.0}


def test_per_task_scorer_missing_labels_task_names_and_errors():
    X, y = _multitask_digits()
    frame = pd.DataFrame(y, columns=["digit", "parity", "high"])
    clf = _mo_lr().fit(X, frame)
    y_missing = frame.astype(object).copy()
    y_missing.iloc[::3, 1] = None
    labelled = y_missing["parity"].notna().to_numpy()
    pred = clf.predict(X)
    by_name = per_task_scorer("accuracy", task="parity")
    assert by_name(clf, X, y_missing) == pytest.approx(
        np.mean(pred[labelled, 1] == frame["parity"].to_numpy()[labelled]))
    assert "task='parity'" in repr(by_name)
    w = np.arange(len(X), dtype=float)
    assert per_task_scorer("accuracy", task=-2)(clf, X, y_missing, sample_weight=w) == (
        pytest.approx(np.average(pred[labelled, 1] == frame["parity"].to_numpy()[labelled],
                                 weights=w[labelled])))
    assert multitask_accuracy_scorer(clf, X, y_missing) == pytest.approx(np.mean(
        [np.mean(pred[:, 0] == y[:, 0]), np.mean(pred[labelled, 1] == y[labelled, 1]),
         np.mean(pred[:, 2] == y[:, 2])]))
    with pytest.raises(ValueError, match="not a column"):
        per_task_scorer("accuracy", task="colour")(clf, X, frame)
    with pytest.raises(ValueError, match="out of range"):
        per_task_scorer("accuracy", task=3)(clf, X, frame)
    with pytest.raises(ValueError, match="multi-task y_true"):
        per_task_scorer("accuracy")(clf, X, y[:, 0])
    with pytest.raises(TypeError, match="scoring"):
        per_task_scorer(3)


def test_per_task_scorer_for_multioutput_regression():
    from sklearn.datasets import load_linnerud
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import r2_score

    X, y = load_linnerud(return_X_y=True)
    reg = LinearRegression().fit(X, y)
    assert per_task_scorer("r2", task=1)(reg, X, y) == pytest.approx(
        r2_score(y[:, 1], reg.predict(X)[:, 1]))


def test_multitask_scorers_with_the_mtsgd_classifier():
    from sklmoo import MTSGDMultiTaskClassifier

    X, y = _multitask_digits()
    X, y = X[:200].astype(np.float32), y[:200]
    clf = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=1, batch_size=64, random_state=0,
                                   module__hidden_units=(8,))
    cv = KFold(2, shuffle=True, random_state=0)
    res = cross_validate(clf, X, y, cv=cv, return_estimator=True, return_indices=True,
                         scoring={"acc": multitask_accuracy_scorer,
                                  "parity_nll": per_task_scorer("neg_log_loss", task=1)},
                         error_score="raise")
    for i, (est, test) in enumerate(zip(res["estimator"], res["indices"]["test"])):
        assert res["test_acc"][i] == pytest.approx(est.score(X[test], y[test]))
        proba = est.predict_proba(X[test])
        assert res["test_parity_nll"][i] == pytest.approx(
            -log_loss(y[test, 1], proba[1], labels=est.classes_[1]))


def test_pandas_missing_markers_are_missing_labels_for_the_scorers():
    """pd.NA in a nullable column (what fit and score skip) and a NaN of any float type are
    missing labels, left out as None is, never scored as wrong answers."""
    X, y = _multitask_digits()
    frame = pd.DataFrame(y, columns=["digit", "parity", "high"])
    clf = _mo_lr().fit(X, frame)
    with_none = frame.astype(object)
    with_none.iloc[::3, 1] = None
    nullable = frame.astype({"parity": "string"})           # pandas' nullable strings
    nullable.iloc[::3, 1] = pd.NA
    float32_nan = frame.astype(object)
    float32_nan.iloc[::3, 1] = np.float32("nan")
    for scorer in (nll_scorer, ece_scorer, brier_scorer, multitask_accuracy_scorer):
        reference = scorer(clf, X, with_none)
        assert scorer(clf, X, nullable) == pytest.approx(reference, rel=1e-12), scorer
        assert scorer(clf, X, float32_nan) == pytest.approx(reference, rel=1e-12), scorer
    proba = clf.predict_proba(X)[1]
    kept = with_none["parity"].notna().to_numpy()
    assert negative_log_likelihood(nullable["parity"], proba) == pytest.approx(
        negative_log_likelihood(frame["parity"].to_numpy()[kept], proba[kept]))


def test_scorer_arguments_a_metric_refuses_are_refused_when_the_scorer_is_made():
    """cross_val_score would otherwise score NaN on every fold, with a warning."""
    with pytest.raises(ValueError, match="n_bins must be a positive integer"):
        make_calibration_scorer("ece", n_bins=0)
    with pytest.raises(TypeError, match="no such argument"):
        make_calibration_scorer("ece", nbins=15)
    make_calibration_scorer("ece", n_bins=15, strategy="quantile")
    make_calibration_scorer("brier", multioutput=[0.5, 0.5])    # checked when scoring
    # the regression scorers likewise
    from sklmoo.metrics import make_regression_scorer

    with pytest.raises(ValueError, match=r"interval_coverage\(level=1.5\): level must be"):
        make_regression_scorer("interval_coverage", level=1.5)
    with pytest.raises(ValueError, match="multioutput"):
        make_regression_scorer("gaussian_nll", multioutput="bogus")
    with pytest.raises(TypeError, match="no such argument"):
        make_regression_scorer("gaussian_nll", multioutptu="raw_values")
    make_regression_scorer("interval_coverage", greater_is_better=True, level=0.9,
                           multioutput="raw_values")
    make_regression_scorer("gaussian_nll", multioutput=[1, 2, 3])   # for a y of 3 outputs


def _small_mtsgd(**kw):
    from sklmoo import MTSGDMultiTaskClassifier

    return MTSGDMultiTaskClassifier(n_particles=2, max_epochs=3, random_state=0,
                                    module__hidden_units=(8,), **kw)


def test_the_estimators_missing_label_is_left_out_by_every_scorer():
    """With missing_label=-1, fit and score leave -1 out; the scorers counted it as a label
    (a wrong answer: NLL -5.07 instead of -0.59, accuracy 0.82 instead of 0.94, a
    reviewer's check), also through a pipeline."""
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    b = (X[:, 0] > 0).astype(int)
    b[::4] = -1
    Y = np.column_stack([y, b])
    Y_nan = np.column_stack([y, np.where(b < 0, np.nan, b)])
    clf = _small_mtsgd(missing_label=-1).fit(X, Y)
    pipe = make_pipeline(StandardScaler(), _small_mtsgd(missing_label=-1)).fit(X, Y)
    frame = pd.DataFrame(Y, columns=["wine", "b"])
    for scorer in (nll_scorer, ece_scorer, brier_scorer, multitask_accuracy_scorer,
                   per_task_scorer("accuracy", task=1)):
        for est in (clf, pipe):
            expected = scorer(est, X, Y_nan)
            assert scorer(est, X, Y) == pytest.approx(expected, rel=1e-12), scorer
        assert scorer(clf, X, frame) == pytest.approx(scorer(clf, X, Y_nan), rel=1e-12)
    assert multitask_accuracy_scorer(clf, X, Y) == pytest.approx(clf.score(X, Y))
    proba = clf.predict_proba(X)[1]
    assert -nll_scorer(clf, X, Y) == pytest.approx(np.mean([
        negative_log_likelihood(y, clf.predict_proba(X)[0]),
        negative_log_likelihood(b[b >= 0], proba[b >= 0])]))


def test_tasks_of_different_label_types_keep_their_types_and_score():
    """A DataFrame y's columns keep their own dtypes in classes_ (the frame's common dtype
    swapped them: an int task beside a float one with NaN got float classes), and the
    multi-task scorers work on tasks whose labels are strings and ints (they raised)."""
    X, t0 = make_classification(200, 5, random_state=0)
    X = X.astype(np.float32)
    flag = (X[:, 1] > 0).astype(int)
    with_nan = np.where(np.arange(200) % 7 == 0, np.nan, (X[:, 2] > 0).astype(float))
    Y = pd.DataFrame({"colour": np.where(t0 == 1, "red", "blue"), "flag": flag,
                      "f": with_nan})
    clf = _small_mtsgd().fit(X, Y)
    assert clf.classes_[0].tolist() == ["blue", "red"]
    assert clf.classes_[1].dtype.kind == "i" and clf.classes_[2].dtype.kind == "i"
    pred = clf.predict(X)
    assert multitask_accuracy_scorer(clf, X, Y) == pytest.approx(clf.score(X, Y))
    kept = ~np.isnan(with_nan)
    for t, name in enumerate(["colour", "flag", "f"]):
        rows = kept if name == "f" else np.ones(200, bool)
        truth = Y[name].to_numpy()[rows]
        hits = np.mean([a == b for a, b in zip(truth.tolist(), pred[rows, t].tolist())])
        assert per_task_scorer("accuracy", task=name)(clf, X, Y) == pytest.approx(hits)
    proba = clf.predict_proba(X)[1]
    assert per_task_scorer("roc_auc", task="flag")(clf, X, Y) == pytest.approx(
        roc_auc_score(flag, proba[:, 1]))


def test_scorers_take_sample_weight_under_metadata_routing():
    """The user guide's promise: with routing on, a scorer that asks for the weights gets
    them (the weighted value, not the unweighted one); unasked, weights are an error, as
    for scikit-learn's scorers; set_score_request needs routing on."""
    import sklearn

    X, y = load_breast_cancer(return_X_y=True)
    w = np.random.default_rng(0).exponential(size=len(y))
    cv = KFold(3, shuffle=True, random_state=0)
    with pytest.raises(RuntimeError, match="metadata routing"):
        make_calibration_scorer("nll").set_score_request(sample_weight=True)
    with sklearn.config_context(enable_metadata_routing=True):
        est = _lr().set_params(
            logisticregression=LogisticRegression(max_iter=1000).set_fit_request(
                sample_weight=True),
            standardscaler=StandardScaler().set_fit_request(sample_weight=False))
        weighted = make_calibration_scorer("nll").set_score_request(sample_weight=True)
        accuracy = per_task_scorer("accuracy", task=0).set_score_request(sample_weight=True)
        res = cross_validate(est, X, y, cv=cv, scoring={"nll": weighted},
                             params={"sample_weight": w}, return_estimator=True,
                             return_indices=True)
        for score, fitted, test in zip(res["test_nll"], res["estimator"],
                                       res["indices"]["test"]):
            proba = fitted.predict_proba(X[test])
            assert score == pytest.approx(-negative_log_likelihood(
                y[test], proba, sample_weight=w[test]))
            assert score != pytest.approx(-negative_log_likelihood(y[test], proba))
        Y = np.column_stack([y, X[:, 0] > np.median(X[:, 0])])
        multi = MultiOutputClassifier(LogisticRegression(max_iter=300).set_fit_request(
            sample_weight=False))
        res = cross_validate(multi, X, Y, cv=cv, scoring={"acc": accuracy},
                             params={"sample_weight": w}, return_estimator=True,
                             return_indices=True)
        for score, fitted, test in zip(res["test_acc"], res["estimator"],
                                       res["indices"]["test"]):
            assert score == pytest.approx(np.average(fitted.predict(X[test])[:, 0] == y[test],
                                                     weights=w[test]))
        with pytest.raises(Exception, match="sample_weight"):
            cross_validate(est, X, y, cv=cv, scoring={"nll": make_calibration_scorer("nll")},
                           params={"sample_weight": w})
        with pytest.raises(TypeError, match="sample_weight only"):
            make_calibration_scorer("nll").set_score_request(groups=True)


def test_reliability_display_leaves_out_missing_labels_and_refuses_unknown_ones():
    """``from_estimator`` leaves out the rows marked with the estimator's ``missing_label``,
    as the scorers do (they counted as wrong predictions); ``from_predictions`` refuses a
    label that is not among the ``labels`` given, as ``expected_calibration_error`` does,
    unless ``unknown_labels='count_as_wrong'``."""
    from sklmoo import MTSGDMultiTaskClassifier

    rng = np.random.RandomState(0)
    X = rng.randn(150, 4)
    Y = np.c_[(X[:, 0] + 0.5 * rng.randn(150) > 0),
              np.digitize(X[:, 1] + 0.3 * rng.randn(150), [-0.5, 0.5])].astype(int)
    Y[:40, 1] = -1
    clf = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=5, random_state=0,
                                   missing_label=-1).fit(X, Y)
    disp = ReliabilityDiagramDisplay.from_estimator(clf, X, Y)
    labelled = Y.astype(float)
    labelled[labelled == -1] = np.nan
    ref = expected_calibration_error(labelled, clf.predict_proba(X), labels=clf.classes_,
                                     multioutput="raw_values")
    np.testing.assert_allclose(disp.ece, ref)
    assert disp.bin_count[1].sum() == pytest.approx(110)
    plt.close("all")
    y, proba = np.array(["cat", "dog", "cat"]), np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    with pytest.raises(ValueError, match=r"labels \['dog'\] not in labels"):
        ReliabilityDiagramDisplay.from_predictions(y, proba, labels=["cat", "Dog"])
    counted = ReliabilityDiagramDisplay.from_predictions(y, proba, labels=["cat", "Dog"],
                                                         unknown_labels="count_as_wrong")
    assert counted.ece[0] == pytest.approx(expected_calibration_error(
        y, proba, labels=["cat", "Dog"], unknown_labels="count_as_wrong"))
    plt.close("all")


def test_a_misspelt_multioutput_is_refused_for_one_task_too():
    """``multioutput`` other than 'raw_values', 'uniform_average' or weights raised for a 2-D
    ``y`` only; with one task it passed unnoticed."""
    from sklmoo.metrics import gaussian_nll

    for call in (lambda m: expected_calibration_error([0, 1], [[0.9, 0.1], [0.2, 0.8]],
                                                      multioutput=m),
                 lambda m: brier_score([0, 1], [0.2, 0.8], multioutput=m),
                 lambda m: negative_log_likelihood([0, 1], [[0.9, 0.1], [0.2, 0.8]],
                                                   multioutput=m),
                 lambda m: gaussian_nll([0.0, 1.0], [0.0, 1.0], [1.0, 1.0], multioutput=m)):
        with pytest.raises(ValueError, match="multioutput must be"):
            call("bogus")
        assert np.isfinite(call("uniform_average"))


def test_labels_all_weighted_zero_are_named_as_such():
    with pytest.raises(ValueError, match="every labelled sample has weight 0"):
        expected_calibration_error(np.array([0, 1, np.nan]),
                                   [[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]], sample_weight=[0, 0, 1])

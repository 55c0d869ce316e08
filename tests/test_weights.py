"""sample_weight and class_weight: what they change in a fit, and that scikit-learn's
meta-estimators pass them through (metadata routing)."""

import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import BayesianRidge
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_class_weight

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.estimators import ValidationSplit
from sklmoo.metrics._recalibration import fit_temperature, fit_variance_scale
from sklmoo.pipeline import make_pipeline

MAKERS = {
    "mtsgd": lambda **kw: MTSGDMultiTaskClassifier(**{"max_epochs": 4, "n_particles": 2,
                                                      "random_state": 0, **kw}),
    "l2e": lambda **kw: L2ESamplerClassifier(**{"max_epochs": 6, "n_chains": 2, "n_draws": 3,
                                                 "random_state": 0, **kw}),
    "regressor": lambda **kw: MTSGDRegressor(**{"max_epochs": 4, "n_particles": 2,
                                                "random_state": 0, **kw}),
}
#: the same, the regressor built on its linear mean: for tests about the networks or about
#: scikit-learn's machinery (on this table its Gaussian-process mean would leave the networks
#: unused, and it takes ten times the fit time; what the weights do inside it is
#: test_integer_weights_act_like_repeated_rows's)
LINEAR_MEAN = {**MAKERS, "regressor": lambda **kw: MAKERS["regressor"](
    **{"mean_function": "linear", **kw})}


@pytest.fixture(scope="module")
def table():
    """A small noisy table: three classes for the classifiers, a value for the regressor."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 4)).astype(np.float32)
    y = np.digitize(X[:, 0] + 0.8 * rng.normal(size=150), [-0.4, 0.4])
    value = X[:, 1] + np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=150)
    w = rng.integers(0, 4, size=150).astype(float)
    return X, y, value, w


def _target(name, table):
    return table[2] if name == "regressor" else table[1]


def _prediction(est, X):
    if isinstance(est, MTSGDRegressor):
        return np.column_stack(est.predict(X, return_std=True))
    proba = est.predict_proba(X)
    return np.column_stack(proba) if isinstance(proba, list) else proba


def _quiet_fit(est, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(*args, **kwargs)


# -- what the weights do ----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(MAKERS))
def test_unit_weights_give_the_fit_of_no_weights(name, table):
    X, _, _, _ = table
    y = _target(name, table)
    plain = _quiet_fit(MAKERS[name](), X, y)
    unit = _quiet_fit(MAKERS[name](), X, y, sample_weight=np.ones(len(X)))
    np.testing.assert_array_equal(_prediction(plain, X), _prediction(unit, X))
    # a number is a weight for every row
    scalar = _quiet_fit(MAKERS[name](), X, y, sample_weight=1)
    np.testing.assert_array_equal(_prediction(plain, X), _prediction(scalar, X))


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_zero_weight_removes_the_row(name, table):
    X, _, _, w = table
    y = _target(name, table)
    kept = w > 0
    weighted = _quiet_fit(MAKERS[name](), X, y, sample_weight=w)
    removed = _quiet_fit(MAKERS[name](), X[kept], y[kept], sample_weight=w[kept])
    np.testing.assert_array_equal(_prediction(weighted, X), _prediction(removed, X))
    assert weighted.n_train_ + weighted.n_valid_ == kept.sum()


def test_a_weight_per_row_applies_to_every_task(table):
    X, y, _, w = table
    Y = np.column_stack([y, (X[:, 2] > 0).astype(int)])
    weighted = _quiet_fit(MAKERS["mtsgd"](), X, Y, sample_weight=w)
    kept = w > 0
    removed = _quiet_fit(MAKERS["mtsgd"](), X[kept], Y[kept], sample_weight=w[kept])
    np.testing.assert_array_equal(_prediction(weighted, X), _prediction(removed, X))
    value = np.column_stack([table[2], X[:, 3]])
    reg = _quiet_fit(MAKERS["regressor"](), X, value, sample_weight=w)
    reg_removed = _quiet_fit(MAKERS["regressor"](), X[kept], value[kept],
                             sample_weight=w[kept])
    np.testing.assert_array_equal(_prediction(reg, X), _prediction(reg_removed, X))


@pytest.mark.parametrize("name", list(MAKERS))
def test_integer_weights_act_like_repeated_rows(name):
    """Labels (values) independent of X: the weighted likelihood is maximised by the weighted
    share of class 1 (the weighted mean), 0.77 here against 0.52 unweighted. Fits with the
    weights and fits on repeated rows, at the same number of optimiser steps, both land
    there on new rows (two seeds each); unweighted ones do not.""" 
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 2)).astype(np.float32)
    X_new = rng.normal(size=(500, 2)).astype(np.float32)
    y = (rng.random(240) < 0.5).astype(int)
    w = np.where(y == 1, 3, 1)
    expected = (w * y).sum() / w.sum()
    epochs = 60 if name == "l2e" else 30
    settings = dict(n_draws=20) if name == "l2e" else dict(callbacks__early_stopping=None)

    def mean_prediction(fit_args, fit_kwargs, epochs):
        values = []
        for seed in (0, 1):
            est = MAKERS[name](random_state=seed, max_epochs=epochs, **settings)
            est = _quiet_fit(est, *fit_args, **fit_kwargs)
            values.append(est.predict(X_new).mean() if name == "regressor"
                          else est.predict_proba(X_new)[:, 1].mean())
        return float(np.mean(values))

    # an epoch over the repeated rows has w.sum() / len(w) times the steps
    weighted = mean_prediction((X, y), dict(sample_weight=w),
                               int(round(epochs * w.sum() / len(w))))
    repeated = mean_prediction((np.repeat(X, w, axis=0), np.repeat(y, w)), {}, epochs)
    unweighted = mean_prediction((X, y), {}, epochs)
    assert abs(weighted - expected) < 0.04, (weighted, expected)
    assert abs(repeated - expected) < 0.04, (repeated, expected)
    assert abs(weighted - repeated) < 0.05
    assert abs(unweighted - y.mean()) < 0.04 and expected - unweighted > 0.2


@pytest.mark.parametrize("bad, match", [
    (-np.ones(150), "[Nn]egative"), (np.full(150, np.nan), "NaN"), (np.ones(149), "149"),
    (np.ones((150, 2)), "1D|1-D|shape"), (np.zeros(150), "zero"),
])
@pytest.mark.parametrize("name", list(MAKERS))
def test_bad_weights_are_a_clear_error_and_leave_the_estimator_unfitted(name, table, bad,
                                                                        match):
    X, _, _, _ = table
    y = _target(name, table)
    est = MAKERS[name]()
    with pytest.raises(ValueError, match=match) as info:
        est.fit(X, y, sample_weight=bad)
    assert "weight" in str(info.value)
    assert not est.__sklearn_is_fitted__()


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_refused_continuation_keeps_the_fitted_model(name, table):
    X, _, _, _ = table
    y = _target(name, table)
    est = _quiet_fit(MAKERS[name](warm_start=True), X, y)
    before = _prediction(est, X)
    with pytest.raises(ValueError, match="weight"):
        est.fit(X, y, sample_weight=-np.ones(len(X)))
    with pytest.raises(ValueError, match="weight"):
        est.partial_fit(X, y, sample_weight=np.ones(3))
    assert est.__sklearn_is_fitted__()
    np.testing.assert_array_equal(_prediction(est, X), before)


@pytest.mark.parametrize("name", list(MAKERS))
def test_continued_fits_take_weights(name, table):
    X, _, _, w = table
    y = _target(name, table)
    # continued fits are about the networks
    first = _quiet_fit(LINEAR_MEAN[name](), X, y)
    runs = {}
    for kind, weight in (("none", None), ("unit", np.ones(len(X))), ("w", w)):
        est = clone(first).set_params(warm_start=True)
        est = _quiet_fit(est, X, y)
        runs[kind] = _prediction(est.partial_fit(X, y, sample_weight=weight), X)
    np.testing.assert_array_equal(runs["none"], runs["unit"])
    assert not np.array_equal(runs["none"], runs["w"])
    warm = _quiet_fit(clone(first).set_params(warm_start=True), X, y)
    kept = w > 0
    warm_removed = clone(warm)
    warm_removed = _quiet_fit(warm_removed, X, y)
    a = _prediction(_quiet_fit(warm, X, y, sample_weight=w), X)
    b = _prediction(_quiet_fit(warm_removed, X[kept], y[kept], sample_weight=w[kept]), X)
    np.testing.assert_array_equal(a, b)


def test_the_validation_loss_is_the_weighted_nll_of_the_held_out_rows(table):
    """With a fixed split and no calibration, the last epoch's validation loss equals
    scikit-learn's weighted log_loss of the pooled probabilities on the held-out rows."""
    X, y, _, w = table
    w = w + 0.5
    valid = np.arange(100, 150)
    clf = MAKERS["mtsgd"](calibration=None, callbacks__early_stopping=None,
                          train_split=_fixed_split(valid), linear_gate=False)
    clf = _quiet_fit(clf, X, y, sample_weight=w)
    expected = log_loss(y[valid], clf.predict_proba(X[valid]), sample_weight=w[valid])
    assert clf.history[-1, "valid_loss"] == pytest.approx(expected, rel=1e-5)


def _fixed_split(valid):
    from torch.utils.data import Subset

    def split(dataset, y=None, **kwargs):
        train = np.setdiff1d(np.arange(len(dataset)), valid)
        return Subset(dataset, train.tolist()), Subset(dataset, list(valid))
    return split


def test_the_weights_reach_the_temperature(table):
    """The temperature is fitted on the weighted held-out NLL: the fitted temperature equals
    the one fitted, independently, on the held-out rows repeated by their weights."""
    X, y, _, w = table
    valid = np.arange(100, 150)
    wv = np.where(np.arange(150) >= 125, 4.0, 1.0)
    # the networks' temperature (a closed linear gate would set it to 1)
    clf = _quiet_fit(MAKERS["mtsgd"](calibration="temperature", linear_gate=False,
                                     train_split=_fixed_split(valid)), X, y, sample_weight=wv)
    raw = clone(clf).set_params(calibration=None)
    raw = _quiet_fit(raw, X, y, sample_weight=wv)
    proba = raw.predict_proba(X[valid])
    reps = wv[valid].astype(int)
    expected = fit_temperature(np.repeat(proba, reps, axis=0), np.repeat(y[valid], reps),
                               prior_scale=0.25)
    assert clf.temperature_[0] == pytest.approx(expected, rel=1e-3)


def test_recalibration_weights_act_like_repeated_rows():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3) * 0.7, size=40)
    codes = rng.integers(0, 3, size=40)
    reps = rng.integers(0, 4, size=40)
    assert fit_temperature(proba, codes, sample_weight=reps) == pytest.approx(
        fit_temperature(np.repeat(proba, reps, axis=0), np.repeat(codes, reps)), rel=1e-3)
    y, mean, std = rng.normal(size=40), np.zeros(40), np.full(40, 0.6)
    for margin in (0.0, 1.0):
        assert fit_variance_scale(y, mean, std, margin, sample_weight=reps) == pytest.approx(
            fit_variance_scale(*(np.repeat(a, reps) for a in (y, mean, std)), margin),
            rel=1e-3)


def test_the_linear_mean_function_is_a_weighted_bayesian_ridge(table):
    X, _, value, w = table
    reg = _quiet_fit(MAKERS["regressor"](mean_function="linear"), X, value, sample_weight=w)
    reps = w.astype(int)
    rows, targets = np.repeat(X, reps, axis=0), np.repeat(value, reps)
    scaled = (targets - targets.mean()) / targets.std()
    reference = BayesianRidge().fit(rows.astype(np.float64), scaled)
    np.testing.assert_allclose(reg.y_mean_, [targets.mean()], rtol=1e-6)
    np.testing.assert_allclose(reg.y_scale_, [targets.std()], rtol=1e-6)
    import torch

    with torch.no_grad():
        mean, _ = reg.module_.output_map.moments(torch.as_tensor(X))
    np.testing.assert_allclose(mean[:, 0].numpy(), reference.predict(X.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)


def test_the_validation_split_holds_out_a_share_of_the_weight():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], [300, 100])
    w = rng.exponential(size=400) * 10
    split = ValidationSplit(random_state=0)
    data = np.zeros((400, 1))
    _, valid = split(data, y, weight=w)
    held = np.asarray(valid.indices)
    for label in (0, 1):
        stratum = y == label
        share = w[held][y[held] == label].sum() / w[stratum].sum()
        assert abs(share - 0.2) <= w[stratum].max() / w[stratum].sum(), (label, share)
    # equal weights: the same split as none
    _, plain = split(data, y)
    _, equal = split(data, y, weight=np.full(400, 3.0))
    assert plain.indices == equal.indices


# -- class_weight ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_class_weight_is_a_weight_per_label_times_sample_weight(name, table):
    """As in scikit-learn: 'balanced' weights n / (n_classes * weighted count), a dict gives
    a label's weight, and either multiplies sample_weight."""
    X, y, _, w = table
    w = w + 1.0
    classes = np.unique(y)
    balanced = compute_class_weight("balanced", classes=classes, y=y, sample_weight=w)
    a = _quiet_fit(MAKERS[name](class_weight="balanced"), X, y, sample_weight=w)
    b = _quiet_fit(MAKERS[name](), X, y, sample_weight=w * balanced[y])
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    c = _quiet_fit(MAKERS[name](class_weight={2: 5.0}), X, y, sample_weight=w)
    d = _quiet_fit(MAKERS[name](), X, y, sample_weight=w * np.where(y == 2, 5.0, 1.0))
    np.testing.assert_array_equal(c.predict_proba(X), d.predict_proba(X))


@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_partial_fit_refuses_balanced_class_weights_as_scikit_learn_does(name, table):
    """'balanced' would be recomputed from each chunk's counts (SGDClassifier.partial_fit
    refuses it too); a dict of weights computed once from the full labels works, and a
    refused call changes nothing of a fitted model."""
    from sklearn.linear_model import SGDClassifier

    X, y, _, _ = table
    classes = np.unique(y)
    with pytest.raises(ValueError, match="balanced"):
        SGDClassifier(class_weight="balanced").partial_fit(X, y, classes=classes)
    for spec in ("balanced", ["balanced"]):
        est = MAKERS[name](class_weight=spec)
        with pytest.raises(ValueError, match="class_weight='balanced' is not supported for "
                                             "partial_fit.*compute_class_weight"):
            est.partial_fit(X[:75], y[:75], classes=classes)
        assert not est.__sklearn_is_fitted__()
    weights = dict(zip(classes, compute_class_weight("balanced", classes=classes, y=y)))
    est = _quiet_fit(MAKERS[name](class_weight=weights), X[:75], y[:75])
    before = est.predict_proba(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.partial_fit(X[75:], y[75:])
    after = est.predict_proba(X)
    assert after.shape == before.shape
    est.set_params(class_weight="balanced")
    with pytest.raises(ValueError, match="balanced"):
        est.partial_fit(X[75:], y[75:])
    assert est.__sklearn_is_fitted__()
    np.testing.assert_array_equal(est.predict_proba(X), after)


@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_class_weight_moves_the_decision_towards_the_favoured_class(name):
    """scikit-learn's check_class_weight_classifiers at the estimators' default budgets:
    noisy blobs, class 0 weighted 1000 against 0.0001: class 0 is predicted on over 87 % of
    the test rows."""
    from sklearn.datasets import make_blobs
    from sklearn.model_selection import train_test_split

    X, y = make_blobs(centers=3, random_state=0, cluster_std=20)
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.5, random_state=0)
    est = MTSGDMultiTaskClassifier(random_state=0) if name == "mtsgd" else \
        L2ESamplerClassifier(n_chains=2, random_state=0)
    est.set_params(class_weight={0: 1000, 1: 0.0001, 2: 0.0001})
    est = _quiet_fit(est, X_train, y_train)
    assert np.mean(est.predict(X_test) == 0) > 0.87


def test_class_weight_per_task(table):
    """A list holds one setting per task: 'balanced' lifts the rare class of the first task
    only; the second task's probabilities do not move towards balance."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    Y = np.column_stack([(rng.random(300) < 0.15).astype(int),
                         (rng.random(300) < 0.15).astype(int)])
    plain = _quiet_fit(MAKERS["mtsgd"](max_epochs=20), X, Y).predict_proba(X)
    weighted = _quiet_fit(MAKERS["mtsgd"](max_epochs=20, class_weight=["balanced", None]),
                          X, Y).predict_proba(X)
    assert plain[0][:, 1].mean() < 0.25 and weighted[0][:, 1].mean() > 0.4
    assert abs(weighted[1][:, 1].mean() - plain[1][:, 1].mean()) < 0.05


@pytest.mark.parametrize("class_weight, match", [
    ("bogus", "'balanced'"), ({7: 2.0}, r"\[7\]"), ({0: -1.0}, ">= 0"),
    ({0: float("nan")}, ">= 0"), (["balanced", None], "2 entries"),
])
@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_bad_class_weights_are_a_clear_error(name, table, class_weight, match):
    X, y, _, _ = table
    est = MAKERS[name](class_weight=class_weight)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


@pytest.mark.parametrize("how", ["sample_weight", "class_weight"])
@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_weights_that_leave_one_class_are_a_clear_error(name, table, how):
    """Zero weights on every row but one class's would fit a one-class model that still reports
    every class in classes_: refused like one-class labels, and the estimator stays unfitted."""
    X, y, _, _ = table
    est = MAKERS[name](**({"class_weight": {0: 0.0, 1: 0.0, 2: 1.0}} if how == "class_weight"
                          else {}))
    weight = np.where(y == 2, 1.0, 0.0) if how == "sample_weight" else None
    with pytest.raises(ValueError, match=r"class\(es\) \[0, 1\] has a zero weight.*leaves 1 "
                                         r"class\(es\) \[2\]"):
        est.fit(X, y, sample_weight=weight)
    assert not est.__sklearn_is_fitted__()
    # two classes left with a positive weight: a fit (the third class is removed)
    est = MAKERS[name]().fit(X, y, sample_weight=np.where(y == 0, 0.0, 1.0))
    assert est.predict_proba(X).shape == (len(X), 3)


@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_a_warm_start_whose_weights_leave_one_class_is_refused(name, table):
    # a warm start is a fit: refused as a new fit is, before anything changes; a partial_fit
    # chunk may weigh one class
    X, y, _, _ = table
    est = _quiet_fit(MAKERS[name](warm_start=True), X, y)
    before = _prediction(est, X)
    with pytest.raises(ValueError, match=r"class\(es\) \[0, 1\] has a zero weight"):
        est.fit(X, y, sample_weight=np.where(y == 2, 1.0, 0.0))
    assert est.__sklearn_is_fitted__()
    np.testing.assert_array_equal(_prediction(est, X), before)
    _quiet_fit(est, X, y, sample_weight=np.where(y == 0, 0.0, 1.0))     # two classes: a fit
    est.partial_fit(X, y, sample_weight=np.where(y == 2, 1.0, 0.0))
    assert est.__sklearn_is_fitted__()


def test_weights_that_leave_one_class_name_the_task(table):
    X, y, _, _ = table
    est = MAKERS["mtsgd"](class_weight=[None, {0: 0.0, 1: 1.0, 2: 0.0}])
    with pytest.raises(ValueError, match=r"task 'task_1': every row of class\(es\) \[0, 2\]"):
        est.fit(X, np.column_stack([y, y]))
    # a partial_fit chunk may hold one class of the given ones, weighted or not
    for name in ("mtsgd", "l2e"):
        est = MAKERS[name]().partial_fit(X[y == 1], y[y == 1], classes=[0, 1, 2])
        assert est.__sklearn_is_fitted__()
        est = MAKERS[name]().partial_fit(X, y, classes=[0, 1, 2],
                                         sample_weight=(y == 1).astype(float))
        assert est.__sklearn_is_fitted__()


def test_one_dict_for_several_tasks_is_refused(table):
    X, y, _, _ = table
    with pytest.raises(ValueError, match="one dict per task"):
        MAKERS["mtsgd"](class_weight={0: 2.0}).fit(X, np.column_stack([y, y]))


# -- scikit-learn's meta-estimators --------------------------------------------------------------

def _manual_fold_predictions(est, X, y, w, cv):
    return [_prediction(_quiet_fit(clone(est), X[tr], y[tr], sample_weight=w[tr]), X)
            for tr, _ in cv.split(X)]


@pytest.mark.parametrize("routing", [False, True])
@pytest.mark.parametrize("name", list(LINEAR_MEAN))
def test_cross_validate_passes_the_weights(name, table, routing):
    X, _, _, w = table
    y = _target(name, table)
    cv = KFold(2, shuffle=True, random_state=0)
    est = LINEAR_MEAN[name]()
    with sklearn.config_context(enable_metadata_routing=routing), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if routing:
            est.set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        result = cross_validate(est, X, y, cv=cv, params={"sample_weight": w},
                                return_estimator=True)
    expected = _manual_fold_predictions(LINEAR_MEAN[name](), X, y, w, cv)
    for fitted, reference in zip(result["estimator"], expected):
        np.testing.assert_array_equal(_prediction(fitted, X), reference)


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
def test_grid_search_and_pipelines_pass_the_weights(name, table):
    X, _, _, w = table
    y = _target(name, table)
    step = type(LINEAR_MEAN[name]()).__name__.lower()
    reference = _prediction(_quiet_fit(LINEAR_MEAN[name](lr=3e-3), X, y, sample_weight=w), X)
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LINEAR_MEAN[name]().set_fit_request(sample_weight=True)
        est.set_score_request(sample_weight=True)
        search = GridSearchCV(est, {"lr": [1e-3, 3e-3]}, cv=2, refit=True)
        search.set_params(estimator__lr=1e-3)
        search = search.fit(X, y, sample_weight=w)
        best = search.best_estimator_
        if best.lr == 3e-3:
            np.testing.assert_array_equal(_prediction(best, X), reference)
        pipe = make_pipeline(StandardScaler().set_fit_request(sample_weight=False),
                             LINEAR_MEAN[name]().set_fit_request(sample_weight=True))
        routed = pipe.fit(X, y, sample_weight=w)
    plain = make_pipeline(StandardScaler(), LINEAR_MEAN[name]())
    plain = _quiet_fit(plain, X, y, **{f"{step}__sample_weight": w})
    Xs = StandardScaler().fit_transform(X)
    direct = _prediction(_quiet_fit(LINEAR_MEAN[name](), Xs, y, sample_weight=w), Xs)
    np.testing.assert_array_equal(_prediction(plain[-1], Xs), direct)
    np.testing.assert_array_equal(_prediction(routed[-1], Xs), direct)


def test_calibrated_classifier_cv_passes_the_weights_to_the_estimator(table):
    X, y, _, w = table
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)      # no "does not support sample_weight"
        warnings.filterwarnings("ignore", message=".*repulsion.*")
        cal = CalibratedClassifierCV(MAKERS["mtsgd"](), method="temperature",
                                     cv=KFold(2, shuffle=True, random_state=0), ensemble=True)
        cal.fit(X, y, sample_weight=w)
    cv = KFold(2, shuffle=True, random_state=0)
    expected = _manual_fold_predictions(MAKERS["mtsgd"](), X, y, w, cv)
    for member, reference in zip(cal.calibrated_classifiers_, expected):
        np.testing.assert_array_equal(_prediction(member.estimator, X), reference)


@pytest.mark.parametrize("name", list(MAKERS))
def test_the_fit_signature_names_sample_weight(name):
    """scikit-learn finds the parameter by inspection (has_fit_parameter), and metadata
    routing offers set_fit_request(sample_weight=...) without further setup."""
    from sklearn.utils.validation import has_fit_parameter

    from sklearn.utils.metadata_routing import get_routing_for_object

    est = MAKERS[name]()
    assert has_fit_parameter(est, "sample_weight")
    with sklearn.config_context(enable_metadata_routing=True):
        est.set_fit_request(sample_weight=True).set_partial_fit_request(sample_weight=True)
        routing = get_routing_for_object(est)
        assert routing.consumes("fit", ["sample_weight"]) == {"sample_weight"}
        assert routing.consumes("partial_fit", ["sample_weight"]) == {"sample_weight"}


# -- edge cases of a hostile-input pass ------------------------------------------------------------

def test_one_heavy_row_never_empties_the_validation_split():
    """One row with 100 times the others' weight: every seed holds out rows (at least
    min_valid), about a fifth of the weight, and the fit completes."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    value = X[:, 0] + 0.1 * rng.normal(size=40)
    w = np.ones(40)
    w[0] = 100.0
    for seed in range(6):
        reg = _quiet_fit(MAKERS["regressor"](max_epochs=2, random_state=seed), X, value,
                         sample_weight=w)
        assert reg.__sklearn_is_fitted__() and reg.n_valid_ >= 5
    for seed in range(20):
        _, valid = ValidationSplit(random_state=seed)(np.zeros((40, 1)), None, weight=w)
        held = w[np.asarray(valid.indices)].sum() / w.sum()
        assert len(valid.indices) >= 5 and abs(held - 0.2) < 0.1, (seed, held)


def test_class_weights_with_a_task_unlabelled_in_a_chunk(table):
    # (per-task dicts: partial_fit refuses 'balanced', as scikit-learn's does)
    X, y, _, _ = table
    Y = np.column_stack([y, X[:, 0] > 0]).astype(float)
    est = MAKERS["mtsgd"](class_weight=[{0.0: 2.0, 1.0: 1.0, 2.0: 0.5}, {0.0: 1.0, 1.0: 3.0}])
    est.partial_fit(X[:75], Y[:75])
    chunk = Y[75:].copy()
    chunk[:, 0] = np.nan
    est.partial_fit(X[75:], chunk)
    assert est.__sklearn_is_fitted__()


def test_an_output_without_weighted_values_is_named(table):
    X, _, value, _ = table
    V = np.column_stack([value, 2 * X[:, 2]])
    V[75:, 0] = np.nan
    w = np.r_[np.zeros(75), np.ones(75)]
    with pytest.raises(ValueError, match="output 'output_0'.*non-zero sample_weight|"
                                         "output .* has 0 sample"):
        MAKERS["regressor"]().fit(X, V, sample_weight=w)


@pytest.mark.parametrize("bad", [np.nan, np.inf, np.array(np.nan)])
@pytest.mark.parametrize("name", list(MAKERS))
def test_a_non_finite_number_as_weight_is_refused(name, table, bad):
    X, _, _, _ = table
    with pytest.raises(ValueError, match="sample_weight must be finite"):
        MAKERS[name]().fit(X, _target(name, table), sample_weight=bad)


@pytest.mark.parametrize("scale", [1e308, 1e-300, 1e9])
@pytest.mark.parametrize("name", list(MAKERS))
def test_weights_beyond_the_arithmetic_are_refused_before_fitting(name, table, scale):
    """A weight counts as observations: a mean weight beyond 1e6 or below 1e-6 per row
    would over- or underflow the likelihood's N (1e308 silently fitted nothing)."""
    X, _, _, _ = table
    est = MAKERS[name]()
    with pytest.raises(ValueError, match="mean weight"):
        est.fit(X, _target(name, table), sample_weight=np.full(len(X), scale))
    assert not est.__sklearn_is_fitted__()
    # within the range, uniform weights fit
    ok = _quiet_fit(MAKERS[name](), X, _target(name, table), sample_weight=np.full(len(X), 1e5))
    assert ok.__sklearn_is_fitted__()


def test_class_weights_beyond_the_arithmetic_are_named(table):
    X, _, _, _ = table
    y = _target("mtsgd", table)
    est = MAKERS["mtsgd"](class_weight={label: 1e30 for label in np.unique(y)})
    with pytest.raises(ValueError, match="^sample_weight and class_weight: the training rows' "
                                         "mean weight is 1e"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


def test_scoring_with_zero_weights_everywhere_names_the_weights(table):
    X, _, _, _ = table
    y = _target("mtsgd", table)
    est = _quiet_fit(MAKERS["mtsgd"](), X, y)
    with pytest.raises(ValueError, match="no labelled sample of positive sample_weight"):
        est.score(X, y, sample_weight=np.zeros(len(X)))


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_zero_dimensional_array_is_a_number(name, table):
    X, _, _, _ = table
    y = _target(name, table)
    a = _prediction(_quiet_fit(MAKERS[name](), X, y, sample_weight=np.array(2.0)), X)
    b = _prediction(_quiet_fit(MAKERS[name](), X, y, sample_weight=2.0), X)
    np.testing.assert_array_equal(a, b)


def test_weights_that_remove_every_labelled_row_of_a_task_are_refused(table):
    """A task whose labelled rows all weigh zero was accepted and never trained (its
    probabilities stayed near its initialisation, with no warning), where a task without
    labels is refused: refused as well, naming the task, and the estimator stays unfitted."""
    X, y, _, _ = table
    b = (X[:, 0] > np.median(X[:, 0])).astype(float)
    b[::2] = np.nan                                   # task 'b' labelled on odd rows only
    Y = pd.DataFrame({"a": y, "b": b})
    weight = np.where(np.isnan(b), 1.0, 0.0)          # every labelled row of 'b' weighs 0
    est = MAKERS["mtsgd"]()
    with pytest.raises(ValueError, match=r"task 'b': every labelled row has a zero weight"):
        est.fit(X, Y, sample_weight=weight)
    assert not est.__sklearn_is_fitted__()
    est = MAKERS["mtsgd"](class_weight=[None, {0.0: 0.0, 1.0: 0.0}])
    with pytest.raises(ValueError, match=r"task 'b': every labelled row has a zero weight"):
        est.fit(X, Y)


@pytest.mark.parametrize("name", list(MAKERS))
def test_weights_that_sum_to_one_are_warned_about_where_their_scale_matters(name, table):
    """Weights normalised to sum to 1 make a fit of one row's worth of data where the total
    weight counters a prior (L2E's n_data, the regressor's prior_precision=1: a reviewer's
    L2E fell from accuracy 0.94 to the majority class, silently), and where the classifiers'
    linear gate's logistic regression counts them: a warning that says so; the MT-SGD
    classifier without the gate at prior_precision=0 reads only the ratios and stays quiet,
    as every estimator does with weights of about 1."""
    X = table[0]
    y = _target(name, table)
    w = np.full(len(X), 1.0 / len(X))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = MAKERS[name]().fit(X, y, sample_weight=w)
        MAKERS[name]().fit(X, y, sample_weight=np.full(len(X), 0.5))
    said = [str(c.message) for c in caught if "sample_weight averages" in str(c.message)]
    assert len(said) == 1 and "as much data as 1 rows" in said[0], said
    assert any("sample_weight averages" in m for m in est.fit_warnings_)
    if name == "mtsgd":
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            MAKERS[name](linear_gate=False).fit(X, y, sample_weight=w)
        assert not [c for c in caught if "sample_weight averages" in str(c.message)]
        with pytest.warns(UserWarning, match="sample_weight averages 0.00667 per row"):
            MAKERS[name](linear_gate=False, prior_precision=1.0).fit(X, y, sample_weight=w)

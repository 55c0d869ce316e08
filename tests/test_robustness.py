"""Regression tests for the robustness audit (issue 13): each case crashed, returned a silent
wrong answer or left a fitted-looking estimator before."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Callback

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.datasets import make_multi_digits
from sklmoo.metrics import brier_scorer, ece_scorer, nll_scorer


def _mt(**kw):
    params = dict(n_particles=2, max_epochs=2, batch_size=32, random_state=0,
                  module__hidden_units=(8,))
    params.update(kw)
    return MTSGDMultiTaskClassifier(**params)


def _target_for(est, y):
    if isinstance(est, MTSGDRegressor):
        return y.astype(float)
    return y if isinstance(est, MTSGDMultiTaskClassifier) else y[:, 0]


@pytest.fixture(scope="module")
def digits():
    X, y = make_multi_digits(300, random_state=0, return_X_y=True)
    return X, y


def test_batches_without_any_label_contribute_nothing(digits):
    # item 1: 85 % missing labels and batches of 4 used to crash (empty stack)
    X, y = digits
    y = y.astype(float)
    rng = np.random.default_rng(0)
    y[rng.random(y.shape) < 0.85] = np.nan
    clf = _mt(batch_size=4, max_epochs=1).fit(X, y)
    assert clf.predict(X[:5]).shape == (5, 2)
    with pytest.raises(ValueError, match="0 class"):
        _mt().fit(X, np.full(y.shape, np.nan))


def test_warm_start_refit_on_other_data_is_refused_and_keeps_the_model(digits):
    # item 2: warm_start refits with other classes / tasks / features silently kept old heads
    X, y = digits
    clf = _mt(warm_start=True).fit(X, y)
    before = clf.predict_proba(X[:5])
    with pytest.raises(ValueError, match="cannot continue the particles"):
        clf.fit(X, y % 3)                                # other classes
    with pytest.raises(ValueError, match="cannot continue the particles"):
        clf.fit(X, y[:, :1])                             # other tasks
    with pytest.raises(ValueError, match="features"):
        clf.fit(X[:, :20], y)                            # other features
    for a, b in zip(before, clf.predict_proba(X[:5])):
        np.testing.assert_array_equal(a, b)
    assert [len(c) for c in clf.classes_] == [p.shape[1] for p in clf.predict_proba(X[:2])]
    clf.fit(X, y)                                        # same data: continues
    assert len(clf.history) == 4


def test_divergence_with_adam_is_detected(digits, tmp_path):
    # item 6: Adam at lr=1e6 used to return "fitted" with a training loss of ~5e19
    X, y = digits
    clf = _mt(lr=1e6, max_epochs=6)
    with pytest.raises(FloatingPointError, match=r"epoch \d+"):
        clf.fit(X, y)
    assert not clf.__sklearn_is_fitted__()
    with pytest.raises(NotFittedError):
        clf.predict(X[:3])
    _nothing_to_save(clf, tmp_path)


def _nothing_to_save(est, tmp_path):
    """An estimator that is not fitted saves no network (load_params would serve it)."""
    with pytest.raises(NotFittedError, match="no fitted network to save"):
        est.save_params(f_params=tmp_path / "p.pt")
    assert not (tmp_path / "p.pt").exists()


class _InterruptAfter(Callback):
    def __init__(self, epochs=1):
        self.epochs = epochs

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) == self.epochs:
            raise KeyboardInterrupt


class _InterruptInside(Callback):
    def __init__(self, epoch=2):
        self.epoch = epoch

    def on_batch_end(self, net, training=False, **kwargs):
        if (training and len(net.history) == self.epoch
                and len(net.history[-1]["batches"]) == 2):
            raise KeyboardInterrupt


@pytest.mark.parametrize("make", [
    lambda **kw: _mt(max_epochs=3, **kw),
    lambda **kw: L2ESamplerClassifier(n_chains=2, max_epochs=3, n_draws=1,
                                      module__hidden_units=(8,), random_state=0, **kw),
    lambda **kw: MTSGDRegressor(n_particles=2, max_epochs=3, module__hidden_units=(8,),
                                random_state=0, **kw),
])
def test_interrupted_or_reinitialised_estimators_are_not_fitted(digits, make, tmp_path):
    # item 9: KeyboardInterrupt returned normally with the estimator marked fitted, and
    # set_params(module__...) re-initialised the weights while predict kept working
    X, y = digits
    y = _target_for(make(), y)
    with pytest.raises(KeyboardInterrupt, match="interrupted after 1 of 3 epochs"):
        make(callbacks=[_InterruptAfter()]).fit(X, y)
    # interrupted inside an epoch: no step's diagnostics (device tensors) are left behind
    # for a later fit or a pickle
    inside = make(callbacks=[_InterruptInside()])
    with pytest.raises(KeyboardInterrupt, match="interrupted"):
        inside.fit(X, y)
    assert getattr(inside, "_step_stash", {}) == {}
    # ... also inside the last epoch (it was counted as done: the fit returned "fitted" with
    # the weights of a half-run epoch)
    last = make(callbacks=[_InterruptInside(epoch=3)])
    with pytest.raises(KeyboardInterrupt, match="interrupted after 2 of 3 epochs"):
        last.fit(X, y)
    assert not last.__sklearn_is_fitted__()
    _nothing_to_save(last, tmp_path)
    clf = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    assert clf.__sklearn_is_fitted__()
    clf.set_params(module__hidden_units=(4,))
    assert not clf.__sklearn_is_fitted__()
    with pytest.raises(NotFittedError):
        clf.predict(X[:3])
    _nothing_to_save(clf, tmp_path)
    assert make().__sklearn_is_fitted__() is False


def test_scores_with_missing_labels_and_a_task_without_labels(digits):
    # item 7: a task without labels gave ZeroDivisionError; ece_scorer rejected NaN labels
    X, y = digits
    clf = _mt().fit(X, y)
    y_test = y.astype(float)
    y_test[::3, 0] = np.nan
    y_test[:, 1] = np.nan                                 # no label at all in task 1
    pred = clf.predict(X)
    labelled = ~np.isnan(y_test[:, 0])
    assert clf.score(X, y_test) == pytest.approx(np.mean(pred[labelled, 0] == y[labelled, 0]))
    with pytest.warns(UserWarning, match="no labelled sample"):
        for scorer in (ece_scorer, brier_scorer, nll_scorer):
            assert np.isfinite(scorer(clf, X, y_test))


def test_cross_validation_on_class_sorted_data_scores_unseen_labels_as_errors():
    # item 8: the default splitter on class-sorted wine puts labels in a test fold that its
    # training fold never saw; score and every scorer raised, so GridSearchCV was all-NaN
    X, y = load_wine(return_X_y=True)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    pipe = make_pipeline(StandardScaler(), L2ESamplerClassifier(
        sampler="sghmc", n_chains=2, max_epochs=4, n_draws=2, module__hidden_units=(8,),
        random_state=0))
    from sklearn.model_selection import KFold

    cv = KFold(3)                                         # no shuffling, no stratification
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for scoring in (None, ece_scorer, brier_scorer, nll_scorer):
            scores = cross_val_score(pipe, X, y, cv=cv, scoring=scoring, error_score="raise")
            assert np.isfinite(scores).all()
        grid = GridSearchCV(pipe, {"l2esamplerclassifier__step_size": [0.01, 0.03]}, cv=cv,
                            scoring=nll_scorer, error_score="raise").fit(X, y)
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()
    # the first fold's test set is all class 0, which its training fold never held
    fitted = pipe.fit(X[y > 0], y[y > 0])
    assert fitted.score(X[y == 0], y[y == 0]) == 0.0
    # probability 0 for the true class, clipped at the machine epsilon as in log_loss
    assert -nll_scorer(fitted, X[y == 0], y[y == 0]) == pytest.approx(
        -np.log(np.finfo(np.float64).eps))


@pytest.mark.parametrize("params, match", [
    (dict(max_epochs=-1), "max_epochs"), (dict(repulsion="abc"), "repulsion"),
    (dict(bandwidth=-1.0), "bandwidth"), (dict(n_particles=0), "n_particles"),
    (dict(batch_size=0), "batch_size"),
])
def test_multitask_parameters_are_validated_before_any_epoch(digits, params, match):
    X, y = digits
    clf = _mt(**params)
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)
    assert not clf.__sklearn_is_fitted__()




@pytest.mark.parametrize("kwargs, match", [
    ({"n_samples": 10, "test_fraction": 0.001, "subset": "test"}, "no source digit in the 'test'"),
    ({"n_samples": 10, "test_fraction": 0.999}, "no source digit in the 'train'"),
    ({"n_samples": 2.7}, "n_samples must be an integer >= 1, got 2.7"),
])
def test_multi_digits_names_an_empty_pool_and_a_fractional_size(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_multi_digits(**kwargs)

"""The defaults users meet: the internal validation split, early stopping with restore-best,
post-hoc recalibration, budgets in steps, regularisation scaled by n, and quiet fits."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.preprocessing import StandardScaler
from skorch.dataset import Dataset

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.estimators import ValidationSplit
from sklmoo.estimators._l2e_classifier import TEMPERATURE_PRIOR_CENTER
from sklmoo.estimators._multitask import TEMPERATURE_PRIOR_SCALE
from sklmoo.metrics import gaussian_nll, negative_log_likelihood
from sklmoo.metrics._recalibration import (apply_temperature, fit_temperature,
                                           fit_variance_scale, pool_log_linear)


def _scaled(load):
    X, y = load(return_X_y=True)
    return StandardScaler().fit_transform(X).astype(np.float32), y


# -- recalibration math ----------------------------------------------------------------------

@pytest.mark.parametrize("power, direction", [(3.0, "over"), (0.3, "under")])
def test_temperature_lowers_held_out_nll_of_miscalibrated_probabilities(power, direction):
    # labels drawn from known probabilities; the model reports them raised to `power`
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=2.0, size=(4000, 4))
    true = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = np.array([rng.choice(4, p=p) for p in true])
    reported = apply_temperature(true, 1.0 / power)
    fit, test = slice(0, 2000), slice(2000, None)
    t = fit_temperature(reported[fit], y[fit])
    assert (t > 1) if direction == "over" else (t < 1)
    np.testing.assert_allclose(t, power, rtol=0.15)          # recovers the distortion
    before = negative_log_likelihood(y[test], reported[test])
    after = negative_log_likelihood(y[test], apply_temperature(reported[test], t))
    assert after < before - 0.01
    np.testing.assert_array_equal(apply_temperature(reported, t).argmax(1), reported.argmax(1))


@pytest.mark.parametrize("factor", [0.3, 3.0])
def test_variance_scale_lowers_held_out_gaussian_nll(factor):
    rng = np.random.default_rng(1)
    mean = rng.normal(size=4000)
    std = np.exp(rng.normal(scale=0.3, size=4000))
    y = mean + std * rng.normal(size=4000)
    reported = std * np.sqrt(factor)                         # too narrow / too wide
    s = fit_variance_scale(y[:2000], mean[:2000], reported[:2000])
    np.testing.assert_allclose(s, 1 / factor, rtol=0.15)
    before = gaussian_nll(y[2000:], mean[2000:], reported[2000:])
    after = gaussian_nll(y[2000:], mean[2000:], reported[2000:] * np.sqrt(s))
    assert after < before - 0.05


def test_variance_narrowing_needs_evidence_beyond_the_margin_but_widening_does_not():
    rng = np.random.default_rng(2)

    def case(n, factor):
        mean = rng.normal(size=n)
        y = mean + rng.normal(size=n)
        return y, mean, np.full(n, np.sqrt(factor))          # factor 3: too wide, 1/3: narrow

    for n in (20, 2000):
        y, mean, too_wide = case(n, 3.0)
        free = fit_variance_scale(y, mean, too_wide)
        held = fit_variance_scale(y, mean, too_wide, narrowing_margin=2.0)
        assert free < 1
        np.testing.assert_allclose(held, min(1.0, free * np.exp(2 * np.sqrt(2 / n))))
        y, mean, too_narrow = case(n, 1 / 3)
        assert (fit_variance_scale(y, mean, too_narrow, narrowing_margin=2.0)
                == fit_variance_scale(y, mean, too_narrow) > 1)
    # a mild narrowing from 20 rows is not shown: the intervals stay as they were
    noise = rng.normal(size=20)
    mean = rng.normal(size=20)
    y = mean + noise / np.sqrt(np.mean(noise ** 2))             # residuals of variance 1 exactly
    slightly_wide = np.full(20, np.sqrt(1.3))
    assert fit_variance_scale(y, mean, slightly_wide) < 1
    assert fit_variance_scale(y, mean, slightly_wide, narrowing_margin=2.0) == 1.0
    # the margin counts the observed rows of the output, not the NaN ones
    y, mean, too_wide = case(40, 3.0)
    y_missing = np.concatenate([y, np.full(40, np.nan)])
    mean2, wide2 = np.concatenate([mean, mean]), np.concatenate([too_wide, too_wide])
    assert (fit_variance_scale(y_missing, mean2, wide2, narrowing_margin=2.0)
            == fit_variance_scale(y, mean, too_wide, narrowing_margin=2.0) < 1)
    with pytest.raises(ValueError, match="narrowing_margin"):
        fit_variance_scale(y, mean, too_wide, narrowing_margin=-1.0)
    # 2000 rows prove the narrowing: it is applied within 7 % of the fitted factor and still
    # lowers the held-out NLL
    assert held < 1 / 3 * 1.2
    y, mean, too_wide = case(4000, 3.0)
    s = fit_variance_scale(y[:2000], mean[:2000], too_wide[:2000], narrowing_margin=2.0)
    assert (gaussian_nll(y[2000:], mean[2000:], too_wide[2000:] * np.sqrt(s))
            < gaussian_nll(y[2000:], mean[2000:], too_wide[2000:]) - 0.05)


def test_temperature_of_a_handful_of_rows_stays_moderate():
    # one confidently wrong row must not set an extreme temperature
    proba = np.array([[0.99, 0.01], [0.98, 0.02], [0.02, 0.98]])
    t = fit_temperature(proba, np.array([1, 0, 1]))
    assert 1 < t < 5


def test_temperature_prior_centre_shrinks_small_samples_towards_it():
    # rows that say nothing about the temperature (uniform probabilities) leave the prior's
    # centre; hundreds of informative rows override it
    uniform = np.full((4, 3), 1 / 3)
    assert fit_temperature(uniform, np.array([0, 1, 2, 0]), prior_center=0.85) == \
        pytest.approx(0.85, rel=1e-3)
    assert fit_temperature(uniform, np.array([-1, -1, -1, -1]), prior_center=0.85) == 0.85
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2000, 3)) * 3
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = np.array([rng.choice(3, p=p) for p in proba])
    t1, t085 = (fit_temperature(proba, y, prior_center=c) for c in (1.0, 0.85))
    assert abs(t1 - 1) < 0.1 and abs(t085 - t1) < 0.01


def test_a_tighter_temperature_prior_shrinks_a_few_rows_but_not_thousands():
    # probabilities twice as sharp as the truth (T = 2 undoes it): on 40 rows a tighter prior
    # keeps the temperature nearer 1, monotonically; on 4000 rows every scale finds the
    # distortion, the MT-SGD classifier's 0.25 included
    rng = np.random.default_rng(3)
    true = _softmax(rng.normal(size=(4000, 3)) * 2)
    y = np.array([rng.choice(3, p=p) for p in true])
    reported = apply_temperature(true, 0.5)
    few = [fit_temperature(reported[:40], y[:40], prior_scale=s) for s in (0.1, 0.25, 0.5, 2.0)]
    assert all(1 < a < b for a, b in zip(few, few[1:]))
    for scale in (TEMPERATURE_PRIOR_SCALE, 0.5):
        np.testing.assert_allclose(fit_temperature(reported, y, prior_scale=scale), 2.0,
                                   rtol=0.1)
    with pytest.raises(ValueError, match="prior_scale"):
        fit_temperature(reported, y, prior_scale=0.0)


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)


def test_log_linear_pool_is_the_softmax_of_the_averaged_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 40, 4)) * 3
    members = _softmax(logits)
    np.testing.assert_allclose(pool_log_linear(members), _softmax(logits.mean(axis=0)),
                               atol=1e-12)
    # members that agree pool to themselves
    np.testing.assert_allclose(pool_log_linear(np.repeat(members[:1], 3, axis=0)), members[0],
                               atol=1e-12)
    # a class that one member rules out stays unlikely, unlike in the average
    two = np.array([[[0.5, 0.5 - 1e-6, 1e-6]], [[0.5, 1e-6, 0.5 - 1e-6]]])
    pooled = pool_log_linear(two)[0]
    assert pooled[0] > 0.99 and two.mean(axis=0)[0, 0] == pytest.approx(0.5)


@pytest.mark.parametrize("power, direction", [(3.0, "over"), (0.3, "under")])
def test_tempered_log_linear_pool_lowers_held_out_nll(power, direction):
    # five members that each see the true logits plus their own noise, all too sharp (power
    # 3) or too flat (0.3): the tempered pool beats the untempered one on new rows
    rng = np.random.default_rng(1)
    true = rng.normal(size=(4000, 3)) * 2
    y = np.array([rng.choice(3, p=p) for p in _softmax(true)])
    members = _softmax(power * (true[None] + 0.7 * rng.normal(size=(5,) + true.shape)))
    pooled = pool_log_linear(members)
    t = fit_temperature(pooled[:2000], y[:2000])
    assert (t > 1) if direction == "over" else (t < 1)
    assert (negative_log_likelihood(y[2000:], apply_temperature(pooled[2000:], t))
            < negative_log_likelihood(y[2000:], pooled[2000:]) - 0.02)


@pytest.mark.parametrize("calibration", ["logit_temperature", "temperature"])
def test_classifier_tempers_its_pool_as_fitted_on_the_validation_rows(calibration):
    # an independent reference from the particles' own probabilities: pool them (log-linearly
    # or by averaging), fit the temperature on the validation rows, temper
    X, y = _scaled(load_wine)
    clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=30, calibration=calibration,
                                   random_state=0).fit(X, y)
    members = clf.predict_proba_members(X)
    pooled = (_softmax(np.log(members).mean(axis=0)) if calibration == "logit_temperature"
              else members.mean(axis=0))
    # the particles disagree enough for the two pools to differ
    assert np.abs(_softmax(np.log(members).mean(axis=0)) - members.mean(axis=0)).max() > 1e-3
    rows = _valid_rows(clf, X, y)
    t = fit_temperature(pooled[rows], y[rows], prior_scale=TEMPERATURE_PRIOR_SCALE)
    np.testing.assert_allclose(clf.temperature_, [t], rtol=1e-6)
    expected = _softmax(np.log(pooled) / t)
    np.testing.assert_allclose(clf.predict_proba(X), expected, atol=1e-9)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[expected.argmax(axis=1)])
    # the fitted temperature can only lower the validation NLL of the pool (prior centred at 1)
    assert (negative_log_likelihood(y[rows], clf.predict_proba(X[rows]))
            <= negative_log_likelihood(y[rows], pooled[rows]))


def test_saved_parameters_carry_how_the_temperatures_pool(tmp_path):
    import torch

    X, y = _scaled(load_wine)
    assert MTSGDMultiTaskClassifier().calibration == "logit_temperature"      # the default
    logit = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=20, random_state=0,
                                     calibration="logit_temperature").fit(X, y)
    assert logit.module_.recalibration_pool.tolist() == [1.0]
    logit.save_params(f_params=tmp_path / "logit.pt")
    other = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=1, calibration="temperature",
                                     random_state=1).fit(X, y)
    other.load_params(f_params=tmp_path / "logit.pt")
    np.testing.assert_allclose(other.predict_proba(X), logit.predict_proba(X), atol=1e-12)
    np.testing.assert_array_equal(other.temperature_, logit.temperature_)
    # parameters saved before the pooling was recorded: the averaged probabilities
    state = torch.load(tmp_path / "logit.pt")
    del state["recalibration_pool"]
    torch.save(state, tmp_path / "older.pt")
    other.load_params(f_params=tmp_path / "older.pt")
    np.testing.assert_allclose(
        other.predict_proba(X),
        apply_temperature(logit.predict_proba_members(X).mean(axis=0), logit.temperature_[0]),
        atol=1e-12)


def test_predict_is_the_most_probable_label_of_the_log_linear_pool():
    # three particles on one row: one sure of class 0, two leaning to class 1. Their average
    # says 1; their log-linear pool says 0 (the first particle all but rules class 1 out)
    import torch

    X, y = _scaled(load_breast_cancer)
    # the particles' pool (a closed linear gate would stand in for it)
    clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=2, random_state=0,
                                   linear_gate=False).fit(X, y)
    member_p = np.array([[0.999, 0.001], [0.2, 0.8], [0.2, 0.8]])
    logits = torch.tensor(np.log(member_p)[None], dtype=torch.float32)        # (1, M, C)
    clf._row_batches = lambda X: [(logits,)]
    assert member_p.mean(axis=0).argmax() == 1
    assert clf.predict(X[:1]).tolist() == [clf.classes_[0]]
    assert clf.predict_proba(X[:1]).argmax(axis=1).tolist() == [0]
    clf.module_.recalibration_pool.zero_()                  # the averaged-probability pool
    assert clf.predict(X[:1]).tolist() == [clf.classes_[1]]


def test_a_task_without_labelled_validation_rows_keeps_the_plain_average():
    from torch.utils.data import Subset

    X, y = _scaled(load_wine)
    valid = np.arange(0, len(X), 5)
    y2 = np.column_stack([y, (X[:, 0] > 0).astype(float)])
    y2[valid, 1] = np.nan                                    # task 1: no validation label
    split = lambda ds, y=None, **kw: (Subset(ds, np.setdiff1d(np.arange(len(ds)), valid)),  # noqa
                                      Subset(ds, valid))
    clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=10, train_split=split, linear_gate=False,
                                   random_state=0).fit(X, y2)
    assert clf.module_.recalibration_pool.tolist() == [1.0, 0.0]
    assert clf.temperature_[1] == 1.0 and clf.temperature_[0] != 1.0
    members = clf.predict_proba_members(X)
    np.testing.assert_allclose(clf.predict_proba(X)[1], members[1].mean(axis=0), atol=1e-12)


def test_an_estimator_pickled_before_the_pooling_was_recorded_predicts_and_refits(tmp_path):
    X, y = _scaled(load_wine)
    clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=5, calibration="temperature", linear_gate=False,
                                   random_state=0).fit(X, y)
    expected = clf.predict_proba(X)
    clf.save_params(f_params=tmp_path / "new.pt")
    del clf.module_._buffers["recalibration_pool"]          # what an older pickle holds
    old = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(old.predict_proba(X), expected, atol=1e-12)
    old.load_params(f_params=tmp_path / "new.pt")           # a file of this version loads
    np.testing.assert_allclose(old.predict_proba(X), expected, atol=1e-12)
    del old.module_._buffers["recalibration_pool"]
    old.set_params(warm_start=True, max_epochs=2, calibration="logit_temperature").fit(X, y)
    assert old.module_.recalibration_pool.tolist() == [1.0] and old.fitted_


# -- the validation split --------------------------------------------------------------------

def test_validation_split_is_stratified_and_reproducible():
    y = np.repeat([0, 1, 2], [60, 30, 10])
    data = Dataset(np.zeros((100, 2), np.float32), y)
    train, valid = ValidationSplit()(data, y, seed=3)
    assert len(valid) == 20 and len(train) == 80
    assert np.bincount(y[valid.indices]).tolist() == [12, 6, 2]
    assert not set(train.indices) & set(valid.indices)
    again = ValidationSplit()(data, y, seed=3)[1].indices
    other = ValidationSplit()(data, y, seed=4)[1].indices
    assert again == valid.indices and other != valid.indices


@pytest.mark.parametrize("n, held_out", [(40, 8), (1000, 200), (10_000, 2000), (15_000, 2000),
                                         (20_000, 2000), (30_000, 3000), (200_000, 20_000)])
def test_validation_split_holds_out_less_of_a_large_table(n, held_out):
    # 'auto': 20 % of up to 10,000 rows, 2,000 rows up to 20,000, 10 % of more
    y = np.arange(n) % 3
    train, valid = ValidationSplit()(Dataset(np.zeros((n, 1), np.float32), y), y, seed=0)
    assert len(valid) == held_out and len(train) == n - held_out
    assert ValidationSplit(fraction=0.2).n_valid(n) == round(0.2 * n)   # a float as given
    counts = np.bincount(y[valid.indices], minlength=3)              # stratified
    assert counts.max() - counts.min() <= 1


def test_validation_split_keeps_tiny_data_for_training():
    y = np.arange(12) % 2
    train, valid = ValidationSplit()(Dataset(np.zeros((12, 1), np.float32), y), y, seed=0)
    assert valid is None and len(train) == 12
    # multi-task codes with missing labels (-1) are stratified on a task whose labels allow it
    codes = np.stack([np.arange(40) % 2, np.where(np.arange(40) < 3, -1, np.arange(40) % 4)], 1)
    train, valid = ValidationSplit()(Dataset(np.zeros((40, 1), np.float32), codes), codes, 0)
    assert len(valid) == 8


@pytest.mark.parametrize("bad", [dict(fraction=1.0), dict(fraction=0), dict(min_valid=0),
                                 dict(fraction="half")])
def test_validation_split_refuses_bad_settings_at_fit(bad):
    X, y = _scaled(load_iris)
    with pytest.raises(ValueError, match="ValidationSplit"):
        MTSGDMultiTaskClassifier(train_split=ValidationSplit(**bad)).fit(X, y)


def test_split_follows_random_state():
    X, y = _scaled(load_iris)
    fits = [MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=s,
                                     linear_gate=False).fit(X, y)
            for s in (0, 0, 1)]
    assert fits[0].n_valid_ == 30 and fits[0].n_train_ == 120
    np.testing.assert_array_equal(fits[0].predict_proba(X), fits[1].predict_proba(X))
    assert fits[0].temperature_[0] == fits[1].temperature_[0] != fits[2].temperature_[0]


# -- early stopping, restore-best, calibration through the estimators ----------------------

def _valid_rows(est, X, y):
    _, valid = est.train_split(Dataset(X, y), y, seed=est.seed_)
    return np.asarray(valid.indices)


def test_early_stopping_restores_the_best_epoch():
    X, y = _scaled(load_wine)
    clf = MTSGDMultiTaskClassifier(n_particles=3, lr=1e-2, max_epochs=200, calibration=None,
                                   callbacks__early_stopping__patience=10,
                                   random_state=0).fit(X, y)
    best = clf.history[-1, "best_epoch"]
    assert len(clf.history) < 200                             # it stopped early
    assert len(clf.history) == best + 10
    rows = _valid_rows(clf, X, y)
    nll = negative_log_likelihood(y[rows], clf.predict_proba(X[rows]))
    # the particles predicting now are the best epoch's, not the last one's
    np.testing.assert_allclose(nll, clf.history[best - 1, "valid_loss"], rtol=1e-4)
    assert nll <= min(clf.history[:, "valid_loss"]) * (1 + 1e-4)


@pytest.mark.parametrize("make, load, center, scale", [
    # MT-SGD: a tighter prior on its temperature than the other recalibrations
    (lambda: MTSGDMultiTaskClassifier(n_particles=3, max_epochs=30, random_state=0),
     load_wine, 1.0, TEMPERATURE_PRIOR_SCALE),
    # L2E: the prior on its temperature is centred below 1 (its average is underconfident)
    # (the chains' temperature: a closed linear gate would set it to 1)
    (lambda: L2ESamplerClassifier(max_epochs=20, n_draws=4, random_state=0, linear_gate=False),
     load_iris, TEMPERATURE_PRIOR_CENTER, 0.5)])
def test_temperature_is_fitted_on_the_validation_rows(make, load, center, scale):
    X, y = _scaled(load)
    raw = make().set_params(calibration=None).fit(X, y)
    cal = clone(raw).set_params(calibration="temperature").fit(X, y)
    rows = _valid_rows(cal, X, y)
    np.testing.assert_array_equal(raw.temperature_, np.ones_like(cal.temperature_))
    expected = fit_temperature(raw.predict_proba(X[rows]), y[rows], prior_center=center,
                               prior_scale=scale)
    np.testing.assert_allclose(cal.temperature_, np.full_like(cal.temperature_, expected),
                               rtol=1e-6)
    np.testing.assert_allclose(cal.predict_proba(X),
                               apply_temperature(raw.predict_proba(X), expected), atol=1e-9)
    np.testing.assert_array_equal(cal.predict(X), raw.predict(X))
    if center == 1.0:   # a prior centred at T = 1 can only lower the held-out NLL
        assert (negative_log_likelihood(y[rows], cal.predict_proba(X[rows]))
                <= negative_log_likelihood(y[rows], raw.predict_proba(X[rows])))


def test_regressor_variance_scale_scales_both_parts_as_fitted_on_the_validation_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = np.column_stack([np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=200), X[:, 1] ** 2])
    raw = MTSGDRegressor(n_particles=3, max_epochs=20, calibration=None, random_state=0,
                         mean_function="linear")
    raw.fit(X, y)
    cal = clone(raw).set_params(calibration="variance").fit(X, y)
    # targets the linear mean function leaves curved: the networks add to it in both fits
    assert raw.networks_used_.all() and cal.networks_used_.all()
    assert cal.variance_scale_.shape == (2,) and np.all(cal.variance_scale_ > 0)
    scale = cal.variance_scale_
    np.testing.assert_allclose(cal.predict(X, return_std=True)[1],
                               raw.predict(X, return_std=True)[1] * np.sqrt(scale), rtol=1e-5)
    parts, raw_parts = cal.predict_uncertainty(X), raw.predict_uncertainty(X)
    for k in ("aleatoric", "epistemic"):
        np.testing.assert_allclose(parts[k], raw_parts[k] * scale, rtol=1e-5)
    # the factors are those of the validation rows, a narrowing held back by two standard errors
    rows = _valid_rows(cal, X, y)
    mean, std = raw.predict(X[rows], return_std=True)
    expected = [fit_variance_scale(y[rows, t], mean[:, t], std[:, t], narrowing_margin=2.0)
                for t in range(2)]
    np.testing.assert_allclose(scale, expected, rtol=1e-4)
    # with the kernel mean function, an output whose GP predicts alone was refitted on every
    # row, the validation rows included: they cannot calibrate it, its factor stays 1
    kernel = MTSGDRegressor(n_particles=3, max_epochs=20, random_state=0).fit(X, y)
    assert kernel.mean_function_ == "kernel" and not kernel.networks_used_.all()
    np.testing.assert_array_equal(kernel.variance_scale_[~kernel.networks_used_], 1.0)


def test_no_split_means_no_calibration_and_every_row():
    X, y = _scaled(load_iris)
    clf = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=3, train_split=None,
                                   random_state=0).fit(X, y)
    assert clf.n_train_ == 150 and clf.n_valid_ == 0 and clf.temperature_.tolist() == [1.0]
    # nothing to calibrate on: the particles' average, not their (sharper) log-linear pool
    np.testing.assert_allclose(clf.predict_proba(X), clf.predict_proba_members(X).mean(axis=0),
                               atol=1e-12)
    assert len(clf.history) == 3 and "valid_loss" not in clf.history[-1]
    l2e = L2ESamplerClassifier(max_epochs=4, n_draws=2, train_split=None,
                               random_state=0).fit(X, y)
    assert l2e.n_train_ == 150 and l2e.temperature_ == 1.0


# -- budgets and regularisation --------------------------------------------------------------

def test_auto_budget_gives_small_tables_enough_steps():
    X, y = _scaled(load_iris)
    clf = MTSGDMultiTaskClassifier(n_particles=2, random_state=0,
                                   callbacks__early_stopping=None)
    clf.set_params(batch_size=64)
    # 120 training rows -> 2 steps per epoch -> 500 epochs (the cap) for ~1000 steps
    assert clf._resolve_epochs(120) == 500
    assert clf._resolve_epochs(64 * 100) == 10                # at least 10 epochs
    assert clf._resolve_epochs(64 * 20) == 50
    l2e = L2ESamplerClassifier()
    assert l2e._resolve_epochs(800) == 500 // 7 + 1            # 7 steps of 128 per epoch


def test_auto_budget_extends_while_the_validation_loss_improves():
    # a slowly learnt linear target (the networks alone, without the linear mean function that
    # would fit it at once): the validation loss still falls when the ~1000-step budget ends
    # (here scaled down to 20 steps: 10 epochs of 4 steps), so with early stopping the fit
    # runs on to three times that; without a split or early stopping it does not. At lr=1e-3
    # with the patience a fifth of the budget, 5 (the regressor's defaults are lr=1e-2 and a
    # patience of 30 epochs; the classifier's are these)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 3))
    y = X @ np.array([1.0, -2.0, 0.5])
    fits = {}
    auto = dict(callbacks__early_stopping__patience=5)
    for name, extra in (("default", auto), ("no_split", dict(train_split=None, **auto)),
                        ("no_stopping", dict(callbacks__early_stopping=None))):
        reg = MTSGDRegressor(n_particles=2, batch_size=32, mean_function=None, random_state=0,
                             lr=1e-3, **extra)
        reg._auto_steps = 20
        fits[name] = reg.fit(X, y)
    reg = fits["default"]
    assert reg.max_epochs_ == 30 and len(reg.history) == 30
    assert dict(reg.callbacks_)["early_stopping"].patience_ == 5
    assert fits["no_split"].max_epochs_ == len(fits["no_split"].history) == 10
    # the regressor's 'auto' patience is 30 epochs on small tables (tests/test_auto_batch.py)
    assert dict(MTSGDRegressor().get_default_callbacks())["early_stopping"].patience == "auto"
    assert fits["no_stopping"].max_epochs_ == len(fits["no_stopping"].history) == 10
    # at most 500 epochs; an integer budget and L2E's budget are never extended
    assert MTSGDRegressor()._resolve_epochs(64 * 100, early_stopping=True) == 30
    assert MTSGDRegressor()._resolve_epochs(64 * 5, early_stopping=True) == 500
    assert MTSGDRegressor(max_epochs=7)._resolve_epochs(128, early_stopping=True) == 7
    assert MTSGDMultiTaskClassifier()._resolve_epochs(64 * 20, early_stopping=True) == 150
    assert MTSGDMultiTaskClassifier()._resolve_epochs(64 * 20) == 50
    assert L2ESamplerClassifier()._resolve_epochs(800, early_stopping=True) == 500 // 7 + 1


def test_prior_precision_is_weight_decay_scaled_by_n():
    X, y = _scaled(load_iris)
    clf = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=1, prior_precision=2.0,
                                   random_state=0).fit(X, y)
    assert {g["weight_decay"] for g in clf.optimizer_.param_groups} == {2.0 / 120}
    reg = MTSGDRegressor(n_particles=2, max_epochs=1, optimizer__weight_decay=0.5,
                         random_state=0).fit(X, X[:, 0])
    assert {g["weight_decay"] for g in reg.optimizer_.param_groups} == {0.5}


# -- quiet defaults, attributes --------------------------------------------------------------

def test_default_fit_on_a_well_posed_table_is_silent():
    X, y = _scaled(load_breast_cancer)
    for est in (MTSGDMultiTaskClassifier(random_state=0),
                L2ESamplerClassifier(max_epochs=30, n_draws=15, random_state=0),
                MTSGDRegressor(random_state=0)):
        target = X[:, 0] * 2 + X[:, 1] if isinstance(est, MTSGDRegressor) else y
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est.fit(X, target)
        assert est.fit_warnings_ == []


def test_warnings_point_at_the_users_call_and_are_kept():
    X, y = _scaled(load_iris)
    clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=3, kernel="function",
                                   head_repulsion=100.0, random_state=0)
    with pytest.warns(UserWarning, match="repulsion outweighs") as record:
        clf.fit(X, y)
    assert all(w.filename == __file__ for w in record if "repulsion" in str(w.message))
    assert any("repulsion outweighs" in m for m in clf.fit_warnings_)
    assert pickle.loads(pickle.dumps(clf)).fit_warnings_ == clf.fit_warnings_


def test_fitted_calibration_survives_clone_and_pickle():
    X, y = _scaled(load_iris)
    clf = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=5, random_state=0).fit(X, y)
    copy = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(copy.temperature_, clf.temperature_)
    np.testing.assert_array_equal(copy.predict_proba(X), clf.predict_proba(X))
    fresh = clone(clf)
    assert fresh.train_split == clf.train_split and not hasattr(fresh, "temperature_")
    assert repr(fresh) == "MTSGDMultiTaskClassifier(max_epochs=5, n_particles=2, random_state=0)"
    assert "ValidationSplit(fraction=0.3)" in repr(
        fresh.set_params(train_split=ValidationSplit(fraction=0.3)))


def test_restore_best_early_stopping_on_a_plain_skorch_net():
    # on a net that is not one of sklmoo's estimators, patience='auto' is a fifth of its
    # max_epochs (at least 5), and the weights of the best validation epoch come back
    import torch
    from skorch import NeuralNetClassifier
    from skorch.dataset import ValidSplit

    from sklmoo.estimators import RestoreBestEarlyStopping

    X, y = _scaled(load_breast_cancer)          # float32
    torch.manual_seed(0)
    net = NeuralNetClassifier(
        torch.nn.Sequential(torch.nn.Linear(X.shape[1], 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 2)),
        criterion=torch.nn.CrossEntropyLoss, optimizer=torch.optim.Adam, lr=0.05,
        max_epochs=60, train_split=ValidSplit(5, stratified=True),
        callbacks=[("stop", RestoreBestEarlyStopping())], verbose=0).fit(X, y)
    stopping = dict(net.callbacks_)["stop"]
    assert stopping.patience_ == 12
    losses = net.history[:, "valid_loss"]
    best = int(np.argmin(losses))
    assert len(losses) <= 60 and stopping.best_epoch_ == best + 1
    assert best < len(losses) - 1           # the last epoch was not the best: a real restore
    # the restored weights give the best epoch's validation loss again
    _, valid = net.get_split_datasets(X, y)
    with torch.no_grad():
        logits = net.module_(torch.as_tensor(X[valid.indices]))
        again = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y[valid.indices]))
    assert float(again) == pytest.approx(losses[best], rel=1e-4)
    net2 = NeuralNetClassifier(torch.nn.Linear(X.shape[1], 2), max_epochs=20,
                               train_split=ValidSplit(5, stratified=True), verbose=0,
                               criterion=torch.nn.CrossEntropyLoss,
                               callbacks=[("stop", RestoreBestEarlyStopping())]).fit(X, y)
    assert dict(net2.callbacks_)["stop"].patience_ == 5

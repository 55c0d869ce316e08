"""A validation set of other rows than the fit's (skorch's ``predefined_split``, a Subset of
another dataset): early stopping, calibration and the regressor's noise map read those rows,
their targets encoded as the fit's."""

import numpy as np
import pytest
from skorch.dataset import Dataset
from skorch.helper import predefined_split
from torch.utils.data import Subset

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor


def _data(n=300, n_valid=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_valid, 4)).astype(np.float32)
    labels = np.array(["low", "high"])[(X[:, 0] + 0.5 * rng.normal(size=len(X)) > 0).astype(int)]
    value = X[:, 1] + (0.2 + 0.5 * np.abs(X[:, 2])) * rng.normal(size=len(X))
    return X, labels, value, n


def _first_rows_validate(n):
    """The index-subset equivalent: the rows after the first n of the data passed to fit."""
    def split(dataset, y=None, **kwargs):
        return Subset(dataset, np.arange(n)), Subset(dataset, np.arange(n, len(dataset)))
    return split


@pytest.mark.parametrize("make, kwargs, target", [
    (MTSGDMultiTaskClassifier, dict(n_particles=2), 1),
    (L2ESamplerClassifier, dict(n_chains=2, n_draws=3), 1),
    # without a standardisation or a linear mean fitted on every row passed to fit (the
    # validation rows too when they are among them), the two fits see the same numbers
    (MTSGDRegressor, dict(n_particles=2, normalize_y=False, mean_function=None), 2),
])
def test_predefined_split_fits_as_the_same_rows_held_out_by_index(make, kwargs, target):
    data = _data()
    X, y, n = data[0], data[target], data[3]
    given = make(max_epochs=4, random_state=0, train_split=predefined_split(
        Dataset(X[n:], y[n:])), **kwargs).fit(X[:n], y[:n])
    indexed = make(max_epochs=4, random_state=0, train_split=_first_rows_validate(n),
                   **kwargs).fit(X, y)
    assert given.n_train_ == n and given.n_valid_ == len(X) - n
    np.testing.assert_allclose(given.history[:, "valid_loss"],
                               indexed.history[:, "valid_loss"], rtol=1e-6)
    if make is MTSGDRegressor:
        for a, b in zip(given.predict(X, return_std=True), indexed.predict(X, return_std=True)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    else:
        # calibrated on the given rows: the same temperature
        np.testing.assert_allclose(given.predict_proba(X), indexed.predict_proba(X),
                                   rtol=1e-5, atol=1e-7)
        assert given.temperature_ == pytest.approx(indexed.temperature_)


def test_the_regressors_noise_map_is_judged_on_a_predefined_validation_set():
    # 400 given validation rows (the map needs 300): kept as with the same rows by index
    X, _, y, _ = _data(n=1200, n_valid=400, seed=1)
    kw = dict(n_particles=2, normalize_y=False, mean_function=None, max_epochs=30,
              random_state=0)
    given = MTSGDRegressor(train_split=predefined_split(Dataset(X[1200:], y[1200:])),
                           **kw).fit(X[:1200], y[:1200])
    indexed = MTSGDRegressor(train_split=_first_rows_validate(1200), **kw).fit(X, y)
    assert given.heteroscedastic_.tolist() == indexed.heteroscedastic_.tolist() == [True]
    np.testing.assert_allclose(given.predict(X, return_std=True)[1],
                               indexed.predict(X, return_std=True)[1], rtol=1e-5)


def test_a_subset_of_another_dataset_is_its_own_rows():
    # not rows of X: the validation rows are the subset's, read from its dataset
    X, y, _, n = _data()
    other = Dataset(X[n:], y[n:])
    pick = np.arange(0, len(X) - n, 2)
    from_subset = MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=3, random_state=0,
        train_split=lambda ds, yy=None, **kw: (ds, Subset(other, pick))).fit(X[:n], y[:n])
    direct = MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=3, random_state=0,
        train_split=predefined_split(Dataset(X[n:][pick], y[n:][pick]))).fit(X[:n], y[:n])
    assert from_subset.n_valid_ == len(pick)
    np.testing.assert_allclose(from_subset.history[:, "valid_loss"],
                               direct.history[:, "valid_loss"], rtol=1e-6)


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, L2ESamplerClassifier])
def test_a_validation_label_the_fit_never_saw_is_named(make):
    X, y, _, n = _data()
    y_valid = y[n:].astype(object)
    y_valid[0] = "middle"
    est = make(max_epochs=2, random_state=0,
               train_split=predefined_split(Dataset(X[n:], y_valid)))
    with pytest.raises(ValueError, match="validation set that train_split returned.*middle"):
        est.fit(X[:n], y[:n])
    assert not est.__sklearn_is_fitted__()


def test_a_validation_set_with_other_features_is_refused():
    X, _, y, n = _data()
    est = MTSGDRegressor(max_epochs=2, random_state=0,
                         train_split=predefined_split(Dataset(X[n:, :3], y[n:])))
    with pytest.raises(ValueError, match="3 features"):
        est.fit(X[:n], y[:n])


def test_a_validation_dataset_without_targets_is_named():
    X, y, _, n = _data()
    est = MTSGDMultiTaskClassifier(max_epochs=2, random_state=0,
                                   train_split=predefined_split(Dataset(X[n:], None)))
    with pytest.raises(ValueError, match="validation set.*no targets"):
        est.fit(X[:n], y[:n])


def test_target_columns_are_matched_by_name():
    import pandas as pd

    X, labels, value, n = _data()
    rng = np.random.default_rng(3)
    Y = pd.DataFrame({"a": labels, "b": np.where(rng.random(len(X)) < 0.5, "p", "q")})
    V = pd.DataFrame({"u": value, "v": 2 * value + rng.normal(size=len(X))})
    for make, target, kw in ((MTSGDMultiTaskClassifier, Y, {}),
                             (MTSGDRegressor, V, dict(mean_function=None))):
        fits = [make(n_particles=2, max_epochs=3, random_state=0, **kw, train_split=(
            predefined_split(Dataset(X[n:], valid)))).fit(X[:n], target[:n])
            for valid in (target[n:], target[n:][target.columns[::-1]])]
        np.testing.assert_allclose(fits[0].history[:, "valid_loss"],
                                   fits[1].history[:, "valid_loss"])
        renamed = target[n:].set_axis(["x", "y"], axis=1)
        with pytest.raises(ValueError, match=r"columns \['x', 'y'\] are not the fit's"):
            make(n_particles=2, max_epochs=3, random_state=0, **kw, train_split=(
                predefined_split(Dataset(X[n:], renamed)))).fit(X[:n], target[:n])


def test_validation_rows_without_a_target_are_left_out_and_weights_count():
    # a task's missing labels (None) in the given rows; rows with none left out, as fit does
    X, y, _, n = _data()
    y_valid = y[n:].astype(object)
    y_valid[:30] = None
    Y = np.column_stack([y, y]).astype(object)
    Y_valid = np.column_stack([y_valid, y_valid])
    weights = [{"low": 1.0, "high": 3.0}] * 2
    given = MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=3, random_state=0, class_weight=weights,
        train_split=predefined_split(Dataset(X[n:], Y_valid))).fit(X[:n], Y[:n])
    assert given.n_valid_ == len(X) - n - 30
    indexed = MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=3, random_state=0, class_weight=weights,
        train_split=_first_rows_validate(n)).fit(np.vstack([X[:n], X[n + 30:]]),
                                                 np.vstack([Y[:n], Y_valid[30:]]))
    np.testing.assert_allclose(given.history[:, "valid_loss"],
                               indexed.history[:, "valid_loss"], rtol=1e-6)
    np.testing.assert_allclose(given.temperature_, indexed.temperature_, rtol=1e-6)


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, L2ESamplerClassifier,
                                  MTSGDRegressor])
def test_a_continuation_refused_for_its_validation_set_keeps_the_model(make):
    data = _data()
    X, y, n = data[0], data[2 if make is MTSGDRegressor else 1], data[3]
    est = make(max_epochs=2, random_state=0, n_draws=2).fit(X[:n], y[:n]) if make is \
        L2ESamplerClassifier else make(max_epochs=2, random_state=0).fit(X[:n], y[:n])
    before = est.predict(X[:5])
    est.set_params(warm_start=True, train_split=predefined_split(Dataset(X[n:, :3], y[n:])))
    with pytest.raises(ValueError, match="validation set that train_split returned.*3 feat"):
        est.fit(X[:n], y[:n])
    assert est.__sklearn_is_fitted__()
    np.testing.assert_array_equal(est.predict(X[:5]), before)


def test_a_refused_continuation_keeps_the_regressors_noise_map():
    # the map (fitted after training, heteroscedastic='auto') is reset only once a continued
    # fit's rows are accepted: a refusal leaves the fitted intervals as they were
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1600, 3)).astype(np.float32)
    y = X[:, 0] + rng.normal(size=len(X)) * (0.05 + 1.5 * np.abs(X[:, 1]))
    reg = MTSGDRegressor(n_particles=2, max_epochs=4, random_state=0).fit(X, y)
    assert reg.heteroscedastic_.all()
    mean, std = reg.predict(X[:5], return_std=True)
    two_outputs = Dataset(X[:50], np.column_stack([y[:50], y[:50]]))
    reg.set_params(warm_start=True, train_split=predefined_split(two_outputs))
    with pytest.raises(ValueError, match="validation set that train_split returned.*2 output"):
        reg.fit(X, y)
    assert reg.__sklearn_is_fitted__() and reg.heteroscedastic_.all()
    for got, want in zip(reg.predict(X[:5], return_std=True), (mean, std)):
        np.testing.assert_array_equal(got, want)


def test_the_regressors_validation_rows_need_no_spread():
    # one row, or an output constant on the given rows: a validation set, not a target to fit
    X, _, y, n = _data()
    for rows in (slice(n, n + 1), slice(n, None)):
        y_valid = y[rows].copy() if rows.stop else np.full(len(X) - n, 0.5)
        est = MTSGDRegressor(n_particles=2, max_epochs=2, random_state=0, train_split=(
            predefined_split(Dataset(X[rows], y_valid)))).fit(X[:n], y[:n])
        assert est.n_valid_ == len(y_valid) and np.isfinite(est.variance_scale_).all()


def test_a_subset_of_a_pandas_dataset_is_read_by_position():
    import pandas as pd

    X, _, y, n = _data()
    frame = pd.DataFrame(X, columns=list("abcd"))
    other = Dataset(frame.iloc[n:], pd.Series(y[n:]))
    pick = np.arange(0, len(X) - n, 3)
    est = MTSGDRegressor(n_particles=2, max_epochs=2, random_state=0,
                         train_split=lambda ds, yy=None, **kw: (ds, Subset(other, pick)))
    est.fit(frame.iloc[:n], y[:n])
    direct = MTSGDRegressor(n_particles=2, max_epochs=2, random_state=0, train_split=(
        predefined_split(Dataset(frame.iloc[n:].iloc[pick], y[n:][pick])))).fit(
        frame.iloc[:n], y[:n])
    assert est.n_valid_ == len(pick)
    np.testing.assert_allclose(est.history[:, "valid_loss"], direct.history[:, "valid_loss"])


def test_a_continued_fit_matches_target_columns_by_name():
    import pandas as pd

    X, labels, value, n = _data()
    V = pd.DataFrame({"u": value, "v": -value})
    kw = dict(n_particles=2, max_epochs=2, random_state=0, mean_function=None)
    a = MTSGDRegressor(**kw).fit(X, V).partial_fit(X, V)
    b = MTSGDRegressor(**kw).fit(X, V).partial_fit(X, V[["v", "u"]])
    np.testing.assert_allclose(a.predict(X), b.predict(X))
    with pytest.raises(ValueError, match="columns"):
        MTSGDRegressor(**kw).fit(X, V).partial_fit(X, V.set_axis(["p", "q"], axis=1))

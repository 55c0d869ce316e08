"""Contracts a second hostile-input audit found broken: each one a clear, early error naming
the problem, or the behaviour scikit-learn users expect."""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.utils.estimator_checks import check_methods_subset_invariance

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fn(*args, **kwargs)


def _l2e(**kw):
    params = dict(n_chains=2, max_epochs=4, n_draws=2, random_state=0,
                  module__hidden_units=(8,))
    params.update(kw)
    return L2ESamplerClassifier(**params)


def _mtsgd(**kw):
    params = dict(n_particles=2, max_epochs=2, random_state=0, module__hidden_units=(8,))
    params.update(kw)
    return MTSGDMultiTaskClassifier(**params)


def _reg(**kw):
    params = dict(n_particles=2, max_epochs=2, random_state=0, module__hidden_units=(8,))
    params.update(kw)
    return MTSGDRegressor(**params)


ESTIMATORS = {"l2e": _l2e, "mtsgd": _mtsgd, "regressor": _reg}


def _target(name, y, X):
    return X[:, 0] * 2.0 + y if name == "regressor" else y


# -- parameters ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
def test_a_warm_up_longer_than_the_fit_is_warned_about(iris, name):
    X, y = iris
    with pytest.warns(UserWarning, match=r"warmup_epochs=5 covers every epoch of this fit "
                                         r"\(up to epoch 2\): no step uses method='mtsgd'"):
        ESTIMATORS[name](warmup_epochs=5).fit(X, _target(name, y, X))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ESTIMATORS[name](warmup_epochs=1).fit(X, _target(name, y, X))


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
def test_zero_epochs_is_refused_not_a_fitted_untrained_model(iris, name):
    X, y = iris
    est = ESTIMATORS[name](max_epochs=0)
    with pytest.raises(ValueError, match="max_epochs must be an integer >= 1"):
        est.fit(X, _target(name, y, X))
    assert not est.__sklearn_is_fitted__()


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
@pytest.mark.parametrize("lr", ["0.01", -1.0, 0.0, float("nan")])
def test_lr_is_validated(iris, name, lr):
    X, y = iris
    with pytest.raises(ValueError, match="lr must be a finite positive number"):
        ESTIMATORS[name](lr=lr).fit(X, _target(name, y, X))


def test_l2e_has_no_lr_or_optimizer_parameters(iris):
    X, y = iris
    params = _l2e().get_params()
    assert "lr" not in params and "optimizer" not in params
    with pytest.raises(ValueError, match="Invalid parameter 'lr'"):
        _l2e().set_params(lr=0.1)
    with pytest.raises(ValueError, match="Invalid parameter 'lr'"):
        GridSearchCV(_l2e(), {"lr": [0.1, 1.0]}, cv=2).fit(X, y)
    with pytest.raises(ValueError, match="does not use lr"):
        _l2e(lr=0.5).fit(X, y)
    with pytest.raises(ValueError, match="does not use optimizer"):
        _l2e(optimizer=torch.optim.SGD).fit(X, y)
    # clone keeps working without them
    assert clone(_l2e(n_chains=3)).n_chains == 3


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("units", [(0,), (-1,), 8, "abc", (8.5,)])
def test_hidden_units_are_validated_by_name(iris, name, units):
    X, y = iris
    with pytest.raises(ValueError, match="hidden_units must be a tuple of positive integers"):
        _quiet(ESTIMATORS[name](module__hidden_units=units).fit, X, _target(name, y, X))


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("shape", [4, "abc", (0, 4), ()])
def test_input_shape_is_validated_by_name(iris, name, shape):
    X, y = iris
    with pytest.raises(ValueError, match="input_shape must be a tuple of positive integers"):
        ESTIMATORS[name](input_shape=shape).fit(X, _target(name, y, X))


class BatchNormNet(torch.nn.Module):
    def __init__(self, n_out=3):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                       torch.nn.ReLU(), torch.nn.Linear(8, n_out))
        self.n_features_out = n_out

    def forward(self, x):
        return self.net(x)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_modules_with_batchnorm_are_accepted(iris, name):
    X, y = iris
    est = ESTIMATORS[name](module=BatchNormNet)
    est.set_params(module__hidden_units=None)
    del est.module__hidden_units
    _quiet(est.fit, X, _target(name, y, X))
    assert est.predict(X[:5]).shape[0] == 5


# -- targets ---------------------------------------------------------------------------------


def test_ragged_multitask_y_is_refused(iris):
    X, _ = iris
    with pytest.raises(ValueError, match="y is ragged"):
        _mtsgd().fit(X[:60], [[0, 1]] * 59 + [[0]])
    with pytest.raises(ValueError, match="y is ragged"):
        _mtsgd().fit(X[:60], [[0, 1]] * 59 + [0])
    # equal-length rows are T tasks, as in scikit-learn
    clf = _mtsgd().fit(X[:60], [[i % 2, i % 3] for i in range(60)])
    assert clf.predict(X[:3]).shape == (3, 2)


@pytest.mark.parametrize("scale", [1e154, 1e200, 1e300])
def test_huge_targets_are_standardised_without_overflow(iris, scale):
    X, y = iris
    target = (X[:, 0] * 2.0 + y) * scale
    reg = _reg().fit(X, target)
    mean, std = reg.predict(X, return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()
    # the same fit in ordinary units, scaled
    ref_mean, ref_std = _reg().fit(X, target / scale).predict(X, return_std=True)
    np.testing.assert_allclose(mean / scale, ref_mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(std / scale, ref_std, rtol=1e-4)
    # R^2 is scale-free: the sums of squares must not overflow into NaN
    np.testing.assert_allclose(reg.score(X, target), r2_score(target / scale, mean / scale),
                               rtol=1e-10)
    assert np.isfinite(cross_val_score(_reg(), X, target, cv=2)).all()
    if scale > 1e154:                          # its square is beyond float64
        with pytest.raises(ValueError, match="exceeds the float64 range"):
            reg.predict_uncertainty(X)
    with pytest.raises(ValueError, match="float32"):
        _reg(normalize_y=False).fit(X, target)


@pytest.mark.parametrize("mean_function", ["linear", None])
def test_inputs_far_beyond_the_training_data_give_a_finite_std(iris, mean_function):
    """The linear mean function's weight variance grows like |x|^2: held in float32 it
    overflowed for |x| near 1e19 and predict(return_std=True) returned NaN."""
    X, y = iris
    reg = _reg(mean_function=mean_function).fit(X, X[:, 0] * 2.0 + y)
    for value in (1e21, 1e30, 3e38):
        far = X[:3].copy()
        far[0, 0] = value
        mean, std = reg.predict(far, return_std=True)
        assert np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()
        # far along a direction the target depends on: the uncertainty grows with the input
        assert std[0] > 10 * std[1:].max()
        np.testing.assert_allclose(mean[1:], reg.predict(X[1:3]), rtol=1e-6)


# -- continuing and restoring ----------------------------------------------------------------


def test_partial_fit_classes_fixes_the_label_set(iris):
    X, y = iris
    first = y < 2                              # the first chunk has classes 0 and 1 only
    for est in (_l2e(), _mtsgd()):
        _quiet(est.partial_fit, X[first], y[first], classes=[0, 1, 2])
        assert list(est.classes_) == [0, 1, 2]
        assert est.predict_proba(X[:3]).shape == (3, 3)
        # a later chunk may lack classes
        later = y == 2
        _quiet(est.partial_fit, X[later][:20], y[later][:20])
        with pytest.raises(ValueError, match="differs from the classes of the first call"):
            est.partial_fit(X, y, classes=[0, 1])
        with pytest.raises(ValueError, match="not"):
            est.partial_fit(X[:5], np.array([0, 1, 5, 0, 1]))
    with pytest.raises(ValueError, match="not in classes"):
        _l2e().partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="not seen in fit"):
        _mtsgd().partial_fit(X, y, classes=[0, 1])


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
def test_warm_start_with_another_particle_count_is_refused(iris, name):
    X, y = iris
    est = ESTIMATORS[name](warm_start=True).fit(X, _target(name, y, X))
    before = est.predict(X[:5])
    est.set_params(n_particles=3)
    with pytest.raises(ValueError, match="fitted with 2 particles; n_particles is now 3"):
        est.fit(X, _target(name, y, X))
    np.testing.assert_array_equal(est.predict(X[:5]), before)   # the fitted model is kept
    est.set_params(warm_start=False).fit(X, _target(name, y, X))
    assert est.module_.n_particles == 3


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_save_params_restore_recipe(iris, name, tmp_path):
    X, y = iris
    target = _target(name, y, X)
    est = _quiet(ESTIMATORS[name]().fit, X, target)
    est.save_params(f_params=tmp_path / "p.pt")
    new = ESTIMATORS[name]()
    with pytest.raises(NotFittedError, match="max_epochs=1 is enough"):
        new.initialize()
    # the documented recipe: an estimator fitted on data of the same shape, then load_params;
    # fitted on a part of the rows (the regressor's target moments are then others: the
    # file's are the ones its network predicts in)
    new = _quiet(clone(est).set_params(max_epochs=1).fit, X[::2], target[::2])
    new.load_params(f_params=tmp_path / "p.pt")
    np.testing.assert_array_equal(new.predict(X), est.predict(X))


def test_load_params_updates_the_draw_count(iris, tmp_path):
    X, y = iris
    est = _quiet(_l2e(n_draws=3, max_epochs=8).fit, X, y)
    est.save_params(f_params=tmp_path / "p.pt")
    other = _quiet(_l2e(n_draws=2, max_epochs=8).fit, X, y)
    assert other.n_draws_ == 2
    other.load_params(f_params=tmp_path / "p.pt")
    assert other.n_draws_ == 3 and other.convergence_ is None
    np.testing.assert_array_equal(other.predict_proba(X), est.predict_proba(X))


# -- scoring and predictions -----------------------------------------------------------------


def test_score_with_sample_weight_of_the_wrong_length_is_a_value_error(iris):
    X, y = iris
    clf = _mtsgd().fit(X, y)
    with pytest.raises(ValueError, match="sample_weight has shape"):
        clf.score(X, y, sample_weight=np.ones(3))


@pytest.mark.parametrize("sampler", ["l2e", "sghmc", "csgmcmc"])
def test_predictions_do_not_depend_on_the_batch(sampler):
    est = _l2e(sampler=sampler, burn_in=0, n_cycles=1, max_epochs=10)
    check_methods_subset_invariance(type(est).__name__, est)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_predictions_stream_over_rows(iris, name, monkeypatch):
    """Predictions reduce batch by batch: the model average of a batch never holds other
    rows (the memory benchmark measures the effect, benchmarks/bench_prediction_memory.py)."""
    X, y = iris
    est = _quiet(ESTIMATORS[name](batch_size=16).fit, X, _target(name, y, X))
    full = est.predict(X)
    seen = []
    original = est._reduce_rows

    def spy(X_, reduce):
        def counted(batch):
            seen.append(batch.shape[-2] if name == "l2e" else batch[0].shape[0])
            return reduce(batch)
        return original(X_, counted)

    monkeypatch.setattr(est, "_reduce_rows", spy)
    X = np.concatenate([X] * 4)                # 600 rows: several batches for every estimator
    np.testing.assert_allclose(est.predict(X), np.concatenate([full] * 4), rtol=1e-6)
    assert len(seen) > 1 and max(seen) <= 256


# -- round 4: parameters, splits and the global random stream ---------------------------------


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("param, value, match", [
    ("train_split", "bogus", "train_split must be a ValidationSplit, None"),
    ("device", "bogus", "device must name a torch device"),
    ("verbose", "x", "verbose must be an integer >= 0"),
    ("verbose", -1, "verbose must be an integer >= 0"),
])
def test_bad_shared_parameters_are_named_at_fit(iris, name, param, value, match):
    X, y = iris
    with pytest.raises(ValueError, match=match):
        ESTIMATORS[name](**{param: value}).fit(X, y)


def test_a_renamed_parameter_says_its_new_name(iris):
    X, y = iris
    with pytest.raises(TypeError, match="'n_samples': it was renamed 'n_draws'"):
        _l2e(n_samples=3).fit(X, y)


def test_the_shared_default_validation_split_cannot_be_changed_in_place():
    from sklmoo.estimators import ValidationSplit

    a, b = _mtsgd(), _reg()
    with pytest.raises(AttributeError, match="immutable"):
        a.train_split.fraction = 0.5
    assert a.train_split == ValidationSplit()
    assert b.train_split == ValidationSplit(fraction=0.2)    # the regressor keeps 20 %
    assert clone(_mtsgd(train_split=ValidationSplit(fraction=0.3))).train_split.fraction == 0.3


def test_a_class_with_one_member_is_never_held_out_of_training():
    from skorch.dataset import Dataset

    from sklmoo.estimators import ValidationSplit

    X = np.zeros((60, 2), np.float32)
    y = np.r_[np.zeros(30, int), np.ones(29, int), 2]            # class 2: one row
    Y = np.column_stack([y, np.r_[np.zeros(59, int), 1]])        # task 1: one row of class 1
    for seed in range(25):
        train, valid = ValidationSplit(random_state=seed)(Dataset(X, Y), Y)
        assert 2 in Y[train.indices, 0] and 1 in Y[train.indices, 1]
        assert len(valid) == 12 and not set(train.indices) & set(valid.indices)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_a_custom_split_with_an_empty_part_is_named(iris, name):
    from torch.utils.data import Subset

    X, y = iris
    rows = list(range(len(X)))
    splits = {"returned an empty validation": lambda ds, y=None, **kw: (Subset(ds, rows),
                                                                        Subset(ds, [])),
              "returned no training rows": lambda ds, y=None, **kw: (Subset(ds, []),
                                                                     Subset(ds, rows))}
    for match, split in splits.items():
        est = ESTIMATORS[name](train_split=split)
        with pytest.raises(ValueError, match=match):
            est.fit(X, y)
        assert not est.__sklearn_is_fitted__()


@pytest.mark.parametrize("name", ESTIMATORS)
def test_fit_and_predict_leave_the_global_torch_random_stream_alone(iris, name):
    X, y = iris
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    est = _quiet(ESTIMATORS[name]().fit, X, y)
    est.predict(X)
    torch.testing.assert_close(torch.rand(3), expected)
    # and the fit does not depend on it: same seed, same result whatever the global state
    torch.manual_seed(7)
    other = _quiet(ESTIMATORS[name]().fit, X, y)
    np.testing.assert_array_equal(other.predict(X), est.predict(X))


def test_l2e_refuses_an_early_stopping_callback_that_would_drop_draws(iris, tmp_path):
    from skorch.callbacks import Checkpoint, EarlyStopping

    from sklmoo.estimators import RestoreBestEarlyStopping

    X, y = iris
    for callback in (EarlyStopping(load_best=True), RestoreBestEarlyStopping(),
                     Checkpoint(load_best=True, dirname=str(tmp_path))):
        est = _l2e(callbacks=[callback])
        with pytest.raises(ValueError, match="load_best=True.*drop every draw"):
            est.fit(X, y)
        assert not est.__sklearn_is_fitted__()
    # without restoring, stopping early keeps every draw collected
    est = _quiet(_l2e(max_epochs=8, callbacks=[EarlyStopping(load_best=False)]).fit, X, y)
    assert est.n_draws_ == len(est.module_.samples) > 0


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
def test_a_fit_diverging_on_huge_features_names_their_scale(iris, name):
    X, y = iris
    with pytest.raises(FloatingPointError,
                       match=r"X holds values up to 3.09e\+30 in magnitude: standardise"):
        ESTIMATORS[name]().fit(X * 1e30, y)


@pytest.mark.parametrize("name", ["l2e", "mtsgd", "regressor"])
def test_a_fit_on_unstandardised_features_says_so(iris, name):
    """Networks on features of thousands fit far worse than on standardised ones without
    failing (a reviewer's linear-mean regressor: test RMSE 7.6 times BayesianRidge's at
    features up to 3e3, 1,200 times at 3e5, and no word): a fit that starts warns, naming
    the scale, once (not again in a continued fit); order-one features stay quiet."""
    X, y = iris
    est = ESTIMATORS[name](warm_start=True)
    with pytest.warns(UserWarning, match=r"X holds values up to 3.09e\+04 in magnitude: "
                                         r"standardise the features"):
        _quiet(est.fit, X * 1e4, _target(name, y, X))
    assert any("standardise the features" in w for w in est.fit_warnings_)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _quiet(est.fit, X * 1e4, _target(name, y, X))              # continued: said already
        _quiet(ESTIMATORS[name]().fit, X, _target(name, y, X))
    assert not [c for c in caught if "standardise the features" in str(c.message)]
    # features all within 0.1 in magnitude: the networks learn little from them either
    with pytest.warns(UserWarning, match=r"X holds values up to 0.00309 in magnitude: "
                                         r"standardise the features"):
        _quiet(ESTIMATORS[name]().fit, X * 1e-3, _target(name, y, X))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unstandardised_features_in_a_memory_map_warn_too(iris, tmp_path, dtype):
    """A memory map of features in the thousands warns as an array does, whatever its dtype
    (a float64 one is read through a row reader, and was skipped)."""
    X, y = iris
    path = tmp_path / "X.dat"
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=X.shape)
    mm[:] = X * 1e4
    mm.flush()
    X_map = np.memmap(path, dtype=dtype, mode="r", shape=X.shape)
    with pytest.warns(UserWarning, match=r"X holds values up to 3.09e\+04 in magnitude"):
        _quiet(ESTIMATORS["mtsgd"](max_epochs=1).fit, X_map, y)


def test_l2e_stuck_on_huge_features_names_their_scale(iris):
    """The meta-learned sampler normalises its inputs and does not overflow on X of 1e30: its
    chains stop moving instead, and the warning says why."""
    from sklearn.exceptions import ConvergenceWarning

    X, y = iris
    with pytest.warns(ConvergenceWarning, match=r"stuck.*X holds values up to 3.09e\+30 in "
                                                r"magnitude: standardise"):
        _l2e(sampler="l2e", n_chains=2).fit(X * 1e30, y)


@pytest.mark.parametrize("name, param", [("l2e", "n_chains"), ("mtsgd", "n_particles"),
                                         ("regressor", "n_particles")])
def test_a_member_count_beyond_memory_is_refused_before_allocating(iris, name, param):
    X, y = iris
    est = ESTIMATORS[name](**{param: 10 ** 9})
    with pytest.raises(ValueError, match=f"{param}=1000000000 networks .* GiB.*lower {param}"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


def test_an_adam_burn_in_of_no_epochs_is_warned_about(iris):
    """csgmcmc burns in by its exploration phases (burn_in 0 by default): an explicit
    burn_in_method='adam' would silently run no Adam step."""
    X, y = iris
    with pytest.warns(UserWarning, match=r"burn_in_method='adam' runs no Adam step.*the "
                                         r"default for 'csgmcmc'.*pass burn_in=k"):
        _l2e(sampler="csgmcmc", burn_in_method="adam", max_epochs=40).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _l2e(sampler="csgmcmc", burn_in_method="adam", burn_in=4, max_epochs=40).fit(X, y)


def test_a_draw_count_beyond_memory_names_n_draws(iris):
    X, y = iris
    est = ESTIMATORS["l2e"](n_chains=2, n_draws=10 ** 9)
    with pytest.raises(ValueError, match=r"n_draws=1000000000 stored draws.*GiB.*lower n_chains "
                                         r"or n_draws"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")   # torch, on the damage
def test_a_pickle_that_cannot_be_restored_names_the_versions(iris):
    import pickle

    import sklmoo

    X, y = iris
    est = _reg().fit(X, X[:, 0])
    state = est.__getstate__()
    assert state["_sklmoo_version"] == sklmoo.__version__
    assert pickle.loads(pickle.dumps(est)).score(X, X[:, 0]) == est.score(X, X[:, 0])
    # a state whose torch part cannot be read (as from another version, or damaged)
    state["__cuda_dependent_attributes__"] = state["__cuda_dependent_attributes__"][:100]
    state["_sklmoo_version"] = "0.0.1"
    with pytest.raises(ValueError, match=r"pickled by sklmoo 0\.0\.1, this is sklmoo "):
        MTSGDRegressor.__new__(MTSGDRegressor).__setstate__(state)


# -- from the fresh hostile pass over the round-4 fixes ---------------------------------------


def test_r2_of_tiny_and_huge_targets_matches_ordinary_units(iris):
    X, y = iris
    target = X[:, 0] * 2.0 + y
    reg = _reg().fit(X, target)
    expected = reg.score(X, target)
    for scale in (1e-200, 1e200):
        # the same fit in other units: predictions scale with the targets
        scaled = _reg().fit(X, target * scale)
        assert scaled.score(X, target * scale) == pytest.approx(expected, rel=1e-4)
    # a prediction hopelessly far from tiny targets: hugely negative, never a silent 0
    assert reg.score(X, target * 1e-200) < -1e100


def test_a_fit_that_fails_on_a_changed_parameter_leaves_the_estimator_unfitted(iris, tmp_path):
    X, y = iris
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    est = _quiet(_l2e().fit, X, y)
    with pytest.raises(ValueError, match="bad.npz"):
        est.set_params(meta_sampler=str(bad)).fit(X, y)
    assert not est.__sklearn_is_fitted__()


def test_l2e_parameters_without_draws_are_refused_and_change_nothing(iris, tmp_path):
    X, y = iris
    est = _quiet(_l2e().fit, X, y)
    before = est.predict_proba(X)
    empty = _quiet(_l2e(max_epochs=4, burn_in=3, n_draws=1).fit, X, y)
    empty.module_.samples.clear()
    empty.save_params(f_params=tmp_path / "p.pt")
    with pytest.raises(ValueError, match="hold no draws"):
        est.load_params(f_params=tmp_path / "p.pt")
    assert est.__sklearn_is_fitted__() and est.n_draws_ == len(est.module_.samples)
    np.testing.assert_array_equal(est.predict_proba(X), before)


def test_loading_parameters_of_other_features_does_not_blame_mean_function(iris, tmp_path):
    X, y = iris
    _reg().fit(X, X[:, 0]).save_params(f_params=tmp_path / "four.pt")
    three = _reg().fit(X[:, :3], X[:, 0])
    with pytest.raises(ValueError) as info:
        three.load_params(f_params=tmp_path / "four.pt")
    assert "mean_function" not in str(info.value)
    other = _reg(mean_function=None).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="differ in mean_function"):
        other.load_params(f_params=tmp_path / "four.pt")


def test_predict_checks_the_whole_sample_shape(iris):
    """Images are checked against the fitted sample shape, not only their channels: another
    height / width is refused naming both shapes; flat rows of the right size and the fitted
    shape are both taken, whichever layout the fit saw; tabular X must stay 2-D."""
    rng = np.random.default_rng(0)
    images = rng.normal(size=(60, 1, 8, 8)).astype(np.float32)
    labels = (images[:, 0, :4].mean(axis=(1, 2)) > 0).astype(int)
    small = dict(n_particles=2, max_epochs=1, random_state=0)     # a LeNet trunk
    est = MTSGDMultiTaskClassifier(**small).fit(images, labels)
    with pytest.raises(ValueError, match=r"shape \(1, 4, 16\).*shape \(1, 8, 8\)"):
        est.predict(images.reshape(60, 1, 4, 16))
    with pytest.raises(ValueError, match=r"shape \(1, 16, 16\)"):
        est.predict(np.zeros((2, 1, 16, 16), dtype=np.float32))
    flat = images.reshape(60, 64)
    np.testing.assert_array_equal(est.predict_proba(flat), est.predict_proba(images))
    flat_fit = MTSGDMultiTaskClassifier(**small, input_shape=(1, 8, 8)).fit(flat, labels)
    np.testing.assert_array_equal(flat_fit.predict_proba(images), flat_fit.predict_proba(flat))
    X, y = iris
    tabular = _mtsgd(max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="fitted on 2-D X"):
        tabular.predict(X[:, None, :])


@pytest.mark.parametrize("name", ["mtsgd", "regressor"])
def test_a_trunk_without_parameters_is_refused_before_training(iris, name):
    X, y = iris
    est = ESTIMATORS[name](module__hidden_units=(), mean_function="linear") if (
        name == "regressor") else ESTIMATORS[name](module__hidden_units=())
    with pytest.raises(ValueError, match="trunk has no parameters"):
        est.fit(X, _target(name, y, X))
    assert not est.__sklearn_is_fitted__()


def test_a_corrupted_params_file_is_a_value_error_naming_it(iris, tmp_path):
    X, y = iris
    est = _quiet(_mtsgd().fit, X, y)
    est.save_params(f_params=tmp_path / "p.pt")
    raw = bytearray((tmp_path / "p.pt").read_bytes())
    middle = len(raw) // 2
    raw[middle:middle + 64] = bytes(64)           # same length: the archive's sizes still hold
    (tmp_path / "bad.pt").write_bytes(bytes(raw))
    before = est.predict_proba(X)
    with pytest.raises(ValueError, match="bad.pt is corrupted"):
        est.load_params(f_params=tmp_path / "bad.pt")
    np.testing.assert_array_equal(est.predict_proba(X), before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_device_set_after_fit_is_checked_when_predicting(iris, name):
    X, y = iris
    est = _quiet(ESTIMATORS[name]().fit, X, _target(name, y, X))
    est.set_params(device="cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        est.predict(X)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_the_meta_device_is_refused_for_predictions_and_fits(iris, name):
    # tensors on 'meta' have no values: predictions read there were garbage and NaN
    X, y = iris
    est = _quiet(ESTIMATORS[name]().fit, X, _target(name, y, X))
    est.set_params(device="meta")
    for call in (lambda: est.predict(X), lambda: est.fit(X, _target(name, y, X))):
        with pytest.raises(ValueError, match="device='meta' holds no values"):
            call()


def test_l2e_names_missing_labels():
    X = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    y = pd.array(["a", "b"] * 9 + [None, "b"], dtype="string")
    with pytest.raises(ValueError, match="missing labels"):
        _l2e().fit(X, y)


@pytest.mark.parametrize("name", ["l2e", "mtsgd", "regressor"])
def test_non_numeric_columns_are_named(iris, name):
    """A DataFrame with a categorical or string column got NumPy's "could not convert string
    to float: 'hi'" (or "Cannot cast object dtype to float32", depending on the other
    columns): the message names the columns and how to encode them, in fit and predict."""
    X, y = iris
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame["flag"] = X[:, 0] > 0                                   # booleans are numbers
    bad = frame.assign(kind=pd.Categorical(np.where(X[:, 1] > 0, "hi", "lo")),
                       note=np.where(X[:, 2] > 0, "x", "y"))
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['kind', 'note'\]: "
                                         r"encode them first"):
        ESTIMATORS[name]().fit(bad, _target(name, y, X))
    est = _quiet(ESTIMATORS[name]().fit, frame, _target(name, y, X))
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['flag'\]"):
        est.predict(frame.assign(flag=np.where(X[:, 0] > 0, "yes", "no")))


def test_a_missing_label_in_one_task_of_an_array_gives_every_task_one_label_dtype(iris):
    # NaN made the whole array float: every task's labels come back as the integers they are,
    # and predict returns one integer array (was int64 for that task, float64 for the other,
    # and an object array of predictions that scikit-learn's metrics refuse)
    X, y = iris
    Y = np.c_[y == 0, y == 1].astype(float)
    Y[0, 0] = np.nan
    est = _quiet(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0).fit,
                 X, Y)
    assert [c.dtype for c in est.classes_] == [np.int64, np.int64]
    assert est.predict(X[:3]).dtype == np.int64
    # without a missing label the float labels stay float, as scikit-learn keeps y's dtype
    est = _quiet(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0).fit,
                 X, np.c_[y == 0, y == 1].astype(float))
    assert [c.dtype for c in est.classes_] == [np.float64, np.float64]
    labels = np.c_[y == 0, y == 1].astype(int).astype(str).astype(object)
    labels[0, 1] = "?"
    est = _quiet(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                          missing_label="?").fit, X, labels)
    assert [c.dtype.kind for c in est.classes_] == ["U", "U"]
    assert est.predict(X[:3]).dtype.kind == "U"


def test_the_function_kernel_is_not_chosen_for_many_particles_and_refused_past_memory(
        iris, monkeypatch):
    # its pairwise terms grow as n_particles squared: 'auto' takes the parameter kernel above
    # 64 particles, and an explicit function kernel whose terms would not fit is refused at
    # its first step, before they are allocated (1,000 particles asked torch for 16 GB)
    X, _ = iris
    y = X[:, 0] + X[:, 1]
    est = _quiet(MTSGDRegressor(n_particles=65, max_epochs=1, mean_function=None,
                                random_state=0).fit, X, y)
    assert est.kernel_ == "parameter"
    est = _quiet(MTSGDRegressor(n_particles=64, max_epochs=1, mean_function=None,
                                random_state=0).fit, X, y)
    assert est.kernel_ == "function"
    monkeypatch.setattr(MTSGDRegressor, "_device_memory", lambda self: 2 ** 29)
    est = MTSGDRegressor(n_particles=120, kernel="function", max_epochs=1, random_state=0,
                         mean_function=None)
    with pytest.raises(ValueError, match=r"kernel='function' with n_particles=120 needs about "
                                         r".* GiB per step for its pairwise terms"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_module_parameter_the_module_does_not_take_changes_nothing(iris, name):
    # as scikit-learn's set_params on an invalid parameter: the fitted estimator stays
    # fitted and usable, and the typo is not kept (it made every later fit raise)
    X, y = iris
    est = _quiet(ESTIMATORS[name]().fit, X, _target(name, y, X))
    before = est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)
    with pytest.raises(TypeError, match="unexpected keyword argument 'hidden'"):
        est.set_params(module__hidden=8)
    assert est.__sklearn_is_fitted__()
    after = est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)
    np.testing.assert_array_equal(after, before)
    assert "module__hidden" not in est.get_params()
    assert "module__hidden" not in clone(est).get_params()
    _quiet(est.fit, X, _target(name, y, X))


@pytest.mark.parametrize("marker, labels, match", [
    ("-1", "numbers", "missing_label='-1' is a string but task 'task_0' has number labels"),
    (-1, "strings", "missing_label=-1 is a number but task 'task_0' has string labels"),
    ({-1}, "numbers", "missing_label must be one label value .* of type set"),
    ([-1], "numbers", "missing_label must be one label value .* of type list"),
])
def test_a_missing_label_marker_that_cannot_match_is_refused(iris, marker, labels, match):
    # '-1' against integer labels never matched: -1 became a class and was predicted
    X, y = iris
    Y = np.c_[y == 0, y == 1].astype(int)
    Y[:5, 1] = -1
    if labels == "strings":
        Y = Y.astype(str).astype(object)
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                   missing_label=marker)
    with pytest.raises(ValueError, match=match):
        est.fit(X, Y)
    assert not est.__sklearn_is_fitted__()


def test_partial_fit_classes_holding_the_marker_or_nan_are_refused(iris):
    X, y = iris
    Y = np.c_[y == 0, y == 1].astype(int)
    Y[:5, 1] = -1
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                   missing_label=-1)
    with pytest.raises(ValueError, match=r"classes of task 1 hold NaN, None or the "
                                         r"missing-label marker \(missing_label=-1\)"):
        est.partial_fit(X, Y, classes=[[0, 1], [-1, 0, 1]])
    with pytest.raises(ValueError, match="classes of task 1 hold NaN"):
        est.partial_fit(X, Y, classes=[[0, 1], [0, 1, np.nan]])
    _quiet(est.partial_fit, X, Y, classes=[[0, 1], [0, 1]])
    assert [c.tolist() for c in est.classes_] == [[0, 1], [0, 1]]


def test_a_nan_marker_marks_labels_of_any_kind(iris):
    X, y = iris
    labels = np.c_[y == 0, y == 1].astype(int).astype(str).astype(object)
    labels[:5, 1] = np.nan
    est = _quiet(MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                          missing_label=np.nan).fit, X, labels)
    assert [c.tolist() for c in est.classes_] == [["0", "1"], ["0", "1"]]


@pytest.mark.parametrize("kwargs, match", [
    (dict(split_seed=None), "split_seed must be an integer, the same for the train and test"),
    (dict(split_seed=np.random.RandomState(0)), "split_seed must be an integer"),
    (dict(split_seed=1.5), "split_seed must be an integer"),
    (dict(test_fraction="0.3"), "test_fraction must be a number in"),
    (dict(canvas_size=12.7), "canvas_size must be an integer between 8 and 16"),
    (dict(canvas_size="12"), "canvas_size must be an integer between 8 and 16"),
])
def test_make_multi_digits_refuses_a_split_it_cannot_repeat_and_odd_sizes(kwargs, match):
    # split_seed=None drew another source split on every call: train and test shared 284
    # source images
    from sklmoo.datasets import make_multi_digits
    with pytest.raises(ValueError, match=match):
        make_multi_digits(50, **kwargs)
    train = make_multi_digits(300, subset="train", split_seed=np.int64(3), random_state=0)
    test = make_multi_digits(300, subset="test", split_seed=3, random_state=1)
    assert not set(train.source_index.ravel()) & set(test.source_index.ravel())


@pytest.mark.parametrize("particles, radius, match", [
    (torch.full((4, 2), float("nan")), 1.5, "particles hold NaN or inf"),
    (torch.zeros(4, 2), -1.0, "radius must be a positive finite number"),
    (torch.zeros(4, 2), float("nan"), "radius must be a positive finite number"),
])
def test_gaussian_mixture_statistics_refuses_what_it_cannot_read(particles, radius, match):
    # a negative or NaN radius read 0.0 near the origin; NaN particles gave NaN statistics
    from sklmoo.datasets import gaussian_mixture_statistics, make_gaussian_mixture_targets
    with pytest.raises(ValueError, match=match):
        gaussian_mixture_statistics(particles, make_gaussian_mixture_targets(), radius=radius)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_a_continued_fit_refuses_a_layout_its_networks_were_not_built_for(iris, name):
    # input_shape (and L2E's sample_dtype) set since the fit were ignored by the continuation
    X, y = iris
    est = _quiet(ESTIMATORS[name](warm_start=True).fit, X, _target(name, y, X))
    before = est.predict(X)
    changes = [dict(input_shape=(1, 2, 2))] + ([dict(sample_dtype="float16")]
                                                if name == "l2e" else [])
    for change in changes:
        est.set_params(**change)
        with pytest.raises(ValueError, match="cannot continue the"):
            est.fit(X, _target(name, y, X))
        assert est.__sklearn_is_fitted__()
        np.testing.assert_array_equal(est.predict(X), before)
        est.set_params(input_shape=None, **({"sample_dtype": "float32"} if name == "l2e" else {}))
    est.set_params(input_shape=(4,))                  # the shape it was built for
    _quiet(est.fit, X, _target(name, y, X))

"""The ecosystem around the estimators: skorch callbacks, progress output, persistence, devices."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import Callback, Checkpoint, EarlyStopping, LRScheduler, ProgressBar
from skorch.dataset import ValidSplit

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.datasets import make_multi_digits


@pytest.fixture(scope="module")
def data():
    X, y = make_multi_digits(300, random_state=0, return_X_y=True)
    return X, y


ESTIMATORS = {
    "mtsgd": lambda **kw: MTSGDMultiTaskClassifier(n_particles=2, max_epochs=3,
                                                   module__hidden_units=(8,), random_state=0,
                                                   **kw),
    "l2e": lambda **kw: L2ESamplerClassifier(n_chains=2, max_epochs=3, n_draws=1,
                                             module__hidden_units=(8,), random_state=0, **kw),
    "regressor": lambda **kw: MTSGDRegressor(n_particles=2, max_epochs=3,
                                             module__hidden_units=(8,), random_state=0, **kw),
}


def _target(name, y):
    if name == "regressor":
        return y.astype(float)               # the two digits' values as a 2-output regression
    return y if name == "mtsgd" else y[:, 0]


def _outputs(est, X):
    """What a user reads from the fitted estimator: probabilities, or mean and std."""
    if isinstance(est, MTSGDRegressor):
        return np.stack(est.predict(X, return_std=True))
    return np.asarray(est.predict_proba(X))


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


class _EpochCounter(Callback):
    def initialize(self):
        self.epochs = 0
        return self

    def on_epoch_end(self, net, **kwargs):
        self.epochs += 1


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_callbacks_set_on_a_fitted_estimator_run_in_its_continued_fits(data, name):
    # skorch's set_params initialises the callbacks before storing the new ones: a continued
    # fit (partial_fit, warm_start) ran the old list
    X, y = data
    y = _target(name, y)
    est = _fit(ESTIMATORS[name](), X, y)
    counter = _EpochCounter()
    est.set_params(callbacks=[("count", counter)])
    est.partial_fit(X, y)
    assert counter.epochs == 3 and len(est.history) == 6
    replacement = _EpochCounter()
    est.set_params(callbacks__count=replacement, warm_start=True)
    _fit(est, X, y)
    assert replacement.epochs == 3 and counter.epochs == 0 and len(est.history) == 9


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_skorch_callbacks_work(tmp_path, data, name, capsys):
    X, y = data
    y = _target(name, y)
    callbacks = [ProgressBar(), Checkpoint(dirname=str(tmp_path / "ckpt"), monitor=None),
                 LRScheduler(policy="StepLR", step_size=1)]
    est = _fit(ESTIMATORS[name](callbacks=callbacks), X, y)
    assert est.predict(X[:3]).shape[0] == 3
    assert (tmp_path / "ckpt" / "params.pt").exists()
    if name == "l2e":
        # the scheduler's "learning rate" is the sampler's step size: 1.0 -> 0.1 -> 0.01
        assert est.optimizer_.sampler.step_size == pytest.approx(0.01)



@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_early_stopping_is_a_completed_fit(data, name):
    X, y = data
    y = _target(name, y)
    # a threshold no epoch can beat: the callback stops after `patience` epochs
    est = ESTIMATORS[name]()
    est.set_params(max_epochs=40, train_split=ValidSplit(0.2),
                   callbacks=[EarlyStopping(patience=3, threshold=100.0)])
    if name == "l2e":
        est.set_params(burn_in=1, n_draws=40)
    _fit(est, X, y)
    assert len(est.history) < 40 and est.__sklearn_is_fitted__()
    assert est.predict(X[:3]).shape[0] == 3
    if name == "l2e":
        assert est.n_draws_ >= 1
        late = ESTIMATORS[name]()
        late.set_params(max_epochs=40, burn_in=30, train_split=ValidSplit(0.2),
                        callbacks=[EarlyStopping(patience=3, threshold=100.0)])
        with pytest.raises(ValueError, match="before any draw was collected"):
            _fit(late, X, y)
        assert not late.__sklearn_is_fitted__()


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_verbose_one_prints_the_epoch_log_and_zero_is_silent(data, name, capsys):
    X, y = data
    y = _target(name, y)
    _fit(ESTIMATORS[name](verbose=1), X, y)
    out = capsys.readouterr().out
    assert "train_loss" in out and "epoch" in out
    _fit(ESTIMATORS[name](verbose=0), X, y)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_pickle_joblib_and_save_params_round_trips(tmp_path, data, name):
    X, y = data
    y = _target(name, y)
    est = _fit(ESTIMATORS[name](), X, y)
    ref = _outputs(est, X[:20])
    path = tmp_path / "model.joblib"
    joblib.dump(est, path)
    for loaded in (joblib.load(path), pickle.loads(pickle.dumps(est))):
        np.testing.assert_array_equal(_outputs(loaded, X[:20]), ref)
    est.save_params(f_params=tmp_path / "params.pt")
    other = _fit(clone(est).set_params(random_state=7), X, y)
    other.load_params(f_params=tmp_path / "params.pt")
    np.testing.assert_array_equal(_outputs(other, X[:20]), ref)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_cuda_without_a_gpu_fails_at_fit_with_a_message(data, name):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    X, y = data
    est = ESTIMATORS[name](device="cuda")
    with pytest.raises(ValueError, match="CUDA is not available"):
        est.fit(X, _target(name, y))
    assert not est.__sklearn_is_fitted__()


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fitted_on_cuda_loads_on_cpu(tmp_path, data, name):
    X, y = data
    est = _fit(ESTIMATORS[name](device="cuda"), X, _target(name, y))
    ref = _outputs(est, X[:10])
    est.save_params(f_params=tmp_path / "params.pt")
    cpu = _fit(ESTIMATORS[name](device="cpu"), X, _target(name, y))
    cpu.load_params(f_params=tmp_path / "params.pt")      # skorch maps to the net's device
    np.testing.assert_allclose(_outputs(cpu, X[:10]), ref, rtol=1e-4)


def test_skorch_resume_pattern_on_a_new_estimator(tmp_path):
    # skorch's documented resume: Checkpoint + LoadInitState on a *new* estimator loads the
    # checkpoint (its file names are formatted with the saved history) and continues
    from skorch.callbacks import LoadInitState

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)

    def make():
        checkpoint = Checkpoint(dirname=str(tmp_path), monitor=None)
        return MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                        callbacks=[("checkpoint", checkpoint),
                                                   ("resume", LoadInitState(checkpoint))])

    first = make().fit(X, y)
    second = make().fit(X, y)
    assert len(first.history) == 2 and len(second.history) == 4
    # the second fit started from the first one's weights: its first epoch's training loss
    # continues the first fit's, not a new start's
    assert second.history[2, "train_loss"] < first.history[0, "train_loss"]


def test_a_checkpoint_that_restores_an_earlier_epoch_is_not_an_interrupted_fit(tmp_path):
    # Checkpoint(load_best=True) rolls the history back to the best epoch at the end of the
    # fit; the fit was then taken for an interrupted one (KeyboardInterrupt)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3)).astype(np.float32)
    y = X[:, 1] + rng.normal(size=400)
    # a checkpoint of the first epoch only, restored at the end
    checkpoint = Checkpoint(dirname=str(tmp_path), load_best=True,
                            monitor=lambda net: len(net.history) == 1)
    reg = MTSGDRegressor(n_particles=2, max_epochs=3, random_state=0,
                         callbacks=[("checkpoint", checkpoint)]).fit(X, y)
    assert reg.__sklearn_is_fitted__()
    assert len(reg.history) == 1
    assert np.isfinite(reg.predict(X[:10])).all()


@pytest.mark.parametrize("name", ["classifier", "regressor", "l2e"])
def test_the_history_keeps_the_last_epochs_batch_records(name, monkeypatch, tmp_path):
    # skorch records every batch; a long fit on a large table would hold hundreds of
    # thousands of records: the last epochs' are kept whole up to a bound, earlier epochs
    # keep their epoch-level entries and their last batch (skorch's Checkpoint formats its
    # file names with it) (here: 10 batches an epoch, a bound of 25)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(640, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int) if name != "regressor" else X[:, 0] + rng.normal(size=640)
    make = {"classifier": MTSGDMultiTaskClassifier, "regressor": MTSGDRegressor,
            "l2e": L2ESamplerClassifier}[name]
    monkeypatch.setattr(make, "_max_batch_records", 25)
    kw = dict(n_draws=2) if name == "l2e" else dict(n_particles=2)
    # a checkpoint of the fifth epoch, loaded after its batches were cut: skorch formats
    # the file names with that epoch's last batch
    checkpoint = Checkpoint(dirname=str(tmp_path), monitor=lambda net: len(net.history) == 5)
    est = make(max_epochs=6, batch_size=64, train_split=None, random_state=0, warm_start=True,
               callbacks=[("checkpoint", checkpoint)], **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
        assert [len(epoch["batches"]) for epoch in est.history] == [1] * 4 + [10] * 2
        assert np.isfinite(est.history[:, "train_loss"]).all() and len(est.history) == 6
        assert est.history[0, "batches", -1, "train_batch_size"] == 640 - 9 * 64
        est.fit(X, y)                                   # a continued fit goes on trimming
        assert [len(epoch["batches"]) for epoch in est.history] == [1] * 10 + [10] * 2
        # the checkpoint's files are found by the trimmed history
        est.load_params(checkpoint=checkpoint)
    assert len(est.history) == 5


def test_an_mtsgd_chunk_drop_last_would_drop_is_refused_and_keeps_the_fitted_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3)).astype(np.float32)
    reg = MTSGDRegressor(n_particles=2, max_epochs=2, batch_size=32, train_split=None,
                         iterator_train__drop_last=True, random_state=0)
    reg.partial_fit(X, X[:, 0])
    with pytest.raises(ValueError, match="drops every batch: the 20 training rows"):
        reg.partial_fit(X[:20], X[:20, 0])
    assert reg.__sklearn_is_fitted__() and reg.predict(X[:3]).shape == (3,)

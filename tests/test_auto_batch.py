"""batch_size='auto' on the MT-SGD estimators: 64 rows on small tables (fits unchanged), a
larger batch with a square-root-scaled learning rate on large ones, never scaled twice."""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from torch.utils.data import DataLoader

from sklmoo import MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.estimators._regressor import NOISE_LR_FACTOR


def _large(n=12_000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)).astype(np.float32)
    return X, (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int), X[:, 1] + rng.normal(size=n)


def _rates(est):
    return [group["lr"] for group in est.optimizer_.param_groups]


@pytest.mark.parametrize("make, target", [(MTSGDMultiTaskClassifier, 1), (MTSGDRegressor, 2)])
def test_large_tables_get_a_larger_batch_and_a_scaled_rate(make, target):
    # the classifier's rate grows with the square root of the batch; the regressor's stays
    # (and its kernel='auto' turns to the parameter kernel)
    data = _large()
    X, y = data[0], data[target]
    factor = math.sqrt(8) if make is MTSGDMultiTaskClassifier else 1.0
    est = make(n_particles=2, max_epochs=1, random_state=0).fit(X, y)
    # the classifier holds out 2,000 of 12,000 rows, the regressor 20 %
    n_train = 10_000 if make is MTSGDMultiTaskClassifier else 9600
    assert est.n_train_ == n_train
    # a 25th of the training rows, rounded to a power of two: 400 / 384 -> 512
    assert est.batch_size_ == 512
    # every group scaled, the regressor's noise-scale group keeping its factor on lr
    noise = [NOISE_LR_FACTOR] if make is MTSGDRegressor else []
    assert _rates(est) == pytest.approx([est.lr * f * factor for f in [1.0] + noise])
    if make is MTSGDRegressor:
        assert est.kernel == "auto" and est.kernel_ == "parameter"
        small = make(n_particles=2, max_epochs=1, random_state=0).fit(X[:3000], y[:3000])
        assert small.kernel_ == "function"
    # one epoch: the training rows in batches of 512, the validation rows in batches of eight
    # times that (no gradients kept), at most 4,096 rows
    batches = est.history[-1, "batches"]
    assert sum("train_loss" in b for b in batches) == math.ceil(n_train / 512)
    assert [b["valid_batch_size"] for b in batches if "valid_loss" in b] == [12_000 - n_train]
    assert est._valid_batch_rows() == 4096
    # a continued fit takes the same rate, not the rate scaled again, and a new lr when
    # one was set since (skorch's set_params writes it into every group unscaled)
    est.set_params(warm_start=True).fit(X, y)
    assert _rates(est) == pytest.approx([est.lr * f * factor for f in [1.0] + noise])
    est.set_params(lr=est.lr / 4).fit(X, y)
    assert _rates(est) == pytest.approx([est.lr * f * factor for f in [1.0] + noise])
    # an explicit batch size is used as given, at the rate given
    fixed = make(n_particles=2, max_epochs=1, batch_size=128, random_state=0).fit(X, y)
    assert fixed.batch_size_ == 128
    assert fixed.optimizer_.param_groups[0]["lr"] == pytest.approx(fixed.lr)


def test_validation_passes_take_larger_batches_unless_told():
    X, y, _ = _large(n=2000)
    # 400 validation rows: one batch of up to 8 x 64 rows; iterator_valid__batch_size is
    # honoured; the loss is the same mean either way
    auto = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0).fit(X, y)
    told = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                    iterator_valid__batch_size=64).fit(X, y)
    for est, sizes in ((auto, [400]), (told, [64] * 6 + [16])):
        for epoch in est.history:
            assert [b["valid_batch_size"] for b in epoch["batches"] if "valid_loss" in b] == sizes
    np.testing.assert_allclose(auto.history[:, "valid_loss"], told.history[:, "valid_loss"],
                               rtol=1e-6)
    np.testing.assert_array_equal(auto.predict_proba(X), told.predict_proba(X))
    # outside a fit (predictions) the training batch size
    assert auto._valid_batch_rows() == 512 and auto._batch_rows() == 64


def test_small_tables_keep_batches_of_64_and_the_rate_given():
    X, y, _ = _large(n=600)
    auto = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0).fit(X, y)
    given = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, batch_size=64,
                                     random_state=0).fit(X, y)
    assert auto.batch_size_ == 64
    np.testing.assert_array_equal(auto.predict_proba(X), given.predict_proba(X))
    assert auto.optimizer_.param_groups[0]["lr"] == auto.lr


@pytest.mark.parametrize("make, target", [(MTSGDMultiTaskClassifier, 1), (MTSGDRegressor, 2)])
@pytest.mark.parametrize("param", ["lr", "optimizer__lr"])
def test_a_rate_set_after_a_fit_is_the_rate_of_the_continued_fit(make, target, param):
    data = _large(n=300)
    X, y = data[0], data[target]
    est = make(n_particles=2, max_epochs=1, random_state=0).fit(X, y)
    noise = [NOISE_LR_FACTOR] if make is MTSGDRegressor else []
    est.set_params(**{param: 0.02}).partial_fit(X, y)
    assert _rates(est) == pytest.approx([0.02 * f for f in [1.0] + noise])
    # the same as a new fit at that rate would train with, and as a clone's
    assert _rates(est) == _rates(make(n_particles=2, max_epochs=1, random_state=0,
                                      **{param: 0.02}).fit(X, y))
    assert est.get_params()[param] == 0.02
    assert _rates(clone(est).fit(X, y)) == _rates(est)
    # one group's rate, set by its index, is that group's
    last = len(est.optimizer_.param_groups) - 1
    est.set_params(**{f"optimizer__param_groups__{last}__lr": 0.03}).partial_fit(X, y)
    assert _rates(est)[last] == 0.03


def test_bad_batch_sizes_are_named():
    X, y, _ = _large(n=100)
    for bad in ("big", 0, 2.5):
        with pytest.raises((ValueError, TypeError), match="batch_size"):
            MTSGDMultiTaskClassifier(batch_size=bad).fit(X, y)


def test_large_tables_get_a_longer_early_stopping_budget():
    est = MTSGDMultiTaskClassifier()
    est._resolve_batch(128_000)                           # batches of 1024: 125 per epoch
    assert est._resolve_epochs(128_000, early_stopping=True) == 150  # not 3 x 10 epochs
    assert est._auto_patience(est._patience_epochs) == 10  # large tables: 10 epochs
    assert est._resolve_epochs(128_000, early_stopping=False) == 10  # no early stopping
    regressor = MTSGDRegressor()                          # its noisy validation loss: 100
    regressor._resolve_batch(128_000)
    assert regressor._resolve_epochs(128_000, early_stopping=True) == 100
    est._resolve_batch(9600)                              # batches of 512: 19 per epoch
    # ~1000 steps (53 epochs), then up to the bound while the validation loss improves
    assert est._resolve_epochs(9600, early_stopping=True) == 159
    assert est._patience_epochs == 53
    assert est._auto_patience(est._patience_epochs) == 10
    # an integer max_epochs on a large table: an eighth of it, as on any table
    given = MTSGDMultiTaskClassifier(max_epochs=200)
    given._resolve_batch(128_000)
    assert given._resolve_epochs(128_000, early_stopping=True) == 200
    assert given._auto_patience(given._patience_epochs) == 25
    # a small table: an eighth of its unextended budget, at least 5 epochs (1,600 rows: 25
    # batches of 64, a 40-epoch budget, 5 epochs; 400 rows: 7 batches, 143 epochs, 18)
    for rows, patience in ((1600, 5), (400, 18), (100, 63)):
        small_fit = MTSGDMultiTaskClassifier()
        small_fit._resolve_batch(rows)
        small_fit._resolve_epochs(rows, early_stopping=True)
        assert small_fit._auto_patience(small_fit._patience_epochs) == patience, rows
    small = MTSGDMultiTaskClassifier()
    small._resolve_batch(5000)
    assert small._resolve_epochs(5000, early_stopping=True) == 3 * 13   # unchanged
    given = MTSGDMultiTaskClassifier(batch_size=512)
    given._resolve_batch(9600)
    assert given._resolve_epochs(9600, early_stopping=True) == 3 * 53   # not 'auto' batches


def test_progress_bar_counts_the_auto_batches_and_params_stay_auto(capsys):
    from sklearn.base import clone
    from skorch.callbacks import ProgressBar

    X, y, _ = _large()
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=1, random_state=0,
                                   callbacks=[ProgressBar()]).fit(X, y)
    assert est.batch_size_ == 512
    params = est.get_params()
    assert params["batch_size"] == "auto" and "iterator_train__batch_size" not in params
    assert clone(est).batch_size == "auto"


def test_the_regressor_waits_30_epochs_on_small_tables_fewer_on_larger_ones():
    X, _, y = _large()
    large = MTSGDRegressor(n_particles=2, max_epochs=1, random_state=0).fit(X, y)
    small = MTSGDRegressor(n_particles=2, max_epochs=1, random_state=0).fit(X[:600], y[:600])
    assert dict(large.callbacks_)["early_stopping"].patience_ == 20
    assert dict(small.callbacks_)["early_stopping"].patience_ == 30
    # between, once an epoch is more than 16 batches of 64 (and the fit averages its weights):
    # about 120 steps, at least 5 epochs (1,280 rows, 20 % held out: 16 batches, 30; 1,400
    # rows: 18 batches, 7; 2,000 rows: 25 batches, 5)
    for rows, patience in ((1280, 30), (1400, 7), (2000, 5), (8000, 5)):
        fitted = MTSGDRegressor(n_particles=2, max_epochs=1, random_state=0).fit(X[:rows],
                                                                                y[:rows])
        assert dict(fitted.callbacks_)["early_stopping"].patience_ == patience, rows
    # a given batch (no average): about 480 steps (2,000 rows: 20)
    for given in ({"batch_size": 64}, {"iterator_train__batch_size": 64}):
        fitted = MTSGDRegressor(n_particles=2, max_epochs=1, random_state=0,
                                **given).fit(X[:2000], y[:2000])
        assert dict(fitted.callbacks_)["early_stopping"].patience_ == 20, given
    given = MTSGDRegressor(n_particles=2, max_epochs=1, random_state=0,
                           callbacks__early_stopping__patience=7).fit(X, y)
    assert dict(given.callbacks_)["early_stopping"].patience_ == 7


def _ema_reference(trajectory, decay):
    """The normalised exponentially weighted average of a list of parameter snapshots (the
    last weighted 1, the one before ``decay``, ...), by numpy."""
    weights = decay ** np.arange(len(trajectory))[::-1]
    return [np.tensordot(weights / weights.sum(), np.stack([step[i] for step in trajectory]), 1)
            for i in range(len(trajectory[0]))]


class _Recorder:
    """A callback that records every parameter after each training step."""

    def __init__(self):
        self.steps = []

    def initialize(self):
        return self

    def __getattr__(self, name):
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.steps.append([p.detach().numpy().astype(np.float64).copy()
                               for p in net.module_.parameters()])


def test_large_tables_keep_the_average_of_the_particles_steps():
    # the classifier with 'auto' batches on more than 8,192 rows: each epoch ends with the
    # particles' weights averaged over the fit's steps (bias-corrected moving average, decay
    # 0.99), the steps themselves exactly those of a fit without averaging
    from skorch.callbacks import Callback

    make = MTSGDMultiTaskClassifier
    X, y, _ = _large(n=9000)

    def fit(decay):
        recorder = type("Recorder", (_Recorder, Callback), {})()
        est = make(n_particles=2, max_epochs=2, train_split=None, random_state=0,
                   callbacks=[("recorder", recorder)])
        est._average_decay = decay
        return est.fit(X, y), recorder.steps

    averaged, steps = fit(0.99)
    plain, plain_steps = fit(None)
    assert averaged.batch_size_ == 256 and len(steps) == 2 * math.ceil(9000 / 256)
    for a, b in zip(steps[-1], plain_steps[-1]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    final = [p.detach().numpy() for p in averaged.module_.parameters()]
    for got, want in zip(final, _ema_reference(steps, 0.99)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for got, want in zip((p.detach().numpy() for p in plain.module_.parameters()),
                         plain_steps[-1]):
        np.testing.assert_array_equal(got, want)
    # the average differs from the last step, and a small table keeps its last step
    assert max(np.abs(a - b).max() for a, b in zip(final, steps[-1])) > 1e-4
    small, small_steps = make(n_particles=2, max_epochs=1, train_split=None,
                              random_state=0), None
    recorder = type("Recorder", (_Recorder, Callback), {})()
    small.set_params(callbacks=[("recorder", recorder)]).fit(X[:3000], y[:3000])
    for got, want in zip((p.detach().numpy() for p in small.module_.parameters()),
                         recorder.steps[-1]):
        np.testing.assert_array_equal(got, want)


def test_the_regressor_averages_from_epochs_of_more_than_16_auto_batches():
    # the regressor keeps the classifier's average (decay 0.99) when an epoch has more than 16
    # 'auto' batches (1,100 rows: 18 of 64), and fits the last iterate with 16 (1,000 rows)
    # or an explicit batch_size
    from skorch.callbacks import Callback

    X, _, y = _large(n=1100)

    def fit(rows, **params):
        recorder = type("Recorder", (_Recorder, Callback), {})()
        reg = MTSGDRegressor(n_particles=2, max_epochs=2, train_split=None, random_state=0,
                             callbacks=[("recorder", recorder)], **params)
        reg.fit(X[:rows], y[:rows])
        return [p.detach().numpy() for p in reg.module_.parameters()], recorder.steps

    final, steps = fit(1100)
    assert len(steps) == 2 * 18
    for got, want in zip(final, _ema_reference(steps, 0.99)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert max(np.abs(a - b).max() for a, b in zip(final, steps[-1])) > 1e-4
    for rows, params in ((1000, {}), (1100, {"batch_size": 64}),
                         (1100, {"iterator_train__batch_size": 64})):
        final, steps = fit(rows, **params)
        assert len(steps) == 2 * (16 if rows == 1000 else 18)
        for got, want in zip(final, steps[-1]):
            np.testing.assert_array_equal(got, want)


class _StepRecorder(_Recorder):
    """Also records every parameter before each training step."""

    def __init__(self):
        super().__init__()
        self.begins = []

    def on_batch_begin(self, net, training=False, **kwargs):
        if training:
            self.begins.append([p.detach().numpy().astype(np.float64).copy()
                                for p in net.module_.parameters()])


def test_l2e_starts_sampling_from_the_average_of_its_adam_burn_in():
    # above 1,024 training rows L2E burns in with Adam and averages the chains' weights over
    # the burn-in's steps: each burn-in epoch continues from the last Adam iterate (the same
    # steps as without the average), and the sampler starts from the average
    from skorch.callbacks import Callback

    from sklmoo import L2ESamplerClassifier

    X, y, _ = _large(n=9000)

    def fit(decay, n=9000, method="auto"):
        recorder = type("Recorder", (_StepRecorder, Callback), {})()
        est = L2ESamplerClassifier(n_chains=2, max_epochs=3, burn_in=2, n_draws=2,
                                   burn_in_method=method, train_split=None, random_state=0,
                                   callbacks=[("recorder", recorder)])
        est._average_decay = decay
        return est.fit(X[:n], y[:n]), recorder

    averaged, rec = fit(0.99)
    plain, plain_rec = fit(None)
    per_epoch = math.ceil(9000 / 128)
    assert averaged.burn_in_method_ == "adam" and len(rec.steps) == 3 * per_epoch
    burn = 2 * per_epoch
    for i in (0, per_epoch, burn - 2):                # burn-in: the last iterate goes on
        for a, b in zip(rec.steps[i], plain_rec.steps[i]):
            np.testing.assert_array_equal(a, b)
    for got, want in zip(rec.begins[per_epoch], plain_rec.steps[per_epoch - 1]):
        np.testing.assert_array_equal(got, want)
    # the step that ends the burn-in leaves the average of the iterates (the plain fit's)
    for got, want in zip(rec.begins[burn], _ema_reference(plain_rec.steps[:burn], 0.99)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert max(np.abs(a - b).max()
               for a, b in zip(rec.begins[burn], plain_rec.steps[burn - 1])) > 1e-4
    for got, want in zip(plain_rec.begins[burn], plain_rec.steps[burn - 1]):
        np.testing.assert_array_equal(got, want)
    assert averaged.n_draws_ == 2 and np.isfinite(averaged.predict_proba(X[:5])).all()
    # a small table's Adam burn-in (asked for, up to 1,024 rows) hands its last iterate on
    small, small_rec = fit(0.99, n=1000, method="adam")
    cut = 2 * math.ceil(1000 / 128)
    for got, want in zip(small_rec.begins[cut], small_rec.steps[cut - 1]):
        np.testing.assert_array_equal(got, want)
    # above 1,024 rows 'auto' burns in with Adam and averages
    mid, mid_rec = fit(0.99, n=1500)
    mid_plain, mid_plain_rec = fit(None, n=1500)
    cut = 2 * math.ceil(1500 / 128)
    assert mid.burn_in_method_ == "adam"
    for got, want in zip(mid_rec.begins[cut], _ema_reference(mid_plain_rec.steps[:cut], 0.99)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


class _ShortEpochs(DataLoader):
    """A custom training iterator that drops each epoch's partial batch without saying so
    (the estimator counts ceil(rows / batch) batches an epoch)."""

    def __init__(self, dataset, **kwargs):
        super().__init__(dataset, drop_last=True, **kwargs)


def test_l2e_averaged_burn_in_ending_inside_an_epoch():
    # epochs shorter than the estimator counts (a custom iterator): the Adam burn-in's last
    # step falls inside an epoch; the sampler's first step starts from the average, and the
    # sampler's own steps are not undone at that epoch's end
    from skorch.callbacks import Callback

    from sklmoo import L2ESamplerClassifier

    X, y, _ = _large(n=9000)

    def fit(decay):
        recorder = type("Recorder", (_StepRecorder, Callback), {})()
        est = L2ESamplerClassifier(n_chains=2, max_epochs=3, burn_in=1, n_draws=2,
                                   batch_size=4000, iterator_train=_ShortEpochs,
                                   burn_in_method="adam", train_split=None, random_state=0,
                                   callbacks=[("recorder", recorder)])
        est._average_decay = decay
        with warnings.catch_warnings():
            # fewer steps than planned: fewer draws (tested elsewhere)
            warnings.simplefilter("ignore", UserWarning)
            return est.fit(X, y), recorder

    est, recorder = fit(0.99)
    plain = fit(None)[1]
    steps, begins = recorder.steps, recorder.begins
    assert len(steps) == 6                           # 2 batches an epoch, 3 Adam steps counted
    for got, want in zip(begins[3], _ema_reference(plain.steps[:3], 0.99)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for i in (4, 5):                                  # the sampler goes on from its iterate
        for got, want in zip(begins[i], steps[i - 1]):
            np.testing.assert_array_equal(got, want)
    assert est.n_draws_ >= 1 and np.isfinite(est.predict_proba(X[:5])).all()


def test_l2e_average_no_step_moved_is_never_swapped_in(tmp_path):
    # skorch's resume pattern: LoadInitState restores an optimizer whose Adam burn-in is over,
    # so no step moves the new fit's average; the loaded chains must go on, not be replaced by
    # the average's starting copy (the fresh initialisation)
    from skorch.callbacks import Checkpoint, LoadInitState

    from sklmoo import L2ESamplerClassifier

    X, y, _ = _large(n=9000)
    kw = dict(n_chains=2, max_epochs=2, burn_in=1, n_draws=2, batch_size=1024,
              train_split=None, random_state=0)
    checkpoint = Checkpoint(dirname=str(tmp_path / "cp"), monitor=None)
    L2ESamplerClassifier(callbacks=[("cp", checkpoint)], **kw).fit(X, y)

    def resumed(decay):
        est = L2ESamplerClassifier(callbacks=[("load", LoadInitState(checkpoint))], **kw)
        est._average_decay = decay
        return [p.detach().numpy().copy() for p in est.fit(X, y).module_.parameters()]

    for got, want in zip(resumed(0.99), resumed(None)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make, target", [(MTSGDMultiTaskClassifier, 1), (MTSGDRegressor, 2)])
def test_a_given_training_batch_trains_as_given_on_a_large_table(make, target):
    # iterator_train__batch_size is the user's training batch: no rate scaled for the 'auto'
    # batch it does not use, no large-table budget or average; 'auto' still sizes the
    # validation and prediction batches
    data = _large()
    X, y = data[0], data[target]
    given = make(n_particles=2, max_epochs="auto", random_state=0,
                 iterator_train__batch_size=32)
    est = clone(given).set_params(max_epochs=1).fit(X, y)
    n_train = est.n_train_
    assert est.history[-1, "train_batch_count"] == math.ceil(n_train / 32)
    assert est.batch_size_ == 512
    noise = [NOISE_LR_FACTOR] if make is MTSGDRegressor else []
    base = 1e-3 if make is MTSGDMultiTaskClassifier else 1e-2
    np.testing.assert_allclose(_rates(est), [base] + [base * f for f in noise])
    assert not est._averages_weights()
    # the 'auto' budget of a 32-row batch: about 1,000 steps, at least 10 epochs (not 150)
    est.set_params(max_epochs="auto")
    assert est._resolve_epochs(n_train, early_stopping=True) < 100

"""MTSGDMultiTaskClassifier as a scikit-learn / skorch estimator, and its fitting."""

import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklmoo import MTSGDMultiTaskClassifier
from sklmoo.datasets import make_multi_digits
from sklmoo.metrics import ece_scorer
from sklmoo.nn import flatten_particles
from sklmoo.samplers import SVGD

# Both follow from skorch's NeuralNet design.
EXPECTED_FAILED_CHECKS = {
    # the estimators under test get module__hidden_units=(8,), which skorch stores as an
    # attribute (that is how it routes module__* keywords); default-constructed estimators
    # pass (tests/test_sklearn_conventions.py)
    "check_no_attributes_set_in_init": "module__* keywords are stored as attributes (skorch)",
    # mini-batch training: repeated rows change the batches and the number of steps, so
    # the fits agree in distribution, not to the last digit (tests/test_weights.py tests
    # that integer weights act like repeated rows, statistically)
    "check_sample_weight_equivalence_on_dense_data": "stochastic mini-batch training: "
        "weights equal repetitions in distribution only (tests/test_weights.py)",
}


def _small(**kw):
    params = dict(n_particles=2, max_epochs=2, batch_size=32, random_state=0,
                  module__hidden_units=(8,))
    params.update(kw)
    return MTSGDMultiTaskClassifier(**params)


@parametrize_with_checks([_small(max_epochs=8, lr=1e-2)],
                         expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def digits():
    X, y = make_multi_digits(1200, random_state=0, return_X_y=True)
    Xt, yt = make_multi_digits(400, subset="test", random_state=1, return_X_y=True)
    return X, y, Xt, yt


@pytest.fixture(scope="module")
def fitted(digits):
    X, y, _, _ = digits
    # 8 epochs on every row (the validation split and calibration: tests/test_defaults.py)
    return MTSGDMultiTaskClassifier(n_particles=3, max_epochs=8, input_shape=(1, 12, 12),
                                    train_split=None, random_state=0).fit(X, y)


def test_beats_chance_by_a_wide_margin(digits, fitted):
    _, _, Xt, yt = digits
    acc = fitted.score(Xt, yt)  # chance is 0.1 per task
    assert acc > 0.6, acc
    probas = fitted.predict_proba(Xt)
    assert [p.shape for p in probas] == [(400, 10), (400, 10)]
    for p in probas:
        np.testing.assert_allclose(p.sum(1), 1, rtol=1e-5)
    members = fitted.predict_proba_members(Xt)
    assert members[0].shape == (3, 400, 10)
    np.testing.assert_allclose(members[1].mean(0), probas[1], rtol=1e-5, atol=1e-6)
    unc = fitted.predict_uncertainty(Xt)
    np.testing.assert_allclose(unc["total"], unc["aleatoric"] + unc["epistemic"], atol=1e-9)
    assert unc["total"].shape == (400, 2) and (unc["epistemic"] >= 0).all()


def test_qp_weights_on_simplex_every_step(fitted):
    weights = np.array([b["task_weights"] for epoch in fitted.history
                        for b in epoch["batches"]])
    assert weights.shape == (8 * 19, 2)  # 1200 samples, batches of 64
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(1), 1, atol=1e-6)
    # the step's diagnostics stay on the device during an epoch (StepInfo holds tensors) and
    # reach every training batch of history as plain floats at its end; the epoch's summary
    # is their mean
    for epoch in fitted.history:
        batches = [b for b in epoch["batches"] if "train_loss" in b]
        ratios = [b["trunk_repulsion"] for b in batches]
        assert all(type(r) is float and r >= 0 for r in ratios)
        assert all(type(w) is float for b in batches for w in b["task_weights"])
        assert epoch["trunk_repulsion"] == pytest.approx(np.mean(ratios))


def test_same_seed_same_predictions_and_pickle_round_trip(digits):
    X, y, Xt, _ = digits
    a = _small(max_epochs=1).fit(X[:300], y[:300])
    b = _small(max_epochs=1).fit(X[:300], y[:300])
    for pa, pb in zip(a.predict_proba(Xt), b.predict_proba(Xt)):
        np.testing.assert_array_equal(pa, pb)
    c = pickle.loads(pickle.dumps(a))
    for pa, pc in zip(a.predict_proba(Xt), c.predict_proba(Xt)):
        np.testing.assert_array_equal(pa, pc)
    d = _small(max_epochs=1, random_state=1).fit(X[:300], y[:300])
    assert not np.allclose(a.predict_proba(Xt)[0], d.predict_proba(Xt)[0])


def test_clone_params_pipeline_and_model_selection(digits):
    X, y, Xt, yt = digits
    est = _small(method="moo_svgd", module__hidden_units=(16,))
    params = est.get_params()
    assert params["method"] == "moo_svgd" and params["module__hidden_units"] == (16,)
    cl = clone(est)
    assert cl.get_params()["module__hidden_units"] == (16,) and not hasattr(cl, "classes_")
    pipe = make_pipeline(StandardScaler(), est).fit(X[:300], y[:300])
    assert pipe.predict(Xt[:5]).shape == (5, 2)
    assert 0 <= pipe.score(Xt, yt) <= 1
    scores = cross_val_score(_small(), X[:300], y[:300], scoring=ece_scorer, cv=2)
    assert np.isfinite(scores).all() and (scores <= 0).all()
    grid = GridSearchCV(_small(max_epochs=1), {"n_particles": [1, 2],
                                               "method": ["mtsgd", "linear"]},
                        cv=2, scoring=ece_scorer).fit(X[:300], y[:300])
    assert np.isfinite(grid.cv_results_["mean_test_score"]).all()
    est2 = _small().fit(X[:300], y[:300])
    est2.set_params(module__hidden_units=(4,))  # skorch re-initialises the module
    assert est2.module_.heads[0].weight.shape[-1] == 4


def test_string_labels_dataframe_missing_labels():
    X, y = make_multi_digits(300, random_state=2, return_X_y=True)
    frame = pd.DataFrame({"left": np.array(list("abcdefghij"))[y[:, 0]],
                          "right_big": np.where(y[:, 1] > 4, "big", "small").astype(object)})
    frame.loc[::7, "right_big"] = None  # unlabelled
    clf = _small().fit(X, frame)
    assert clf.task_names_ == ["left", "right_big"]
    assert clf.classes_[1].tolist() == ["big", "small"]
    pred = clf.predict(X[:10])
    assert pred.shape == (10, 2) and set(pred[:, 1]) <= {"big", "small"}
    assert [p.shape[1] for p in clf.predict_proba(X[:3])] == [10, 2]
    assert 0 <= clf.score(X, frame) <= 1
    # missing_label marks a sentinel value as unlabelled
    y2 = y.copy()
    y2[::5, 0] = -1
    clf2 = _small(missing_label=-1).fit(X, y2)
    assert clf2.classes_[0].tolist() == list(range(10))


@pytest.mark.parametrize("kernel", ["parameter", "function"])
def test_single_particle_mtsgd_equals_mgda(digits, kernel):
    X, y, Xt, _ = digits
    mt = _small(n_particles=1, method="mtsgd", max_epochs=2, kernel=kernel).fit(X[:400], y[:400])
    mg = _small(n_particles=1, method="mgda", max_epochs=2).fit(X[:400], y[:400])
    for a, b in zip(mt.predict_proba(Xt), mg.predict_proba(Xt)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("smooth_drive", [True, False])
def test_single_task_trunk_update_is_svgd(digits, smooth_drive):
    """T = 1: the trunk step is SVGD's (smooth_drive=True, the kernel-averaged scores) or each
    particle's own gradient plus SVGD's repulsion (smooth_drive=False)."""
    X, y, _, _ = digits
    X, y1 = X[:64], y[:64, :1]
    est = _small(n_particles=4, optimizer=torch.optim.SGD, lr=0.5, batch_size=64,
                 max_epochs=1, iterator_train__shuffle=False, head_repulsion=0.0, repulsion=0.3,
                 kernel="parameter", train_split=None, prior_precision=0.0,
                 smooth_drive=smooth_drive)
    est.fit(X, y1)  # one full-batch step from the initial particles
    # rebuild the initial particles exactly as fit does, then take the SVGD step by hand
    ref = clone(est)
    ref._prepare(X, y1)
    ref.initialize()
    net = ref.module_
    params = net.trunk.member_parameters()
    logits = net(torch.as_tensor(X))[0]                          # (B, M, C)
    target = torch.as_tensor(ref.classes_[0].searchsorted(y1[:, 0]))
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2),
                                             target[:, None].expand(-1, 4), reduction="none")
    grads = torch.autograd.grad(loss.mean(0).sum(), params)
    theta = flatten_particles(params).detach()
    scores = -flatten_particles(grads)
    phi, _ = SVGD(repulsion=0.3).direction(theta, scores[None])
    if not smooth_drive:      # own score + the same repulsion
        no_drive, _ = SVGD(repulsion=0.3).direction(theta, torch.zeros_like(scores)[None])
        phi = scores + no_drive
    after = flatten_particles(est.module_.trunk.member_parameters()).detach()
    torch.testing.assert_close(after, theta + 0.5 * phi, rtol=1e-4, atol=1e-6)


@pytest.mark.filterwarnings("ignore:the trunk repulsion outweighs:UserWarning")   # asked for here
def test_single_task_function_space_update_is_function_space_svgd(digits):
    """T = 1: MT-SGD with the function-space kernel is SVGD with that kernel (QP weight 1)."""
    from sklmoo.nn import function_space_terms
    from sklmoo.samplers import PrecomputedKernel

    X, y, _, _ = digits
    X, y1 = X[:64], y[:64, 0]                                     # a 1-D target: one task
    est = _small(n_particles=4, optimizer=torch.optim.SGD, lr=0.5, batch_size=64,
                 max_epochs=1, iterator_train__shuffle=False, head_repulsion=0.0, repulsion=0.3,
                 kernel="function", smooth_drive=True, train_split=None, prior_precision=0.0)
    est.fit(X, y1)
    ref = clone(est)
    ref._prepare(X, y1)
    ref.initialize()
    net = ref.module_
    params = net.trunk.member_parameters()
    features, logits = net.forward_with_features(torch.as_tensor(X))
    target = torch.as_tensor(np.searchsorted(ref.classes_, y1))
    loss = torch.nn.functional.cross_entropy(logits[0].transpose(1, 2),
                                             target[:, None].expand(-1, 4), reduction="none")
    grads = torch.autograd.grad(loss.mean(0).sum(), params, retain_graph=True)
    terms = function_space_terms(features, params, smooth_drive=True)
    theta = flatten_particles(params).detach()
    phi, _ = SVGD(PrecomputedKernel().use(terms), repulsion=0.3).direction(
        theta, -flatten_particles(grads)[None])
    after = flatten_particles(est.module_.trunk.member_parameters()).detach()
    torch.testing.assert_close(after, theta + 0.5 * phi, rtol=1e-4, atol=1e-6)
    assert est.history[-1, "trunk_repulsion"] > 0


def test_one_dimensional_target_is_a_drop_in_classifier():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    labels = np.array(list("abcdefghij"))[y]
    pipe = make_pipeline(StandardScaler(), _small(max_epochs=3, module__hidden_units=(16,)))
    scores = cross_val_score(pipe, X[:300], labels[:300], scoring=ece_scorer, cv=3)
    assert np.isfinite(scores).all() and (scores <= 0).all()
    clf = pipe.fit(X[:300], labels[:300])[-1]
    assert isinstance(clf.classes_, np.ndarray) and clf.classes_.tolist() == list("abcdefghij")
    assert pipe.predict(X[:5]).shape == (5,) and pipe.predict_proba(X[:5]).shape == (5, 10)
    assert clf.predict_proba_members(pipe[0].transform(X[:5])).shape == (2, 5, 10)
    assert clf.predict_uncertainty(pipe[0].transform(X[:5]))["epistemic"].shape == (5,)
    assert 0 <= pipe.score(X[300:400], labels[300:400]) <= 1


def test_new_parameters_round_trip_and_warm_up(digits):
    X, y, _, _ = digits
    est = _small(kernel="parameter", smooth_drive=True, warmup_epochs=1, max_epochs=2)
    cl = clone(est)
    assert {k: cl.get_params()[k] for k in ("kernel", "smooth_drive", "warmup_epochs")} == \
        {"kernel": "parameter", "smooth_drive": True, "warmup_epochs": 1}
    cl.set_params(kernel="function", warmup_epochs=0)
    assert cl.kernel == "function" and cl.warmup_epochs == 0
    est.fit(X[:200], y[:200])
    first = np.array([b["task_weights"] for b in est.history[0, "batches"]
                      if "task_weights" in b])                # (validation batches have none)
    assert first.shape[1:] == (2, 2)              # warm-up: one fixed weight row per particle
    np.testing.assert_allclose(first[0], first[-1])
    assert not np.allclose(first[0][0], first[0][1])       # spread over the simplex
    later = np.array([b["task_weights"] for b in est.history[1, "batches"]
                      if "task_weights" in b])
    assert later.shape[1:] == (2,)                # then one QP solution per step
    for bad, match in ((dict(kernel="rbf"), "kernel"), (dict(warmup_epochs=-1), "warmup"),
                       (dict(smooth_drive="yes"), "smooth_drive")):
        with pytest.raises(ValueError, match=match):
            _small(**bad).fit(X[:100], y[:100])


@pytest.mark.parametrize("X_bad,y_bad,match", [
    ("short_y", None, "samples"),
    ("nan_X", None, "NaN"),
    ("inf_X", None, "infinity"),
    (None, "one_class", "at least two classes"),
])
def test_bad_input_raises(X_bad, y_bad, match):
    X, y = make_multi_digits(60, random_state=0, return_X_y=True)
    if X_bad == "nan_X":
        X = X.copy()
        X[0, 0] = np.nan
    if X_bad == "inf_X":
        X = X.copy()
        X[0, 0] = np.inf
    if X_bad == "short_y":
        y = y[:-1]
    if y_bad == "one_dim":
        y = y[:, 0]
    if y_bad == "one_class":
        y = y.copy()
        y[:, 1] = 3
    with pytest.raises(ValueError, match=match):
        _small().fit(X, y)


def test_unseen_labels_at_score_and_unfitted_use(digits):
    X, y, _, _ = digits
    clf = _small(max_epochs=1).fit(X[:200], y[:200] % 5)  # labels 0-4 only
    # labels 5-9 were never seen: scored as wrong predictions, never an exception
    pred = clf.predict(X[:50])
    expected = np.mean([np.mean(pred[:, t] == y[:50, t]) for t in range(2)])
    assert clf.score(X[:50], y[:50]) == pytest.approx(expected)
    assert clf.score(X[:50], y[:50]) < clf.score(X[:50], y[:50] % 5)
    with pytest.raises(ValueError, match="3 task columns but the estimator was fitted on 2"):
        clf.score(X[:50], np.column_stack([y[:50] % 5, y[:50, :1] % 5]))
    with pytest.raises(NotFittedError):
        _small().predict(X[:5])


def test_non_finite_loss_stops_with_epoch_and_is_not_fitted(digits):
    X, y, _, _ = digits
    clf = _small(lr=1e30, optimizer=torch.optim.SGD, max_epochs=5)
    with pytest.raises(FloatingPointError, match="epoch"):
        clf.fit(X[:200] * 1e6, y[:200])
    with pytest.raises(NotFittedError):
        clf.predict(X[:5])


def test_save_params_load_params_round_trip(digits, tmp_path):
    X, y, Xt, _ = digits
    a = _small(max_epochs=1).fit(X[:300], y[:300])
    a.save_params(f_params=tmp_path / "params.pt")
    # skorch's pattern: a net sized on the same data, then the saved particles loaded into it
    b = clone(a).set_params(max_epochs=1, random_state=5).fit(X[:300], y[:300])
    b.load_params(f_params=tmp_path / "params.pt")
    for pa, pb in zip(a.predict_proba(Xt), b.predict_proba(Xt)):
        np.testing.assert_array_equal(pa, pb)


@pytest.mark.cuda
def test_fits_on_cuda(digits):
    X, y, Xt, _ = digits
    clf = _small(device="cuda").fit(X[:200], y[:200])
    assert next(clf.module_.parameters()).is_cuda
    assert clf.predict(Xt[:5]).shape == (5, 2)


class _TinyTrunk(torch.nn.Module):
    """A user trunk: any nn.Module class, configured with module__* parameters."""

    def __init__(self, n_in=144, width=6):
        super().__init__()
        self.layer = torch.nn.Linear(n_in, width)

    def forward(self, x):
        return torch.tanh(self.layer(x.reshape(len(x), -1)))


def test_user_module_class_with_module_params(digits):
    X, y, Xt, _ = digits
    clf = MTSGDMultiTaskClassifier(_TinyTrunk, module__width=5, n_particles=2, max_epochs=1,
                                   random_state=0).fit(X[:200], y[:200])
    assert clf.module_.n_features_out == 5
    assert clf.module_.trunk.member_parameters()[0].shape == (2, 5, 144)
    assert clf.predict(Xt[:3]).shape == (3, 2)


def test_skorch_validation_split_callbacks_and_history(digits, capsys):
    from skorch.callbacks import EarlyStopping
    from skorch.dataset import ValidSplit

    X, y, _, _ = digits
    clf = _small(max_epochs=3, train_split=ValidSplit(0.2), verbose=1,
                 callbacks=[EarlyStopping(patience=5)]).fit(X[:300], y[:300])
    valid = clf.history[:, "valid_loss"]
    assert len(valid) == 3 and np.isfinite(valid).all()
    assert "valid_loss" in capsys.readouterr().out  # skorch's epoch log


# -- task normalisation (issue 19) ---------------------------------------------------------------

def _two_task_step(task_scale, task_normalization, method="mtsgd"):
    from sklmoo.nn import (MLPTrunk, MultiTaskParticleNet, make_update_rules, member_factory,
                           multitask_particle_step)
    from sklmoo.samplers import RBFKernel
    torch.manual_seed(0)
    net = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=4, hidden_units=(8,)),
                               n_particles=3, n_classes=[5, 2])
    g = torch.Generator().manual_seed(1)
    X, y = torch.randn(32, 4, generator=g), torch.randint(0, 2, (32, 2), generator=g)
    losses = [torch.nn.functional.cross_entropy(out.transpose(1, 2),
                                                y[:, t, None].expand(-1, 3),
                                                reduction="none").mean(0) * scale
              for t, (out, scale) in enumerate(zip(net(X), task_scale))]   # (M,) per task
    rules = make_update_rules(method, RBFKernel(), 1e-3, 1e-2,
                              task_normalization=task_normalization)
    info = multitask_particle_step(net, losses, *rules)
    return info.weights, [p.grad.clone() for p in net.trunk.member_parameters()]


@pytest.mark.parametrize("method", ["mtsgd", "mgda", "moo_svgd"])
def test_l2_normalised_network_step_ignores_a_task_loss_scale(method):
    w, grads = _two_task_step((1.0, 1.0), "l2", method)
    w100, grads100 = _two_task_step((100.0, 1.0), "l2", method)
    torch.testing.assert_close(w100, w, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads100, grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    w_plain, _ = _two_task_step((100.0, 1.0), "none", method)
    assert float(w_plain[..., 0].mean()) < 0.05         # without it task 0 is all but dropped
    # 'loss' divides each particle's score by its loss: a constant factor cancels too ('loss+'
    # divides by loss x norm, so a factor on the loss does not cancel there)
    torch.testing.assert_close(_two_task_step((100.0, 1.0), "loss", method)[0],
                               _two_task_step((1.0, 1.0), "loss", method)[0],
                               rtol=1e-5, atol=1e-6)


def test_task_normalization_parameter_is_validated_and_used():
    X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
    y = np.column_stack([(X[:, 0] > 0), (X[:, 1] > 0.5)]).astype(int)
    est = _small(task_normalization="l2").fit(X, y)
    assert type(est.rules_[0]).__name__ == "MTSGD"
    assert est.rules_[0].task_normalization == "l2"
    assert est.rules_[1].task_normalization == "none"          # heads are never rescaled
    weights = np.array(est.history[-1, "task_weights_mean"])
    assert weights.shape == (2,) and abs(weights.sum() - 1) < 1e-6
    with pytest.raises(ValueError, match="task_normalization must be one of"):
        _small(task_normalization="max").fit(X, y)
    from sklmoo import MTSGDRegressor
    with pytest.raises(ValueError, match="task_normalization must be one of"):
        MTSGDRegressor(task_normalization="loss", max_epochs=1).fit(X, X[:, :2])


def test_no_repulsion_warning_once_a_fitted_task_stops_driving_but_one_for_a_real_excess():
    import warnings as _warnings
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3)).astype(np.float32)
    y = np.column_stack([X[:, 0] > 0, X[:, 1] + X[:, 2] > 0]).astype(int)   # separable tasks
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")        # a warning here fails the test
        # every row, no prior, no early stopping: the heads fit the separable tasks exactly
        est = _small(max_epochs=150, lr=1e-1, train_split=None, prior_precision=0.0).fit(3 * X, y)
    # the drive of the fitted heads has all but vanished: repulsion / drive went above 1, which
    # is no reason to warn (nothing a user could change; the drive's scale is its early size)
    ratios = [r for r in est.history[:, "head_repulsion"] if r is not None]
    drives = est.history[:, "head_drive_norm"]
    assert max(ratios) > 1.0 and drives[-1] < 0.1 * max(drives)
    with pytest.warns(UserWarning, match="head repulsion outweighs the drive"):
        _small(head_repulsion=1e3).fit(X, y)


def test_defaults_weigh_tasks_by_unit_gradients_and_fit_without_warnings():
    import warnings as _warnings
    from sklearn.datasets import load_wine
    est = MTSGDMultiTaskClassifier()
    assert est.task_normalization == "l2" and est.normalize_drive is False
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    # a 3-class task beside a binary one with a tenth of its labels
    rng = np.random.default_rng(0)
    sparse = np.where(rng.random(len(X)) < 0.1, (X[:, 0] > 0).astype(float), np.nan)
    Y = np.column_stack([y.astype(float), sparse])
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=40, random_state=0).fit(X, Y)
    assert clf.rules_[0].task_normalization == "l2" and clf.rules_[0].normalize_drive is False
    w = np.array(clf.history[:, "task_weights_mean"])
    assert w.min() > 0.05                     # neither task is starved
    with pytest.raises(ValueError, match="normalize_drive must be True or False"):
        MTSGDMultiTaskClassifier(normalize_drive="no", max_epochs=1).fit(X, Y)


def test_linear_stays_the_plain_independent_ensemble_under_the_default_normalisation():
    from sklmoo.nn import make_update_rules
    from sklmoo.samplers import RBFKernel
    trunk, _ = make_update_rules("linear", RBFKernel(), 1e-3, 1e-2, task_normalization="l2",
                                 normalize_drive=False)
    assert trunk.task_normalization == "none"          # fixed weights: nothing to rescale
    trunk, _ = make_update_rules("linear", RBFKernel(), 1e-3, 1e-2, task_normalization="l2")
    assert trunk.task_normalization == "l2"            # the authors' rescaled drive
    X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
    y = np.column_stack([(X[:, 0] > 0), (X[:, 1] > 0.5)]).astype(int)
    a = _small(method="linear").fit(X, y)
    b = _small(method="linear", task_normalization="none").fit(X, y)
    for pa, pb in zip(a.predict_proba(X), b.predict_proba(X)):
        np.testing.assert_array_equal(pa, pb)

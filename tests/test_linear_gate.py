"""The MT-SGD classifier's linear gate (``linear_gate``): a Bayesian logistic regression
stands in for a task's networks where it is not worse on the validation rows."""

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from sklmoo import MTSGDMultiTaskClassifier
from sklmoo.nn import LinearLogits
from sklmoo.nn._logistic import fit_evidence_logistic


def _linear_task(n, seed=0, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    p = 1 / (1 + np.exp(-(X[:, 0] - 0.5 * X[:, 1])))
    return X, (rng.random(n) < p).astype(int)


def _xor_task(X, seed=1):
    rng = np.random.default_rng(seed)
    clean = (X[:, 2] * X[:, 3] > 0).astype(int)
    return np.where(rng.random(len(X)) < 0.05, 1 - clean, clean)


def _noise_labels(n, seed=0):
    """Labels independent of X, 30 % positive: the networks can only over-fit them, the
    evidence-tuned logistic regression predicts about the base rate."""
    return (np.random.default_rng(seed).random(n) < 0.3).astype(int)


@pytest.fixture(scope="module")
def linear_fit():
    X, _ = _linear_task(300)
    y = _noise_labels(300)
    return X, y, MTSGDMultiTaskClassifier(n_particles=3, random_state=0).fit(X, y)


def test_a_task_the_networks_cannot_learn_gets_the_logistic_regression(linear_fit):
    """Where the networks only over-fit, the gate closes and the predictions are the
    refitted logistic regression's (within what its posterior draws change), uncalibrated."""
    X, y, clf = linear_fit
    assert clf.networks_used_.tolist() == [False]
    assert clf.temperature_.tolist() == [1.0]
    fit = fit_evidence_logistic(X, y, 2)
    ref = LogisticRegression(C=1 / fit.lambda_, tol=1e-10, max_iter=1000).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(X), atol=0.01)
    # the particles are the posterior's draws: they differ, their average is the prediction
    members = clf.predict_proba_members(X)
    assert members.std(axis=0).max() > 1e-3
    np.testing.assert_allclose(members.mean(axis=0), clf.predict_proba(X), atol=1e-6)
    assert (clf.predict_uncertainty(X)["epistemic"] > 0).all()


def test_an_open_gate_changes_nothing():
    """Where the networks win on the validation rows, the predictions are exactly those of
    ``linear_gate=False``."""
    X, _ = _linear_task(600, seed=2)
    y = _xor_task(X)
    on = MTSGDMultiTaskClassifier(n_particles=3, random_state=0).fit(X, y)
    off = MTSGDMultiTaskClassifier(n_particles=3, random_state=0, linear_gate=False).fit(X, y)
    assert on.networks_used_.tolist() == [True]
    assert off.networks_used_.tolist() == [True]
    assert isinstance(on.module_.output_map, LinearLogits)
    assert off.module_.output_map is None
    np.testing.assert_array_equal(on.predict_proba(X), off.predict_proba(X))


def test_gates_are_per_task_and_survive_save_load_and_pickle(tmp_path):
    X, _ = _linear_task(600, seed=3)
    y = pd.DataFrame({"noise": _noise_labels(600, seed=3), "xor": _xor_task(X, seed=4)})
    clf = MTSGDMultiTaskClassifier(n_particles=3, random_state=0).fit(X, y)
    assert clf.networks_used_.tolist() == [False, True]
    proba = clf.predict_proba(X)
    clf.save_params(f_params=tmp_path / "p.pt")
    other = MTSGDMultiTaskClassifier(n_particles=3, random_state=1, linear_gate=True)
    other.fit(X, y)
    other.load_params(f_params=tmp_path / "p.pt")
    assert other.networks_used_.tolist() == [False, True]
    for a, b in zip(other.predict_proba(X), proba):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    import pickle
    again = pickle.loads(pickle.dumps(clf))
    for a, b in zip(again.predict_proba(X), proba):
        np.testing.assert_array_equal(a, b)


def test_a_file_from_before_the_gate_loads_with_the_networks(tmp_path, linear_fit):
    """Parameters saved by an earlier version (no linear model in the module) load into a
    new estimator with every gate open: the networks it was saved with predict."""
    X, y, _ = linear_fit
    clf = MTSGDMultiTaskClassifier(n_particles=3, random_state=0, linear_gate=False).fit(X, y)
    state = {k: v for k, v in clf.module_.state_dict().items()}
    torch.save(state, tmp_path / "old.pt")
    new = MTSGDMultiTaskClassifier(n_particles=3, random_state=0).fit(X, y)
    assert new.networks_used_.tolist() == [False]
    new.load_params(f_params=tmp_path / "old.pt")
    assert new.networks_used_.tolist() == [True]
    np.testing.assert_allclose(new.predict_proba(X), clf.predict_proba(X), rtol=1e-6)


def test_a_continued_fit_trains_the_networks_and_judges_them_again(linear_fit):
    X, y, _ = linear_fit
    clf = MTSGDMultiTaskClassifier(n_particles=3, random_state=0, warm_start=True).fit(X, y)
    assert clf.networks_used_.tolist() == [False]
    before = [p.detach().clone() for p in clf.module_.parameters()]
    clf.set_params(max_epochs=2).fit(X, y)
    # the networks moved (the closed gate did not cut their gradients)
    assert any(not torch.equal(a, b) for a, b in zip(before, clf.module_.parameters()))
    assert clf.networks_used_.shape == (1,)


def test_no_validation_split_keeps_the_networks():
    X, _ = _linear_task(300)
    y = _noise_labels(300)
    clf = MTSGDMultiTaskClassifier(n_particles=3, random_state=0, train_split=None,
                                   max_epochs=5).fit(X, y)
    assert clf.networks_used_.tolist() == [True]


def test_the_gate_is_reproducible_and_weighted():
    X, _ = _linear_task(300)
    y = _noise_labels(300)
    a = MTSGDMultiTaskClassifier(n_particles=3, random_state=5).fit(X, y)
    b = MTSGDMultiTaskClassifier(n_particles=3, random_state=5).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    # integer sample weights act as repeated rows in the linear model as in the networks' loss
    w = np.random.default_rng(0).integers(1, 3, len(X))
    c = MTSGDMultiTaskClassifier(n_particles=3, random_state=5).fit(X, y, sample_weight=w)
    assert c.networks_used_.shape == (1,)
    assert np.isfinite(c.predict_proba(X)).all()


def test_l2e_gets_the_same_gate(tmp_path):
    """L2E's chains are judged the same way: on labels the networks can only over-fit the
    logistic regression's draws stand in for the chains (predict_proba their average,
    uncalibrated), diagnose still reads the chains, and the gate survives save / load."""
    from sklmoo import L2ESamplerClassifier

    X, _ = _linear_task(400, seed=6)
    y = _noise_labels(400, seed=6)
    kw = dict(n_chains=2, n_draws=4, random_state=0)
    clf = L2ESamplerClassifier(**kw).fit(X, y)
    assert clf.networks_used_ is False and clf.temperature_ == 1.0
    samples = clf.predict_proba_samples(X)
    assert samples.shape == (10, 400, 2)                  # 5 draws per chain
    np.testing.assert_allclose(samples.mean(0), clf.predict_proba(X), atol=1e-12)
    fit = fit_evidence_logistic(X, y, 2)
    ref = LogisticRegression(C=1 / fit.lambda_, tol=1e-10, max_iter=1000).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(X), atol=0.01)
    # the chains' own diagnostics are not the linear draws'
    assert clf.diagnose(X)["diversity"] != pytest.approx(0.0)
    off = L2ESamplerClassifier(**kw, linear_gate=False).fit(X, y)
    assert off.networks_used_ is True
    np.testing.assert_allclose(off.diagnose(X)["rhat"], clf.diagnose(X)["rhat"])
    clf.save_params(f_params=tmp_path / "p.pt")
    other = L2ESamplerClassifier(**kw).fit(X, _xor_task(X))
    other.load_params(f_params=tmp_path / "p.pt")
    assert other.networks_used_ is False
    np.testing.assert_allclose(other.predict_proba(X), clf.predict_proba(X), rtol=1e-7)


def test_l2e_keeps_its_chains_where_they_win():
    from sklmoo import L2ESamplerClassifier

    X, _ = _linear_task(600, seed=7)
    y = _xor_task(X, seed=7)
    clf = L2ESamplerClassifier(n_chains=2, n_draws=4, random_state=0).fit(X, y)
    off = L2ESamplerClassifier(n_chains=2, n_draws=4, random_state=0,
                               linear_gate=False).fit(X, y)
    assert clf.networks_used_ is True
    np.testing.assert_array_equal(clf.predict_proba(X), off.predict_proba(X))


def test_a_class_without_weighted_training_rows_keeps_the_networks():
    """A class that ``class_weight`` zeroes (or a ``partial_fit`` chunk lacks) leaves the
    logistic regression's intercept for it to the nearly flat prior: half its posterior draws
    would give that class a probability near 1. Such a task keeps its networks, even weak
    ones that the gate would otherwise replace."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3)).astype(np.float32)
    y = np.argmax(X @ rng.normal(size=(3, 3)) * 2 + rng.gumbel(size=(600, 3)), axis=1)
    weak = dict(n_particles=3, max_epochs=1, lr=1e-5, random_state=0)
    every_class = MTSGDMultiTaskClassifier(**weak).fit(X, y)
    assert every_class.networks_used_.tolist() == [False]
    no_class_2 = MTSGDMultiTaskClassifier(class_weight={2: 0.0}, **weak).fit(X, y)
    assert no_class_2.networks_used_.tolist() == [True]

"""What an estimator stores is a copy, and a saved / copied estimator continues exactly.

The stored draws of the SG-MCMC chains must not alias the live chains (``.detach()`` / ``.to``
return the same storage when nothing changes), and a pickled, deep-copied or joblib-saved
estimator must continue its chains / particles as the original would have.
"""

import copy
import io
import pickle
import warnings

import joblib
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.nn import ChainEnsemble, SampleStore

SAMPLERS = ("l2e", "sghmc", "csgmcmc")


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y


def _l2e(sampler, **kw):
    params = dict(sampler=sampler, n_chains=2, max_epochs=4, n_draws=3, burn_in=1,
                  batch_size=32, train_split=None, random_state=0, module__hidden_units=(8,))
    if sampler == "csgmcmc":
        params.update(burn_in=0, n_cycles=1)
    params.update(kw)
    return L2ESamplerClassifier(**params)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


def test_sample_store_keeps_a_copy_of_the_live_tensor():
    live = torch.ones(2, 3)
    store = SampleStore(["w"])
    store.append({"w": live})
    live.add_(5.0)                           # the chain moves on in place
    store.append({"w": live})
    live.add_(5.0)
    draws = store.draws()["w"]
    assert torch.equal(draws[0], torch.ones(2, 3))
    assert torch.equal(draws[1], torch.full((2, 3), 6.0))


def test_loaded_draws_must_fit_the_chains_and_be_backed_by_data():
    # torch's own load_state_dict, without the estimator around it: the store refuses before
    # it allocates (a stride-0 view of one draw claiming a million would cost 48 MB here)
    net = ChainEnsemble(lambda: torch.nn.Linear(3, 2), n_chains=2)
    net.collect()
    net.collect()
    state = net.state_dict()
    draws = state["samples.draw__weight"]                                  # (2, 2, 2, 3)
    for forged, match in [
        (draws[:1].expand(10 ** 6, 2, 2, 3), r"claims shape \(1000000, 2, 2, 3\) but holds "
                                             r"data for only 24 elements"),
        (torch.cat([draws] * 2, dim=1), r"has shape \(2, 4, 2, 3\); the draws of these chains "
                                        r"have shape \(n_draws, \*\(2, 2, 3\)\)"),
        (draws[:1], "hold different numbers of draws"),
    ]:
        with pytest.raises(ValueError, match=match):
            net.load_state_dict(dict(state, **{"samples.draw__weight": forged}))
    assert len(net.samples) == 2
    net.load_state_dict(state)                         # genuine draws load


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_consecutive_draws_of_every_chain_differ(iris, sampler):
    X, y = iris
    est = _fit(_l2e(sampler), X, y)
    for name, draws in est.module_.samples.draws().items():
        if not draws.is_floating_point() or "weight" not in name:
            continue
        step = (draws[1:] - draws[:-1]).reshape(draws.shape[0] - 1, draws.shape[1], -1)
        assert (step.abs().amax(dim=2) > 0).all(), name
    # mutating the live chains after the fit changes nothing stored
    before = {k: v.clone() for k, v in est.module_.samples.draws().items()}
    with torch.no_grad():
        for p in est.module_.chains.parameters():
            p.add_(1.0)
    for k, v in est.module_.samples.draws().items():
        assert torch.equal(v, before[k]), k


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_draws=st.integers(2, 4), n_chains=st.integers(1, 3), sampler=st.sampled_from(SAMPLERS))
def test_stored_draws_are_distinct_copies(iris, n_draws, n_chains, sampler):
    X, y = iris
    est = _fit(_l2e(sampler, n_draws=n_draws, n_chains=n_chains, max_epochs=n_draws + 1),
               X[::3], y[::3])
    draws = est.module_.samples.draws()
    weight = next(v for k, v in draws.items() if "weight" in k)
    assert weight.shape[:2] == (est.n_draws_, n_chains)
    flat = weight.reshape(weight.shape[0], n_chains, -1)
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            assert ((flat[a] - flat[b]).abs().amax(dim=1) > 0).all()
        # no stored draw shares memory with a live parameter or with another draw
    live = [p.data_ptr() for p in est.module_.chains.parameters()]
    assert not set(live) & {v.data_ptr() for v in draws.values()}


def _pickle(est):
    return pickle.loads(pickle.dumps(est))


def _joblib(est):
    buf = io.BytesIO()
    joblib.dump(est, buf)
    buf.seek(0)
    return joblib.load(buf)


COPIES = {"pickle": _pickle, "deepcopy": copy.deepcopy, "joblib": _joblib}


@pytest.mark.parametrize("sampler, how", list(zip(SAMPLERS, COPIES)))
def test_a_copied_l2e_model_continues_exactly(iris, sampler, how):
    X, y = iris[0][::2], iris[1][::2]
    original = _fit(_l2e(sampler, warm_start=True), X, y)
    saved = COPIES[how](original)
    assert saved.__sklearn_is_fitted__()
    # continue both: fit under warm_start, then partial_fit
    for est in (original, saved):
        _fit(est, X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.partial_fit(X, y)
    assert saved.n_draws_ == original.n_draws_ > 3
    for k, v in original.module_.samples.draws().items():
        assert torch.equal(saved.module_.samples.draws()[k], v), k
    np.testing.assert_array_equal(saved.predict_proba(X), original.predict_proba(X))


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["classifier", "regressor"]), how=st.sampled_from(list(COPIES)),
       method=st.sampled_from(["mtsgd", "linear"]))
def test_a_copied_mtsgd_model_continues_exactly(iris, kind, how, method):
    X, y = iris
    if kind == "classifier":
        est, target = MTSGDMultiTaskClassifier(method=method), y
    else:
        est, target = MTSGDRegressor(method=method), X[:, 0].astype(float) + y
    est.set_params(warm_start=True, max_epochs=2, n_particles=2, random_state=0)
    est.fit(X, target)
    saved = COPIES[how](est)
    est.fit(X, target)
    saved.fit(X, target)
    assert len(saved.history) == len(est.history) == 4
    np.testing.assert_array_equal(saved.predict(X), est.predict(X))


def test_draws_that_overflow_float16_storage_are_refused(iris):
    X, y = iris
    # a buffer beyond float16's range (65504) in a user module
    class Big(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("offset", torch.tensor(1e6))

        def forward(self, x):
            return self.lin(x) + 0 * self.offset

    def make(**kw):
        return L2ESamplerClassifier(Big, sampler="sghmc", n_chains=2, max_epochs=3, n_draws=2,
                                    random_state=0, **kw)

    est = make(sample_dtype="float16")
    with pytest.raises(ValueError, match="does not fit the sample storage type"):
        _fit(est, X, y)
    assert not est.__sklearn_is_fitted__()
    # float32 storage holds it
    assert _fit(make(), X, y).__sklearn_is_fitted__()


def test_loaded_draws_take_the_stores_dtype_and_integers_are_refused():
    from sklmoo.nn import SampleStore

    store = SampleStore(["w"])
    store.append({"w": torch.arange(6.0).reshape(2, 3)})
    draws = store.state_dict()["draw__w"]
    loaded = SampleStore(["w"])
    loaded.load_state_dict({"draw__w": draws.double()})      # e.g. another version's file
    assert loaded.draws()["w"].dtype == torch.float32
    torch.testing.assert_close(loaded.draws()["w"], draws)
    with pytest.raises(ValueError, match="holds torch.int64 values"):
        SampleStore(["w"]).load_state_dict({"draw__w": draws.long()})

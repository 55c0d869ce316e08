"""Fits follow scikit-learn's conventions on threads: threadpoolctl's limits reach torch, and
cross_validate(n_jobs=...) workers do not oversubscribe the cores."""

import os

import numpy as np
import pytest
import torch
from sklearn.model_selection import cross_validate
from skorch.callbacks import Callback
from threadpoolctl import threadpool_limits

from sklmoo import MTSGDMultiTaskClassifier


class ThreadsSeen(Callback):
    """Records torch's intra-op thread count at every epoch of a fit."""

    def initialize(self):
        self.seen_ = []
        return self

    def on_epoch_begin(self, net, **kwargs):
        self.seen_.append(torch.get_num_threads())


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(int)


def _clf():
    return MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0,
                                    callbacks=[("threads", ThreadsSeen())])


# `make test` runs the suite with OMP_NUM_THREADS=1: these tests start from two threads and
# from an environment without the variables, or they would pass whatever the fit did
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_threadpool_limits_reach_the_training_loop(two_threads):
    X, y = _data()
    with threadpool_limits(limits=1):
        clf = _clf().fit(X, y)
    assert dict(clf.callbacks_)["threads"].seen_ == [1, 1]
    assert torch.get_num_threads() == 2                  # the limit ends with the block


def test_cross_validate_workers_share_the_cores(monkeypatch):
    """joblib's workers get cpu_count // n_jobs threads each (scikit-learn's convention), so
    two parallel fits on two cores run one thread each instead of two."""
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    X, y = _data()
    result = cross_validate(_clf(), X, y, cv=2, n_jobs=2, return_estimator=True)
    budget = max(1, (os.cpu_count() or 1) // 2)
    for est in result["estimator"]:
        seen = dict(est.callbacks_)["threads"].seen_
        assert seen and max(seen) <= budget, seen

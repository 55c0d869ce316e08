"""Scale-out through joblib: hyperparameter search on a local dask.distributed cluster gives
exactly the serial results."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier
from sklmoo.datasets import make_multi_digits
from sklmoo.metrics import nll_scorer

distributed = pytest.importorskip("distributed")
joblib = pytest.importorskip("joblib")


def _one_thread():
    torch.set_num_threads(1)
    return torch.get_num_threads()


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster)
    client.run(_one_thread)            # the same intra-op threading as the serial run below
    yield client
    client.close()
    cluster.close()


@pytest.mark.parametrize("make, grid, target", [
    (lambda: L2ESamplerClassifier(sampler="sghmc", n_chains=2, max_epochs=10, n_samples=2,
                                  module__hidden_units=(8,), random_state=0),
     {"step_size": [0.01, 0.03], "sampler": ["sghmc", "csgmcmc"]}, lambda y: y[:, 0]),
    (lambda: MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, module__hidden_units=(8,),
                                      random_state=0),
     {"method": ["mtsgd", "linear"]}, lambda y: y),
])
def test_grid_search_on_dask_equals_serial(client, make, grid, target):
    X, y = make_multi_digits(240, random_state=0, return_X_y=True)
    y = target(y)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            serial = GridSearchCV(make(), grid, cv=KFold(2), scoring=nll_scorer,
                                  error_score="raise").fit(X, y)
            with joblib.parallel_backend("dask"):
                parallel = GridSearchCV(make(), grid, cv=KFold(2), scoring=nll_scorer, n_jobs=2,
                                        error_score="raise").fit(X, y)
    finally:
        torch.set_num_threads(threads)
    for key in ("split0_test_score", "split1_test_score", "mean_test_score"):
        np.testing.assert_array_equal(parallel.cv_results_[key], serial.cv_results_[key])
    assert parallel.best_params_ == serial.best_params_

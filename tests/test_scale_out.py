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
    (lambda: L2ESamplerClassifier(sampler="sghmc", n_chains=2, max_epochs=10, n_draws=2,
                                  batch_size=32, module__hidden_units=(8,), random_state=0),
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


def _trainer(**kw):
    from sklmoo.meta import MetaTrainer

    return MetaTrainer(inner_steps=12, n_pairs=3, batch_size=32, n_samples=3, seed=0, **kw)


def test_meta_training_on_dask_equals_the_local_run(client):
    """The ES pairs of every outer step run on the workers (one pair per job); the
    meta-sampler equals the local run's -- all pairs batched in one call, or in the same
    jobs -- up to float rounding."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = {"local, batched": _trainer(), "local, 1 pair per job": _trainer(pairs_per_job=1),
                "dask": _trainer(client=client), "dask, 2 pairs per job": _trainer(
                    client=client, pairs_per_job=2)}
        for trainer in runs.values():
            for _ in range(3):
                trainer.outer_step()
    finally:
        torch.set_num_threads(threads)
    ref = runs["local, batched"]
    for name, trainer in runs.items():
        torch.testing.assert_close(trainer.phi.detach(), ref.phi.detach(), rtol=1e-5, atol=1e-6,
                                   msg=name)
        np.testing.assert_allclose([c[1] for c in trainer.curve], [c[1] for c in ref.curve],
                                   rtol=1e-5, err_msg=name)
        assert [c[2] for c in trainer.curve] == [c[2] for c in ref.curve]
    # the same jobs in one process or on the workers: identical
    torch.testing.assert_close(runs["dask"].phi, runs["local, 1 pair per job"].phi, rtol=0,
                               atol=0)
    assert not torch.equal(ref.phi.detach(), _trainer(warm=True).phi.detach())  # it moved


def test_meta_training_cli_with_a_scheduler(client, tmp_path):
    from sklmoo.meta._train import main
    from sklmoo.samplers import MetaSampler

    common = ["--outer-steps", "2", "--inner-steps", "12", "--n-pairs", "2", "--seed", "3"]
    main(["--out", str(tmp_path / "local"), *common])
    main(["--out", str(tmp_path / "dask"), "--scheduler", client.scheduler.address, *common])
    local = MetaSampler.load(tmp_path / "local" / "l2e_meta.npz")
    remote = MetaSampler.load(tmp_path / "dask" / "l2e_meta.npz")
    for (name, a), (_, b) in zip(local.named_parameters(), remote.named_parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "bad"), "--scheduler", "tcp://127.0.0.1:1", *common])

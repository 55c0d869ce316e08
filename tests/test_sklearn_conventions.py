"""What scikit-learn users check first: repr, get_params, dtypes, parameter names."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor

CLASSES = {"mtsgd": MTSGDMultiTaskClassifier, "l2e": L2ESamplerClassifier,
           "regressor": MTSGDRegressor}
SMALL = {"mtsgd": dict(n_particles=2, max_epochs=1),
         "l2e": dict(sampler="sghmc", n_chains=2, max_epochs=2, n_draws=1),
         "regressor": dict(n_particles=2, max_epochs=1)}


@pytest.mark.parametrize("name", list(CLASSES))
def test_repr_shows_the_changed_parameters_only(name):
    cls = CLASSES[name]
    assert repr(cls()) == f"{cls.__name__}()"
    est = cls(random_state=3, module__hidden_units=(8,), batch_size=17)
    assert repr(est) == (f"{cls.__name__}(batch_size=17, module__hidden_units=(8,), "
                         "random_state=3)")
    assert "sklmoo.estimators" not in repr(est) and "<class" not in repr(est)


@pytest.mark.parametrize("name", list(CLASSES))
def test_get_params_holds_what_a_user_sets(name):
    params = CLASSES[name]().get_params()
    assert not [k for k in params if k.startswith("_")]
    assert not [k for k in params if k.startswith("callbacks__")]
    assert len(params) <= 35
    est = CLASSES[name](callbacks__print_log__floatfmt=".2f")
    assert est.get_params()["callbacks__print_log__floatfmt"] == ".2f"


def test_clone_and_grid_search_over_module_and_optimizer_parameters():
    X, y = load_iris(return_X_y=True)
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=1, module__hidden_units=(4,),
                                   optimizer__weight_decay=1e-4, random_state=0)
    copy = clone(est)
    assert copy.get_params()["module__hidden_units"] == (4,)
    assert copy.get_params()["optimizer__weight_decay"] == 1e-4
    search = GridSearchCV(est, {"module__hidden_units": [(4,), (6,)],
                                "optimizer__weight_decay": [0.0, 1e-3]}, cv=2).fit(X, y)
    best = search.best_estimator_
    assert best.module_.n_features_out == best.module__hidden_units[-1]
    assert best.optimizer_.param_groups[0]["weight_decay"] == best.optimizer__weight_decay


def test_l2e_draws_per_chain_is_n_draws():
    X, y = load_iris(return_X_y=True)
    params = L2ESamplerClassifier().get_params()
    assert params["n_draws"] == 20 and "n_samples" not in params
    est = L2ESamplerClassifier(sampler="sghmc", n_chains=2, max_epochs=8, n_draws=3,
                               random_state=0).fit(X, y)
    assert est.n_draws_ == 3
    with pytest.raises((TypeError, ValueError), match="n_samples"):
        L2ESamplerClassifier(n_samples=3).fit(X, y)


LABELS = np.array(["setosa", "other"] * 30)
TARGETS = {"list of str": list(LABELS), "str array": LABELS,
           "object array": LABELS.astype(object), "object Series": pd.Series(LABELS),
           "categorical Series": pd.Series(LABELS, dtype="category"), "ints": [3, 7] * 30,
           "bools": np.array([True, False] * 30)}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", ["mtsgd", "l2e"])
def test_classes_and_probabilities_have_scikit_learns_dtypes(name, target):
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = TARGETS[target]
    reference = LogisticRegression().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CLASSES[name](**SMALL[name], random_state=0).fit(X, y)
    assert est.classes_.dtype == reference.classes_.dtype
    np.testing.assert_array_equal(est.classes_, reference.classes_)
    assert est.predict_proba(X[:3]).dtype == np.float64
    assert est.predict(X[:3]).dtype == reference.predict(X[:3]).dtype


@pytest.mark.parametrize("name", list(CLASSES))
def test_init_sets_parameters_only(name):
    """skorch's bookkeeping (history_, initialized_, virtual_params_) is no longer set in
    __init__; it still works once a fit or set_params needs it."""
    from sklearn.utils.estimator_checks import check_no_attributes_set_in_init

    est = CLASSES[name]()
    check_no_attributes_set_in_init(name, est)
    assert est.history_ is None and est.initialized_ is False and est.virtual_params_ == {}
    assert CLASSES[name]().virtual_params_ is not est.virtual_params_


def test_a_module_instance_is_taken_as_skorch_takes_it():
    """``module=MyNet()`` (an instance, as the docstrings allow) failed in __init__: the class
    default of ``initialized_`` hid skorch's construction state from its attribute guard."""
    import pickle

    import torch.nn as nn
    from sklearn.base import clone
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X).astype(np.float32)

    def trunk():
        return nn.Sequential(nn.Linear(13, 16), nn.Tanh())

    for est, target in ((MTSGDMultiTaskClassifier(trunk(), max_epochs=2, random_state=0), y),
                        (MTSGDRegressor(trunk(), max_epochs=2, random_state=0), X[:, 0]),
                        (L2ESamplerClassifier(nn.Sequential(nn.Linear(13, 8), nn.ReLU(),
                                                            nn.Linear(8, 3)),
                                              max_epochs=2, n_chains=2, random_state=0), y)):
        assert "_constructing" not in vars(est)
        est.fit(X, target)
        again = clone(est).fit(X, target)
        np.testing.assert_array_equal(est.predict(X), again.predict(X))
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict(X),
                                      est.predict(X))


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, L2ESamplerClassifier,
                                  MTSGDRegressor])
def test_scoring_callbacks_during_the_fit_are_told_why_they_cannot_predict(make):
    # skorch's EpochScoring scores with predict during the fit; the predictions exist (with
    # their calibration) only once it has ended: the error says so, and the fit is not kept
    from skorch.callbacks import EpochScoring

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=120) if make is MTSGDRegressor else (X[:, 0] > 0)
    scoring = "r2" if make is MTSGDRegressor else "accuracy"
    est = make(max_epochs=2, random_state=0, callbacks=[EpochScoring(scoring, name="s")])
    with pytest.raises(NotFittedError, match="is being fitted.*valid_loss"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()

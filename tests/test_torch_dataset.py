"""Inputs that stay where they are: torch Datasets of (x, y) items (skorch's convention) and
memory maps train and predict like the arrays they hold, read a batch at a time."""

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from torch.utils.data import Dataset, TensorDataset

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.estimators import _rows


def _table(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


class Items(Dataset):
    """A map-style dataset of (x, y) items built one at a time, as a user's would be."""

    def __init__(self, X, y=None):
        self.X, self.y = X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        x = torch.as_tensor(self.X[i])
        return x if self.y is None else (x, self.y[i])


ESTIMATORS = {
    "mtsgd": lambda: MTSGDMultiTaskClassifier(max_epochs=4, random_state=0),
    "l2e": lambda: L2ESamplerClassifier(max_epochs=6, n_draws=3, random_state=0),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fit_on_a_dataset_equals_fit_on_its_arrays(name):
    X, y = _table()
    ref = ESTIMATORS[name]().fit(X, y)
    est = ESTIMATORS[name]().fit(Items(X, y))                 # y read from the items
    np.testing.assert_allclose(est.predict_proba(Items(X)), ref.predict_proba(X),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    assert est.n_features_in_ == 4
    # a dataset without targets plus an explicit y, and the dataset's own y ignored for
    # prediction
    est2 = ESTIMATORS[name]().fit(Items(X), y)
    np.testing.assert_allclose(est2.predict_proba(TensorDataset(torch.from_numpy(X),
                                                                torch.from_numpy(y))),
                               ref.predict_proba(X), rtol=1e-6, atol=1e-7)


def test_regressor_on_a_dataset_equals_its_arrays():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1200, 3)).astype(np.float32)        # linear mean function path
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=1200)
    ref = MTSGDRegressor(max_epochs=3, random_state=0).fit(X, y)
    est = MTSGDRegressor(max_epochs=3, random_state=0).fit(Items(X, y))
    for a, b in zip(est.predict(Items(X), return_std=True), ref.predict(X, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_dataset_is_never_read_whole(monkeypatch):
    X, y = _table(3000)
    largest = []
    read = _rows.DatasetRows.__getitem__

    def counting(self, index):
        out = read(self, index)
        largest.append(len(np.atleast_2d(out)))
        return out

    monkeypatch.setattr(_rows.DatasetRows, "__getitem__", counting)
    clf = MTSGDMultiTaskClassifier(max_epochs=2, random_state=0).fit(Items(X, y))
    clf.predict_proba(Items(X))
    assert largest and max(largest) <= 1024 < len(X)


def test_dataset_errors_are_early_and_named():
    X, y = _table(200)
    with pytest.raises(ValueError, match="requires y"):
        MTSGDMultiTaskClassifier().fit(X)
    with pytest.raises(ValueError, match="not \\(x, y\\) pairs"):
        MTSGDMultiTaskClassifier().fit(Items(X))
    bad = X.copy()
    bad[137, 2] = np.nan
    clf = MTSGDMultiTaskClassifier(max_epochs=2, random_state=0)
    with pytest.raises(ValueError, match="row 137 has NaN"):
        clf.fit(Items(bad, y))
    with pytest.raises(NotFittedError):
        clf.predict_proba(X)
    clf.fit(Items(X, y))
    with pytest.raises(ValueError, match="3 features"):
        clf.predict_proba(Items(X[:, :3]))
    with pytest.raises(ValueError, match="no rows"):
        clf.predict_proba(Items(X[:0]))

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(zip(X, y))

    with pytest.raises(TypeError, match="map-style Dataset"):
        MTSGDMultiTaskClassifier().fit(Stream())


@pytest.mark.parametrize("make, kwargs", [
    (MTSGDMultiTaskClassifier, dict(n_particles=2)),
    (L2ESamplerClassifier, dict(n_chains=2, n_draws=3)),
    (MTSGDRegressor, dict(n_particles=2)),
])
def test_a_float64_memory_map_is_read_a_batch_at_a_time(tmp_path, make, kwargs, monkeypatch):
    # np.save of float64 data: cast to float32 a batch at a time (the fit and its predictions
    # are the float32 array's), never converted whole -- X is not passed to scikit-learn's
    # validate_data, which would make a float32 copy of it
    X, y = _table()
    target = X[:, 1] + 0.1 * X[:, 0] if make is MTSGDRegressor else y
    np.save(tmp_path / "X.npy", X.astype(np.float64))
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    ref = make(max_epochs=3, random_state=0, **kwargs).fit(X, target)
    from sklmoo.estimators import _guard

    seen = []
    real = _guard.validate_data

    def spy(est, X, *args, **kw):
        seen.append(type(X))
        return real(est, X, *args, **kw)

    monkeypatch.setattr(_guard, "validate_data", spy)
    est = make(max_epochs=3, random_state=0, **kwargs).fit(mapped, target)
    assert np.memmap not in seen
    predict = ((lambda e, Z: np.column_stack(e.predict(Z, return_std=True)))
               if make is MTSGDRegressor else (lambda e, Z: e.predict_proba(Z)))
    np.testing.assert_array_equal(predict(est, mapped[:50]), predict(ref, X[:50]))
    assert np.memmap not in seen
    broken = np.array(mapped)
    broken[7, 2] = np.nan
    np.save(tmp_path / "bad.npy", broken)
    # checked before training (a chunk of rows at a time), as an array is
    with pytest.raises(ValueError, match="X contains NaN or infinity in row 7$"):
        make(max_epochs=1, random_state=0, **kwargs).fit(
            np.load(tmp_path / "bad.npy", mmap_mode="r"), target)
    with pytest.raises(ValueError, match="X contains NaN or infinity in row 7$"):
        est.predict(np.load(tmp_path / "bad.npy", mmap_mode="r"))


def test_read_only_memory_map_trains_as_the_array(tmp_path):
    X, y = _table()
    np.save(tmp_path / "X.npy", X)
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    ref = MTSGDMultiTaskClassifier(max_epochs=3, random_state=0).fit(X, y)
    est = MTSGDMultiTaskClassifier(max_epochs=3, random_state=0).fit(mapped, y)
    np.testing.assert_array_equal(est.predict_proba(mapped), ref.predict_proba(X))


def test_a_memory_map_after_a_dataframe_fit_warns_as_an_array_does(tmp_path):
    # scikit-learn's "X does not have valid feature names" for an array without column names,
    # on the memory-map path too (it does not go through validate_data)
    import pandas as pd

    X, y = _table()
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    est = MTSGDMultiTaskClassifier(max_epochs=2, n_particles=2, random_state=0).fit(frame, y)
    np.save(tmp_path / "X.npy", X.astype(np.float64))
    mapped = np.load(tmp_path / "X.npy", mmap_mode="r")
    with pytest.warns(UserWarning) as array_warnings:
        est.predict_proba(X.astype(np.float64))
    with pytest.warns(UserWarning) as map_warnings:
        proba = est.predict_proba(mapped)
    assert ([str(w.message) for w in map_warnings]
            == [str(w.message) for w in array_warnings])
    assert "does not have valid feature names" in str(map_warnings[0].message)
    np.testing.assert_array_equal(proba, est.predict_proba(frame))


def test_a_dataset_of_pairs_with_a_different_y_is_refused():
    """fit(dataset, y) whose items are (x, y) pairs trained on the y argument and ignored the
    items' targets without a word; a y that differs from them is refused, the same targets
    (given again for the split's stratification, as skorch users do; a float32 copy of
    float64 ones) pass."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.normal(size=120)
    pairs = TensorDataset(torch.as_tensor(X), torch.as_tensor(y, dtype=torch.float32))
    est = MTSGDRegressor(n_particles=2, max_epochs=2, random_state=0, mean_function=None)
    with pytest.raises(ValueError, match=r"Dataset of \(x, y\) items whose targets differ "
                                         r"from the y given.*row 0"):
        est.fit(pairs, -y)
    assert not est.__sklearn_is_fitted__()
    reference = est.fit(pairs).predict(X)
    np.testing.assert_allclose(est.fit(pairs, y).predict(X), reference, rtol=1e-5, atol=1e-6)
    inputs_only = TensorDataset(torch.as_tensor(X))
    assert est.fit(inputs_only, y).predict(X).shape == (120,)

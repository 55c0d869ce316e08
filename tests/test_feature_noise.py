"""heteroscedastic='auto': the noise map fitted on the trained networks' features."""

import pickle

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from sklmoo import MTSGDRegressor
from sklmoo.nn import StackedGaussianHead, fit_feature_noise


def _objective(theta, h, e2, offset, coef, rest, w, penalty, min_std):
    """numpy reference of the objective fit_feature_noise minimises, one member."""
    z = offset + h @ theta[:-1] + theta[-1]
    sd = np.logaddexp(0.0, z) + min_std
    v = coef * sd ** 2 + rest
    return np.sum(w * (0.5 * np.log(v) + 0.5 * e2 / v)) / w.sum() + 0.5 * penalty * np.sum(
        theta[:-1] ** 2)


@pytest.mark.parametrize("penalty", [0.0, 1e-2])
def test_fit_feature_noise_reaches_the_reference_optimum(penalty):
    rng = np.random.RandomState(0)
    M, n, F = 3, 500, 4
    h = rng.standard_normal((M, n, F))
    std = np.exp(0.4 * h[..., 0] - 0.3 * h[..., 1]) * 0.5
    e2 = (std * rng.standard_normal((M, n))) ** 2
    rest = 0.01 * rng.uniform(size=(M, n))
    w = rng.uniform(0.5, 2.0, n)
    offset = rng.standard_normal(M) * 0.3
    W, b = fit_feature_noise(torch.as_tensor(h), torch.as_tensor(e2), torch.as_tensor(offset),
                             coef=0.7, rest=torch.as_tensor(rest), weight=torch.as_tensor(w),
                             penalty=penalty, min_std=1e-3, tol=1e-12, max_iter=100)
    for a in range(M):
        args = (h[a], e2[a], offset[a], 0.7, rest[a], w, penalty, 1e-3)
        ref = minimize(_objective, np.zeros(F + 1), args=args, method="BFGS",
                       options={"gtol": 1e-10})
        ours = np.append(W[a].numpy(), b[a].numpy())
        assert _objective(ours, *args) == pytest.approx(ref.fun, abs=1e-7)
        np.testing.assert_allclose(ours, ref.x, atol=1e-3)
        # never above the constant noise it starts from
        assert _objective(ours, *args) <= _objective(np.zeros(F + 1), *args)


def test_fit_feature_noise_returns_zeros_when_it_cannot_fit():
    h = torch.ones(2, 10, 3)
    e2 = torch.ones(2, 10)
    e2[0, 0] = float("nan")
    W, b = fit_feature_noise(h, e2, torch.zeros(2))
    assert not W.any() and not b.any()
    W, b = fit_feature_noise(h, torch.ones(2, 10), torch.zeros(2), coef=0.0)
    assert not W.any() and not b.any()


def test_fit_feature_noise_where_the_information_vanishes():
    # noise scales at their floor, where the softplus is flat in float64: the information
    # matrix is singular (a noise-free target on 1,000,000 rows made linalg.solve fail)
    h = torch.relu(torch.randn(2, 500, 8, generator=torch.Generator().manual_seed(0)))
    W, b = fit_feature_noise(h, torch.full((2, 500), 1e-6), torch.full((2,), -800.0))
    assert torch.isfinite(W).all() and torch.isfinite(b).all()


def test_noise_map_head_is_the_homoscedastic_head_until_set():
    torch.manual_seed(0)
    plain = StackedGaussianHead(3, 5)
    torch.manual_seed(0)
    mapped = StackedGaussianHead(3, 5, noise_map=True)
    h = torch.randn(3, 7, 5)
    assert torch.equal(plain(h), mapped(h))
    u, e = torch.randn(3, 5), torch.randn(3)
    mapped.set_noise_map(u, e)
    raw = mapped.raw_scale[:, None, 0] + torch.einsum("mbf,mf->mb", h, u) + e[:, None]
    expected = torch.nn.functional.softplus(raw) + mapped.min_std
    torch.testing.assert_close(mapped(h)[..., 1], expected)
    torch.testing.assert_close(mapped(h)[..., 0], plain(h)[..., 0])
    mapped.set_noise_map()
    assert torch.equal(plain(h), mapped(h))
    with pytest.raises(ValueError, match="noise_map"):
        StackedGaussianHead(3, 5, heteroscedastic=True, noise_map=True)


def _noisy(n, seed=0):
    """y = sin(2 x0) + x1 with a noise standard deviation from 0.05 to 1.05 along x1 (the map
    reads the features the networks learnt for the mean: the noise has to depend on what the
    mean does)."""
    rng = np.random.RandomState(seed)
    X = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    std = 0.05 + (X[:, 1] + 1) / 2
    return X, np.sin(2 * X[:, 0]) + X[:, 1] + std * rng.standard_normal(n), std


def test_auto_fits_input_dependent_noise_when_the_validation_rows_show_it():
    X, y, _ = _noisy(2500)
    Xt, yt, std_t = _noisy(2000, seed=1)
    kw = dict(random_state=0, max_epochs=15, n_particles=3)
    auto = MTSGDRegressor(**kw).fit(X, y)
    plain = MTSGDRegressor(heteroscedastic=False, **kw).fit(X, y)
    assert auto.heteroscedastic_.tolist() == [True]
    assert plain.heteroscedastic_.tolist() == [False]
    # the same networks and means; the noise follows the input
    np.testing.assert_allclose(auto.predict(Xt), plain.predict(Xt), rtol=1e-5, atol=1e-5)
    aleatoric = np.sqrt(auto.predict_uncertainty(Xt)["aleatoric"])
    assert np.corrcoef(aleatoric, std_t)[0, 1] > 0.7
    assert auto.score(Xt, yt) == pytest.approx(plain.score(Xt, yt), abs=1e-4)

    def nll(model):
        mu, sd = model.predict(Xt, return_std=True)
        return np.mean(0.5 * np.log(2 * np.pi * sd ** 2) + 0.5 * ((yt - mu) / sd) ** 2)

    assert nll(auto) < nll(plain) - 0.1
    # the map is a buffer of the module: it survives save_params / load_params and pickle
    copy = pickle.loads(pickle.dumps(auto))
    np.testing.assert_array_equal(copy.predict(Xt, return_std=True)[1],
                                  auto.predict(Xt, return_std=True)[1])
    assert copy.heteroscedastic_.tolist() == [True]


def test_auto_keeps_the_constant_noise_on_small_or_homoscedastic_tables():
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, (2500, 3)).astype(np.float32)
    # linear, with constant noise: the linear mean function leaves nothing for a map to find
    y = X @ np.array([1.0, -0.5, 0.3]) + 0.3 * rng.standard_normal(2500)
    kw = dict(random_state=0, max_epochs=10, n_particles=3)
    assert MTSGDRegressor(**kw).fit(X, y).heteroscedastic_.tolist() == [False]
    # fewer than NOISE_MIN_VALID_ROWS validation rows: not tried; the fit is the
    # heteroscedastic=False one, bit for bit
    X, y, _ = _noisy(1000)
    auto = MTSGDRegressor(**kw).fit(X, y)
    plain = MTSGDRegressor(heteroscedastic=False, **kw).fit(X, y)
    assert auto.heteroscedastic_.tolist() == [False]
    np.testing.assert_array_equal(auto.predict(X, return_std=True)[1],
                                  plain.predict(X, return_std=True)[1])


def test_continued_fit_trains_with_the_constant_noise_and_fits_the_map_again(tmp_path):
    X, y, _ = _noisy(2500)
    reg = MTSGDRegressor(random_state=0, max_epochs=8, n_particles=3).fit(X, y)
    assert reg.heteroscedastic_.all()
    seen = []
    head = reg.module_.heads[0]
    hook = head.register_forward_hook(
        lambda mod, inp, out: seen.append(bool(mod.noise_weight.any())) if mod.training
        else None)
    reg.partial_fit(X, y)
    hook.remove()
    assert seen and not any(seen)              # every training step: the constant noise
    assert reg.heteroscedastic_.all() and bool(head.noise_weight.any())
    # load_params restores the map and heteroscedastic_
    reg.save_params(f_params=tmp_path / "p.pt")
    # (without a validation split no map is tried)
    other = MTSGDRegressor(random_state=1, max_epochs=2, n_particles=3,
                           train_split=None).fit(X, y)
    assert not other.heteroscedastic_.any()
    other.load_params(f_params=tmp_path / "p.pt")
    assert other.heteroscedastic_.all()
    np.testing.assert_allclose(other.predict(X[:50], return_std=True)[1] / other.variance_scale_
                               ** 0.5, reg.predict(X[:50], return_std=True)[1]
                               / reg.variance_scale_ ** 0.5, rtol=1e-5)


def test_the_map_is_bounded_by_its_range_on_the_training_rows():
    X, y, _ = _noisy(2500)
    reg = MTSGDRegressor(random_state=0, max_epochs=15, n_particles=3).fit(X, y)
    assert reg.heteroscedastic_.all()
    _, noise = reg.predict_members(X, return_std=True)
    far = np.zeros((3, 3), dtype=np.float32)
    far[:, 1] = [-5.0, -20.0, 20.0]                  # far outside [-1, 1]
    _, noise_far = reg.predict_members(far, return_std=True)
    low, high = noise.min(axis=1, keepdims=True), noise.max(axis=1, keepdims=True)
    assert (noise_far >= low * (1 - 1e-5)).all() and (noise_far <= high * (1 + 1e-5)).all()


def test_heteroscedastic_attribute_describes_the_heads():
    X, y, _ = _noisy(1600)
    kw = dict(random_state=0, max_epochs=3, n_particles=2)
    assert MTSGDRegressor(heteroscedastic=np.True_, **kw).fit(X, y).heteroscedastic_.all()
    reg = MTSGDRegressor(warm_start=True, **kw).fit(X, y)
    for value in (False, True):
        with pytest.raises(ValueError, match="heteroscedastic='auto'"):
            reg.set_params(heteroscedastic=value).fit(X, y)
    # networks wider than NOISE_MAP_MAX_FEATURES: no map (the solver's cost is cubic in them)
    wide = MTSGDRegressor(module__hidden_units=(300,), **kw).fit(X, y)
    assert not wide.heteroscedastic_.any()


def test_heads_pickled_before_the_noise_map_still_predict():
    X, y, _ = _noisy(300)
    reg = MTSGDRegressor(heteroscedastic=False, random_state=0, max_epochs=2,
                         n_particles=2).fit(X, y)
    expected = reg.predict(X, return_std=True)
    for head in reg.module_.heads:               # as a head of an earlier version unpickles
        del head.noise_map, head.noise_map_active
    np.testing.assert_array_equal(reg.predict(X, return_std=True)[1], expected[1])


def test_loading_parameters_saved_with_another_heteroscedastic_names_it(tmp_path):
    X, y, _ = _noisy(300)
    kw = dict(random_state=0, max_epochs=2, n_particles=2)
    MTSGDRegressor(heteroscedastic=False, **kw).fit(X, y).save_params(
        f_params=tmp_path / "p.pt")
    reg = MTSGDRegressor(**kw).fit(X, y)
    before = reg.predict(X)
    with pytest.raises(ValueError, match="differ in heteroscedastic"):
        reg.load_params(f_params=tmp_path / "p.pt")
    np.testing.assert_array_equal(reg.predict(X), before)

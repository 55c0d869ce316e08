"""The training step's plumbing: optimizer defaults, skorch's hooks, train / eval switching."""

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback, GradientNormClipping

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.nn import flatten_particles, unflatten_like


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    return X, (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, MTSGDRegressor])
def test_adam_is_fused_unless_the_user_chose_an_implementation(make):
    X, y = _data()
    target = y if make is MTSGDMultiTaskClassifier else X[:, 0]
    est = make(n_particles=2, max_epochs=1, random_state=0).fit(X, target)
    assert est.optimizer_.defaults["fused"] is True
    for given in ({"optimizer__foreach": True}, {"optimizer__fused": False}):
        est = make(n_particles=2, max_epochs=1, random_state=0, **given).fit(X, target)
        assert not est.optimizer_.defaults["fused"]
    # other optimizers get no such argument
    est = make(n_particles=2, max_epochs=1, random_state=0, optimizer=torch.optim.SGD,
               lr=1e-2).fit(X, target)
    assert "fused" not in est.optimizer_.defaults or not est.optimizer_.defaults["fused"]


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, MTSGDRegressor])
@pytest.mark.parametrize("method", ["mtsgd", "moo_svgd", "mgda", "linear"])
def test_fused_adam_takes_torchs_adam_steps(make, method):
    """The fused default and torch's loop-over-tensors Adam give the same fit up to rounding,
    for every trunk rule: each gradient the step assigns is laid out like its parameter (the
    fused kernel reads it in the parameter's memory order; 'linear' once handed it autograd's
    transposed gradients and barely learned: breast cancer training NLL 0.31 against 0.035)."""
    X, y = _data()
    target = y if make is MTSGDMultiTaskClassifier else X[:, 0] + 0.1 * y
    kw = dict(n_particles=3, max_epochs=4, random_state=0, method=method)
    fused = make(**kw).fit(X, target)
    plain = make(**kw, optimizer__fused=False).fit(X, target)
    assert fused.optimizer_.defaults["fused"] and not plain.optimizer_.defaults["fused"]
    for name, param in fused.module_.named_parameters():
        if param.grad is not None:
            assert param.grad.stride() == param.stride(), name
    predict = fused.predict_proba if make is MTSGDMultiTaskClassifier else fused.predict
    other = plain.predict_proba if make is MTSGDMultiTaskClassifier else plain.predict
    np.testing.assert_allclose(predict(X), other(X), atol=1e-4)
    np.testing.assert_allclose(fused.history[:, "train_loss"], plain.history[:, "train_loss"],
                               rtol=1e-4, atol=1e-5)


class _CountGrads(Callback):
    def initialize(self):
        self.calls, self.norms = 0, []
        return self

    def on_grad_computed(self, net, named_parameters, **kwargs):
        self.calls += 1
        self.norms.append(float(sum(p.grad.norm() ** 2 for _, p in named_parameters)))


def test_grad_computed_callbacks_still_run_and_see_the_step_gradients():
    """Without a listener the step skips skorch's closure; with one it takes skorch's path, and
    both give the same fit (a clipping bound never reached changes nothing)."""
    X, y = _data()
    # the networks' predictions (a closed linear gate would stand in for them)
    kw = dict(n_particles=2, max_epochs=3, random_state=0, linear_gate=False)
    plain = MTSGDMultiTaskClassifier(**kw).fit(X, y)
    counter = _CountGrads()
    hooked = MTSGDMultiTaskClassifier(**kw, callbacks=[counter, GradientNormClipping(1e30)]).fit(X, y)
    steps = sum(e["train_batch_count"] for e in hooked.history)
    assert counter.calls == steps and all(n > 0 for n in counter.norms)
    np.testing.assert_array_equal(plain.predict_proba(X), hooked.predict_proba(X))
    # and a bound that is reached does clip
    clipped = MTSGDMultiTaskClassifier(**kw, callbacks=[GradientNormClipping(1e-6)]).fit(X, y)
    assert not np.allclose(plain.predict_proba(X), clipped.predict_proba(X))


def test_l2e_keeps_its_sampler_step():
    X, y = _data()
    est = L2ESamplerClassifier(n_chains=2, max_epochs=3, random_state=0).fit(X, y)
    assert not isinstance(est.optimizer_, torch.optim.Adam)
    assert est.predict_proba(X).shape == (len(X), 2)


def test_every_module_is_put_back_in_training_mode():
    X, y = _data()
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=1, random_state=0).fit(X, y)
    est.module_.eval()
    est._set_training(True)
    assert all(m.training for m in est.module_.modules())
    # one submodule left in eval mode (e.g. by a user's callback) is switched too
    next(iter(est.module_.children())).eval()
    est._set_training(True)
    assert all(m.training for m in est.module_.modules()) and est.criterion_.training
    est._set_training(False)
    assert not any(m.training for m in est.module_.modules())


def test_unflatten_refuses_a_matrix_of_another_width():
    params = [torch.zeros(3, 2, 2), torch.zeros(3, 5)]
    flat = flatten_particles(params)
    assert [p.shape for p in unflatten_like(flat, params)] == [p.shape for p in params]
    with pytest.raises(ValueError, match="does not split"):
        unflatten_like(flat[:, :-1], params)


def test_sampler_optimizer_adam_burn_in_reads_a_transposed_gradient_right():
    """A gradient assigned with other strides than its parameter's (as autograd returns for a
    weight used transposed) takes the same fused-Adam step as the same values laid out like it."""
    from sklmoo.samplers import SGHMC, SamplerOptimizer

    gen = torch.Generator().manual_seed(0)
    start = torch.randn(3, 4, generator=gen)
    grads = [torch.randn(4, 3, generator=gen) * torch.arange(1.0, 5.0)[:, None]
             for _ in range(5)]
    runs = []
    for layout in ("transposed", "contiguous"):
        theta = torch.nn.Parameter(start.clone())
        opt = SamplerOptimizer([("theta", theta)], SGHMC(0.01, n_data=10)).set_warmup(5, lr=0.1)
        for g in grads:
            theta.grad = g.t() if layout == "transposed" else g.t().contiguous()
            opt.step()
        runs.append(theta.detach().clone())
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, MTSGDRegressor])
def test_function_kernel_on_a_dense_trunk_takes_the_batched_product_repulsion(make,
                                                                              monkeypatch):
    """kernel='function' (the regressor's default up to 8,192 rows) pulls the trunk's
    repulsion back by batched products: the estimator hands the step its batch, and the fit
    is the one autograd's batched backward pass gives, up to rounding."""
    from sklmoo.nn import MultiTaskParticleNet

    X, y = _data()
    target = y if make is MTSGDMultiTaskClassifier else X[:, 0] + 0.1 * X[:, 1] ** 2
    calls = []
    real = MultiTaskParticleNet.trunk_pullback

    def spy(self, x):
        calls.append(x.shape)
        return real(self, x)

    monkeypatch.setattr(MultiTaskParticleNet, "trunk_pullback", spy)
    kw = dict(n_particles=3, max_epochs=2, random_state=0, kernel="function")
    fast = make(**kw).fit(X, target)
    assert calls and all(s[1:] == X.shape[1:] for s in calls)
    monkeypatch.setattr(MultiTaskParticleNet, "trunk_pullback", lambda self, x: None)
    slow = make(**kw).fit(X, target)
    predict = "predict_proba" if make is MTSGDMultiTaskClassifier else "predict"
    a, b = getattr(fast, predict)(X), getattr(slow, predict)(X)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert fast.history[-1, "trunk_repulsion"] == pytest.approx(
        slow.history[-1, "trunk_repulsion"], rel=1e-3)


@pytest.mark.parametrize("make, kw", [
    (MTSGDMultiTaskClassifier, {}),                                  # StackedLinear heads
    (MTSGDRegressor, {"mean_function": "linear"}),
    (MTSGDRegressor, {"mean_function": "linear", "heteroscedastic": True}),
    (MTSGDRegressor, {"mean_function": "kernel"}),
    (MTSGDRegressor, {"mean_function": "kernel", "gp": "unfitted"}),
    (MTSGDRegressor, {"mean_function": None}),
])
def test_head_pullbacks_give_the_autograd_function_space_repulsion(make, kw):
    """The heads' function-space repulsion in closed form (sklmoo's heads, through the
    linear and GP mean functions) equals autograd's batched backward pass, for every task."""
    from sklmoo.nn import flatten_particles, function_space_terms

    X, y = _data(200)
    if make is MTSGDRegressor:
        target = np.stack([X[:, 0] + 0.3 * X[:, 1] ** 2, np.sin(X[:, 2])], 1)
    else:
        target = np.stack([y, (X[:, 1] > 0).astype(int)], 1)
    gp = kw.pop("gp", None)
    est = make(n_particles=3, max_epochs=2, random_state=0, kernel="function", **kw)
    est.fit(X, target)
    net = est.module_
    if kw.get("mean_function") in ("kernel", "linear"):
        # gates between 0 and 1 (on this table the mean function may shut the particles out:
        # no repulsion)
        net.output_map.gate.copy_(torch.tensor([0.6, 0.3], dtype=net.output_map.gate.dtype))
        if gp == "unfitted":
            net.output_map.fitted.fill_(False)
    elif make is MTSGDMultiTaskClassifier:
        # through the linear gate open (a closed one's outputs do not depend on the heads)
        net.output_map.set_gate(np.ones(2))
    features, outputs = net.forward_with_features(torch.as_tensor(X[:50]))
    for t in range(2):
        params = net.heads[t].member_parameters()
        out = outputs[t].transpose(0, 1)
        pullback = net.head_pullback(t, features, out)
        assert pullback is not None
        ref = function_space_terms(out, params, smooth_drive=False).repulsive
        got = function_space_terms(out, params, smooth_drive=False, pullback=pullback).repulsive
        assert ref.abs().max() > 1e-6
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-6 * float(ref.abs().max()))
        assert got.shape == flatten_particles(params).shape


def test_head_pullback_is_not_inherited_by_a_subclass():
    from sklmoo.nn import MLPTrunk, MultiTaskParticleNet, StackedLinear, member_factory

    class Doubled(StackedLinear):
        def forward(self, h):
            return 2 * super().forward(h)

    net = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=4, hidden_units=(8,)),
                               n_particles=3, n_classes=[2], head_factory=Doubled)
    features, outputs = net.forward_with_features(torch.randn(6, 4))
    assert net.head_pullback(0, features, outputs[0].transpose(0, 1)) is None


@pytest.mark.parametrize("make", [MTSGDMultiTaskClassifier, MTSGDRegressor,
                                  L2ESamplerClassifier])
def test_a_modules_own_randomness_follows_random_state(make):
    """A user's module with dropout: the same random_state gives the same fit, another seed
    another one, a continued fit draws new masks, and the caller's global torch generator is
    left as it was."""
    from torch import nn

    X, y = _data()
    target = X[:, 0] + 0.1 * X[:, 1] ** 2 if make is MTSGDRegressor else y
    module = (nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3))
              if make is not L2ESamplerClassifier else
              nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2)))
    kw = dict(module=module, max_epochs=3, random_state=0)
    if make is L2ESamplerClassifier:
        kw["n_chains"] = 2
    else:
        kw["n_particles"] = 2
    if make is MTSGDRegressor:
        kw["mean_function"] = "linear"     # no GP that may shut the networks out
    predict = "predict" if make is MTSGDRegressor else "predict_proba"
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = make(**kw).fit(X, target)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.rand(7)                                    # the caller's generator moves on
    b = make(**kw).fit(X, target)
    np.testing.assert_array_equal(getattr(a, predict)(X), getattr(b, predict)(X))
    c = make(**{**kw, "random_state": 1}).fit(X, target)
    assert not np.array_equal(getattr(a, predict)(X), getattr(c, predict)(X))


def test_a_continued_fit_draws_new_dropout_masks(monkeypatch):
    """partial_fit continues the module's random stream from the epochs already run: equal
    states continue equally, and a continued fit is not seeded as the first call was (its
    dropout masks would repeat the first epochs')."""
    from torch import nn

    X, y = _data()
    kw = dict(module=nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3)),
              n_particles=2, max_epochs=1, random_state=0, train_split=None)
    seeds = []
    real = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", lambda s: seeds.append(s) or real(s))
    a = MTSGDMultiTaskClassifier(**kw).fit(X, y)
    first = list(seeds)
    b = MTSGDMultiTaskClassifier(**kw).fit(X, y)
    del seeds[:]
    a.partial_fit(X, y)
    b.partial_fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert seeds and first[-1] not in seeds

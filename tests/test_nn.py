"""Particle ensembles against per-member references."""

import copy

import pytest

import torch
from torch import nn

from sklmoo.nn import (LeNetTrunk, MLPTrunk, MultiTaskParticleNet, StackedModules,
                       TrunkClassifier,
                       flatten_particles, make_update_rules, member_factory,
                       multitask_particle_step, unflatten_like)
from sklmoo.samplers import LinearScalarization, RBFKernel


def test_stacked_forward_and_grads_equal_member_loop():
    torch.manual_seed(0)
    members = [LeNetTrunk() for _ in range(3)]
    refs = [copy.deepcopy(m) for m in members]
    ens = StackedModules(members)
    x = torch.randn(4, 1, 12, 12)
    out = ens(x)
    for m, ref in enumerate(refs):
        torch.testing.assert_close(out[m], ref(x), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    for m, ref in enumerate(refs):
        ref(x).sum().backward()
        for p_stacked, p_ref in zip(ens.member_parameters(), ref.parameters()):
            torch.testing.assert_close(p_stacked.grad[m], p_ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make, shape", [
    (lambda: MLPTrunk(6), (9, 6)),
    (lambda: MLPTrunk(6, hidden_units=()), (9, 6)),                   # identity trunk
    (lambda: MLPTrunk(12, hidden_units=(5, 4, 3)), (9, 3, 4)),         # flattened input
    (lambda: TrunkClassifier(MLPTrunk(6, hidden_units=(8,)), 3), (9, 6)),
    (lambda: nn.Sequential(nn.Linear(6, 5, bias=False), nn.ReLU(), nn.Linear(5, 2)), (9, 6)),
])
def test_dense_members_take_batched_products_with_the_member_loop_numbers(make, shape):
    # plain dense members skip vmap: same outputs and gradients as each member on its own
    torch.manual_seed(0)
    members = [make() for _ in range(4)]
    refs = [copy.deepcopy(m) for m in members]
    ens = StackedModules(members)
    assert ens._plan is not None
    x = torch.randn(*shape)
    out = ens(x)
    weights = torch.randn(out.shape)
    if ens.member_parameters():
        (out * weights).sum().backward()
    for m, ref in enumerate(refs):
        torch.testing.assert_close(out[m], ref(x), rtol=1e-5, atol=1e-6)
        if ens.member_parameters():
            (ref(x) * weights[m]).sum().backward()
        for p_stacked, p_ref in zip(ens.member_parameters(), ref.parameters()):
            torch.testing.assert_close(p_stacked.grad[m], p_ref.grad, rtol=1e-5, atol=1e-6)


class _ScaledTrunk(MLPTrunk):
    def forward(self, x):
        return 2.0 * super().forward(x)


@pytest.mark.parametrize("make", [
    lambda: _ScaledTrunk(6),                                # a subclass computes its own thing
    lambda: nn.Sequential(nn.Linear(6, 5), nn.Tanh()),
    lambda: nn.Sequential(nn.Linear(6, 5), nn.Dropout(0.5)),      # and follows eval()
])
def test_other_members_keep_vmap(make):
    torch.manual_seed(0)
    members = [make() for _ in range(3)]
    refs = [copy.deepcopy(m).eval() for m in members]
    ens = StackedModules(members).eval()
    assert ens._plan is None
    x = torch.randn(5, 6)
    for m, ref in enumerate(refs):
        torch.testing.assert_close(ens(x)[m], ref(x), rtol=1e-5, atol=1e-6)


def test_members_are_initialised_independently_and_factories():
    torch.manual_seed(0)
    net = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=6, hidden_units=(5,)), 4,
                               [3, 2], input_shape=(6,))
    w = net.trunk.member_parameters()[0]
    assert not torch.allclose(w[0], w[1])
    assert [o.shape for o in net(torch.randn(7, 6))] == [(7, 4, 3), (7, 4, 2)]
    inst = member_factory(nn.Linear(3, 2))
    assert not torch.equal(inst().weight, inst().weight)  # re-initialised copies


def test_flatten_round_trip():
    params = [torch.randn(3, 4, 5), torch.randn(3, 2)]
    flat = flatten_particles(params)
    assert flat.shape == (3, 22)
    for a, b in zip(unflatten_like(flat, params), params):
        torch.testing.assert_close(a, b)


def _losses(net, x, y):
    return [nn.functional.cross_entropy(o.transpose(1, 2), y[:, t, None].expand(-1, 3),
                                        reduction="none").mean(0).sum()
            for t, o in enumerate(net(x))]


def test_linear_fast_path_equals_generic_per_task_path():
    torch.manual_seed(1)
    net = MultiTaskParticleNet(lambda: MLPTrunk(5, (6,)), 3, [4, 4], input_shape=(5,))
    x, y = torch.randn(16, 5), torch.randint(0, 4, (16, 2))
    fast_rules = make_update_rules("linear", RBFKernel(), 0.0, 0.0)
    multitask_particle_step(net, _losses(net, x, y), *fast_rules)
    fast = [p.grad.clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    # explicit uniform weights take the generic path: one backward pass per task
    generic = (LinearScalarization(weights=[0.5, 0.5]), LinearScalarization(weights=[1.0]))
    multitask_particle_step(net, _losses(net, x, y), *generic)
    for a, p in zip(fast, net.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("c, smooth", [(1.0, True), (0.3, True), (0.7, False)])
def test_function_space_gram_and_direction_match_autograd(c, smooth):
    """The RBF kernel on network outputs, k(a, b) = exp(-|f(a) - f(b)|^2 / 2 s^2) as a function
    of the flattened parameters: U and phi against a term-by-term autograd evaluation."""
    from torch.func import functional_call

    from _references import reference_gram, reference_svgd
    from sklmoo.nn import StackedModules, flatten_particles, function_space_terms
    from sklmoo.samplers import MTSGD, PrecomputedKernel, min_norm_weights

    torch.manual_seed(0)
    members = [nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
               for _ in range(4)]
    stack = StackedModules(members)
    X = torch.randn(5, 3, dtype=torch.float64)
    params = stack.member_parameters()
    outputs = stack(X)                                            # (M, batch, 2) with graph
    terms = function_space_terms(outputs, params, smooth_drive=smooth)
    x = flatten_particles(params).detach()
    s = torch.randn(2, *x.shape, dtype=torch.float64)
    kernel = PrecomputedKernel()
    phi, info = MTSGD(kernel.use(terms), repulsion=c).direction(x, s)

    names = [n for n, _ in members[0].named_parameters()]
    shapes = [p.shape for p in members[0].parameters()]

    def f(theta):                                                 # one particle's outputs
        pieces, start = {}, 0
        for name, shape in zip(names, shapes):
            size = int(torch.tensor(shape).prod())
            pieces[name] = theta[start:start + size].reshape(shape)
            start += size
        return functional_call(members[0], pieces, (X,)).reshape(-1)

    sigma2 = terms.sigma2

    def kern(a, b):
        return torch.exp(-((f(a) - f(b)) ** 2).sum() / (2 * sigma2))

    if smooth:
        ref = reference_gram(x, s, kern, c)
        trace_only = reference_gram(x, torch.zeros_like(s), kern, c)   # c^2/M^2 sum tr
        # exact up to the trace term, the same constant in every entry
        torch.testing.assert_close(info.gram + trace_only, ref, rtol=1e-9, atol=1e-11)
        assert torch.allclose(trace_only, trace_only[0, 0].expand_as(trace_only))
        torch.testing.assert_close(min_norm_weights(ref), info.weights, rtol=1e-6, atol=1e-8)
        expected = sum(w * reference_svgd(x, s[k], kern, c) for k, w in enumerate(info.weights))
    else:
        # each particle's own score plus the pulled-back repulsion
        zero = torch.zeros_like(s[0])
        expected = (torch.einsum("k,kmd->md", info.weights, s)
                    + reference_svgd(x, zero, kern, c))
    torch.testing.assert_close(phi, expected, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("make, shape", [
    (lambda: MLPTrunk(6), (9, 6)),
    (lambda: MLPTrunk(12, hidden_units=(5, 4, 3)), (9, 3, 4)),         # flattened input
    (lambda: TrunkClassifier(MLPTrunk(6, hidden_units=(8,)), 3), (9, 6)),
    (lambda: nn.Sequential(nn.Linear(6, 5, bias=False), nn.ReLU(), nn.Linear(5, 2)), (9, 6)),
    (lambda: nn.Sequential(nn.ReLU(), nn.Linear(6, 3)), (9, 6)),       # a ReLU on the input
])
@pytest.mark.parametrize("smooth", [True, False])
def test_dense_pullback_gives_the_autograd_function_space_repulsion(make, shape, smooth):
    """kernel='function' on a plain dense trunk: the repulsion pulled back by batched
    products equals the batched backward pass's (itself checked term by term above), in
    every block of the parameters, and the kernel matrix is the same."""
    from sklmoo.nn import function_space_terms

    torch.manual_seed(0)
    stack = StackedModules([make().double() for _ in range(4)])
    x = torch.randn(*shape, dtype=torch.float64)
    params = stack.member_parameters()
    outputs = stack(x)
    pullback = stack.dense_pullback(x)
    assert pullback is not None
    ref = function_space_terms(outputs, params, smooth_drive=smooth)
    got = function_space_terms(outputs, params, smooth_drive=smooth, pullback=pullback)
    assert got.repulsive.shape == ref.repulsive.shape
    assert ref.repulsive.abs().max() > 1e-3                    # not vacuous
    torch.testing.assert_close(got.repulsive, ref.repulsive, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got.matrix, ref.matrix)
    torch.testing.assert_close(got.sigma2, ref.sigma2)


def test_dense_pullback_is_offered_only_for_plain_dense_trunks():
    torch.manual_seed(0)
    x = torch.randn(5, 6)
    assert StackedModules([nn.Sequential(nn.Linear(6, 5), nn.Tanh())
                           for _ in range(3)]).dense_pullback(x) is None
    images = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=12, hidden_units=(4,)),
                                  n_particles=3, n_classes=[2], input_shape=(3, 4))
    assert images.trunk_pullback(torch.randn(5, 12)) is not None     # flat rows, reshaped
    conv = MultiTaskParticleNet(member_factory(LeNetTrunk), n_particles=2, n_classes=[2],
                                input_shape=(1, 12, 12))
    assert conv.trunk_pullback(torch.randn(5, 144)) is None


def test_linear_mean_reproduces_bayesian_ridge_under_the_particles():
    """LinearMean set from a fitted BayesianRidge gives its predictive mean and weight variance
    (sklearn's return_std minus the noise), and carries the particles' outputs at its scale."""
    import numpy as np
    from sklearn.linear_model import BayesianRidge

    from sklmoo.nn import LinearMean

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4)) + 2.0
    fits = [BayesianRidge().fit(X, X @ w + rng.normal(size=40))
            for w in ([1, 0, -1, 2], [0, 3, 0, 0])]
    lin = LinearMean(4, n_tasks=2).double()
    assert not lin.fitted
    lin.set(np.stack([f.coef_ for f in fits]), [f.intercept_ for f in fits],
            scale=[0.5, 2.0], center=np.stack([f.X_offset_ for f in fits]),
            covariance=np.stack([f.sigma_ for f in fits]))
    Xq = rng.normal(size=(7, 4)) * 3
    heads = tuple(torch.stack([torch.zeros(7, 3), torch.ones(7, 3)], -1).double() for _ in fits)
    outs = lin(torch.from_numpy(Xq), heads)
    for t, f in enumerate(fits):
        mean, std = f.predict(Xq, return_std=True)
        assert outs[t].shape == (7, 3, 3)
        np.testing.assert_allclose(outs[t][:, 0, 0].numpy(), mean, rtol=1e-10)
        np.testing.assert_allclose(outs[t][:, 0, 2].numpy() ** 2, std ** 2 - 1 / f.alpha_,
                                   rtol=1e-8, atol=1e-12)
        # unit head noise at scale s: s^2 + the weight variance
        np.testing.assert_allclose(outs[t][:, :, 1].numpy() ** 2,
                                   ([0.5, 2.0][t] ** 2 + outs[t][:, :, 2].numpy() ** 2),
                                   rtol=1e-10)
    assert lin.fitted
    # in float32, inputs far from the origin keep their precision (the mean is taken about
    # the center, not the origin)
    far = X + 1e6
    fit = BayesianRidge().fit(far, far @ np.array([1.0, 0.5, -1.0, 2.0]) - 2.5e6)
    lin32 = LinearMean(4, n_tasks=1)
    lin32.set(fit.coef_[None], [fit.intercept_], center=fit.X_offset_[None],
              covariance=fit.sigma_[None])
    mean, _ = lin32.moments(torch.from_numpy(far[:5]).float())
    # (float32 inputs near 1e6 are themselves spaced 0.06 apart)
    np.testing.assert_allclose(mean[:, 0].numpy(), fit.predict(far[:5]), atol=0.25)


def test_stacked_linear_is_each_members_linear_layer_and_checks_its_input():
    from sklmoo.nn import StackedLinear

    torch.manual_seed(0)
    layer = StackedLinear(3, 8, 4)
    h = torch.randn(3, 5, 8)
    expected = torch.stack([h[m] @ layer.weight[m].T + layer.bias[m] for m in range(3)])
    torch.testing.assert_close(layer(h), expected)
    # one input block shared by every member broadcasts (as einsum did)
    shared = torch.randn(1, 5, 8)
    torch.testing.assert_close(layer(shared), layer(shared.expand(3, 5, 8)))
    with pytest.raises(ValueError, match=r"takes \(members, batch, in_features\) inputs"):
        layer(torch.randn(5, 8))


def test_flattening_refuses_parameters_of_other_particle_counts():
    """Every stacked parameter has the particles as its leading dimension: tensors that do
    not agree would be reshaped into other particles' rows."""
    with pytest.raises(ValueError, match=r"same number of particles.*\[4, 3\]"):
        flatten_particles([torch.zeros(4, 6), torch.zeros(3, 8)])
    with pytest.raises(ValueError, match="no parameters"):
        flatten_particles([])
    with pytest.raises(ValueError, match="particles"):
        unflatten_like(torch.zeros(3, 4), [torch.zeros(4, 3)])


def test_pullbacks_are_not_offered_where_they_would_compute_something_else():
    """A network subclass that computes its features / outputs otherwise, and a mean function
    over heads that are not Gaussian, get autograd (found by a hostile-input review: the
    subclass's repulsion was off by 0.67, the mismatched map raised mid-step)."""
    from sklmoo.nn import LinearMean

    class Squashed(MultiTaskParticleNet):
        def features(self, x):
            return torch.tanh(super().features(x))

    kw = dict(n_particles=3, n_classes=[2])
    factory = member_factory(MLPTrunk, n_features=4, hidden_units=(8,))
    x = torch.randn(6, 4)
    plain = MultiTaskParticleNet(factory, **kw)
    features, outputs = plain.forward_with_features(x)
    assert plain.trunk_pullback(x) is not None
    assert plain.head_pullback(0, features, outputs[0].transpose(0, 1)) is not None
    squashed = Squashed(factory, **kw)
    features, outputs = squashed.forward_with_features(x)
    assert squashed.trunk_pullback(x) is None
    assert squashed.head_pullback(0, features, outputs[0].transpose(0, 1)) is None
    mapped = MultiTaskParticleNet(factory, n_particles=3, n_classes=[3],
                                  output_map=LinearMean(4, 1))
    features, outputs = mapped.forward_with_features(x)
    assert mapped.trunk_pullback(x) is not None
    assert mapped.head_pullback(0, features, outputs[0].transpose(0, 1)) is None


def test_set_grads_writes_minus_phi_for_contiguous_and_strided_parameters():
    # the contiguous parameters' one-call path and the per-tensor path for another layout
    # give the same gradients, each laid out like its parameter
    from sklmoo.nn._multitask_update import _set_grads
    gen = torch.Generator().manual_seed(0)
    plain = [torch.randn(3, 2, 4, generator=gen), torch.randn(3, 5, generator=gen)]
    strided = [plain[0].transpose(1, 2).contiguous().transpose(1, 2), plain[1]]
    assert not strided[0].is_contiguous()
    phi = torch.randn(3, 13, generator=gen)
    for params in (plain, strided):
        params = [p.clone().requires_grad_() if p.is_contiguous()
                  else p.detach().transpose(1, 2).clone().transpose(1, 2).requires_grad_()
                  for p in params]
        _set_grads(params, phi)
        assert torch.equal(params[0].grad, -phi[:, :8].reshape(3, 2, 4))
        assert torch.equal(params[1].grad, -phi[:, 8:])
        assert [p.grad.stride() for p in params] == [p.stride() for p in params]

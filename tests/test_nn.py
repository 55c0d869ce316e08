"""Particle ensembles against per-member references."""

import copy

import torch
from torch import nn

from sklmoo.nn import (LeNetTrunk, MLPTrunk, MultiTaskParticleNet, StackedModules,
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

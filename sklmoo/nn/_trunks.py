"""Default trunk networks: an MLP for tabular data and a small LeNet-style CNN for images."""

import numpy as np
import torch
from torch import nn


def _positive_ints(name, value, length=None):
    """``value`` as a tuple of positive ints, or a ValueError naming the parameter."""
    try:
        items = tuple(value)
    except TypeError:
        items = None
    if (items is None or isinstance(value, (str, bytes))
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
                       for v in items)
            or (length is not None and len(items) != length)):
        what = f"{length} positive integers" if length else "a tuple of positive integers"
        raise ValueError(f"{name} must be {what} (e.g. module__{name}=(64, 64)), got {value!r}")
    return tuple(int(v) for v in items)


class MLPTrunk(nn.Module):
    """ReLU multilayer perceptron trunk.

    Parameters
    ----------
    n_features : int
    hidden_units : tuple of int, default=(64, 64)

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import MLPTrunk
    >>> MLPTrunk(10, hidden_units=(32,))(torch.zeros(4, 10)).shape
    torch.Size([4, 32])
    """

    def __init__(self, n_features, hidden_units=(64, 64)):
        super().__init__()
        hidden_units = _positive_ints("hidden_units", hidden_units)
        layers, width = [], n_features
        for h in hidden_units:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.net = nn.Sequential(*layers) if layers else nn.Identity()
        self.n_features_out = width

    def forward(self, x):
        return self.net(x.reshape(x.shape[0], -1))


class LeNetTrunk(nn.Module):
    """LeNet-style trunk for small images (the MT-SGD paper's Multi-MNIST backbone, scaled to
    the 12x12 Multi-Digits canvas): two 3x3 conv + ReLU + 2x2 max-pool blocks and a dense layer.

    Parameters
    ----------
    in_channels : int, default=1
    height, width : int, default=12
    channels : tuple of 2 int, default=(8, 16)
    hidden_units : int, default=64

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import LeNetTrunk
    >>> LeNetTrunk()(torch.zeros(2, 1, 12, 12)).shape
    torch.Size([2, 64])
    """

    def __init__(self, in_channels=1, height=12, width=12, channels=(8, 16), hidden_units=64):
        super().__init__()
        c1, c2 = _positive_ints("channels", channels, length=2)
        (hidden_units,) = _positive_ints("hidden_units", (hidden_units,))
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        h, w = height // 4, width // 4
        if h < 1 or w < 1:
            raise ValueError(f"images of {height}x{width} are too small for two 2x2 poolings")
        self.fc = nn.Sequential(nn.Flatten(), nn.Linear(c2 * h * w, hidden_units), nn.ReLU())
        self.n_features_out = hidden_units

    def forward(self, x):
        return self.fc(self.conv(x))


def dense_plan(module, prefix=""):
    """The layers of a plain dense network as ``[(kind, parameter names)]`` (kinds 'flatten',
    'linear', 'relu'), or None for any other module. Plain: an :class:`MLPTrunk`, ``nn.Linear``,
    ``nn.ReLU``, ``nn.Identity`` or an ``nn.Sequential`` of them (exactly these classes: a
    subclass may compute something else), or a module whose ``_dense_plan(prefix)`` says how.
    Stacked copies of such a network are evaluated by :func:`dense_forward`."""
    kind = type(module)
    if kind is MLPTrunk:
        inner = dense_plan(module.net, prefix + "net.")
        return None if inner is None else [("flatten", ())] + inner
    if kind is nn.Identity:
        return []
    if kind is nn.Linear:
        return [("linear", (prefix + "weight",)
                 + ((prefix + "bias",) if module.bias is not None else ()))]
    if kind is nn.ReLU:
        return [("relu", ())]
    if kind is nn.Sequential:
        plan = []
        for name, child in module.named_children():
            part = dense_plan(child, f"{prefix}{name}.")
            if part is None:
                return None
            plan += part
        return plan
    own = getattr(module, "_dense_plan", None)
    return own(prefix) if callable(own) else None


def dense_forward(plan, tensors, x, n_members, steps=None):
    """Evaluate ``n_members`` stacked copies of a :func:`dense_plan` network on the shared input
    ``x`` (batch, ...) -> (n_members, batch, ...): one batched matrix product per layer
    (``tensors``: parameter name -> stacked (n_members, ...) tensor). On the CPU these are the
    numbers ``vmap`` over ``functional_call`` gives, at a fraction of its overhead.

    ``steps``, a list, receives what a backward pass needs (:func:`dense_pullback`): per
    reshape of the members' values their shape before it, per ReLU its mask, per linear layer
    its parameter names, its members' input (None: the shared ``x``) and ``x`` as it reads
    it."""
    h = None                                       # None: still the shared input x
    for kind, names in plan:
        if kind == "flatten":
            if h is None:
                x = x.reshape(x.shape[0], -1)
            else:
                if steps is not None:
                    steps.append(("reshape", h.shape[1:]))
                h = h.reshape(h.shape[0], h.shape[1], -1)
            continue
        inp = x.expand(n_members, *x.shape) if h is None else h
        if kind == "relu":
            if steps is not None:
                steps.append(("relu", inp > 0))
            h = torch.relu(inp)
            continue
        if steps is not None:
            steps.append(("linear", names, h, x))
        weight = tensors[names[0]].transpose(1, 2)
        h = (torch.baddbmm(tensors[names[1]][:, None, :], inp, weight) if len(names) == 2
             else torch.bmm(inp, weight))
    return x.expand(n_members, *x.shape) if h is None else h


def dense_pullback(plan, tensors, x, n_members, cotangent):
    """Every target's sum over the members of their vector-Jacobian products, for ``n_members``
    stacked copies of a :func:`dense_plan` network on the shared input ``x``.

    ``cotangent`` (n_members, n_targets, batch, ...) holds, at ``[a, b]``, the cotangent of
    member a's output for target b. Returns a dict: parameter name -> (n_targets,
    *parameter shape) tensor whose row b is :math:`\\sum_a J_a^\\top\\,` ``cotangent[a, b]``
    (:math:`J_a` the Jacobian of member a's output in its own parameters). That is what
    ``torch.autograd.grad(outputs, params, cotangents, is_grads_batched=True)`` followed by a
    sum over the members gives, up to rounding, without ``vmap``: the forward pass is
    recomputed without a graph and the cotangents of all targets go back through each
    layer in one batched product (``tensors``: parameter name -> stacked tensor).
    """
    m = n_members
    n_targets = cotangent.shape[1]
    steps = []                                     # what the backward pass needs, per layer
    with torch.no_grad():
        out = dense_forward(plan, tensors, x, m, steps)
        grads = {}
        delta = cotangent.to(out.dtype)                               # (a, b, batch, ...)
        # back to the first linear layer: nothing before it has parameters
        first = min((i for i, s in enumerate(steps) if s[0] == "linear"), default=len(steps))
        for i in range(len(steps) - 1, first - 1, -1):
            kind, *rest = steps[i]
            if kind == "reshape":
                delta = delta.reshape(m, n_targets, *rest[0])
                continue
            if kind == "relu":
                delta = delta * rest[0][:, None]
                continue
            names, inp, shared = rest
            width = delta.shape[-1]
            if inp is None:                        # the shared input: sum the members first
                grads[names[0]] = delta.sum(0).transpose(1, 2) @ shared
            else:                                  # sum over members a and rows r at once
                rows = delta.permute(1, 3, 0, 2).reshape(n_targets, width, -1)
                grads[names[0]] = rows @ inp.reshape(-1, inp.shape[-1])
            if len(names) == 2:
                grads[names[1]] = delta.sum((0, 2))
            if i > first:
                delta = torch.bmm(delta.reshape(m, -1, width), tensors[names[0]]).reshape(
                    m, n_targets, *delta.shape[2:-1], -1)
    return grads

"""Particle ensembles: M networks of one architecture evaluated in one batched call."""

import copy
import math

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from ._trunks import dense_forward, dense_plan, dense_pullback


def _reinitialise(module):
    for sub in module.modules():
        if hasattr(sub, "reset_parameters"):
            sub.reset_parameters()
    return module


def member_factory(module, **kwargs):
    """A callable returning a freshly initialised member: ``module`` is an ``nn.Module`` class
    (called with ``kwargs``) or an instance (deep-copied, then re-initialised).

    Examples
    --------
    >>> from torch import nn
    >>> from sklmoo.nn import member_factory
    >>> make = member_factory(nn.Linear, in_features=3, out_features=2)
    >>> a, b = make(), make()                                 # independently initialised
    >>> bool((a.weight != b.weight).any())
    True
    """
    if isinstance(module, nn.Module):
        if kwargs:
            raise ValueError("module__* parameters need a module class, not an instance")
        return lambda: _reinitialise(copy.deepcopy(module))
    if isinstance(module, type) and issubclass(module, nn.Module):
        return lambda: module(**kwargs)
    raise TypeError(f"module must be an nn.Module class or instance, got {module!r}")


class StackedModules(nn.Module):
    """M copies of one architecture with their own parameters, evaluated with ``torch.func.vmap``.

    The parameters of member m are slice ``m`` of the registered stacked parameters (leading
    dimension M), so an optimiser, ``.to(device)``, ``state_dict`` and skorch's ``save_params``
    see ordinary tensors, and one forward/backward call covers all members.

    Parameters
    ----------
    members : list of nn.Module
        Same architecture, independently initialised.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from sklmoo.nn import StackedModules
    >>> ens = StackedModules([nn.Linear(3, 2) for _ in range(4)])
    >>> ens(torch.randn(5, 3)).shape  # (members, batch, out)
    torch.Size([4, 5, 2])
    """

    def __init__(self, members):
        super().__init__()
        members = list(members)
        if not members:
            raise ValueError("need at least one member")
        params, buffers = stack_module_state(members)
        self.n_members = len(members)
        self._param_names = list(params)
        self._buffer_names = list(buffers)
        for name, p in params.items():
            self.register_parameter(self._key(name), nn.Parameter(p.detach().clone()))
        for name, b in buffers.items():
            self.register_buffer(self._key(name), b.detach().clone())
        # an unregistered, storage-free copy of the architecture: functional_call supplies every
        # tensor, so the skeleton never moves between devices and holds no memory
        self.__dict__["_skeleton"] = copy.deepcopy(members[0]).to("meta")
        # a plain dense member: batched products (the numbers vmap gives, without its overhead)
        self._plan = None if self._buffer_names else dense_plan(members[0])

    @staticmethod
    def _key(name):
        return name.replace(".", "__")

    def member_parameters(self):
        """The stacked parameters, in the members' ``named_parameters`` order."""
        return [getattr(self, self._key(n)) for n in self._param_names]

    def named_member_parameters(self):
        """``(name in the member, stacked parameter)`` pairs, e.g. ``('0.weight', (M, ...))``."""
        return [(n, getattr(self, self._key(n))) for n in self._param_names]

    def dense_plan_for(self, x):
        """The members' :func:`~sklmoo.nn._trunks.dense_plan` when it can evaluate ``x``
        (flat rows, or a plan that flattens them first), else None: ``vmap``."""
        plan = getattr(self, "_plan", None)          # (absent from modules pickled before it)
        if plan is not None and (x.ndim == 2 or plan[:1] == [("flatten", ())]):
            return plan
        return None

    def dense_pullback(self, x):
        """For plain dense members evaluating ``x``: a function mapping cotangents
        (M, n_targets, batch, ...) of the members' outputs to, per stacked parameter (in
        :meth:`member_parameters` order), the (n_targets, ...) sums over the members of their
        vector-Jacobian products (:func:`~sklmoo.nn._trunks.dense_pullback`); None for any
        other members (autograd then)."""
        plan = self.dense_plan_for(x)
        if plan is None:
            return None
        tensors = {n: getattr(self, self._key(n)).detach() for n in self._param_names}

        def pullback(cotangent):
            grads = dense_pullback(plan, tensors, x, self.n_members, cotangent)
            return [grads[n] for n in self._param_names]

        return pullback

    def forward(self, x):
        """Evaluate every member on the same input ``x`` -> (M, batch, ...)."""
        params = {n: getattr(self, self._key(n)) for n in self._param_names}
        plan = self.dense_plan_for(x)
        if plan is not None:
            return dense_forward(plan, params, x, self.n_members)
        buffers = {n: getattr(self, self._key(n)) for n in self._buffer_names}
        skeleton = self._skeleton

        def one(p, b, inp):
            return functional_call(skeleton, (p, b), (inp,))

        return vmap(one, in_dims=(0, 0, None), randomness="different")(params, buffers, x)

    def train(self, mode=True):
        """nn.Module's, and the same mode for the unregistered skeleton the members run in
        (a member's dropout or batch norm must follow ``eval()``)."""
        super().train(mode)
        self._skeleton.train(mode)
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_skeleton"] = copy.deepcopy(self._skeleton)
        return state


class StackedLinear(nn.Module):
    """M independent linear layers (one per particle) applied to per-particle inputs.

    ``forward(h)`` with ``h`` of shape (M, batch, in_features) -> (M, batch, out_features).
    Initialised like ``nn.Linear``, independently per member.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import StackedLinear
    >>> StackedLinear(3, 8, 2)(torch.randn(3, 5, 8)).shape      # (members, batch, out)
    torch.Size([3, 5, 2])
    """

    def __init__(self, n_members, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_members, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(n_members, out_features))
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def member_parameters(self):
        return [self.weight, self.bias]

    def summed_vjp(self, h, cotangent):
        """[weight, bias] gradients (n_targets, ...): for every target b, the sum over members
        a of member a's vector-Jacobian product with ``cotangent[a, b]`` (M, n_targets, batch,
        out), at the members' inputs ``h`` (M, batch, in); the function-space kernel's
        pull-back without autograd."""
        n_targets, out = cotangent.shape[1], cotangent.shape[-1]
        rows = cotangent.permute(1, 3, 0, 2).reshape(n_targets, out, -1)    # (b, out, a*r)
        return [rows @ h.reshape(-1, h.shape[-1]).to(rows.dtype), cotangent.sum((0, 2))]

    def forward(self, h):
        if h.ndim != 3:
            raise ValueError(f"StackedLinear takes (members, batch, in_features) inputs, got "
                             f"shape {tuple(h.shape)}")
        # one batched product with the bias added in (einsum's permutes and reshapes cost
        # more than the product at a network's batch sizes); one input row block for every
        # member broadcasts, as with einsum
        h = h.expand(self.weight.shape[0], *h.shape[1:]) if h.shape[0] == 1 else h
        return torch.baddbmm(self.bias[:, None, :], h, self.weight.transpose(1, 2))


class StackedGaussianHead(nn.Module):
    r"""M independent Gaussian regression heads: a mean and a standard deviation per sample.

    ``forward(h)`` with ``h`` of shape (M, batch, in_features) -> (M, batch, 2): channel 0 is
    the mean :math:`\mu = w^\top h + b`, channel 1 the standard deviation
    :math:`\sigma = \mathrm{softplus}(s) + \sigma_{\min}`. Homoscedastic (default): ``s`` is
    one learned parameter per member (the noise scale of a Gaussian likelihood); heteroscedastic:
    ``s = v^\top h + c`` depends on the input. Initialised like ``nn.Linear`` for the mean and with
    :math:`\sigma = 1` (the scale of standardised targets) for the noise.

    With ``noise_map=True`` (homoscedastic heads only) a fixed linear map of the features is
    added to ``s``: :math:`s = s_0 + \mathrm{clip}(u^\top h + e, l, r)`, with :math:`u, e`
    and the bounds :math:`l, r` buffers (never trained; zero until :meth:`set_noise_map`, so
    that the head computes as without them): the noise scale that :func:`fit_feature_noise`
    fits once the networks are trained, bounded by its range on the rows it was fitted on
    (far from them a linear map of ReLU features would shrink or grow without limit).

    Parameters
    ----------
    n_members, in_features : int
    heteroscedastic : bool, default=False
    min_std : float, default=1e-3
        Floor of :math:`\sigma`, so that the likelihood cannot collapse onto a training point.
    noise_map : bool, default=False

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import StackedGaussianHead
    >>> out = StackedGaussianHead(3, 8)(torch.randn(3, 5, 8))
    >>> out.shape, bool((out[..., 1] > 0).all())
    (torch.Size([3, 5, 2]), True)
    """

    #: softplus(_UNIT) == 1: the noise scale starts at the standardised targets' scale
    _UNIT = math.log(math.e - 1.0)
    #: class defaults: heads pickled before the noise map have neither attribute
    noise_map = False
    noise_map_active = False

    def __init__(self, n_members, in_features, heteroscedastic=False, min_std=1e-3,
                 noise_map=False):
        super().__init__()
        self.heteroscedastic = bool(heteroscedastic)
        self.min_std = float(min_std)
        self.mean = StackedLinear(n_members, in_features, 1)
        if self.heteroscedastic:
            if noise_map:
                raise ValueError("noise_map is for homoscedastic heads: a heteroscedastic "
                                 "head's noise already depends on its input")
            self.scale = StackedLinear(n_members, in_features, 1)
            with torch.no_grad():
                self.scale.weight.mul_(0.1)
                self.scale.bias.fill_(self._UNIT - min_std)
        else:
            self.raw_scale = nn.Parameter(torch.full((n_members, 1), self._UNIT - min_std))
        self.noise_map = bool(noise_map)
        #: whether the noise map is non-zero: until it is, the head computes exactly as without
        #: one (kept in step by :meth:`set_noise_map` and by ``load_state_dict``)
        self.noise_map_active = False
        if self.noise_map:
            self.register_buffer("noise_weight", torch.zeros(n_members, in_features, 1))
            self.register_buffer("noise_bias", torch.zeros(n_members, 1, 1))
            self.register_buffer("noise_low", torch.zeros(n_members, 1, 1))
            self.register_buffer("noise_high", torch.zeros(n_members, 1, 1))
            self.register_load_state_dict_post_hook(_sync_noise_map)

    def member_parameters(self):
        tail = (self.scale.member_parameters() if self.heteroscedastic else [self.raw_scale])
        return self.mean.member_parameters() + tail

    def set_noise_map(self, weight=None, bias=None, low=None, high=None):
        """Set the noise map's (M, in_features) weights, (M,) biases and (M,) bounds (None:
        zeros, the constant noise; bounds None: unbounded)."""
        if not self.noise_map:
            raise ValueError("this head was built with noise_map=False")
        inf = torch.tensor(float("inf"))
        low = -inf if low is None and weight is not None else low
        high = inf if high is None and weight is not None else high
        with torch.no_grad():
            for buf, value in ((self.noise_weight, weight), (self.noise_bias, bias),
                               (self.noise_low, low), (self.noise_high, high)):
                buf.zero_()
                if value is not None:
                    value = torch.as_tensor(value).to(buf.dtype)
                    value = value.expand(buf.numel()) if value.numel() == 1 else value
                    buf.copy_(value.reshape(buf.shape))
        _sync_noise_map(self)

    def _raw_scale(self, h):
        """(M, batch or 1, 1) noise parameter s before the softplus."""
        if self.heteroscedastic:
            return self.scale(h)
        raw = self.raw_scale[:, None, :]
        if self.noise_map_active:
            shift = torch.baddbmm(self.noise_bias.to(h.dtype), h, self.noise_weight.to(h.dtype))
            raw = raw + torch.maximum(torch.minimum(shift, self.noise_high.to(h.dtype)),
                                      self.noise_low.to(h.dtype))
        return raw

    def forward(self, h):
        mean = self.mean(h)
        raw = self._raw_scale(h).expand_as(mean)
        return torch.cat([mean, nn.functional.softplus(raw) + self.min_std], dim=-1)

    def summed_vjp(self, h, cotangent):
        """:meth:`StackedLinear.summed_vjp` for the mean and the noise scale, in
        :meth:`member_parameters` order (cotangent (M, n_targets, batch, 2))."""
        grads = self.mean.summed_vjp(h, cotangent[..., :1])
        with torch.no_grad():
            raw = self._raw_scale(h)
        slope = torch.sigmoid(raw)[:, None].to(cotangent.dtype)       # softplus' derivative
        if self.heteroscedastic:
            return grads + self.scale.summed_vjp(h, cotangent[..., 1:] * slope)
        return grads + [(cotangent[..., 1:] * slope).sum((0, 2))]


def _sync_noise_map(head, *_):
    """``noise_map_active`` from the buffers (after :meth:`set_noise_map` or a state load)."""
    head.noise_map_active = bool(head.noise_weight.any() or head.noise_bias.any())


def gaussian_map_pullback(mean_coef, var_coef, head_outputs, mapped, cotangent):
    r"""Cotangents of a Gaussian head's (m, sigma) from those of an output map's
    :math:`(\mu + c_m m,\ \sqrt{c_v \sigma^2 + \text{rest}}, \ldots)` (``cotangent``
    (M, n_targets, batch, >= 2) at member a's outputs; ``head_outputs`` (M, batch, 2),
    ``mapped`` (M, batch, >= 2)): :math:`c_m` for the mean, :math:`c_v \sigma / \text{std}`
    for sigma."""
    dtype = cotangent.dtype
    slope = (var_coef * head_outputs[..., 1] / mapped[..., 1]).to(dtype)          # (M, batch)
    return torch.stack([cotangent[..., 0] * mean_coef.to(dtype),
                        cotangent[..., 1] * slope[:, None]], dim=-1)


class LinearMean(nn.Module):
    r"""A fixed Bayesian linear model under Gaussian particle heads: the particles fit what it
    leaves over, in units of its residual scale.

    An ``output_map`` of :class:`MultiTaskParticleNet`: ``forward(x, outputs)`` takes the
    input batch and the per-task particle outputs (T tensors (batch, M, 2): a Gaussian head's
    mean m and standard deviation :math:`\sigma`) and returns T tensors (batch, M, 3):

    .. math:: \mu_t(x) + g_t s_t\, m, \qquad \sqrt{g_t s_t^2 \sigma^2 + (1 - g_t) s_t^2
              + v_t(x)}, \qquad \sqrt{v_t(x)},

    where, on the flattened input, :math:`\mu_t(x) = w_t^\top x + b_t` is task t's linear
    mean, :math:`v_t(x) = \lVert L_t^\top (x - c_t) \rVert^2` its posterior variance
    (:math:`L_t L_t^\top = \Sigma_t`, the weights' posterior covariance) and :math:`s_t` the
    scale of its residuals: each particle's mean and predictive standard deviation, and the
    standard deviation of the part that comes from the linear weights (the same for every
    particle, so that it can be reported as epistemic). :math:`g_t` is the networks' gate
    (:meth:`set_gate`): 1 (default), or 0 for the linear model's predictive distribution
    alone. The variance is computed in float64
    and leaves as a standard deviation: for inputs far outside the training data its square
    would overflow float32 long before it does. Until :meth:`set` is called it passes m and
    :math:`\sigma` through and adds a channel of zeros (zero mean and variance, unit scale).
    Buffers: saved with the module, never trained.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import LinearMean
    >>> lin = LinearMean(3, n_tasks=1)
    >>> lin.set(torch.ones(1, 3), torch.tensor([1.0]), scale=torch.tensor([0.5]))
    >>> heads = (torch.tensor([[[2.0, 1.0]]]),)         # one row, one particle: N(2, 1)
    >>> lin(torch.ones(1, 3), heads)[0].tolist(), bool(lin.fitted)
    ([[[5.0, 0.5, 0.0]]], True)
    """

    def __init__(self, in_features, n_tasks):
        super().__init__()
        self.register_buffer("weight", torch.zeros(n_tasks, in_features))
        self.register_buffer("bias", torch.zeros(n_tasks))
        self.register_buffer("scale", torch.ones(n_tasks))
        self.register_buffer("center", torch.zeros(n_tasks, in_features))
        self.register_buffer("factor", torch.zeros(n_tasks, in_features, in_features))
        self.register_buffer("fitted", torch.tensor(False))
        self.register_buffer("gate", torch.ones(n_tasks))

    def set_gate(self, gate):
        r"""Per task (n_tasks,), 1: the particles add to the linear model; 0: it predicts
        alone (mean :math:`\mu_t(x)`, variance :math:`s_t^2 + v_t(x)`, Bayesian ridge's
        predictive distribution)."""
        with torch.no_grad():
            self.gate.copy_(torch.as_tensor(gate, dtype=self.gate.dtype))

    def set(self, weight, bias, scale=None, center=None, covariance=None):
        """Copy a fitted (n_tasks, in_features) weight and (n_tasks,) bias in, with the
        residuals' (n_tasks,) ``scale``, the inputs' ``center`` (n_tasks, in_features) and the
        weights' posterior covariance about it (n_tasks, in_features, in_features), if given.
        The mean is kept as its value at the center plus the weights times ``x - center``, so
        that inputs far from the origin do not lose float32 precision."""
        with torch.no_grad():
            w = torch.as_tensor(weight, dtype=torch.float64)
            c = (torch.zeros_like(w) if center is None
                 else torch.as_tensor(center, dtype=torch.float64))
            self.weight.copy_(w.to(self.weight.dtype))
            self.center.copy_(c.to(self.center.dtype))
            # the mean at the center: bias + w . c, in float64
            self.bias.copy_((torch.as_tensor(bias, dtype=torch.float64)
                             + (w * c).sum(-1)).to(self.bias.dtype))
            if scale is not None:
                self.scale.copy_(torch.as_tensor(scale, dtype=self.scale.dtype))
            if covariance is not None:
                cov = torch.as_tensor(covariance, dtype=torch.float64)
                # symmetric square root: a covariance that is only semi-definite has none of
                # Cholesky's, and eigenvalues below zero from rounding are clipped
                vals, vecs = torch.linalg.eigh((cov + cov.transpose(-1, -2)) / 2)
                root = vecs * vals.clamp(min=0).sqrt()[..., None, :]
                self.factor.copy_(root.to(self.factor.dtype))
            self.fitted.fill_(True)

    def moments(self, x):
        """The linear mean (in the module's dtype) and its posterior variance (float64),
        (batch, n_tasks) each."""
        x = x.reshape(x.shape[0], -1).to(self.weight.dtype)
        centred = x[:, None, :] - self.center[None]                         # (batch, T, d)
        mean = torch.einsum("btd,td->bt", centred, self.weight) + self.bias
        # float64: ||L^T (x - c)||^2 overflows float32 once |x - c| nears 1e19
        variance = torch.einsum("btd,tde->bte", centred.double(),
                                self.factor.double()).pow(2).sum(-1)
        return mean, variance

    def forward(self, x, outputs):
        """The particles' per-task outputs with the linear model under them (see the class
        description): T tensors (batch, M, 3) of mean, standard deviation, and the standard
        deviation of the weights' part."""
        mean, variance = self.moments(x)
        out = []
        for t, o in enumerate(outputs):
            o_mean, o_std = o[..., :1], o[..., 1:2]
            scale, gate = self.scale[t].to(o.dtype), self.gate[t].to(o.dtype)
            linear = variance[:, t, None, None].expand_as(o_mean)
            # gate 1: the particles' scaled noise; 0: the linear model's own, s^2 (float64)
            g = self.gate[t].to(linear.dtype)
            noise = (g * (scale * o_std).to(linear.dtype) ** 2
                     + (1 - g) * self.scale[t].to(linear.dtype) ** 2)
            std = (noise + linear).sqrt()
            out.append(torch.cat([mean[:, t, None, None].to(o.dtype) + gate * scale * o_mean,
                                  std.to(o.dtype), linear.sqrt().to(o.dtype)], dim=-1))
        return tuple(out)

    def variance_coefficient(self, t):
        r"""c in task t's variance :math:`c\,\sigma^2 + \text{rest}(x)`: :math:`g_t s_t^2`."""
        return float(self.gate[t]) * float(self.scale[t]) ** 2

    def task_pullback(self, t, head_outputs, mapped, cotangent):
        """Task t's :func:`gaussian_map_pullback` (mean coefficient g_t s_t, variance
        g_t s_t^2)."""
        scale, gate = self.scale[t], self.gate[t]
        return gaussian_map_pullback(gate * scale, gate * scale ** 2, head_outputs, mapped,
                                     cotangent)


class LinearLogits(nn.Module):
    r"""Fixed draws of a Bayesian logistic regression that stand in for the particles' logits,
    task by task.

    An ``output_map`` of :class:`MultiTaskParticleNet` under logit heads
    (:class:`StackedLinear`): ``forward(x, outputs)`` takes the input batch and the per-task
    particle logits (T tensors (batch, M, C_t)) and returns them unchanged for a task whose
    gate is open (1, the default), and for a closed one (0, :meth:`set_gate`) particle m's
    logits of the linear model

    .. math:: (x - c_t)^\top W_{t,m} + b_{t,m},

    on the flattened input, :math:`(W_{t,m}, b_{t,m})` the m-th of M fixed draws from the
    model's posterior (:meth:`set`): the particles then average the linear model's predictive
    distribution and their spread is its epistemic part. An open gate costs no tensor
    operation. Buffers: saved with the module, never trained.

    Parameters
    ----------
    in_features : int
        Flattened input size d.
    n_particles : int
        M, the draws per task.
    n_classes : list of int
        Classes per task (C_t).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import LinearLogits
    >>> lin = LinearLogits(2, n_particles=1, n_classes=[2])
    >>> logits = (torch.zeros(1, 1, 2),)                    # one row, one particle
    >>> lin.set(0, torch.tensor([[[0.0, 0.0], [1.0, 0.0]]]), torch.zeros(1, 2), torch.zeros(2))
    >>> lin(torch.ones(1, 2), logits)[0].tolist()           # gate open: the particles' logits
    [[[0.0, 0.0]]]
    >>> lin.set_gate([0])
    >>> lin(torch.ones(1, 2), logits)[0].tolist()           # closed: the linear model's
    [[[0.0, 1.0]]]
    """

    #: the heads whose pull-back :meth:`task_pullback` maps (see
    #: :meth:`MultiTaskParticleNet.head_pullback`)
    pullback_heads = (StackedLinear,)

    def __init__(self, in_features, n_particles, n_classes):
        super().__init__()
        self.n_tasks = len(n_classes)
        self.register_buffer("gate", torch.ones(self.n_tasks))
        for t, c in enumerate(n_classes):
            self.register_buffer(f"weight_{t}", torch.zeros(n_particles, c, in_features))
            self.register_buffer(f"bias_{t}", torch.zeros(n_particles, c))
            self.register_buffer(f"center_{t}", torch.zeros(in_features))
        self._closed = []
        self.register_load_state_dict_post_hook(_sync_closed_gates)

    def set_gate(self, gate):
        """Per task (n_tasks,), 1: the particles' logits; 0: the linear model's draws."""
        with torch.no_grad():
            self.gate.copy_(torch.as_tensor(gate, dtype=self.gate.dtype))
        _sync_closed_gates(self)

    def set(self, t, weight, bias, center):
        """Task t's draws: ``weight`` (M, C_t, d) and ``bias`` (M, C_t) of the logits about
        the inputs' ``center`` (d,)."""
        with torch.no_grad():
            for name, value in (("weight", weight), ("bias", bias), ("center", center)):
                buffer = getattr(self, f"{name}_{t}")
                buffer.copy_(torch.as_tensor(value, dtype=torch.float64).to(buffer.dtype))

    def task_logits(self, t, x, dtype=None):
        """Task t's linear logits (batch, M, C_t) of the draws on the batch ``x``, computed
        in ``dtype`` (None: the buffers')."""
        weight, bias, center = (getattr(self, f"{name}_{t}").to(dtype)
                                for name in ("weight", "bias", "center"))
        z = x.reshape(x.shape[0], -1).to(weight.dtype) - center
        return torch.einsum("bd,mcd->bmc", z, weight) + bias

    def forward(self, x, outputs):
        """The per-task logits (see the class description)."""
        if not self._closed:
            return outputs
        return tuple(self.task_logits(t, x).to(o.dtype) if t in self._closed else o
                     for t, o in enumerate(outputs))

    def task_pullback(self, t, head_outputs, mapped, cotangent):
        """Task t's logits' cotangents to its head's: unchanged through an open gate, zero
        through a closed one (the linear logits do not depend on the particles)."""
        return torch.zeros_like(cotangent) if t in self._closed else cotangent


def _sync_closed_gates(module, *_):
    """The closed gates' tasks, read once from the buffer (after :meth:`LinearLogits.set_gate`
    or a state load) rather than at every forward pass."""
    module._closed = [t for t, g in enumerate(module.gate.tolist()) if g == 0]


class MultiTaskParticleNet(nn.Module):
    """M particle networks with a shared-per-particle trunk and per-task heads.

    Particle m maps ``x`` through its trunk :math:`\\alpha_m` to features, then through its
    head :math:`\\beta^t_m` for every task t (the MT-SGD paper's Section 3 model).

    Parameters
    ----------
    trunk_factory : callable
        Returns a fresh, independently initialised trunk ``nn.Module`` mapping a batch to
        (batch, n_features_out).
    n_particles : int
    n_classes : list of int
        Classes per task (the width of each task's head).
    input_shape : tuple, optional
        Reshape flat inputs to ``(batch, *input_shape)`` before the trunk (images given flat).
    head_factory : callable, optional
        ``head_factory(n_particles, n_features, width)`` builds one task's heads, a module
        with ``member_parameters()`` mapping (M, batch, n_features) to (M, batch, ...). Default:
        :class:`StackedLinear` (logits). Regression uses :class:`StackedGaussianHead`.
    output_map : nn.Module, optional
        Called as ``output_map(x, outputs)`` on the input batch and the tuple of per-task
        outputs, returning the tuple the network outputs: e.g. :class:`LinearMean`, a fixed
        Bayesian linear model under Gaussian heads, or :class:`LinearLogits`, a Bayesian
        logistic regression that can stand in for a task's logits.

    Notes
    -----
    ``forward`` returns a tuple of T output tensors of shape (batch, M, n_classes_t) (logits by
    default): batch first, so skorch concatenates mini-batch outputs along the sample axis.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import MLPTrunk, MultiTaskParticleNet, member_factory
    >>> net = MultiTaskParticleNet(member_factory(MLPTrunk, n_features=6, hidden_units=(8,)),
    ...                            n_particles=4, n_classes=[3, 2])
    >>> [out.shape for out in net(torch.randn(5, 6))]         # per task: (batch, M, classes)
    [torch.Size([5, 4, 3]), torch.Size([5, 4, 2])]
    """

    def __init__(self, trunk_factory, n_particles, n_classes, input_shape=None,
                 head_factory=None, output_map=None):
        super().__init__()
        self.output_map = output_map
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.trunk = StackedModules([trunk_factory() for _ in range(n_particles)])
        probe = trunk_factory()
        shape = self.input_shape
        with torch.no_grad():
            if shape is None:
                n_out = getattr(probe, "n_features_out", None)
                if n_out is None:
                    raise ValueError("cannot infer the trunk's output size: give it an "
                                     "n_features_out attribute or pass input_shape")
            else:
                # eval mode: a BatchNorm layer cannot normalise a single training sample
                n_out = probe.eval()(torch.zeros(1, *shape)).reshape(1, -1).shape[1]
        self.n_features_out = int(n_out)
        head_factory = StackedLinear if head_factory is None else head_factory
        self.heads = nn.ModuleList(head_factory(n_particles, self.n_features_out, c)
                                   for c in n_classes)

    @property
    def n_particles(self):
        return self.trunk.n_members

    def _trunk_input(self, x):
        return x if self.input_shape is None else x.reshape(x.shape[0], *self.input_shape)

    def _computes_as_defined(self):
        # a subclass that computes its features or outputs otherwise gets autograd
        base = MultiTaskParticleNet
        return all(getattr(type(self), name) is getattr(base, name)
                   for name in ("features", "forward_with_features", "_trunk_input"))

    def trunk_pullback(self, x):
        """:meth:`StackedModules.dense_pullback` of the trunk on the batch ``x`` given to
        :meth:`forward` (None when the trunk is not plain dense, or for a subclass that
        computes its features otherwise)."""
        if not self._computes_as_defined():
            return None
        return self.trunk.dense_pullback(self._trunk_input(x))

    def head_pullback(self, t, features, outputs):
        """Task t's function-space pull-back without autograd, as
        :meth:`StackedModules.dense_pullback` for the trunk: a function mapping cotangents
        (M, n_targets, batch, C) of its outputs (``outputs`` (M, batch, C), after the
        ``output_map``) to its head's summed vector-Jacobian products, for sklmoo's own heads
        and output maps (the mean functions over Gaussian heads; None for others: autograd
        then). ``features``: the trunk's (M, batch, n_features)."""
        head = self.heads[t]
        vjp = _own_method(head, "summed_vjp")
        task_map = None if self.output_map is None else _own_method(self.output_map,
                                                                    "task_pullback")
        if (vjp is None or not self._computes_as_defined()
                or (self.output_map is not None
                    and (task_map is None
                         or type(head) not in getattr(type(self.output_map), "pullback_heads",
                                                      (StackedGaussianHead,))))):
            return None
        h = features.detach()

        def pullback(cotangent):
            if task_map is not None:
                with torch.no_grad():
                    cotangent = task_map(t, head(h), outputs.detach(), cotangent)
            return vjp(h, cotangent)

        return pullback

    def features(self, x):
        h = self.trunk(self._trunk_input(x))
        return h.reshape(h.shape[0], h.shape[1], -1)

    def forward(self, x):
        return self.forward_with_features(x)[1]

    def forward_with_features(self, x):
        """``(features (M, batch, n_features), logits)``: the trunk outputs that a
        function-space kernel compares, and the tuple :meth:`forward` returns."""
        h = self.features(x)
        outs = tuple(head(h).transpose(0, 1) for head in self.heads)
        if self.output_map is not None:
            outs = tuple(self.output_map(x, outs))
        return h, outs


def _own_method(obj, name):
    """``obj.name`` when ``obj``'s own class defines it (a subclass may compute something
    else), else None."""
    return getattr(obj, name) if name in type(obj).__dict__ else None


def flatten_particles(params):
    """Stacked parameters (each (M, ...)) -> one (M, d) matrix, one row per particle.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import flatten_particles
    >>> flatten_particles([torch.zeros(4, 2, 3), torch.zeros(4, 5)]).shape
    torch.Size([4, 11])
    """
    if not len(params):
        raise ValueError("no parameters to flatten")
    m = params[0].shape[0]
    if any(p.shape[0] != m for p in params):          # shapes only: no tensor operation
        raise ValueError(f"every parameter needs the same number of particles (leading "
                         f"dimension), got {[p.shape[0] for p in params]}")
    return torch.cat([p.reshape(m, -1) for p in params], dim=1)


def unflatten_like(flat, params):
    """Split an (M, d) matrix back into tensors shaped like ``params``.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import flatten_particles, unflatten_like
    >>> params = [torch.randn(4, 2, 3), torch.randn(4, 5)]
    >>> back = unflatten_like(flatten_particles(params), params)
    >>> all(torch.equal(a, b) for a, b in zip(back, params))
    True
    """
    m = flat.shape[0]
    if any(p.shape[0] != m for p in params):
        raise ValueError(f"an ({m}, {flat.shape[1]}) matrix does not split into parameters of "
                         f"{[p.shape[0] for p in params]} particles")
    sizes = [p.numel() // m if m else 0 for p in params]
    if m == 0 or sum(sizes) != flat.shape[1]:
        raise ValueError(f"an ({m}, {flat.shape[1]}) matrix does not split into parameters of "
                         f"{sum(sizes)} values per particle")
    return [part.reshape(p.shape) for part, p in zip(flat.split(sizes, dim=1), params)]

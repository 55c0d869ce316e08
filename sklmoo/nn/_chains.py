"""Independent SG-MCMC chains of one network, batched with torch.func, and their samples."""

import torch
from torch import nn
from torch.func import functional_call, vmap

from .._io import backed_by_storage
from ._ensemble import StackedModules
from ._trunks import dense_forward, dense_plan


class TrunkClassifier(nn.Module):
    """A trunk (batch -> (batch, n_features_out)) followed by a linear layer to class logits.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import MLPTrunk, TrunkClassifier
    >>> TrunkClassifier(MLPTrunk(4, hidden_units=(8,)), n_classes=3)(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    """

    def __init__(self, trunk, n_classes):
        super().__init__()
        self.trunk = trunk
        self.head = nn.Linear(trunk.n_features_out, n_classes)

    def forward(self, x):
        return self.head(self.trunk(x))

    def _dense_plan(self, prefix=""):
        """The trunk's and the head's :func:`~sklmoo.nn._trunks.dense_plan` (None when the
        trunk is not a plain dense network, or for a subclass)."""
        if type(self) is not TrunkClassifier:
            return None
        trunk = dense_plan(self.trunk, prefix + "trunk.")
        return None if trunk is None else trunk + dense_plan(self.head, prefix + "head.")


class SampleStore(nn.Module):
    """Collected posterior samples of stacked chains, kept on the CPU.

    One buffer per member tensor (parameters and buffers), shaped (n_draws, n_chains, ...).
    The buffers are part of the owner's ``state_dict`` (so ``save_params`` / ``load_params``
    and pickling carry the samples), but ``.to(device)`` leaves them on the CPU: a network's
    hundreds of samples must not occupy accelerator memory. Loading a state dict resizes the
    buffers to what it holds, once :meth:`check_state_dict` has accepted it.

    Parameters
    ----------
    names : list of str
    dtype : torch.dtype, default=torch.float32
        Storage type of the draws.
    shapes : dict, optional
        ``{name: shape of one draw}`` (n_chains, ...): loaded draws must have it.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import SampleStore
    >>> store = SampleStore(["w"])
    >>> store.append({"w": torch.ones(2, 3)})                 # one draw of 2 chains
    >>> store.append({"w": torch.zeros(2, 3)})
    >>> len(store), store.draws()["w"].shape
    (2, torch.Size([2, 2, 3]))
    """

    def __init__(self, names, dtype=torch.float32, shapes=None):
        super().__init__()
        self.names = list(names)
        self.dtype = dtype
        self.shapes = None if shapes is None else {k: tuple(v) for k, v in shapes.items()}
        for name in self.names:
            self.register_buffer(self._key(name), torch.empty(0))

    @staticmethod
    def _key(name):
        return "draw__" + name.replace(".", "__")

    def _apply(self, fn, recurse=True):
        # keep the samples on the CPU and in their storage dtype whatever the owner is moved to
        return self

    def __len__(self):
        return int(getattr(self, self._key(self.names[0])).shape[0]) if self.names else 0

    def clear(self):
        for name in self.names:
            setattr(self, self._key(name), torch.empty(0))

    @torch.no_grad()
    def append(self, tensors):
        """Add one draw: ``tensors`` maps every name to a (n_chains, ...) tensor."""
        new = {}
        for name in self.names:
            # copy=True: for CPU tensors already in the storage dtype ``.to`` would return the
            # live tensor itself, and the stored draw would follow the chain as it moves on
            value = tensors[name].detach().to("cpu", self.dtype, copy=True)
            if value.is_floating_point():
                finite = torch.isfinite(value)
                if not finite.all() and torch.isfinite(tensors[name].detach()).all():
                    limit = torch.finfo(self.dtype).max
                    raise ValueError(
                        f"a draw of {name!r} does not fit the sample storage type {self.dtype}: "
                        f"its largest magnitude {float(tensors[name].detach().abs().max()):.4g} "
                        f"exceeds {limit:.4g}; store the draws as float32")
            new[name] = value.unsqueeze(0)
        for name in self.names:
            old = getattr(self, self._key(name))
            setattr(self, self._key(name),
                    new[name] if old.numel() == 0 else torch.cat([old, new[name]]))

    def draws(self):
        """``{name: (n_draws, n_chains, ...) tensor}``."""
        return {name: getattr(self, self._key(name)) for name in self.names}

    def check_state_dict(self, state_dict, prefix=""):
        """Refuse draws that do not fit these chains, before anything is allocated for them:
        every draw buffer of ``state_dict`` (keys under ``prefix``) must be a tensor of shape
        ``(n_draws, *shape_of_one_draw)`` with the same n_draws for all, whose elements all have
        bytes in its storage (a view with a zero or overlapping stride claiming 100,000 draws
        of one stored draw is a forged file: loading it would allocate them all).

        Parameters
        ----------
        state_dict : dict
        prefix : str, default=''
            This store's prefix in ``state_dict`` (``'samples.'`` in a :class:`ChainEnsemble`'s).

        Raises
        ------
        ValueError
            Naming the key and the mismatch.
        """
        shapes = getattr(self, "shapes", None)       # None in pickles of earlier versions
        n_draws = {}
        for name in self.names:
            key = prefix + self._key(name)
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"draw buffer {key!r} is a {type(value).__name__}, not a tensor")
            if not backed_by_storage(value):
                raise ValueError(f"draw buffer {key!r} claims shape {tuple(value.shape)} but "
                                 f"holds data for only "
                                 f"{value.untyped_storage().nbytes() // value.element_size()} "
                                 "elements (a view with a zero or overlapping stride)")
            if value.dim() == 1 and value.numel() == 0:           # a store without draws
                n_draws[key] = 0
                continue
            if value.dim() == 0:
                raise ValueError(f"draw buffer {key!r} is a scalar, not (n_draws, ...) draws")
            if not value.is_floating_point():
                raise ValueError(f"draw buffer {key!r} holds {value.dtype} values; draws are "
                                 "stored as floating point")
            if shapes is not None and name in shapes and tuple(value.shape[1:]) != shapes[name]:
                raise ValueError(f"draw buffer {key!r} has shape {tuple(value.shape)}; the draws "
                                 f"of these chains have shape (n_draws, *{shapes[name]})")
            n_draws[key] = int(value.shape[0])
        if len(set(n_draws.values())) > 1:
            raise ValueError(f"the draw buffers hold different numbers of draws: {n_draws}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        self.check_state_dict(state_dict, prefix)
        for name in self.names:
            key = prefix + self._key(name)
            if key in state_dict:
                # in this store's dtype: the copy converts a file's float16 / float64 draws
                setattr(self, self._key(name), torch.empty(state_dict[key].shape,
                                                           dtype=self.dtype))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class ChainEnsemble(nn.Module):
    """``n_chains`` copies of a network evaluated in one vectorised call, plus their samples.

    Parameters
    ----------
    factory : callable
        Returns a fresh, independently initialised network mapping a batch to (batch, n_out).
    n_chains : int
    input_shape : tuple, optional
        Reshape flat inputs to ``(batch, *input_shape)`` first (images given flat).
    sample_dtype : torch.dtype, default=torch.float32
        Storage type of the collected samples (``torch.float16`` halves their memory).

    Notes
    -----
    ``forward`` returns (batch, n_chains, n_out): batch first, so skorch concatenates
    mini-batch outputs along the sample axis.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from sklmoo.nn import ChainEnsemble
    >>> net = ChainEnsemble(lambda: nn.Linear(3, 2), n_chains=4)
    >>> net(torch.zeros(5, 3)).shape
    torch.Size([5, 4, 2])
    >>> net.collect(); net.collect(); len(net.samples)
    2
    >>> net.forward_samples(torch.zeros(5, 3)).shape   # (draws, chains, batch, out)
    torch.Size([2, 4, 5, 2])
    """

    def __init__(self, factory, n_chains, input_shape=None, sample_dtype=torch.float32):
        super().__init__()
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.chains = StackedModules([factory() for _ in range(n_chains)])
        self.samples = SampleStore(self.chains._param_names + self.chains._buffer_names,
                                   sample_dtype, shapes={k: v.shape for k, v in
                                                         self.chain_tensors().items()})

    @property
    def n_chains(self):
        return self.chains.n_members

    def _reshape(self, x):
        return x if self.input_shape is None else x.reshape(x.shape[0], *self.input_shape)

    def forward(self, x):
        return self.chains(self._reshape(x)).transpose(0, 1)

    def chain_tensors(self):
        """Current state of every chain: ``{member name: (n_chains, ...) tensor}``."""
        c = self.chains
        return {n: getattr(c, c._key(n)) for n in c._param_names + c._buffer_names}

    def collect(self):
        """Store the chains' current parameters as one draw."""
        self.samples.append(self.chain_tensors())

    def prepared_draws(self):
        """The stored draws as (n_draws * n_chains, ...) tensors on the chains' device and
        dtype, ready for :meth:`forward_samples` (prepare once, evaluate many batches)."""
        ref = next(iter(self.chain_tensors().values()))
        n = len(self.samples) * self.n_chains
        return {k: v.reshape(n, *v.shape[2:]).to(ref.device, ref.dtype)
                for k, v in self.samples.draws().items()}

    def forward_samples(self, x, prepared=None):
        """Evaluate every stored draw of every chain on ``x`` -> (n_draws, n_chains, batch,
        n_out); ``prepared`` is :meth:`prepared_draws`, computed here when not given."""
        flat = self.prepared_draws() if prepared is None else prepared
        n_draws, n_chains = len(self.samples), self.n_chains
        params = {n: flat[n] for n in self.chains._param_names}
        buffers = {n: flat[n] for n in self.chains._buffer_names}
        skeleton = self.chains._skeleton

        def one(p, b, inp):
            return functional_call(skeleton, (p, b), (inp,))

        x = self._reshape(x)
        plan = self.chains.dense_plan_for(x)
        if plan is not None:
            out = dense_forward(plan, params, x, n_draws * n_chains)
        else:
            out = vmap(one, in_dims=(0, 0, None))(params, buffers, x)
        return out.reshape(n_draws, n_chains, *out.shape[1:])

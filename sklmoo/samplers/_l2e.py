"""L2E: SG-MCMC with a meta-learned kinetic-energy gradient (Kim et al., ICML 2024)."""

import io
import json
import math
import numbers
import pathlib
import warnings
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import __version__
from .._io import atomic_writes, read_json
from ._sgmcmc import (add_thermal_noise, as_tree, check_sampler_settings, checked_gradients,
                      checked_state, like_input, time_step)

#: decays of the six running gradient means fed to the meta-model
GRADIENT_DECAYS = (0.1, 0.5, 0.9, 0.99, 0.999, 0.9999)
N_FEATURES = 3 + len(GRADIENT_DECAYS)
_LAYERS = ("linear_0", "linear_1", "linear_2")
OUTPUT_SCALE = 1e-3


def _card_value(value):
    """A card entry JSON does not know: numpy scalars and arrays as Python numbers and lists
    (a ``TypeError`` naming the type otherwise)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"the card holds a {type(value).__name__}, which a JSON card cannot hold")


class MetaSampler(nn.Module):
    """The L2E meta-model: a per-coordinate MLP 9 -> 32 -> 32 -> 2 (ReLU) whose outputs, times
    1e-3, are the kinetic-energy gradients :math:`\\alpha` (w.r.t. :math:`\\theta`) and
    :math:`\\beta` (w.r.t. :math:`r`).

    Saved as a ``.npz`` of float32 arrays in the authors' (haiku) layout -- ``linear_{i}_w`` of
    shape (in, out), applied as ``x @ w + b`` -- plus a JSON card beside it, so the file is
    portable and the authors' published parameters load with the same code.

    Parameters
    ----------
    hidden_units : int, default=32
    card : dict, optional
        Provenance (config, task distribution, meta-loss curve, seed, version).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import MetaSampler
    >>> meta = MetaSampler()
    >>> meta(torch.zeros(5, 9)).shape
    torch.Size([5, 2])
    """

    def __init__(self, hidden_units=32, card=None):
        super().__init__()
        if (isinstance(hidden_units, bool) or not isinstance(hidden_units, numbers.Integral)
                or not 1 <= hidden_units <= MAX_HIDDEN_UNITS):
            raise ValueError(f"hidden_units must be an integer in 1..{MAX_HIDDEN_UNITS} (what "
                             f"load reads back), got {hidden_units!r}")
        self.net = nn.Sequential(nn.Linear(N_FEATURES, hidden_units), nn.ReLU(),
                                 nn.Linear(hidden_units, hidden_units), nn.ReLU(),
                                 nn.Linear(hidden_units, 2))
        self.card = dict(card or {})

    def forward(self, features):
        return self.net(features)

    def weights(self):
        """The parameters as ``{'linear_0_w': (9, 32), 'linear_0_b': (32,), ...}`` tensors."""
        out = {}
        for name, layer in zip(_LAYERS, self.net[::2]):
            out[f"{name}_w"] = layer.weight.T
            out[f"{name}_b"] = layer.bias
        return out

    def flat_parameters(self):
        """All meta-parameters as one vector (the order of :meth:`weights`)."""
        return torch.cat([w.reshape(-1) for w in self.weights().values()])

    def unflatten(self, flat):
        """Split a vector (..., n_params) into a weights dict with the same leading dims."""
        out, start = {}, 0
        for name, w in self.weights().items():
            size = w.numel()
            out[name] = flat[..., start:start + size].reshape(*flat.shape[:-1], *w.shape)
            start += size
        return out

    @torch.no_grad()
    def load_weights(self, weights):
        for name, layer in zip(_LAYERS, self.net[::2]):
            layer.weight.copy_(torch.as_tensor(np.asarray(weights[f"{name}_w"])).T)
            layer.bias.copy_(torch.as_tensor(np.asarray(weights[f"{name}_b"])))
        return self

    def save(self, path):
        """Write ``path`` (``.npz`` appended unless the name ends in it: ``run.2024.01`` gives
        ``run.2024.01.npz``) and the card beside it (``run.2024.01.json``), each atomically;
        non-finite meta-parameters are refused.

        Returns
        -------
        Path
            The ``.npz`` written.
        """
        path = _npz_path(path)
        arrays = {k: v.detach().cpu().numpy().astype(np.float32)
                  for k, v in self.weights().items()}
        bad = [k for k, v in arrays.items() if not np.isfinite(v).all()]
        if bad:
            raise FloatingPointError(f"refusing to save non-finite meta-parameters {bad}")
        # both files written to temporaries first, then renamed: a card or weights that
        # cannot be written (a directory in the way, a full disk) leave both previous
        # versions, never new weights beside the old card
        try:                       # strict JSON: a NaN or inf would be written as NaN
            card = json.dumps(self.card, indent=1, sort_keys=True, default=_card_value,
                              allow_nan=False)
        except ValueError as exc:
            raise ValueError(f"the card holds NaN or inf, which JSON cannot hold: {exc}") from None
        atomic_writes({_card_path(path): lambda f: f.write(card.encode("utf-8")),
                       path: lambda f: np.savez(f, **arrays)})
        return path

    @classmethod
    def load(cls, path):
        """Load meta-parameters from a ``.npz`` in the haiku layout (sklmoo's own files and
        the authors' published ``l2e_official_meta_params.npz`` alike), with its card if any.

        Loading is safe by construction: only the six expected members are read, each
        member's declared dtype and shape are checked against the MLP's layout (hidden width
        1 to :data:`MAX_HIDDEN_UNITS`) from its ``.npy`` header (itself at most
        :data:`MAX_NPY_HEADER_BYTES`), and its declared size against what that shape needs,
        before any data is decompressed; nothing is unpickled. A card (``.json`` beside the
        file: ``run.json`` for ``run.npz``) that cannot be read is ignored with a warning: it
        is provenance, the weights do not depend on it.

        Parameters
        ----------
        path : str or Path
            The ``.npz``; a name without the suffix finds the file :meth:`save` wrote for it.

        Raises
        ------
        FileNotFoundError
            If there is no file at ``path``.
        ValueError
            Naming the file (and the member) if it is not a ``.npz`` of finite floating-point
            meta-parameters with the expected members and shapes; with the sklmoo version
            that wrote it when its card records another one.
        """
        path = pathlib.Path(path)
        if not path.is_file() and _npz_path(path).is_file():
            path = _npz_path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no meta-sampler file at {path}")
        try:
            with zipfile.ZipFile(path) as archive:
                arrays = _read_meta_members(path, archive)
            bad = [k for k, v in arrays.items() if not np.isfinite(v).all()]
            if bad:
                raise ValueError(f"{path}: meta-parameters {sorted(bad)} hold NaN or inf (or "
                                 "values beyond float32)")
        except ValueError as exc:           # already names the file and the member
            raise ValueError(f"{exc}{_card_version_note(path)}") from None
        except Exception as exc:  # zip, zlib and I/O errors all mean "not a .npz we wrote"
            raise ValueError(f"cannot read meta-sampler file {path}: not a complete .npz of "
                             f"meta-parameters ({type(exc).__name__}: {exc})"
                             f"{_card_version_note(path)}") from None
        hidden = arrays["linear_0_w"].shape[1]
        # the module initialises weights that the file's then replace: from a forked RNG, so
        # that loading leaves the global torch random stream as it was
        with torch.random.fork_rng(devices=[]):
            meta = cls(hidden_units=hidden, card=_read_card(path))
        return meta.load_weights(arrays)


#: the largest hidden width :meth:`MetaSampler.load` accepts (the paper's is 32); it bounds
#: what a file can make the loader allocate (a few MB)
MAX_HIDDEN_UNITS = 1024
#: the largest card :meth:`MetaSampler.load` reads (the shipped one is a few tens of KB)
MAX_CARD_BYTES = 16 * 2 ** 20
#: the largest ``.npy`` header :meth:`MetaSampler.load` reads (numpy writes about 128 bytes for
#: these arrays)
MAX_NPY_HEADER_BYTES = 4096
_MEMBERS = tuple(f"{n}_{s}" for n in _LAYERS for s in "wb")


def _npz_path(path):
    """``path`` with ``.npz`` appended unless its name ends in it (``Path.with_suffix`` would
    replace the ``.01`` of ``run.2024.01``)."""
    path = pathlib.Path(path)
    if path.name in ("", ".", "..") or path.is_dir():
        raise ValueError(f"a meta-sampler path must name a file, got {str(path)!r}"
                         + (" (a directory)" if path.is_dir() else ""))
    return path if path.name.endswith(".npz") else path.with_name(path.name + ".npz")


def _card_path(path):
    """The card beside a meta-sampler file: ``run.json`` for ``run.npz``, ``run.bin.json`` for
    a file of another name."""
    path = pathlib.Path(path)
    stem = path.name[:-len(".npz")] if path.name.endswith(".npz") else path.name
    return path.with_name(stem + ".json")


def _member_header(path, archive, member):
    """(shape, fortran_order, dtype, header size in bytes) from the ``.npy`` header of
    ``member``: the header's declared length is read and bounded by
    :data:`MAX_NPY_HEADER_BYTES` before the header itself is read, and nothing of the data
    is."""
    with archive.open(member + ".npy") as f:
        # magic (6 bytes), version (2), header length: uint16 in version 1, uint32 after
        start = f.read(8)
        if len(start) < 8 or start[:6] != np.lib.format.MAGIC_PREFIX:
            raise ValueError(f"{path}: member {member!r} is not a .npy array (no .npy magic)")
        version = (start[6], start[7])
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"{path}: member {member!r} has .npy format version {version}, "
                             "expected 1.0 or 2.0")
        size = f.read(2 if version == (1, 0) else 4)
        if len(size) < (2 if version == (1, 0) else 4):
            raise ValueError(f"{path}: member {member!r} is not a .npy array (it ends in its "
                             "header)")
        length = int.from_bytes(size, "little")
        if length > MAX_NPY_HEADER_BYTES:
            raise ValueError(f"{path}: member {member!r} declares a .npy header of {length} "
                             f"bytes, more than {MAX_NPY_HEADER_BYTES}: not an array this "
                             "loader reads")
        raw = start + size + f.read(length)
    buffer = io.BytesIO(raw)
    try:
        np.lib.format.read_magic(buffer)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, fortran_order, dtype = read(buffer)
    except ValueError as exc:
        raise ValueError(f"{path}: member {member!r} is not a .npy array ({exc})") from None
    return shape, fortran_order, dtype, len(raw)


def _read_meta_members(path, archive):
    """The six weight arrays of ``archive``, checked member by member before decompression."""
    names = archive.namelist()
    unknown = [n for n in names if not (n.endswith(".npy") and n[:-4] in _MEMBERS)]
    if unknown:
        raise ValueError(f"{path}: unexpected member {unknown[0]!r} (a meta-sampler file holds "
                         f"only {', '.join(m + '.npy' for m in _MEMBERS)})")
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: a member is stored twice ({sorted(names)})")
    missing = [m for m in _MEMBERS if m + ".npy" not in names]
    if missing:
        raise ValueError(f"{path} lacks meta-parameters {missing}")
    headers = {m: _member_header(path, archive, m) for m in _MEMBERS}
    for member, (shape, _, dtype, _) in headers.items():
        if dtype.kind != "f":
            raise ValueError(f"{path}: member {member!r} holds {dtype} values, expected "
                             "floating-point meta-parameters")
    first, last = headers["linear_0_w"][0], headers["linear_2_w"][0]
    if len(first) != 2 or first[0] != N_FEATURES or len(last) != 2 or last[1] != 2:
        raise ValueError(f"{path}: expected a {N_FEATURES} -> ... -> 2 MLP, got first layer "
                         f"{first} and last {last}")
    hidden = first[1]
    if not 1 <= hidden <= MAX_HIDDEN_UNITS:
        raise ValueError(f"{path}: hidden width {hidden} is outside 1..{MAX_HIDDEN_UNITS}")
    expected = {"linear_0_w": (N_FEATURES, hidden), "linear_0_b": (hidden,),
                "linear_1_w": (hidden, hidden), "linear_1_b": (hidden,),
                "linear_2_w": (hidden, 2), "linear_2_b": (2,)}
    for member, shape in expected.items():
        if tuple(headers[member][0]) != shape:
            raise ValueError(f"{path}: {member} has shape {tuple(headers[member][0])}, "
                             f"expected {shape}")
        # what the header promises is all the member may hold: a longer one is not read
        needed = headers[member][3] + math.prod(shape) * headers[member][2].itemsize
        declared = archive.getinfo(member + ".npy").file_size
        if declared > needed:
            raise ValueError(f"{path}: member {member!r} declares {declared} bytes, more than "
                             f"the {needed} its {shape} {headers[member][2]} array needs")
    arrays = {}
    for member in _MEMBERS:           # every shape is now bounded: decompress
        with archive.open(member + ".npy") as f:
            try:
                array = np.lib.format.read_array(f, allow_pickle=False)
            except ValueError as exc:
                raise ValueError(f"{path}: member {member!r} is incomplete ({exc})") from None
        # float32 in native byte order, as the module holds them (torch refuses big-endian)
        arrays[member] = array.astype(np.float32)
    return arrays


def _read_card(path):
    """The JSON card beside ``path``, ``{}`` if there is none; an unreadable card is ignored
    with a warning (it records provenance; the weights are valid without it)."""
    card_path = _card_path(path)
    if not card_path.exists():
        return {}
    try:
        card = read_json(card_path, MAX_CARD_BYTES)
        if not isinstance(card, dict):
            raise ValueError(f"it holds a JSON {type(card).__name__}, not an object")
    except (OSError, ValueError) as exc:      # size, depth, JSON and UTF-8 errors included
        warnings.warn(f"ignoring the meta-sampler card {card_path}: cannot read it "
                      f"({type(exc).__name__}: {exc}); the meta-parameters in {path} are "
                      "loaded without provenance", UserWarning, stacklevel=3)
        return {}
    return card


def _card_version_note(path):
    """`` (its card says sklmoo X wrote it; this is sklmoo Y)`` for an error about ``path``
    when its card records another version than this one, else ``''``."""
    try:
        version = read_json(_card_path(path), MAX_CARD_BYTES).get("sklmoo_version")
    except (OSError, ValueError, AttributeError):
        return ""
    if not isinstance(version, str) or version == __version__:
        return ""
    return f" (its card says sklmoo {version} wrote it; this is sklmoo {__version__})"


def meta_mlp(features, weights):
    """Evaluate the meta-MLP on features (..., n, 9) with weights that may carry the same
    leading (chain) dims: ``x @ w + b`` with ReLU between layers -> (..., n, 2).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.meta import load_default_meta_sampler
    >>> from sklmoo.samplers import meta_mlp
    >>> weights = load_default_meta_sampler().weights()
    >>> meta_mlp(torch.zeros(4, 9), weights).shape        # (alpha, beta) per coordinate
    torch.Size([4, 2])
    """
    h = features
    for i, name in enumerate(_LAYERS):
        w, b = weights[f"{name}_w"], weights[f"{name}_b"]
        if h.dim() == 2 and w.dim() == 2:  # one set of weights: fused multiply-add
            h = torch.addmm(b, h, w)
        else:
            h = torch.matmul(h, w) + b.unsqueeze(-2)
        if i < len(_LAYERS) - 1:
            h = torch.relu_(h)
    return h


#: coordinates of the meta-MLP's hidden layers computed at a time by :func:`meta_mlp_columns`
#: (bounds its buffers: 2 x 8192 x 32 floats)
META_MLP_CHUNK = 8192


def meta_mlp_columns(features, weights, scratch, beta_only=False):
    """:func:`meta_mlp` of feature-major ``features`` (9, n) -- one coordinate per column --
    with one set of weights, in blocks of :data:`META_MLP_CHUNK` columns through buffers of
    ``scratch``: returns the (2, n) buffer of (alpha, beta) rows, or with ``beta_only`` the
    (n,) buffer of beta alone (the same values as :func:`meta_mlp`, up to rounding).

    The last layer is written as ``w.T @ h.T`` (two output rows) or one matrix-vector product:
    as ``h @ w`` with two output columns it cost as much as the 32 x 32 layer."""
    n = features.shape[1]
    last = _LAYERS[-1]
    w_out, b_out = weights[f"{last}_w"], weights[f"{last}_b"]
    if beta_only:
        out = scratch("beta", (n,), features)
    else:
        out = scratch("output", (w_out.shape[-1], n), features)
    for start in range(0, n, META_MLP_CHUNK):
        h = features[:, start:start + META_MLP_CHUNK].t()
        stop = start + len(h)
        for i, name in enumerate(_LAYERS[:-1]):
            w, b = weights[f"{name}_w"], weights[f"{name}_b"]
            hidden = scratch(("hidden", i), (min(n, META_MLP_CHUNK), w.shape[-1]), h)
            h = torch.relu_(torch.addmm(b, h, w, out=hidden[:len(h)]))
        if beta_only:
            torch.addmv(b_out[1], h, w_out[:, 1], out=out[start:stop])
        else:
            torch.addmm(b_out[:, None], w_out.t(), h.t(), out=out[:, start:stop])
    return out


class _Scratch:
    """Buffers a transition reuses from step to step, by key, so a step makes no large tensor.

    A step that allocated its features and hidden layers afresh gave them back to the system at
    the end of the step (glibc trims the heap and unmaps large blocks) and page-faulted them in
    again on the next one: about half an L2E step on CPU, measured in ``bench_step_cost.py``."""

    def __init__(self):
        self.buffers = {}

    def __call__(self, key, shape, like):
        shape = torch.Size(shape)
        buffer = self.buffers.get(key)
        if (buffer is None or buffer.shape != shape or buffer.dtype != like.dtype
                or buffer.device != like.device):
            buffer = self.buffers[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return buffer


def l2e_features(grad, theta, momentum, grad_means, batch_dims=0):
    r"""The 9 normalised per-coordinate features ``[g, theta, r, m_0.1, ..., m_0.9999]``.

    Each feature is divided by its root mean square over the tensor,
    :math:`x/\sqrt{10^{-5} + \mathrm{mean}(x^2)}` (per chain: over all but the leading
    ``batch_dims`` axes; a scalar's features are each divided by their own magnitude).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import l2e_features
    >>> g, theta, r = torch.randn(5), torch.randn(5), torch.randn(5)
    >>> feats = l2e_features(g, theta, r, torch.zeros(6, 5))
    >>> feats.shape                                       # 9 features per coordinate
    torch.Size([5, 9])
    """
    lead = grad.shape[:batch_dims]
    means = grad_means if torch.is_tensor(grad_means) else torch.stack(list(grad_means))
    block = grad.new_empty((N_FEATURES, *lead, grad[(0,) * batch_dims].numel()))
    _write_features(block, grad, theta, momentum, means)
    return block.view(N_FEATURES, *grad.shape).movedim(0, -1).contiguous()


def _write_features(block, grad, theta, momentum, means):
    """Write one parameter tensor's features into ``block`` (9, *chains, size) -- whole-tensor
    copies, one row per feature -- and normalise each row in place over its last axis; with
    ``grad`` None, ``block`` is the momentum's row (*chains, size) alone."""
    if grad is None:
        block.copy_(momentum.reshape(block.shape))
    else:
        for row, x in zip(block, (grad, theta, momentum)):
            row.copy_(x.reshape(row.shape))
        block[3:].copy_(means.reshape(block[3:].shape))
    # the mean square in at least float32: in half precision a sum of squares overflows
    square = torch.linalg.vector_norm(block, dim=-1, keepdim=True,
                                      dtype=torch.promote_types(block.dtype, torch.float32))
    return block.div_(square.square_().div_(block.shape[-1]).add_(1e-5).sqrt_())


@dataclass
class L2EState:
    """State of an L2E chain: parameters, momentum, six running gradient means, step count.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.meta import load_default_meta_sampler
    >>> from sklmoo.samplers import L2E
    >>> state = L2E(load_default_meta_sampler(), n_data=100).init({"w": torch.zeros(3)})
    >>> state.grad_means["w"].shape                       # one running mean per decay
    torch.Size([6, 3])
    """

    params: Any
    momentum: Any
    grad_means: Any
    step: int = 0


class L2E:
    r"""The L2E transition (Eq. 6 / Algorithm 2 of Kim et al., 2024, in the authors' published
    discretisation):

    .. math::

        m_i &\leftarrow d_i m_i + (1-d_i)\, g \quad (d \in \{0.1, 0.5, 0.9, 0.99, 0.999, 0.9999\}) \\
        (\alpha, \beta) &= 10^{-3}\,\mathrm{MLP}_\phi(\hat f(g, \theta, r, m)) \\
        r' &= r - \epsilon\,(N g + \alpha + a\,\beta) + \sqrt{2 a \epsilon T}\,\xi \\
        \theta' &= \theta + \epsilon\, \beta'(g, \theta, r'),

    per coordinate, where :math:`\hat f` normalises each of the 9 features over its parameter
    tensor (:math:`x/\sqrt{10^{-5} + \mathrm{mean}(x^2)}`), :math:`\beta'` is the MLP's second
    output recomputed with the updated momentum, :math:`\epsilon = \sqrt{\text{step\_size}/N}`
    and :math:`a` the friction (0.1). With :math:`\alpha = 0, \beta = r` this is
    :class:`SGHMC`.

    Deviation from the authors' code: the noise is written with a temperature,
    :math:`\sqrt{2 a \epsilon T}`; their ``noise_mult`` equals :math:`\epsilon T` (and
    :math:`N` is the actual training-set size instead of their hard-coded 50000).

    Parameters
    ----------
    meta : MetaSampler or dict of weight tensors
        Meta-parameters; a dict (see :meth:`MetaSampler.weights`) may carry leading chain dims
        matching ``batch_dims`` (one meta-parameter set per chain, as in ES meta-training).
    step_size : float, default=1.0
    n_data : int
    friction : float, default=0.1
    temperature : float, default=1.0
        Scales the momentum noise only. The position moves by the meta-network's output,
        which reads the momentum through per-tensor normalised features, so the noise's scale
        barely reaches the draws (unlike :class:`SGHMC`, whose position moves by the momentum
        itself).
    weight_decay : float, default=0.0
        Adds ``weight_decay * theta`` to the gradient (the authors' ``0.5 wd ||theta||^2``).
    batch_dims : int, default=0
        Leading axes of every tensor that index independent chains (excluded from the
        per-tensor normalisation).

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import L2E, MetaSampler
    >>> sampler = L2E(MetaSampler(), step_size=0.1, n_data=100)
    >>> params = {"w": torch.randn(3, 4), "b": torch.zeros(4)}
    >>> state = sampler.init(params)
    >>> state = sampler.update(state, {k: torch.randn_like(v) for k, v in params.items()})
    >>> state.params["w"].shape, state.step
    (torch.Size([3, 4]), 1)
    """

    def __init__(self, meta, step_size=1.0, n_data=1, *, friction=0.1, temperature=1.0,
                 weight_decay=0.0, batch_dims=0):
        check_sampler_settings(step_size, n_data, friction, temperature, weight_decay)
        self.meta = meta
        self.step_size = step_size
        self.n_data = n_data
        self.friction = friction
        self.temperature = temperature
        self.weight_decay = weight_decay
        self.batch_dims = batch_dims

    def _weights(self, like):
        """The meta-parameters, in ``like``'s dtype and device when they are not already (a
        float32 meta-sampler moving float64 parameters, say)."""
        weights = self.meta.weights() if isinstance(self.meta, MetaSampler) else self.meta
        if any(w.dtype != like.dtype or w.device != like.device for w in weights.values()):
            weights = {k: w.to(dtype=like.dtype, device=like.device) for k, w in weights.items()}
        return weights

    def init(self, params):
        """Zero momentum and running means for ``params`` (tensor or dict of tensors)."""
        tree = as_tree(params)
        zeros = {k: torch.zeros_like(v) for k, v in tree.items()}
        means = {k: torch.zeros((len(GRADIENT_DECAYS), *v.shape), dtype=v.dtype,
                                device=v.device) for k, v in tree.items()}
        return L2EState(params=params, momentum=like_input(zeros, params),
                        grad_means=like_input(means, params))

    def _fill(self, leaves, rows=slice(None)):
        """Write the normalised features (``rows=2``: the momentum's alone) of every leaf into
        the feature-major buffer (9, *chains, n_coordinates).

        ``leaves``: list of (grad, theta, momentum, means) per parameter tensor; each leaf's
        coordinates are a block of columns (per chain), so every copy is of a whole tensor, and
        each feature row of a leaf is normalised by its own root mean square (per chain).
        With ``rows=2`` the other entries of a leaf are None. Returns the buffer and the
        leaves' sizes (coordinates per chain)."""
        scratch = self._scratch()
        first = leaves[0][2]
        lead = first.shape[:self.batch_dims]
        sizes = [r[(0,) * self.batch_dims].numel() for _, _, r, _ in leaves]
        feats = scratch("features", (N_FEATURES, *lead, sum(sizes)), first)
        offset = 0
        for leaf, size in zip(leaves, sizes):
            _write_features(feats[rows, ..., offset:offset + size], *leaf)
            offset += size
        return feats, sizes

    def _meta_outputs(self, weights, feats, sizes, beta_only=False):
        """The meta-MLP on the features: a tuple of alpha pieces and a tuple of beta pieces,
        one (*chains, size) piece per leaf (the beta pieces alone with ``beta_only``). One set
        of meta-weights runs in blocks through buffers (:func:`meta_mlp_columns`); per-chain
        weights (ES) take :func:`meta_mlp`."""
        if all(w.dim() == 2 for k, w in weights.items() if k.endswith("_w")):
            out = meta_mlp_columns(feats.view(N_FEATURES, -1), weights, self._scratch(),
                                   beta_only)
            out = out.view(*out.shape[:-1], *feats.shape[1:])
        else:
            out = meta_mlp(feats.movedim(0, -1), weights).movedim(-1, 0)
            out = out[1] if beta_only else out
        out = out.mul_(OUTPUT_SCALE) if out.is_contiguous() else out * OUTPUT_SCALE
        if beta_only:
            return torch.split(out, sizes, dim=-1)
        return torch.split(out[0], sizes, dim=-1), torch.split(out[1], sizes, dim=-1)

    def _mean_weights(self, theta):
        """``1 - d`` for the six decays, shaped (6, 1, ..., 1) to broadcast against ``theta``'s
        running means (kept per dtype and device)."""
        cache = self.__dict__.setdefault("_mean_weight_cache", {})
        key = (theta.dtype, theta.device)
        if key not in cache:
            cache[key] = torch.tensor([1 - d for d in GRADIENT_DECAYS], dtype=theta.dtype,
                                      device=theta.device)
        return cache[key].view(-1, *[1] * theta.dim())

    def _scratch(self):
        scratch = self.__dict__.get("_scratch_buffers")
        if scratch is None:
            scratch = self._scratch_buffers = _Scratch()
        return scratch

    def release_scratch(self):
        """Free the buffers the transition reuses from step to step (they are made again at
        the next step)."""
        self.__dict__.pop("_scratch_buffers", None)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_scratch_buffers", None)
        state.pop("_mean_weight_cache", None)
        return state

    def update(self, state, grads, generator=None, check_state=True):
        """One L2E transition given the mean-loss gradients at ``state.params``; the checks
        and ``check_state`` as in :meth:`SGHMC.update`."""
        params, momentum = as_tree(state.params), as_tree(state.momentum)
        means_tree = as_tree(state.grad_means)
        g = checked_gradients(params, grads, state.step)
        weights = self._weights(next(iter(params.values())))
        eps = time_step(self.step_size, self.n_data)
        a, n = self.friction, self.n_data
        keys = list(params)
        with torch.no_grad():
            grad, means = {}, {}
            for k in keys:
                theta = params[k]
                grad[k] = torch.add(g[k], theta, alpha=self.weight_decay)
                # m_i + (1 - d_i) (g - m_i), i.e. d_i m_i + (1 - d_i) g
                means[k] = torch.lerp(means_tree[k], grad[k], self._mean_weights(theta))
            leaves = [(grad[k], params[k], momentum[k], means[k]) for k in keys]
            alpha, beta = self._meta_outputs(weights, *self._fill(leaves))
            new_r = {}
            for k, al, be in zip(keys, alpha, beta):
                drive = torch.add(al, be, alpha=a).view(params[k].shape).add_(grad[k], alpha=n)
                r = torch.add(momentum[k], drive, alpha=-eps)
                new_r[k] = add_thermal_noise(r, a, eps, self.temperature, generator)
            # the second call differs only in the momentum: its feature row is rewritten
            feats, sizes = self._fill([(None, None, new_r[k], None) for k in keys], rows=2)
            beta = self._meta_outputs(weights, feats, sizes, beta_only=True)
            new_p = {k: torch.add(params[k].reshape(be.shape), be, alpha=eps)
                     .view(params[k].shape) for k, be in zip(keys, beta)}
        if check_state:
            checked_state(new_p, new_r, state.step)
        return L2EState(params=like_input(new_p, state.params),
                        momentum=like_input(new_r, state.params),
                        grad_means=like_input(means, state.params), step=state.step + 1)

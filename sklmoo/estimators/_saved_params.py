"""The checks ``load_params`` makes of the files it reads: declared sizes bounded by what the
estimator holds before anything is decompressed, and the loaded state dict (keys, shapes, the
draws, finite values, positive recalibration and target scales) checked before anything is copied into the
module."""

import contextlib
import copy

import torch

from .._io import (ArchiveTooLargeError, backed_by_storage, check_torch_archive, read_json,
                   tensor_bytes)
from ..nn import LinearLogits, LinearMean, SampleStore
from ..nn._kernel_mean import KernelMean

#: what a file may declare beyond twice the bytes of the state it replaces (its pickled
#: structure, the optimiser's state before its first step)
ARCHIVE_SLACK = 2 ** 20
#: an optimiser keeps at most this many tensors the size of each parameter (Adam 2, the L2E
#: sampler's momentum and six running means 7)
OPTIMIZER_STATES_PER_PARAMETER = 8
#: the largest ``f_history`` read (a history of tens of thousands of epochs)
MAX_HISTORY_BYTES = 16 * 2 ** 20


def _attribute(key):
    """The net's attribute a ``load_params`` argument loads: ``f_params`` -> ``module_``,
    ``f_optimizer`` -> ``optimizer_`` (skorch's rule)."""
    return "module_" if key in ("f_params", "f_module") else key[2:] + "_"


def files_to_load(net, checkpoint, explicit):
    """``{argument: file}`` that skorch's ``load_params`` will read, the explicit arguments
    overriding the checkpoint's (skorch's rule); a checkpoint's history is ``'f_history'``.

    Parameters
    ----------
    net : NeuralNet
    checkpoint : skorch.callbacks.Checkpoint or None
    explicit : dict
        The ``f_*`` arguments given.

    Returns
    -------
    dict
    """
    files = {}
    if checkpoint is not None:
        saved_history = explicit.get("f_history") is None and checkpoint.f_history is not None
        if saved_history and not len(net.history):
            # a new estimator (skorch's LoadInitState): skorch formats the checkpoint's file
            # names, which may hold the epoch, with the history it loads first
            from skorch.history import History

            kept, net.history = net.history, History(check_history(checkpoint.f_history_))
            try:
                files.update(checkpoint.get_formatted_files(net))
            finally:
                net.history = kept
        else:
            files.update(checkpoint.get_formatted_files(net))
        if saved_history:
            files["f_history"] = checkpoint.f_history_
    files.update({k: v for k, v in explicit.items() if v is not None})
    # skorch skips empty names and does not load f_pickle
    return {k: v for k, v in files.items()
            if v is not None and not (isinstance(v, str) and not v) and k != "f_pickle"}


def archive_limit(target):
    """The bytes a ``torch.save`` file of ``target``'s state may declare: twice what its
    current state holds plus :data:`ARCHIVE_SLACK`; for an optimiser, its state after a step
    (:data:`OPTIMIZER_STATES_PER_PARAMETER` tensors per parameter) at the least."""
    state = tensor_bytes(target.state_dict())
    if isinstance(target, torch.optim.Optimizer):
        params = [p for group in target.param_groups for p in group["params"]]
        state = max(state, OPTIMIZER_STATES_PER_PARAMETER * tensor_bytes(params))
    return 2 * state + ARCHIVE_SLACK


#: modules whose buffers take the shapes of the file loaded into them (draws; a kernel mean
#: function's training rows), each checking them with its ``check_state_dict(state, prefix)``
RESIZABLE = (SampleStore, KernelMean)


def holds_draws(target):
    """Whether ``target`` holds a :data:`RESIZABLE` module (a
    :class:`~sklmoo.nn.SampleStore`, a kernel mean function): its legitimate size grows with
    what a file brings (see ``allow_stored_bytes`` of
    :func:`~sklmoo._io.check_torch_archive`)."""
    return isinstance(target, torch.nn.Module) and any(
        isinstance(m, RESIZABLE) for m in target.modules())


def check_files(net, files, use_safetensors=False):
    """Check every file of :func:`files_to_load` before skorch reads any: torch files against
    :func:`archive_limit` of what they replace, the history's size and nesting.

    Raises
    ------
    ValueError
        Naming the argument, the file and the problem.
    """
    for key, source in files.items():
        if key == "f_history":
            check_history(source)
            continue
        target = getattr(net, _attribute(key), None)
        if use_safetensors or not isinstance(target, (torch.nn.Module, torch.optim.Optimizer)):
            continue          # safetensors are not decompressed; skorch names a missing target
        try:
            check_torch_archive(source, archive_limit(target),
                                allow_stored_bytes=holds_draws(target))
        except ArchiveTooLargeError as exc:
            raise ValueError(
                f"load_params({key}=...): {exc}. If sklmoo saved this file, it came from an "
                "estimator with other settings (more particles or chains, a larger network, "
                "another mean_function or linear_gate): fit this estimator with the settings "
                "of the one that saved it, then load; the estimator is unchanged"
            ) from None
        except ValueError as exc:
            raise ValueError(f"load_params({key}=...): {exc}") from None


def check_history(source):
    """A skorch history file: a JSON list of epochs (dicts), at most
    :data:`MAX_HISTORY_BYTES`, nested at most :data:`~sklmoo._io.MAX_JSON_DEPTH` deep;
    returns the list."""
    try:
        history = read_json(source, MAX_HISTORY_BYTES)
    except ValueError as exc:
        raise ValueError(f"load_params(f_history=...): {exc}") from None
    if not (isinstance(history, list) and all(isinstance(e, dict) for e in history)):
        raise ValueError(f"load_params(f_history=...): {source} is not a skorch history (a JSON "
                         "list of epochs)")
    for i, epoch in enumerate(history):
        problem = _history_entry_problem(epoch)
        if problem:
            raise ValueError(f"load_params(f_history=...): {source} is not a skorch history: "
                             f"epoch {i} {problem}")
    return history


#: entries of a history epoch (and of its batches) that fits and callbacks read as numbers
_NUMERIC_HISTORY_KEYS = ("dur", "train_loss", "valid_loss", "train_batch_size",
                         "valid_batch_size")


def _number(value, integer=False):
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool)


def _history_entry_problem(epoch):
    """What makes one epoch of a loaded history unreadable by a later fit (its ``epoch`` not
    an integer, ``batches`` not a list of dicts, a loss or duration not a number), or None."""
    if "epoch" in epoch and not _number(epoch["epoch"], integer=True):
        return f"has 'epoch' {epoch['epoch']!r}, not an integer"
    batches = epoch.get("batches", [])
    if not (isinstance(batches, list) and all(isinstance(b, dict) for b in batches)):
        return "has 'batches' that are not a list of records"
    for record in [epoch, *batches]:
        for key in _NUMERIC_HISTORY_KEYS:
            if key in record and record[key] is not None and not _number(record[key]):
                return f"has {key!r} {record[key]!r}, not a number"
    return None


def check_state_dict(module, state_dict, source):
    """Refuse a loaded state dict that is not ``module``'s, before anything of it is copied:
    unknown or missing keys, other shapes (draws may differ in number, see
    :meth:`~sklmoo.nn.SampleStore.check_state_dict`), tensors claiming more elements than
    their data holds, non-finite values, and recalibration values (temperatures, variance
    scales) that are not positive.

    Raises
    ------
    ValueError
        Naming ``source`` and the keys.
    """
    expected = module.state_dict()
    unknown = sorted(map(str, set(state_dict) - set(expected)))
    missing = sorted(set(expected) - set(state_dict))
    for prefix in ("output_map.", "linear."):
        if (unknown or missing) and all(k.startswith(prefix) for k in unknown + missing):
            # the linear model: a classifier's LinearLogits (linear_gate; per-task weight_t,
            # bias_t, center_t) or the regressor's LinearMean (mean_function)
            param = ("linear_gate" if any(k[len(prefix):].startswith(("weight_", "center_"))
                                          for k in unknown + missing) else "mean_function")
            raise ValueError(
                f"{source} and this estimator differ in {param} (module_.{prefix[:-1]}): fit "
                f"this estimator with the {param} of the one that saved them, then load; the "
                "estimator is unchanged")
    noise = (".noise_", ".scale.", ".raw_scale")
    if (unknown or missing) and all(k.startswith("heads.") and any(n in k for n in noise)
                                    for k in unknown + missing):
        raise ValueError(
            f"{source} and this estimator differ in heteroscedastic (the heads' noise "
            f"parameters: {_some(unknown + missing)}): fit this estimator with the "
            "heteroscedastic of the one that saved them (False before sklmoo's default became "
            "'auto'), then load; the estimator is unchanged")
    if unknown or missing:
        raise ValueError(
            f"{source} does not hold this estimator's parameters: "
            + "; ".join(f"{what} keys {_some(keys)}" for what, keys in
                        (("unknown", unknown), ("missing", missing)) if keys)
            + " (saved from another estimator, other settings or another sklmoo version?); "
            "the estimator is unchanged")
    not_tensors = [k for k, v in state_dict.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise ValueError(f"{source}: {_some(not_tensors)} are not tensors")
    forged = [k for k, v in state_dict.items() if not backed_by_storage(v)]
    if forged:
        raise ValueError(f"{source}: tensors {_some(forged)} claim more elements than their data "
                         "holds (views with a zero or overlapping stride): a forged file")
    resizable = set()
    for name, store in module.named_modules():
        if isinstance(store, RESIZABLE):
            prefix = f"{name}." if name else ""
            resizable.update(store.state_dict(prefix=prefix))
            try:
                store.check_state_dict(state_dict, prefix)
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
    shapes = [f"{k} {tuple(v.shape)} (expected {tuple(expected[k].shape)})"
              for k, v in state_dict.items()
              if k not in resizable and v.shape != expected[k].shape]
    if shapes:
        raise ValueError(f"{source}: other shapes than this estimator's: {_some(shapes)}")
    bad = [k for k, v in state_dict.items() if not _all_finite(v)]
    if bad:
        raise ValueError(f"{source}: {_some(bad)} hold NaN or inf")
    recalibration = state_dict.get("recalibration")
    if recalibration is not None and not bool((recalibration > 0).all()):
        raise ValueError(f"{source}: the recalibration (temperatures / variance scales) must be "
                         f"positive, got {recalibration.tolist()}")
    moments = state_dict.get("target_moments")          # the regressor's (y_mean_, y_scale_)
    if moments is not None and not bool((moments[1] > 0).all()):
        raise ValueError(f"{source}: the target scales must be positive, got "
                         f"{moments[1].tolist()}")


def _all_finite(tensor):
    """Whether a floating tensor is finite, in pieces (a bool copy of a GB of draws is not
    needed at once)."""
    if not tensor.is_floating_point():
        return True
    return all(bool(torch.isfinite(piece).all())
               for piece in tensor.reshape(-1).split(1 << 22))


def _open_missing_linear_gates(module, state_dict):
    """A file saved before :class:`~sklmoo.nn.LinearMean` had its networks' gate: open (the
    networks always added to it then), written into ``state_dict``; likewise a classifier's
    file saved before its :class:`~sklmoo.nn.LinearLogits`: every gate open."""
    for name, mod in module.named_modules():
        prefix = f"{name}." if name else ""
        if (isinstance(mod, LinearMean) and f"{prefix}gate" not in state_dict
                and f"{prefix}weight" in state_dict):
            state_dict[f"{prefix}gate"] = torch.ones_like(mod.gate)
        if (isinstance(mod, LinearLogits) and name
                and not any(k.startswith(prefix) for k in state_dict)):
            # a classifier's file from before its linear model: the particles' logits
            for key, buffer in mod.named_buffers(recurse=False):
                state_dict[prefix + key] = (torch.ones_like(buffer) if key == "gate"
                                            else torch.zeros_like(buffer))


def _some(keys, n=8):
    keys = list(keys)
    return str(keys[:n]) + (f" and {len(keys) - n} more" if len(keys) > n else "")


@contextlib.contextmanager
def checked_loads(module, source):
    """While in the block, ``module.load_state_dict`` first runs :func:`check_state_dict`
    (a load pre-hook, removed on exit: nothing of it is pickled with the estimator)."""
    def hook(mod, state_dict, prefix, *args):
        if prefix == "":
            _open_missing_linear_gates(mod, state_dict)
            check_state_dict(mod, state_dict, source)

    handle = module.register_load_state_dict_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def snapshot(net):
    """What a load may change and :func:`restore` puts back: the module's, optimiser's and
    criterion's states (copies) and the history."""
    saved = {"history": getattr(net, "history", None)}
    for attr in ("module_", "optimizer_", "criterion_"):
        target = getattr(net, attr, None)
        if isinstance(target, (torch.nn.Module, torch.optim.Optimizer)):
            # state_dict returns the live tensors, which a load overwrites in place: copies
            saved[attr] = (target, copy.deepcopy(target.state_dict()))
    return saved


def restore(net, saved):
    """Put back a :func:`snapshot`."""
    net.history = saved["history"]
    for attr, (target, state) in ((k, v) for k, v in saved.items() if k != "history"):
        target.load_state_dict(state)


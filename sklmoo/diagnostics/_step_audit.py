"""What an estimator's training step does that costs on a GPU, measured on any device.

:class:`StepAudit` records, inside every optimiser step of a fit (skorch's ``train_step``), the
calls that wait for the device (``.item()``, ``float(t)``, ``bool(t)``, ``.tolist()``,
``.numpy()``, ``.cpu()``: a host synchronisation on CUDA) and the tensor factories called
without a ``device`` (``torch.zeros(n)``, ``torch.tensor(x)``: a CPU tensor, and a copy to the
device, when the module is on a GPU), each with the line that made it. Used by
``benchmarks/bench_gpu.py`` and the tests; not part of the public API.
"""

import collections
import os
import traceback

import torch
from torch.overrides import TorchFunctionMode

#: tensor methods that copy a value to the host (a synchronisation on CUDA)
SYNC_METHODS = frozenset({"item", "__float__", "__int__", "__bool__", "__index__", "tolist",
                          "numpy", "cpu"})
#: factories whose result lands on the CPU unless given a device
FACTORIES = frozenset({"zeros", "ones", "empty", "full", "tensor", "as_tensor", "arange", "eye",
                       "linspace", "logspace", "rand", "randn", "randint", "randperm",
                       "scalar_tensor"})

_THIS = os.path.abspath(__file__)
_PACKAGE = os.path.dirname(os.path.dirname(_THIS))


def _origin():
    """file:line of the innermost frame outside torch and this module (sklmoo's paths relative
    to its checkout, others from their package directory on)."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        path = os.path.abspath(frame.filename)
        if path == _THIS or f"{os.sep}torch{os.sep}" in path:
            continue
        if path.startswith(_PACKAGE):
            path = os.path.relpath(path, os.path.dirname(_PACKAGE))
        elif "site-packages" in path:
            path = path.split("site-packages" + os.sep, 1)[1]
        return f"{path}:{frame.lineno}"
    return "?"


class _Recorder(TorchFunctionMode):
    def __init__(self, audit):
        super().__init__()
        self.audit = audit

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in SYNC_METHODS and args and isinstance(args[0], torch.Tensor):
            self.audit.syncs[f"{name} at {_origin()}"] += 1
        elif (name in FACTORIES and "TensorBase" not in getattr(func, "__qualname__", "")
              and kwargs.get("device") is None):
            self.audit.factories[f"torch.{name} at {_origin()}"] += 1
        return func(*args, **kwargs)


class StepAudit:
    """Count host synchronisations and device-less tensor factories per optimiser step.

    Parameters
    ----------
    net : skorch NeuralNet
        An sklmoo estimator (fitted or not); its ``train_step`` is wrapped while the audit is
        entered.

    Attributes
    ----------
    steps : int
        Optimiser steps recorded.
    syncs, factories : collections.Counter
        ``"<call> at <file:line>"`` -> count over all recorded steps.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklmoo import MTSGDMultiTaskClassifier
    >>> from sklmoo.diagnostics._step_audit import StepAudit
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = MTSGDMultiTaskClassifier(max_epochs=1, random_state=0)
    >>> with StepAudit(clf) as audit:
    ...     _ = clf.fit(X.astype("float32"), y)
    >>> audit.steps > 0
    True
    >>> sum(audit.factories.values())
    0
    """

    def __init__(self, net):
        self.net = net
        self.steps = 0
        self.syncs = collections.Counter()
        self.factories = collections.Counter()

    def __enter__(self):
        inner = self.net.train_step
        recorder = _Recorder(self)

        def train_step(batch, **fit_params):
            self.steps += 1
            with recorder:
                return inner(batch, **fit_params)

        self.net.train_step = train_step
        return self

    def __exit__(self, *exc):
        del self.net.train_step          # the class's method again
        return False

    def per_step(self, counter):
        """``counter``'s total divided by the recorded steps."""
        return sum(counter.values()) / max(self.steps, 1)

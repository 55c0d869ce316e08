"""The meta-training task distribution: small classification problems that fit a CPU.

Digits-derived tasks (class subsets, 8x8 or 4x4 images, MLP or small CNN trunks of varying
width and depth, with or without residual connections) and synthetic tasks
(``sklearn.datasets.make_classification``). Iris, wine and breast_cancer are never used: they
are the held-out evaluation sets.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import torch
from sklearn.datasets import load_digits, make_classification
from torch import nn

HELD_OUT = ("iris", "wine", "breast_cancer")


class TaskMLP(nn.Module):
    """ReLU MLP classifier with optional residual connections between equal-width layers."""

    def __init__(self, n_in, n_out, width=32, depth=1, residual=False):
        super().__init__()
        self.inp = nn.Linear(n_in, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(depth - 1))
        self.out = nn.Linear(width, n_out)
        self.residual = residual

    def forward(self, x):
        h = torch.relu(self.inp(x.reshape(x.shape[0], -1)))
        for layer in self.hidden:
            z = torch.relu(layer(h))
            h = h + z if self.residual else z
        return self.out(h)


class TaskCNN(nn.Module):
    """Conv(3x3) + ReLU + 2x2 pool + dense classifier for 8x8 single-channel images."""

    def __init__(self, n_out, channels=4, size=8, residual=False):
        super().__init__()
        self.size = size
        self.conv = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1) if residual else None
        self.out = nn.Linear(channels * (size // 2) ** 2, n_out)

    def forward(self, x):
        h = torch.relu(self.conv(x.reshape(x.shape[0], 1, self.size, self.size)))
        if self.conv2 is not None:
            h = h + torch.relu(self.conv2(h))
        h = nn.functional.max_pool2d(h, 2)
        return self.out(h.flatten(1))


@dataclass
class Task:
    """One meta-training task: data splits (float32 tensors) and a model factory.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.meta import digits_task
    >>> task = digits_task(np.random.default_rng(0))
    >>> model = task.make_model()
    >>> model(task.X_val[:4]).shape[1] == task.n_classes
    True
    """

    name: str
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_val: torch.Tensor
    y_val: torch.Tensor
    n_classes: int
    make_model: Callable[[], nn.Module]


@lru_cache(maxsize=1)
def _digits():
    d = load_digits()
    return d.images.astype(np.float32) / 16.0, d.target


def _split(X, y, n_train, n_val, rng):
    idx = rng.permutation(len(y))[: n_train + n_val]
    tr, va = idx[:n_train], idx[n_train:]
    t = torch.as_tensor
    return t(X[tr]), t(y[tr]).long(), t(X[va]), t(y[va]).long()


def digits_task(rng, max_train=512, n_val=256):
    """A random digits-derived task.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.meta import digits_task
    >>> task = digits_task(np.random.default_rng(0), max_train=128, n_val=64)
    >>> len(task.y_val), task.X_train.dtype
    (64, torch.float32)
    """
    images, target = _digits()
    k = int(rng.integers(2, 11))
    classes = np.sort(rng.choice(10, size=k, replace=False))
    keep = np.isin(target, classes)
    X, y = images[keep], np.searchsorted(classes, target[keep])
    size = int(rng.choice([8, 4]))
    if size == 4:
        X = X.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4))
    X = (X - X.mean()) / (X.std() + 1e-6)
    n_train = min(max_train, len(y) - n_val)
    if n_train < 1:
        raise ValueError(f"n_val={n_val} leaves no training rows in a digits task of "
                         f"{len(y)} rows ({k} classes): lower n_val")
    Xtr, ytr, Xva, yva = _split(X.reshape(len(y), -1), y, n_train, min(n_val, len(y) // 3), rng)
    residual = bool(rng.integers(2))
    if size == 8 and rng.random() < 0.4:
        channels = int(rng.choice([4, 8]))
        make = (lambda: TaskCNN(k, channels, 8, residual))
        arch = f"cnn{channels}{'-res' if residual else ''}"
    else:
        width, depth = int(rng.choice([16, 32, 64])), int(rng.integers(1, 4))
        make = (lambda: TaskMLP(size * size, k, width, depth, residual))
        arch = f"mlp{width}x{depth}{'-res' if residual else ''}"
    return Task(f"digits{size}-k{k}-{arch}", Xtr, ytr, Xva, yva, k, make)


def synthetic_task(rng, max_train=512, n_val=256):
    """A random ``make_classification`` task with an MLP.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.meta import synthetic_task
    >>> task = synthetic_task(np.random.default_rng(0), max_train=128, n_val=64)
    >>> len(task.y_val), int(task.y_train.max()) < task.n_classes
    (64, True)
    """
    n_features = int(rng.integers(2, 21))
    n_informative = int(rng.integers(2, n_features + 1))
    k = int(rng.integers(2, min(5, 2 ** n_informative // 2) + 1))
    X, y = make_classification(n_samples=max_train + n_val, n_features=n_features,
                               n_informative=n_informative, n_redundant=0, n_classes=k,
                               n_clusters_per_class=1, class_sep=float(rng.uniform(0.5, 2.0)),
                               flip_y=float(rng.uniform(0, 0.1)),
                               random_state=int(rng.integers(2**31)))
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    Xtr, ytr, Xva, yva = _split(X, y, max_train, n_val, rng)
    width, depth, residual = int(rng.choice([16, 32])), int(rng.integers(1, 3)), bool(rng.integers(2))
    return Task(f"synthetic-f{n_features}-k{k}-mlp{width}x{depth}", Xtr, ytr, Xva, yva, k,
                lambda: TaskMLP(n_features, k, width, depth, residual))


class TaskDistribution:
    """Samples meta-training tasks: digits-derived with probability ``p_digits``, else synthetic.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.meta import TaskDistribution
    >>> task = TaskDistribution().sample(np.random.default_rng(0))
    >>> task.X_train.shape[0] <= 512 and task.n_classes >= 2
    True
    """

    def __init__(self, p_digits=0.7, max_train=512, n_val=256):
        if isinstance(p_digits, bool) or not (isinstance(p_digits, (int, float, np.floating))
                                              and 0.0 <= p_digits <= 1.0):
            raise ValueError(f"p_digits must be a probability in [0, 1], got {p_digits!r}")
        for name, value in (("max_train", max_train), ("n_val", n_val)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if p_digits > 0:
            # the smallest digits task has two classes: n_val must leave it training rows
            smallest = int(np.sort(np.bincount(_digits()[1]))[:2].sum())
            if n_val >= smallest:
                raise ValueError(f"n_val={n_val} leaves no training rows in the smallest digits "
                                 f"task ({smallest} rows, two classes): lower n_val or set "
                                 "p_digits=0")
        self.p_digits = p_digits
        self.max_train = max_train
        self.n_val = n_val

    def describe(self):
        return {"p_digits": self.p_digits, "max_train": self.max_train, "n_val": self.n_val,
                "families": ["digits (class subsets, 8x8 / 4x4, MLP 16-64 wide 1-3 deep or "
                             "CNN 4-8 channels, +/- residual)",
                             "make_classification (2-20 features, 2-5 classes, MLP)"],
                "held_out_never_used": list(HELD_OUT)}

    def sample(self, rng):
        if rng.random() < self.p_digits:
            return digits_task(rng, self.max_train, self.n_val)
        return synthetic_task(rng, self.max_train, self.n_val)

"""Default trunk networks: an MLP for tabular data and a small LeNet-style CNN for images."""

import numpy as np
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

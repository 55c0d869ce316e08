"""Default trunk networks: an MLP for tabular data and a small LeNet-style CNN for images."""

from torch import nn


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
        c1, c2 = channels
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

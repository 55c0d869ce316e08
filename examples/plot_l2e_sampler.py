"""
==========================================================
SG-MCMC with the shipped L2E meta-sampler, step by step
==========================================================

The samplers in :mod:`sklmoo.samplers` are functional transitions over a dict of parameter
tensors: ``state = sampler.init(params)``, then ``state = sampler.update(state, grads)`` with
the gradient of the mean mini-batch loss. Here a small MLP on the wine data set (never seen in
meta-training) is sampled with the meta-sampler sklmoo ships and with SGHMC, and the Bayesian
model average (BMA) of the collected samples is compared as samples accumulate.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.func import functional_call

from sklmoo.meta import load_default_meta_sampler
from sklmoo.samplers import L2E, make_sgmcmc

X, y = load_wine(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y,
                                                    random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = (torch.as_tensor(scaler.transform(a), dtype=torch.float32)
                   for a in (X_train, X_test))
y_train, y_test = torch.as_tensor(y_train), torch.as_tensor(y_test)
net = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 3))


def run(sampler, n_steps=1500, thin=50, burn_in=500, seed=0):
    torch.manual_seed(seed)
    init = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 3))
    state = sampler.init({k: v.detach() for k, v in init.named_parameters()})
    gen = torch.Generator().manual_seed(seed)
    probs, curve = [], []
    for step in range(n_steps):
        idx = torch.randint(0, len(y_train), (32,), generator=gen)
        params = {k: v.requires_grad_(True) for k, v in state.params.items()}
        loss = nn.functional.cross_entropy(functional_call(net, params, (X_train[idx],)),
                                           y_train[idx])
        grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
        state.params = {k: v.detach() for k, v in params.items()}
        state = sampler.update(state, grads, generator=gen)
        if step >= burn_in and step % thin == 0:
            with torch.no_grad():
                probs.append(torch.softmax(functional_call(net, state.params, (X_test,)), -1))
            bma = torch.stack(probs).mean(0)
            curve.append((len(probs), float(-torch.log(bma[torch.arange(len(y_test)),
                                                            y_test]).mean()),
                          float((bma.argmax(1) == y_test).float().mean())))
    return np.array(curve)


n = len(y_train)
curves = {"L2E (shipped)": run(L2E(load_default_meta_sampler(), step_size=1.0, n_data=n)),
          # friction at its default, 0.1 / epsilon: momentum 0.9 per step
          "SGHMC": run(make_sgmcmc("sghmc", n_data=n, step_size=0.03))}
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for name, c in curves.items():
    axes[0].plot(c[:, 0], c[:, 1], label=name)
    axes[1].plot(c[:, 0], c[:, 2], label=name)
    print(f"{name:14s} BMA of {int(c[-1, 0])} samples: NLL {c[-1, 1]:.3f}, "
          f"accuracy {c[-1, 2]:.3f}")
axes[0].set(xlabel="samples in the BMA", ylabel="test NLL")
axes[1].set(xlabel="samples in the BMA", ylabel="test accuracy")
axes[0].legend()
fig.tight_layout()
plt.show()

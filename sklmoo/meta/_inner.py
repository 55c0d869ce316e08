"""Inner loop of L2E meta-training: P chains of one task, batched, and the meta-losses."""

import math

import numpy as np
import torch
from torch.func import functional_call, vmap

from ..samplers import L2E


def _stacked_init(model, n_chains):
    # all chains start from the same parameters: antithetic pairs then differ only by the
    # meta-parameter perturbation
    return {k: v.detach().unsqueeze(0).repeat(n_chains, *[1] * v.dim())
            for k, v in model.named_parameters()}


def run_chains(task, sampler, n_chains, n_steps, *, batch_size=128, n_samples=10, thin=None,
               generator=None, noise_generators=None, init_seed=None, full=False):
    """Run ``n_chains`` chains of ``sampler`` (built with ``batch_dims=1``) on ``task``.

    ``generator`` draws the mini-batches (shared by all chains) and, unless
    ``noise_generators`` gives one generator per chain, the sampler's noise. ``init_seed``
    seeds the network's initialisation (shared by all chains); None draws it from torch's
    global generator. With both, a chain's run does not depend on which other chains are
    batched with it (up to float rounding): how meta-training splits its ES pairs over workers.

    Returns
    -------
    log_probs : Tensor (n_chains, S, n_val), or (..., n_classes) with ``full=True``
        Log-probability of each validation label (or of every class) under each of the
        S = min(n_samples, n_steps) collected samples (thinned from the end of the run); NaN
        for a chain whose gradient stopped being finite (it is taken out of the run).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklmoo.meta import load_default_meta_sampler, synthetic_task
    >>> from sklmoo.meta._inner import make_l2e
    >>> task = synthetic_task(np.random.default_rng(0), max_train=64, n_val=32)
    >>> meta = load_default_meta_sampler()
    >>> weights = {k: v.expand(2, *v.shape) for k, v in meta.weights().items()}
    >>> logp = run_chains(task, make_l2e(weights, task), 2, 20, n_samples=3,
    ...                   generator=torch.Generator().manual_seed(0))
    >>> logp.shape                                     # (chains, samples, validation points)
    torch.Size([2, 3, 32])
    """
    for name, value in (("n_chains", n_chains), ("n_steps", n_steps), ("n_samples", n_samples)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    n_chains, n_steps, n_samples = int(n_chains), int(n_steps), int(n_samples)
    if init_seed is None:
        model = task.make_model()
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(init_seed))
            model = task.make_model()
    params = _stacked_init(model, n_chains)
    noise = generator if noise_generators is None else list(noise_generators)
    state = sampler.init(params)
    n = len(task.y_train)
    thin = thin or max(1, n_steps // (4 * n_samples))
    collect = {n_steps - 1 - i * thin for i in range(n_samples)}

    def logits_of(p, x):
        return vmap(lambda q: functional_call(model, q, (x,)))(p)

    collected = []
    diverged = torch.zeros(n_chains, dtype=torch.bool)
    for step in range(n_steps):
        idx = torch.randint(0, n, (min(batch_size, n),), generator=generator)
        x, y = task.X_train[idx], task.y_train[idx]
        p = {k: v.requires_grad_(True) for k, v in state.params.items()}
        logits = logits_of(p, x)                                       # (P, B, C)
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2),
                                                 y[None].expand(n_chains, -1))
        # each chain's gradient is its own loss's (the mean's backward does not mix them)
        grads = torch.autograd.grad(loss * n_chains, list(p.values()))
        state.params = {k: v.detach() for k, v in p.items()}
        grads = _drop_diverged(state, grads, diverged)
        # a chain that overflows is dropped at its next (non-finite) gradient, above
        state = sampler.update(state, dict(zip(p, grads)), generator=noise, check_state=False)
        if step in collect:
            with torch.no_grad():
                lp = torch.log_softmax(logits_of(state.params, task.X_val), dim=-1)
                collected.append(lp if full else lp.gather(-1, task.y_val[None, :, None].expand(
                    n_chains, -1, 1))[..., 0])
    out = torch.stack(collected, dim=1)
    out[diverged] = float("nan")
    return out


def _drop_diverged(state, grads, diverged):
    """Chains whose gradient is not finite are marked in ``diverged`` (P,) and taken out of
    the run: their parameters and gradients are set to zero from then on, so that the
    sampler (which refuses a non-finite gradient) keeps moving the other chains, and
    :func:`run_chains` reports them as NaN."""
    sums = torch.stack([g.reshape(len(diverged), -1).sum(dim=1) for g in grads]).sum(dim=0)
    diverged |= ~torch.isfinite(sums)
    if not diverged.any():
        return grads
    keep = ~diverged

    def zeroed(t):                                   # where, not a product: 0 * inf is NaN
        return torch.where(keep.view(-1, *[1] * (t.ndim - 1)), t, 0.0)

    state.params = {k: zeroed(v) for k, v in state.params.items()}
    return [zeroed(g) for g in grads]


def _inf_if_diverged(loss):
    return torch.where(torch.isfinite(loss), loss, torch.full_like(loss, float("inf")))


def bma_meta_loss(log_probs):
    """Eq. 7: NLL of the Bayesian model average, ``-mean_i log mean_k p_k(y_i|x_i)``, per chain
    (``log_probs`` (P, K, n)) -> (P,); inf for a diverged chain.

    Examples
    --------
    >>> import math, torch
    >>> from sklmoo.meta import bma_meta_loss
    >>> log_probs = torch.log(torch.tensor([[[0.5], [1.0]]]))   # 1 chain, 2 samples, 1 label
    >>> round(float(bma_meta_loss(log_probs)[0]), 4) == round(-math.log(0.75), 4)
    True
    """
    k = log_probs.shape[1]
    if log_probs.ndim != 3 or k == 0 or log_probs.shape[2] == 0:
        raise ValueError(f"log_probs must be (chains, samples, labels) with at least one sample "
                         f"and one label, got shape {tuple(log_probs.shape)}")
    return _inf_if_diverged(-(torch.logsumexp(log_probs, dim=1) - math.log(k)).mean(dim=1))


def ce_meta_loss(log_probs):
    """Mean cross-entropy of the individual samples (the paper's CE meta-loss ablation).

    Examples
    --------
    >>> import math, torch
    >>> from sklmoo.meta import ce_meta_loss
    >>> log_probs = torch.log(torch.tensor([[[0.5], [1.0]]]))
    >>> round(float(ce_meta_loss(log_probs)[0]), 4) == round(-math.log(0.5) / 2, 4)
    True
    """
    return _inf_if_diverged(-log_probs.mean(dim=(1, 2)))


def make_l2e(weights, task, step_size=1.0, temperature=1.0, friction=0.1):
    """An L2E sampler with per-chain meta-parameters ``weights`` (leading chain dim)."""
    return L2E(weights, step_size=step_size, n_data=len(task.y_train), friction=friction,
               temperature=temperature, batch_dims=1)

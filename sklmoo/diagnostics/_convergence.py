"""Rank-normalised split-R-hat and bulk effective sample size, vectorised over quantities."""

import numpy as np
from scipy import stats

from ..metrics import pairwise_kl_diversity


def _check_draws(draws, min_draws=4):
    if np.iscomplexobj(draws):
        raise ValueError("draws must be real numbers, got complex values")
    x = np.asarray(draws, dtype=np.float64)
    if x.ndim < 2:
        raise ValueError(f"draws must be (n_chains, n_draws, ...), got shape {x.shape}")
    if x.shape[0] < 1 or 0 in x.shape[2:]:
        raise ValueError(f"draws must hold at least one chain and one quantity, got shape "
                         f"{x.shape}")
    if x.shape[1] < min_draws:
        raise ValueError(f"need at least {min_draws} draws per chain to split the chains, got "
                         f"{x.shape[1]}")
    if not np.isfinite(x).all():
        raise ValueError("draws contain NaN or inf")
    return x


def _split(x):
    """Each chain's first and last halves become two chains (the middle draw of an odd
    length is dropped)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _rank_normalise(x):
    """Replace every value by the normal quantile of its fractional rank among all the draws
    of its quantity: :math:`\\Phi^{-1}((r - 3/8) / (S + 1/4))` (average ranks for ties)."""
    s = x.shape[0] * x.shape[1]
    ranks = stats.rankdata(x.reshape(s, -1), method="average", axis=0)
    return stats.norm.ppf((ranks - 0.375) / (s + 0.25)).reshape(x.shape)


def _basic_rhat(x):
    n = x.shape[1]
    within = x.var(axis=1, ddof=1).mean(axis=0)
    between = n * x.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(((n - 1) / n * within + between / n) / within)
    # no movement within any chain (tested exactly: the variance of equal values need not
    # round to 0): chains frozen at different values have not mixed at all (inf); frozen at
    # one value there is nothing to diagnose (NaN)
    frozen = (x.max(axis=1) == x.min(axis=1)).all(axis=0)
    agree = (x.max(axis=(0, 1)) == x.min(axis=(0, 1)))
    return np.where(frozen, np.where(agree, np.nan, np.inf), r)


def rhat(draws):
    r"""Rank-normalised split-:math:`\hat R` (Vehtari et al., 2021), per quantity.

    The larger of the bulk :math:`\hat R` (split chains, rank-normalised) and the tail
    :math:`\hat R` (the same on :math:`|x - \mathrm{median}(x)|`). Values near 1 mean the
    chains agree; 1.1 or more means they have not mixed (1.01 is the strict threshold for
    final inference).

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, ...)
        At least 4 draws per chain. Trailing axes index separate quantities.

    Returns
    -------
    ndarray of shape draws.shape[2:] (a float for a scalar quantity); NaN where a quantity is
    constant over all draws (nothing to diagnose), inf where every chain is constant but
    the chains differ (frozen chains, not mixed at all).

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.diagnostics import rhat
    >>> rng = np.random.default_rng(0)
    >>> mixed = rng.normal(size=(4, 500))
    >>> stuck = mixed + np.arange(4)[:, None]       # every chain in its own place
    >>> round(float(rhat(mixed)), 2), bool(rhat(stuck) > 1.1)
    (1.0, True)
    >>> float(rhat(np.repeat([[0.1], [0.7]], 10, axis=1)))       # two frozen chains
    inf
    """
    x = _split(_check_draws(draws))
    bulk = _basic_rhat(_rank_normalise(x))
    folded = np.abs(x - np.median(x.reshape(-1, *x.shape[2:]), axis=0))
    tail = _basic_rhat(_rank_normalise(folded))
    out = np.fmax(bulk, tail)
    return float(out) if out.ndim == 0 else out


def _autocovariance(x):
    """Biased autocovariance of every chain at every lag (FFT), shape (n_chains, n_draws, ...)."""
    n = x.shape[1]
    centred = x - x.mean(axis=1, keepdims=True)
    size = 2 ** int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(f * np.conj(f), n=size, axis=1)[:, :n] / n


def _ess(x):
    """Effective sample size of (chains, draws, Q) with Geyer's initial monotone sequence."""
    m, n = x.shape[:2]
    acov = _autocovariance(x).mean(axis=0)                        # (n, Q) mean over chains
    within = acov[0] * n / (n - 1)                                # mean within-chain variance
    var_plus = within * (n - 1) / n + (x.mean(axis=1).var(axis=0, ddof=1) if m > 1 else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within - acov) / var_plus                    # (n, Q) combined autocorrelation
    rho[0] = 1.0                                                  # by definition, not estimated
    q = rho.shape[1]
    # sums of consecutive (even, odd) lag pairs (lags up to n - 2), truncated at the first
    # non-positive pair (Geyer's initial positive sequence)
    n_pairs = (n - 1) // 2
    pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2, q).sum(axis=1)
    positive = np.cumprod(pairs > 0, axis=0).astype(bool)
    # the pair where the sequence stops: the first non-positive one, or the last one computed;
    # only its even-lag term counts, once, and only when positive
    cut = np.minimum(positive.sum(axis=0), n_pairs - 1)
    kept = np.arange(n_pairs)[:, None] < cut
    # initial monotone sequence: a pair sum may not exceed the one before it
    monotone = np.minimum.accumulate(np.where(kept, pairs, np.inf), axis=0)
    tau = -1.0 + 2.0 * np.where(kept, monotone, 0.0).sum(axis=0)
    even = np.take_along_axis(rho, (2 * cut)[None], axis=0)[0]
    tau += np.where(even > 0, even, 0.0)
    s = m * n
    tau = np.maximum(tau, 1.0 / np.log10(s))
    return np.where(var_plus > 0, s / tau, np.nan)


def ess_bulk(draws):
    """Bulk effective sample size (Vehtari et al., 2021), per quantity.

    The ESS of the rank-normalised split chains: how many independent draws the chains are
    worth for estimating the bulk (mean, median) of each quantity.

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, ...)

    Returns
    -------
    ndarray of shape draws.shape[2:] (a float for a scalar quantity); NaN where a quantity is
    constant.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.diagnostics import ess_bulk
    >>> rng = np.random.default_rng(0)
    >>> iid = rng.normal(size=(4, 250))
    >>> bool(800 < ess_bulk(iid) < 1200)
    True
    """
    x = _split(_check_draws(draws))
    z = _rank_normalise(x)
    shape = z.shape[2:]
    out = _ess(z.reshape(*z.shape[:2], -1)).reshape(shape)
    return float(out) if out.ndim == 0 else out


def function_space_diagnostics(proba_draws):
    """Convergence of SG-MCMC chains of a classifier, judged on its predictions.

    Parameter-space R-hat is meaningless for neural networks (symmetries: permuted hidden
    units predict the same); the chains' predicted class probabilities on a probe set are
    what must agree.

    Parameters
    ----------
    proba_draws : array-like of shape (n_chains, n_draws, n_samples, n_classes)

    Returns
    -------
    dict
        ``'rhat'``: the largest R-hat over probe points and classes (inf when chains are
        frozen at different predictions; 1.0 when no prediction changes in any chain or
        between chains); ``'ess_bulk'``: the smallest bulk ESS; ``'rhat_per_output'``,
        ``'ess_bulk_per_output'``: (n_samples, n_classes) arrays (NaN where a probability is
        the same in every draw of every chain, which is left out of the summaries);
        ``'diversity'``: mean pairwise KL between all collected samples' predictions
        (:func:`sklmoo.metrics.pairwise_kl_diversity`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.diagnostics import function_space_diagnostics
    >>> rng = np.random.default_rng(0)
    >>> logits = rng.normal(size=(4, 100, 6, 3))
    >>> proba = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    >>> d = function_space_diagnostics(proba)
    >>> bool(d['rhat'] < 1.05), d['rhat_per_output'].shape
    (True, (6, 3))
    """
    p = np.asarray(proba_draws, dtype=np.float64)
    if p.ndim != 4:
        raise ValueError("proba_draws must be (n_chains, n_draws, n_samples, n_classes), got "
                         f"shape {p.shape}")
    r, e = rhat(p), ess_bulk(p)
    informative = ~np.isnan(r)
    return {
        "rhat": float(np.max(r[informative])) if informative.any() else 1.0,
        "ess_bulk": float(np.min(e[informative])) if informative.any() else float(p.shape[0] * p.shape[1]),
        "rhat_per_output": r,
        "ess_bulk_per_output": e,
        "diversity": pairwise_kl_diversity(p.reshape(-1, *p.shape[2:])),
    }

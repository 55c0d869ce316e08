"""Post-hoc recalibration of a pooled prediction on held-out data ("pool, then calibrate").

One temperature per task for class probabilities (Guo et al. 2017, applied to the ensemble's /
posterior's averaged probabilities, or to the log-linear pool of the members' probabilities)
and one variance scale per output for Gaussian predictions.
Both are fitted by minimising the held-out negative log-likelihood plus a Gaussian prior on
the logarithm of the parameter (standard deviation ``PRIOR_SCALE`` unless the caller passes its
own): with hundreds of held-out rows the prior is weak; with a handful it keeps one unlucky row
from setting an extreme temperature.
NumPy and SciPy only.
"""

import numpy as np
from scipy.optimize import minimize_scalar

#: standard deviation of the Gaussian prior on log(temperature) / log(variance scale)
PRIOR_SCALE = 0.5
#: the search interval of the logarithm (temperatures / scales between e^-4 and e^4)
_LOG_BOUND = 4.0
_TINY = 1e-300


def apply_temperature(proba, temperature):
    """Probabilities ``proba`` (n, C) raised to ``1 / temperature`` and renormalised (the
    softmax of ``log p / T``); T > 1 softens, T < 1 sharpens, the argmax never changes."""
    proba = np.asarray(proba, dtype=np.float64)
    if temperature == 1.0:
        return proba
    logits = np.log(np.maximum(proba, _TINY)) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    out = np.exp(logits)
    return out / out.sum(axis=1, keepdims=True)


def pool_log_linear(members, log=False):
    """The members' probabilities (M, n, C) pooled log-linearly into (n, C): the renormalised
    geometric mean, i.e. the softmax of the members' averaged log-probabilities (for networks,
    of their averaged logits). ``log=True``: ``members`` are log-probabilities (exact where a
    probability would underflow). Sharper than the arithmetic mean wherever members disagree:
    a class one member rules out stays unlikely."""
    members = np.asarray(members, dtype=np.float64)
    logp = (members if log else np.log(np.maximum(members, _TINY))).mean(axis=0)
    logp -= logp.max(axis=1, keepdims=True)
    out = np.exp(logp)
    return out / out.sum(axis=1, keepdims=True)


def _minimise(objective):
    res = minimize_scalar(objective, bounds=(-_LOG_BOUND, _LOG_BOUND), method="bounded",
                          options={"xatol": 1e-4})
    return float(np.exp(res.x))


def _weighted_rows(sample_weight, rows):
    """The rows that count (labelled, with a positive weight) and their weights (None:
    unweighted). A weight counts like that many copies of the row against the prior, as
    scikit-learn's ``sample_weight`` does; a zero weight leaves the row out."""
    if sample_weight is None:
        return rows, None
    weight = np.asarray(sample_weight, dtype=np.float64)
    if weight.shape != rows.shape:
        raise ValueError(f"sample_weight has shape {weight.shape}; expected {rows.shape}")
    if not (np.isfinite(weight).all() and (weight >= 0).all()):
        raise ValueError("sample_weight must be finite and non-negative")
    rows = rows & (weight > 0)
    return rows, weight[rows]


def fit_temperature(proba, codes, prior_center=1.0, prior_scale=PRIOR_SCALE,
                    sample_weight=None):
    """The temperature that minimises the NLL of ``apply_temperature(proba, T)`` on the labels
    ``codes`` (integer column indices, -1 = missing), plus the prior on log T, a normal
    distribution centred at ``log(prior_center)`` with standard deviation ``prior_scale``.
    ``prior_center`` when no row is labelled. ``sample_weight`` (n,) weights the rows' NLL
    (integer weights act like copies of the rows; zero leaves a row out)."""
    if not prior_scale > 0:
        raise ValueError(f"prior_scale must be > 0, got {prior_scale!r}")
    proba = np.asarray(proba, dtype=np.float64)
    codes = np.asarray(codes)
    rows, weight = _weighted_rows(sample_weight, codes >= 0)
    center = float(np.log(prior_center))
    if not rows.any():
        return float(prior_center)
    logp = np.log(np.maximum(proba[rows], _TINY))
    logp -= logp.max(axis=1, keepdims=True)
    idx = codes[rows].astype(np.int64)

    def objective(log_t):
        z = logp / np.exp(log_t)
        lse = np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1)) + z.max(axis=1)
        per_row = lse - z[np.arange(len(idx)), idx]
        nll = np.sum(per_row if weight is None else weight * per_row)
        return nll + 0.5 * ((log_t - center) / prior_scale) ** 2

    return _minimise(objective)


def fit_variance_scale(y, mean, std, narrowing_margin=0.0, sample_weight=None):
    """The factor ``s`` on the variance (``std * sqrt(s)``) that minimises the Gaussian NLL of
    ``y`` (n,) under ``N(mean, s * std**2)``, plus the prior on log s; NaN targets are left
    out. 1.0 when no target is observed.

    ``narrowing_margin`` (in standard errors of log s, about ``sqrt(2 / n)`` for n rows): a
    factor below 1 is applied only as far as it lies beyond that margin,
    ``min(1, s * exp(margin * sqrt(2 / n)))``; widening is never held back. 0 (the default)
    returns the fitted factor as is. ``sample_weight`` (n,) weights the rows' NLL (integer
    weights act like copies of the rows: ``n`` above is the rows' total weight; zero leaves a
    row out)."""
    if not narrowing_margin >= 0:
        raise ValueError(f"narrowing_margin must be >= 0, got {narrowing_margin!r}")
    y, mean, std = (np.asarray(a, dtype=np.float64) for a in (y, mean, std))
    rows, weight = _weighted_rows(sample_weight, ~np.isnan(y))
    if not rows.any():
        return 1.0
    z2 = ((y[rows] - mean[rows]) / np.maximum(std[rows], _TINY)) ** 2
    if weight is not None:
        z2 = weight * z2
    n = rows.sum() if weight is None else weight.sum()

    def objective(log_s):
        # the terms that depend on s: 0.5 * sum(log s + z^2 / s)
        return 0.5 * (n * log_s + np.sum(z2) * np.exp(-log_s)) + 0.5 * (log_s / PRIOR_SCALE) ** 2

    s = _minimise(objective)
    if s < 1.0:
        s = min(1.0, s * float(np.exp(narrowing_margin * np.sqrt(2.0 / n))))
    return s

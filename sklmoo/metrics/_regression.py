"""Calibration metrics for Gaussian predictive distributions (regression), their scorers and the
expected-vs-observed coverage display."""

import warnings

import numpy as np
from scipy.special import logsumexp, ndtri

from ._validation import aggregate, check_weight_sum, float_targets

_LOG_2PI = float(np.log(2 * np.pi))


def _as_columns(a, name):
    a = float_targets(a)
    if a.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, n_outputs), got shape {a.shape}")
    return a


def regression_outputs(y_true, y_mean, y_std, sample_weight=None):
    """Validate ``(y_true, y_mean, y_std)`` and split them per output.

    Returns
    -------
    outputs : list of (y, mean, std, weight or None) per output, over its observed samples
        (NaN in ``y_true`` = missing), or None for an output without any observed sample
    multioutput : bool
        Whether the inputs were 2-D.
    """
    y, mean, std = (_as_columns(a, n) for a, n in ((y_true, "y_true"), (y_mean, "y_mean"),
                                                   (y_std, "y_std")))
    if mean.shape != y.shape or std.shape != y.shape:
        raise ValueError(f"y_true, y_mean and y_std must have the same shape, got {y.shape}, "
                         f"{mean.shape} and {std.shape}")
    if y.shape[0] == 0:
        raise ValueError("y_true is empty")
    if np.isinf(y).any():
        raise ValueError("y_true contains inf (NaN marks a missing target)")
    if not (np.isfinite(mean).all() and np.isfinite(std).all()):
        raise ValueError("y_mean and y_std must be finite (no NaN or inf)")
    if (std <= 0).any():
        raise ValueError(f"y_std must be positive, got a minimum of {std.min():.3g}")
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (y.shape[0],):
            raise ValueError(f"sample_weight must have shape ({y.shape[0]},), got {w.shape}")
        if not np.isfinite(w).all() or (w < 0).any():
            raise ValueError("sample_weight must be finite and non-negative")
        check_weight_sum(w)
    multi = y.ndim == 2
    y2, m2, s2 = (a.reshape(a.shape[0], -1) for a in (y, mean, std))
    outputs = []
    for t in range(y2.shape[1]):
        rows = ~np.isnan(y2[:, t])
        wt = None if w is None else w[rows]
        if not rows.any() or (wt is not None and not wt.sum() > 0):
            outputs.append(None)
            continue
        outputs.append((y2[rows, t], m2[rows, t], s2[rows, t], wt))
    if all(o is None for o in outputs):
        raise ValueError("y_true has no observed (non-NaN) value with positive weight")
    return outputs, multi


def _per_output(func, y_true, y_mean, y_std, sample_weight, multioutput):
    outputs, multi = regression_outputs(y_true, y_mean, y_std, sample_weight)
    values = [np.nan if o is None else func(*o) for o in outputs]
    if multi and any(o is None for o in outputs):
        missing = [t for t, o in enumerate(outputs) if o is None]
        warnings.warn(f"output(s) {missing} have no observed value: left out of the average "
                      "(NaN in raw_values)", UserWarning, stacklevel=3)
    return aggregate(values, multi, multioutput)


def gaussian_nll(y_true, y_mean, y_std, *, sample_weight=None, multioutput="uniform_average"):
    r"""Mean negative log-likelihood of ``y_true`` under :math:`\mathcal N(\mu, \sigma^2)`.

    :math:`\frac{1}{n}\sum_i \tfrac12\log(2\pi\sigma_i^2) + (y_i - \mu_i)^2 / 2\sigma_i^2`
    (nats, constant included; lower is better). It rewards both an accurate mean and a spread
    that matches the errors.

    Parameters
    ----------
    y_true, y_mean, y_std : array-like of shape (n,) or (n, n_outputs)
        Targets (NaN = missing, left out of that output), predictive means and standard
        deviations (positive), e.g. from ``predict(X, return_std=True)``.
    sample_weight : array-like of shape (n,), optional
    multioutput : {'uniform_average', 'raw_values'} or array-like of output weights

    Returns
    -------
    float, or ndarray of shape (n_outputs,) with ``multioutput='raw_values'``

    Raises
    ------
    ValueError
        When the value exceeds the largest float64 (a standardised residual
        :math:`|y - \mu| / \sigma` beyond about 1e154). Large but representable values are
        computed without overflow (the quadratic term is averaged in log space).

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.metrics import gaussian_nll
    >>> round(gaussian_nll([0.0, 1.0], [0.0, 0.0], [1.0, 1.0]), 4)   # log(2 pi)/2 + 1/4
    1.1689
    """
    return _per_output(_gaussian_nll_1d, y_true, y_mean, y_std, sample_weight, multioutput)


def _gaussian_nll_1d(y, mean, std, w):
    with np.errstate(over="ignore", invalid="ignore"):
        value = np.average(0.5 * _LOG_2PI + np.log(std) + 0.5 * ((y - mean) / std) ** 2,
                           weights=w)
    if np.isfinite(value):
        return value
    # y - mean, its ratio to std or the square overflowed: average the quadratic term in log
    # space, log(0.5 z^2) = log 0.5 + 2 (log|y - mean| - log std), halving before subtracting
    w = np.ones(len(y)) if w is None else w
    with np.errstate(divide="ignore"):            # a zero residual: log 0 = -inf, exp -> 0
        log_abs_residual = np.log(np.abs(0.5 * y - 0.5 * mean)) + np.log(2.0)
    log_quadratic = logsumexp(np.log(0.5) + 2.0 * (log_abs_residual - np.log(std)),
                              b=w) - np.log(w.sum())
    log_terms = np.average(0.5 * _LOG_2PI + np.log(std), weights=w)
    with np.errstate(over="ignore"):
        value = log_terms + np.exp(log_quadratic)
    if not np.isfinite(value):
        worst = int(np.argmax(log_abs_residual - np.log(std)))
        raise ValueError(
            "gaussian_nll overflows float64: the standardised residual |y - mean| / std is "
            f"{np.exp(log_abs_residual[worst] - np.log(std[worst])):.3g} for y={y[worst]:.3g}, "
            f"mean={mean[worst]:.3g}, std={std[worst]:.3g}, so the mean negative "
            "log-likelihood exceeds the largest float")
    return value


def _check_level(level):
    if isinstance(level, bool) or not isinstance(level, (int, float, np.number)) or not (
            0 < level < 1):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")


def _inside(y, mean, std, level):
    """Whether each y lies in the central ``level`` interval of N(mean, std^2); ``level`` may
    be an array of levels (broadcast on a new last axis)."""
    z = ndtri(0.5 + np.asarray(level, dtype=np.float64) / 2)
    # in standard deviations: comparing |y - mean| with std * z counted inf <= inf as covered
    # when both overflowed; a residual that overflows is measured as y / std - mean / std
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        residual = np.abs(np.asarray(y, dtype=np.float64) - mean)
        scaled = residual / std
        overflow = ~np.isfinite(residual)
        if overflow.any():
            scaled = np.where(overflow, np.abs(y / std - mean / std), scaled)
    return scaled[..., None] <= z


def interval_coverage(y_true, y_mean, y_std, *, level=0.9, sample_weight=None,
                      multioutput="uniform_average"):
    """Share of ``y_true`` inside the central ``level`` interval of the predictive Gaussian.

    :math:`\\mu \\pm z\\,\\sigma` with :math:`z = \\Phi^{-1}((1 + \\text{level}) / 2)` (1.645
    for 90 %). A calibrated model covers ``level`` of held-out data; less is overconfident,
    more underconfident.

    Parameters
    ----------
    y_true, y_mean, y_std : array-like of shape (n,) or (n, n_outputs)
    level : float in (0, 1), default=0.9
    sample_weight : array-like of shape (n,), optional
    multioutput : {'uniform_average', 'raw_values'} or array-like of output weights

    Returns
    -------
    float, or ndarray of shape (n_outputs,) with ``multioutput='raw_values'``

    Examples
    --------
    >>> from sklmoo.metrics import interval_coverage
    >>> interval_coverage([0.0, 1.0, 3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], level=0.9)
    0.6666666666666666
    """
    _check_level(level)
    return _per_output(lambda y, m, s, w: np.average(_inside(y, m, s, level)[:, 0], weights=w),
                       y_true, y_mean, y_std, sample_weight, multioutput)


def _abs_area(x, d):
    """Exact integral of |d| for d piecewise linear on the grid x (sign changes included)."""
    d0, d1, dx = d[:-1], d[1:], np.diff(x)
    same = d0 * d1 >= 0
    area = np.where(same, 0.5 * dx * np.abs(d0 + d1), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = 0.5 * dx * (d0 ** 2 + d1 ** 2) / (np.abs(d0) + np.abs(d1))
    return float(np.sum(np.where(same, area, crossing)))


#: the most coverage levels a curve takes (each costs a pass over the samples)
MAX_LEVELS = 10_000


def check_levels(n_levels):
    """``ValueError`` unless ``n_levels`` is an integer from 2 to :data:`MAX_LEVELS`."""
    if (isinstance(n_levels, bool) or not isinstance(n_levels, (int, np.integer))
            or not 2 <= n_levels <= MAX_LEVELS):
        raise ValueError(f"n_levels must be an integer from 2 to {MAX_LEVELS}, got "
                         f"{n_levels!r}")
    return int(n_levels)


def coverage_curve(y, mean, std, sample_weight=None, n_levels=100):
    """Expected (``np.linspace(0, 1, n_levels)``) and observed proportions of ``y`` inside the
    central intervals of N(mean, std^2) at those levels, and the area between the two curves,
    for one output."""
    expected = np.linspace(0.0, 1.0, check_levels(n_levels))
    observed = np.average(_inside(y, mean, std, expected), axis=0, weights=sample_weight)
    return expected, observed, _abs_area(expected, observed - expected)


def miscalibration_area(y_true, y_mean, y_std, *, n_levels=100, sample_weight=None,
                        multioutput="uniform_average"):
    """Area between the expected and observed proportion-in-interval curves.

    For levels p on ``np.linspace(0, 1, n_levels)``, the observed proportion of ``y_true`` in
    the central p interval of the predictive Gaussian is compared with p; the metric is the
    area between that curve and the diagonal (piecewise linear, crossings included), as
    Uncertainty Toolbox computes it (Chung et al. 2021). 0 is perfect calibration, 0.5 the
    worst; it does not say in which direction: look at :func:`interval_coverage` or
    :class:`RegressionCalibrationDisplay`.

    Parameters
    ----------
    y_true, y_mean, y_std : array-like of shape (n,) or (n, n_outputs)
    n_levels : int, default=100
        Levels on the curve, 2 to 10,000.
    sample_weight : array-like of shape (n,), optional
    multioutput : {'uniform_average', 'raw_values'} or array-like of output weights

    Returns
    -------
    float, or ndarray of shape (n_outputs,) with ``multioutput='raw_values'``

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.metrics import miscalibration_area
    >>> rng = np.random.RandomState(0)
    >>> y = rng.standard_normal(20000)
    >>> zero, one = np.zeros_like(y), np.ones_like(y)
    >>> miscalibration_area(y, zero, one) < 0.01          # the true distribution
    True
    >>> miscalibration_area(y, zero, 0.5 * one) > 0.1    # half the true spread
    True
    """
    check_levels(n_levels)
    return _per_output(lambda y, m, s, w: coverage_curve(y, m, s, w, n_levels)[2],
                       y_true, y_mean, y_std, sample_weight, multioutput)

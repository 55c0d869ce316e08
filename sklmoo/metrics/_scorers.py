"""scikit-learn scorers for the calibration metrics (classification and regression)."""

import inspect

import numpy as np

from ._calibration import (brier_score, classwise_calibration_error, expected_calibration_error,
                           negative_log_likelihood)
from ._regression import gaussian_nll, interval_coverage, miscalibration_area

_METRICS = {
    "ece": expected_calibration_error,
    "classwise_ece": classwise_calibration_error,
    "brier": brier_score,
    "nll": negative_log_likelihood,
}


def _classes_of(estimator):
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise AttributeError(
            f"{type(estimator).__name__} has no classes_: calibration scorers need a fitted "
            "classifier (the classes_ attribute maps probability columns to labels)"
        )
    if isinstance(classes, (list, tuple)):
        return [np.asarray(c) for c in classes]
    return np.asarray(classes)


def _final_estimator(estimator, attribute):
    """The estimator, or the last step of a pipeline / the best estimator of a search (nested
    up to 16 deep), that has ``attribute``; None if none has."""
    for _ in range(16):
        if hasattr(estimator, attribute):
            return estimator
        if hasattr(estimator, "steps"):
            estimator = estimator.steps[-1][1]
        elif hasattr(estimator, "best_estimator_"):
            estimator = estimator.best_estimator_
        else:
            return None
    return None


def _missing_marker(estimator):
    """The missing-label marker of a fitted multi-task classifier when it is neither NaN nor
    None (sklmoo's ``missing_label``; read through pipelines' last steps and searches' best
    estimators), else None."""
    estimator = _final_estimator(estimator, "missing_label")
    marker = None if estimator is None else estimator.missing_label
    if marker is None or (isinstance(marker, float) and np.isnan(marker)):
        return None
    return marker


def predict_with_std(estimator, X, who):
    """``estimator.predict(X, return_std=True)``; a ``TypeError`` saying that ``who`` (e.g.
    'regression calibration scorers need') a predictive standard deviation when the
    estimator's ``predict`` takes no ``return_std``."""
    try:
        return estimator.predict(X, return_std=True)
    except TypeError as exc:
        if "return_std" not in str(exc):
            raise
        raise TypeError(f"{type(estimator).__name__}.predict does not accept "
                        f"return_std=True; {who} a predictive standard deviation") from exc


def in_fit_order(estimator, y_true):
    """``y_true`` as a sklmoo estimator's ``fit`` and ``score`` read targets: a DataFrame of
    several columns named as the fit's (``task_names_``) but in another order is reordered by
    name, and one with other names is an error; anything else (and any other estimator's
    ``y_true``) is read by position, unchanged."""
    estimator = _final_estimator(estimator, "_match_target_columns")
    return y_true if estimator is None else estimator._match_target_columns(y_true)


def _equals(value, marker):
    try:
        return bool(value == marker)
    except (TypeError, ValueError):            # pd.NA, arrays: not the marker
        return False


def with_missing_marked(estimator, y_true):
    """``y_true`` with the labels equal to the estimator's missing-label marker (e.g.
    ``missing_label=-1``) replaced by None, which the metrics leave out as the estimator does
    in ``fit`` and ``score``; unchanged when the marker is NaN / None or does not occur."""
    marker = _missing_marker(estimator)
    if marker is None:
        return y_true
    frame = hasattr(y_true, "columns")
    values = y_true.to_numpy() if hasattr(y_true, "to_numpy") else np.asarray(y_true)
    columns = ([y_true.iloc[:, t].to_numpy() for t in range(values.shape[1])] if frame
               else [values] if values.ndim == 1 else list(values.T))
    masks = [np.array([_equals(v, marker) for v in c.tolist()], dtype=bool) for c in columns]
    if not any(m.any() for m in masks):
        return y_true
    if frame:
        out = y_true.astype(object)
        for t, m in enumerate(masks):
            out.iloc[m, t] = None
        return out
    out = values.astype(object)
    if out.ndim == 1:
        out[masks[0]] = None
    else:
        for t, m in enumerate(masks):
            out[m, t] = None
    return out


class _RoutedScorer:
    """scikit-learn's metadata routing for a scorer that takes ``sample_weight``: as for
    scikit-learn's own scorers, with routing switched on the weights reach it only once it
    asks for them (``set_score_request(sample_weight=True)``)."""

    def set_score_request(self, **kwargs):
        """Request ``sample_weight`` for scoring when scikit-learn's metadata routing is on.

        Parameters
        ----------
        sample_weight : bool, None or str
            True: pass the weights given to ``cross_validate`` / ``GridSearchCV`` (``params``)
            on to this scorer; False: do not; None (the default): an error if they are given;
            a string: the name of another parameter that holds them.

        Returns
        -------
        self
            This scorer (the module's ready-made scorers are shared objects: make your own,
            e.g. ``make_calibration_scorer('nll')``, to leave theirs unchanged).
        """
        import sklearn                   # here: sklmoo.metrics imports without scikit-learn

        if not sklearn.get_config().get("enable_metadata_routing", False):
            raise RuntimeError("set_score_request is only available when metadata routing is "
                               "enabled: sklearn.set_config(enable_metadata_routing=True)")
        unknown = sorted(set(kwargs) - {"sample_weight"})
        if unknown:
            raise TypeError(f"set_score_request takes sample_weight only, got {unknown}")
        if "sample_weight" in kwargs:
            self._sample_weight_request = kwargs["sample_weight"]
        return self

    def get_metadata_routing(self):
        """The scorer's :class:`~sklearn.utils.metadata_routing.MetadataRequest`: its
        ``score`` method's request for ``sample_weight``."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=self)
        request.score.add_request(param="sample_weight",
                                  alias=getattr(self, "_sample_weight_request", None))
        return request


class _MetricScorer(_RoutedScorer):
    """Shared by the scorers: a metric, its keyword arguments and scikit-learn's sign
    convention (lower-is-better metrics negated, named ``neg_*``)."""

    _factory = "make_scorer"

    def __init__(self, score_func, *, greater_is_better=False, name=None, **kwargs):
        self._score_func = score_func
        self._sign = 1 if greater_is_better else -1
        self._kwargs = kwargs
        base = name or getattr(score_func, "__name__", "score")
        self.name = base if greater_is_better else f"neg_{base}"

    def __repr__(self):
        kw = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        return f"{self._factory}({self._score_func.__name__}{kw})"


def _resolve_metric(metric, registry):
    if isinstance(metric, str):
        if metric not in registry:
            raise ValueError(f"metric must be one of {sorted(registry)} or a callable, "
                             f"got {metric!r}")
        return registry[metric]
    if not callable(metric):
        raise TypeError(f"metric must be a string or a callable, got {type(metric).__name__}")
    return metric


class CalibrationScorer(_MetricScorer):
    """A scikit-learn scorer ``scorer(estimator, X, y_true, sample_weight=None)`` for a
    probability metric.

    It calls ``estimator.predict_proba(X)`` and passes ``estimator.classes_`` as the metric's
    ``labels``, so probability columns map to labels even when a cross-validation fold lacks a
    class, for single-task estimators, :class:`~sklearn.multioutput.MultiOutputClassifier`
    (list of per-task arrays) and sklmoo's multi-task estimators alike. A label the estimator
    never saw in fit counts as a wrong prediction (probability 0 for its class) instead of
    raising, and missing labels (NaN / None, or the estimator's own ``missing_label`` such as
    -1) are left out, as the estimators do in fit. With scikit-learn's metadata routing on,
    ``set_score_request(sample_weight=True)`` has the weights routed to it.
    Lower-is-better metrics are negated (``greater_is_better=False``), following
    scikit-learn's ``neg_*`` scorers.

    Build one with :func:`make_calibration_scorer`; ready-made: :data:`ece_scorer`,
    :data:`brier_scorer`, :data:`nll_scorer`.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklmoo.metrics import CalibrationScorer, brier_score
    >>> X, y = load_iris(return_X_y=True)
    >>> scorer = CalibrationScorer(brier_score)                # same as make_calibration_scorer
    >>> scorer.name, bool(scorer(LogisticRegression(max_iter=500).fit(X, y), X, y) < 0)
    ('neg_brier_score', True)
    """

    _factory = "make_calibration_scorer"

    def __call__(self, estimator, X, y_true, sample_weight=None):
        labels = _classes_of(estimator)
        y_true = with_missing_marked(estimator, in_fit_order(estimator, y_true))
        kwargs = dict(self._kwargs)
        if self._score_func in _METRICS.values():
            # a test fold's label that its training fold never held is a wrong prediction
            kwargs.setdefault("unknown_labels", "count_as_wrong")
        value = self._score_func(y_true, estimator.predict_proba(X), labels=labels,
                                 sample_weight=sample_weight, **kwargs)
        return self._sign * value


def make_calibration_scorer(metric="ece", *, greater_is_better=False, **kwargs):
    """Make a scorer from a calibration metric, with custom bins or task weighting.

    Parameters
    ----------
    metric : {'ece', 'classwise_ece', 'brier', 'nll'} or callable, default='ece'
        A callable must accept ``(y_true, y_proba, *, labels, sample_weight, **kwargs)``.
    greater_is_better : bool, default=False
        False negates the metric, so that scikit-learn maximises the score.
    **kwargs
        Passed to the metric, e.g. ``n_bins=15, strategy='quantile', norm='max'``,
        ``multioutput=[0.5, 0.5]``, or ``scale_by_half=False`` (Brier score summed over
        classes even for binary tasks).

    Returns
    -------
    CalibrationScorer

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import cross_val_score
    >>> from sklmoo.metrics import make_calibration_scorer
    >>> X, y = load_iris(return_X_y=True)
    >>> ece15 = make_calibration_scorer("ece", n_bins=15)
    >>> scores = cross_val_score(LogisticRegression(max_iter=500), X, y, scoring=ece15, cv=3)
    >>> bool((scores <= 0).all())  # negated: closer to 0 is better
    True
    """
    fn = _resolve_metric(metric, _METRICS)
    if fn in _METRICS.values():
        # tried on a two-sample binary problem when every argument is about the binning or
        # the floor (not about labels or tasks)
        trial = (([0, 1], np.array([[0.8, 0.2], [0.3, 0.7]]))
                 if set(kwargs) <= {"n_bins", "strategy", "norm", "scale_by_half", "eps"}
                 else None)
        _check_metric_arguments(fn, kwargs, 2, trial)
    return CalibrationScorer(fn, greater_is_better=greater_is_better, **kwargs)


def _check_metric_arguments(fn, kwargs, n_inputs, trial=None):
    """Refuse, when the scorer is made, arguments a built-in metric would refuse at every
    scoring (a misspelt name, ``n_bins=0``, ``level=1.5``): scikit-learn's model selection
    would otherwise turn each score into NaN with a warning. ``n_inputs``: the metric's
    positional inputs; ``trial``: such inputs of a small valid problem to call it on, or
    None (only the names are checked)."""
    try:
        inspect.signature(fn).bind(*[None] * n_inputs, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{fn.__name__} takes no such argument: {exc}") from None
    if trial is None:
        return
    try:
        fn(*trial, **kwargs)
    except ValueError as exc:
        raise ValueError(f"{fn.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
                         f": {exc}") from None


#: Negated top-label ECE with 10 equal-width bins (the MT-SGD paper's setting).
ece_scorer = make_calibration_scorer("ece")
#: Negated Brier score, scikit-learn's ``'neg_brier_score'`` convention (binary: mean squared
#: error of the positive-class probability; three or more classes: summed over classes), for
#: single- and multi-task classifiers. The per-class sum for any number of classes (twice this
#: for binary): ``make_calibration_scorer("brier", scale_by_half=False)``.
brier_scorer = make_calibration_scorer("brier")
#: Negated mean negative log-likelihood.
nll_scorer = make_calibration_scorer("nll")


# -- regression ------------------------------------------------------------------------------

_REGRESSION_METRICS = {
    "gaussian_nll": gaussian_nll,
    "interval_coverage": interval_coverage,
    "miscalibration_area": miscalibration_area,
}


class RegressionScorer(_MetricScorer):
    """A scikit-learn scorer ``scorer(estimator, X, y_true, sample_weight=None)`` for a metric
    of Gaussian predictive distributions.

    It calls ``estimator.predict(X, return_std=True)`` (sklmoo's regressors,
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`,
    :class:`~sklearn.linear_model.BayesianRidge`, ...) and passes ``(y_true, mean, std)`` to the
    metric. Lower-is-better metrics are negated (``greater_is_better=False``), following
    scikit-learn's ``neg_*`` scorers. Build one with :func:`make_regression_scorer`;
    ready-made: :data:`gaussian_nll_scorer`, :data:`miscalibration_area_scorer`.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.linear_model import BayesianRidge
    >>> from sklmoo.metrics import RegressionScorer, gaussian_nll
    >>> X, y = load_diabetes(return_X_y=True)
    >>> scorer = RegressionScorer(gaussian_nll)                # same as make_regression_scorer
    >>> scorer.name, bool(scorer(BayesianRidge().fit(X, y), X, y) < 0)
    ('neg_gaussian_nll', True)
    """

    _factory = "make_regression_scorer"

    def __call__(self, estimator, X, y_true, sample_weight=None):
        mean, std = predict_with_std(estimator, X, "regression calibration scorers need")
        value = self._score_func(in_fit_order(estimator, y_true), mean, std,
                                 sample_weight=sample_weight,
                                 **self._kwargs)
        return self._sign * value


def make_regression_scorer(metric="gaussian_nll", *, greater_is_better=False, **kwargs):
    """Make a scorer from a regression calibration metric.

    Parameters
    ----------
    metric : {'gaussian_nll', 'interval_coverage', 'miscalibration_area'} or callable
        A callable must accept ``(y_true, y_mean, y_std, *, sample_weight, **kwargs)``.
    greater_is_better : bool, default=False
        False negates the metric, so that scikit-learn maximises the score. (Coverage is a
        quantity to report, e.g. in ``cross_validate``, rather than to maximise: wider
        intervals always cover more.)
    **kwargs
        Passed to the metric, e.g. ``level=0.95`` or ``multioutput='raw_values'``.

    Returns
    -------
    RegressionScorer

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.linear_model import BayesianRidge
    >>> from sklearn.model_selection import cross_val_score
    >>> from sklmoo.metrics import gaussian_nll_scorer, make_regression_scorer
    >>> X, y = load_diabetes(return_X_y=True)
    >>> nll = cross_val_score(BayesianRidge(), X, y, scoring=gaussian_nll_scorer, cv=3)
    >>> bool((nll < 0).all())            # negated NLL: closer to 0 is better
    True
    >>> cov = make_regression_scorer("interval_coverage", greater_is_better=True, level=0.9)
    >>> cov90 = cross_val_score(BayesianRidge(), X, y, scoring=cov, cv=3)
    >>> bool(((cov90 > 0.8) & (cov90 < 0.97)).all())
    True
    """
    fn = _resolve_metric(metric, _REGRESSION_METRICS)
    if fn in _REGRESSION_METRICS.values():
        # tried on three samples of two outputs, unless the arguments hold output weights
        # (their number is the scored y's, not known here)
        y = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.2]])
        weights = not isinstance(kwargs.get("multioutput", "uniform_average"), str)
        _check_metric_arguments(fn, kwargs, 3,
                                None if weights else (y, y + 0.1, np.ones_like(y)))
    return RegressionScorer(fn, greater_is_better=greater_is_better, **kwargs)


#: Negated mean Gaussian negative log-likelihood of ``predict(X, return_std=True)``.
gaussian_nll_scorer = make_regression_scorer("gaussian_nll")
#: Negated miscalibration area of ``predict(X, return_std=True)``.
miscalibration_area_scorer = make_regression_scorer("miscalibration_area")

"""Scoring multi-task classifiers: accuracy averaged over tasks, and any scikit-learn scorer
applied to one task.

scikit-learn's classification scorers reject a multiclass-multioutput ``y`` (``'accuracy'``
raises, so ``cross_val_score`` returns NaN), and for all-binary tasks ``'accuracy'`` is the
subset accuracy (every task right at once) while ``'neg_log_loss'`` treats the T positive-class
probabilities as one distribution.
"""

import inspect
import warnings

import numpy as np
from sklearn.metrics import get_scorer, make_scorer
from sklearn.utils import get_tags

from ._scorers import _MetricScorer, _RoutedScorer, in_fit_order, with_missing_marked
from ._validation import (aggregate, check_label_kinds, check_sample_weight,
                          missing_label_mask)


def _as_2d(y, name):
    if hasattr(y, "to_numpy"):                  # pandas Series / DataFrame
        y = y.to_numpy()
    try:
        y = np.asarray(y)
    except ValueError:                          # numpy's "inhomogeneous shape"
        raise ValueError(f"{name} is ragged: its rows hold different numbers of labels; a "
                         "multi-task target needs one label per task in every row (NaN or "
                         "None for a missing label)") from None
    if y.ndim == 1:
        return y[:, None], False
    if y.ndim != 2:
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, n_tasks), got shape {y.shape}")
    return y, True


def _infer_dtype(values):
    """An object column (a DataFrame's, or one that held None) with its labels' own dtype, so
    that scikit-learn's metrics see ints or strings rather than 'unknown' objects."""
    if values.dtype != object:
        return values
    inferred = np.array(values.tolist())
    return inferred if inferred.dtype != object and inferred.shape == values.shape else values


def _equal(a, b):
    if a.dtype.kind in "biuf" and b.dtype.kind in "biuf" or (a.dtype.kind in "US"
                                                              and b.dtype.kind in "US"):
        return a == b
    return np.array([x == y for x, y in zip(a.tolist(), b.tolist())], dtype=bool)


def multitask_accuracy_score(y_true, y_pred, *, sample_weight=None,
                             multioutput="uniform_average"):
    """Accuracy of each task on its labelled samples, averaged over tasks.

    What a multi-task classifier's ``score`` reports (sklmoo's
    :class:`~sklmoo.MTSGDMultiTaskClassifier` does), as a metric: scikit-learn's
    :func:`~sklearn.metrics.accuracy_score` rejects multiclass-multioutput targets and, when
    every task is binary, returns the subset accuracy (all tasks right at once) instead.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_tasks)
        True labels; NaN / None marks a missing label, left out of its task. A DataFrame works.
    y_pred : array-like of the same shape
        Predicted labels, e.g. ``estimator.predict(X)``.
    sample_weight : array-like of shape (n_samples,), optional
    multioutput : {'uniform_average', 'raw_values'} or array-like of task weights
        How to combine the tasks. A task without any labelled sample gives NaN in
        ``'raw_values'`` and is left out of the averages (with a warning).

    Returns
    -------
    float, or ndarray of shape (n_tasks,) with ``multioutput='raw_values'``

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.metrics import multitask_accuracy_score
    >>> y_true = np.array([[0, "cat"], [1, "dog"], [2, None]], dtype=object)
    >>> y_pred = np.array([[0, "cat"], [2, "cat"], [2, "dog"]], dtype=object)
    >>> multitask_accuracy_score(y_true, y_pred, multioutput="raw_values")  # 2/3 and 1/2
    array([0.66666667, 0.5       ])
    >>> round(multitask_accuracy_score(y_true, y_pred), 4)
    0.5833
    """
    y, multitask = _as_2d(y_true, "y_true")
    pred, _ = _as_2d(y_pred, "y_pred")
    if pred.shape != y.shape:
        raise ValueError(f"y_true has shape {np.shape(y_true)} but y_pred has "
                         f"{np.shape(y_pred)}")
    if len(y) == 0:
        raise ValueError("y_true is empty")
    sw = check_sample_weight(sample_weight, len(y))
    values = []
    for t in range(y.shape[1]):
        rows = ~missing_label_mask(y[:, t])
        w = None if sw is None else sw[rows]
        if not rows.any() or (w is not None and not w.sum() > 0):
            values.append(np.nan)
            continue
        true, predicted = _infer_dtype(y[rows, t]), _infer_dtype(pred[rows, t])
        check_label_kinds(true, predicted, f"task {t}: " if multitask else "")
        hits = _equal(true, predicted)
        values.append(float(np.average(hits, weights=w)))
    values = np.array(values)
    if np.isnan(values).all():
        raise ValueError("y_true has no labelled sample of positive weight (every label is "
                         "missing, or every labelled sample has weight 0)")
    if np.isnan(values).any():
        warnings.warn(f"tasks {np.flatnonzero(np.isnan(values)).tolist()} have no labelled "
                      "sample: left out of the average (NaN in raw_values)", UserWarning,
                      stacklevel=2)
    return aggregate(values, multitask, multioutput)


class _LabelScorer(_MetricScorer):
    """``scorer(estimator, X, y_true, sample_weight=None)`` for a metric of predicted labels:
    ``metric(y_true, estimator.predict(X))``, with the estimator's own missing-label marker
    left out as NaN / None are (scikit-learn's ``make_scorer`` reads a classifier's
    ``classes_`` as one array, which a multi-task estimator's list of per-task label arrays of
    different types is not)."""

    def __call__(self, estimator, X, y_true, sample_weight=None):
        y_true = with_missing_marked(estimator, in_fit_order(estimator, y_true))
        return self._sign * self._score_func(y_true, estimator.predict(X),
                                             sample_weight=sample_weight, **self._kwargs)


#: Mean over tasks of each task's accuracy on its labelled samples (missing labels NaN / None,
#: or the estimator's ``missing_label``, left out), a scikit-learn scorer for multi-task ``y``:
#: ``scoring=multitask_accuracy_scorer``.
multitask_accuracy_scorer = _LabelScorer(multitask_accuracy_score, greater_is_better=True)


class _TaskView:
    """One task of a fitted multi-task estimator, seen as a single-task estimator: ``predict``
    and ``predict_proba`` return that task's column / array restricted to ``rows``, and
    ``classes_`` that task's classes. scikit-learn's scorers read its tags (classifier or
    regressor) from the wrapped estimator."""

    def __init__(self, estimator, task, n_tasks, rows):
        self.estimator, self.task, self.n_tasks, self.rows = estimator, task, n_tasks, rows

    def __sklearn_tags__(self):
        return get_tags(self.estimator)

    @property
    def classes_(self):
        classes = self.estimator.classes_
        if isinstance(classes, (list, tuple)):
            return _infer_dtype(np.asarray(classes[self.task]))
        return np.array([0, 1])            # multilabel indicator: each task is binary 0 / 1

    def _task_output(self, out, method):
        if isinstance(out, (list, tuple)):
            if len(out) != self.n_tasks:
                raise ValueError(f"{method} returned {len(out)} arrays for {self.n_tasks} tasks")
            return np.asarray(out[self.task])[self.rows]
        arr = out.to_numpy() if hasattr(out, "to_numpy") else np.asarray(out)
        if arr.ndim == 2 and arr.shape[1] == self.n_tasks:
            column = arr[self.rows, self.task]
            if method == "predict":
                # one task's labels, not the object column that tasks of mixed types share
                return _infer_dtype(column)
            return np.column_stack([1 - column, column])  # positive-class probabilities
        raise ValueError(f"{type(self.estimator).__name__}.{method} returned shape "
                         f"{arr.shape}, not one output per task ({self.n_tasks} tasks)")

    def __getattr__(self, name):
        if name not in ("predict", "predict_proba"):
            raise AttributeError(name)
        method = getattr(self.estimator, name)          # AttributeError if it has none

        def task_method(X):
            return self._task_output(method(X), name)
        task_method.__name__ = name
        return task_method


class _PerTaskScorer(_RoutedScorer):
    def __init__(self, scoring, task):
        self._scoring, self._task = scoring, task
        if isinstance(scoring, str):
            self._scorer = get_scorer(scoring)
        elif not callable(scoring):
            raise TypeError(f"scoring must be a scorer name or a callable, got "
                            f"{type(scoring).__name__}")
        elif _first_parameter(scoring) == "y_true":      # a metric, not a scorer
            self._scorer = make_scorer(scoring)
        else:
            self._scorer = scoring

    def __repr__(self):
        name = self._scoring if isinstance(self._scoring, str) else getattr(
            self._scoring, "__name__", repr(self._scoring))
        return f"per_task_scorer({name!r}, task={self._task!r})"

    def _task_index(self, y_true, n_tasks):
        task = self._task
        if not isinstance(task, (int, np.integer)):
            columns = list(getattr(y_true, "columns", []))
            if task not in columns:
                raise ValueError(f"task {task!r} is not a column of y_true (columns: "
                                 f"{columns}); pass a column name of a DataFrame y or an int")
            return columns.index(task)
        if not -n_tasks <= task < n_tasks:
            raise ValueError(f"task {task} out of range for y_true with {n_tasks} tasks")
        return int(task) % n_tasks

    def __call__(self, estimator, X, y_true, sample_weight=None):
        y_true = with_missing_marked(estimator, in_fit_order(estimator, y_true))
        y, multitask = _as_2d(y_true, "y_true")
        if not multitask:
            raise ValueError("per_task_scorer needs a multi-task y_true (n_samples, n_tasks); "
                             "score a single task with the scorer itself")
        t = self._task_index(y_true, y.shape[1])
        rows = ~missing_label_mask(y[:, t])
        if not rows.any():
            raise ValueError(f"task {self._task!r} has no labelled sample in y_true")
        view = _TaskView(estimator, t, y.shape[1], rows)
        y_task = _infer_dtype(y[rows, t])
        if sample_weight is None:
            return self._scorer(view, X, y_task)
        return self._scorer(view, X, y_task, sample_weight=np.asarray(sample_weight)[rows])


def _first_parameter(func):
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None
    return params[0] if params else None


def per_task_scorer(scoring, task=0):
    """A scorer that scores one task of a multi-task estimator with any single-task scorer.

    The estimator's ``predict`` / ``predict_proba`` output for task ``task`` (column ``task``,
    or array ``task`` of a list such as :class:`~sklearn.multioutput.MultiOutputClassifier`'s
    and sklmoo's multi-task estimators return) and ``classes_[task]`` are handed to the scorer
    with that task's column of ``y``, as if the estimator were a single-task one. Samples whose
    label is missing (NaN / None, or the estimator's own ``missing_label``) in that task are
    left out. With scikit-learn's metadata routing on, ``set_score_request(sample_weight=True)``
    has the weights routed to it.

    Parameters
    ----------
    scoring : str or callable
        A scikit-learn scorer name (``'accuracy'``, ``'balanced_accuracy'``, ``'f1_macro'``,
        ``'neg_log_loss'``, ``'roc_auc'``, ``'r2'``, ...), a scorer
        ``scorer(estimator, X, y)`` (from :func:`sklearn.metrics.make_scorer`, or sklmoo's
        :data:`ece_scorer`, ...), or a metric ``metric(y_true, y_pred)`` (a callable whose
        first parameter is named ``y_true``), wrapped with ``make_scorer``.
    task : int or str, default=0
        Index of the task, or its column name when ``y`` is a DataFrame.

    Returns
    -------
    callable
        ``scorer(estimator, X, y_true, sample_weight=None)`` for ``scoring=``.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import KFold, cross_validate
    >>> from sklearn.multioutput import MultiOutputClassifier
    >>> import numpy as np
    >>> from sklmoo.metrics import multitask_accuracy_scorer, per_task_scorer
    >>> X, species = load_iris(return_X_y=True)
    >>> y = np.column_stack([species, X[:, 0] > 5.8])        # two tasks: 3 classes, binary
    >>> scoring = {"mean_accuracy": multitask_accuracy_scorer,
    ...            "species_log_loss": per_task_scorer("neg_log_loss", task=0),
    ...            "long_sepal_auc": per_task_scorer("roc_auc", task=1)}
    >>> cv = cross_validate(MultiOutputClassifier(LogisticRegression(max_iter=500)), X, y,
    ...                     scoring=scoring, cv=KFold(3, shuffle=True, random_state=0))
    >>> bool(cv["test_mean_accuracy"].mean() > 0.8), bool(cv["test_long_sepal_auc"].min() > 0.8)
    (True, True)
    """
    return _PerTaskScorer(scoring, task)

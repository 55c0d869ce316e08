"""Calibration and ensemble metrics: ECE, class-wise ECE, Brier score, NLL, pairwise KL."""

import warnings

import numpy as np

from ._uncertainty import check_eps, check_member_proba
from ._validation import _as_label_array, aggregate, missing_label_mask, tasks_and_weights

_NORMS = ("l1", "l2", "max")
_STRATEGIES = ("uniform", "quantile")


#: the most bins a calibration metric accepts: every bin costs a few float64 (its edges and
#: sums), so a typo such as 10**9 would take gigabytes
MAX_BINS = 10 ** 6


def _check_binning(n_bins, strategy, norm=None):
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if n_bins > MAX_BINS:
        raise ValueError(f"n_bins={n_bins} is more than the {MAX_BINS} bins a calibration "
                         "metric allows (each bin costs memory; beyond one bin per sample they "
                         "only add empty bins)")
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")
    if norm is not None and norm not in _NORMS:
        raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")


def bin_edges(confidence, n_bins, strategy, sample_weight=None):
    """Bin edges on [0, 1]. ``'quantile'``: the weighted inverted-CDF quantiles of the
    confidences (the smallest confidence whose cumulative weight reaches each quantile, so an
    integer weight acts exactly as repetition and a zero weight as absence); duplicate
    quantiles are merged."""
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)
    conf = np.asarray(confidence)
    w = np.ones(len(conf)) if sample_weight is None else np.asarray(sample_weight)
    keep = w > 0
    order = np.argsort(conf[keep], kind="stable")
    sorted_conf, cum = conf[keep][order], np.cumsum(w[keep][order])
    targets = np.linspace(0.0, 1.0, n_bins + 1) * cum[-1]
    edges = sorted_conf[np.clip(np.searchsorted(cum, targets, side="left"), 0,
                                len(cum) - 1)].astype(np.float64)
    edges[0], edges[-1] = 0.0, 1.0
    return np.unique(edges)


def binned_calibration(confidence, correct, sample_weight, n_bins=10, strategy="uniform"):
    """Weighted mean confidence, accuracy and weight per non-empty bin.

    Bins are right-closed, ``(lo, hi]``, as in the MT-SGD paper (Appendix B.2.1); a confidence of
    exactly 0 falls in the first bin.

    Returns
    -------
    mean_confidence, accuracy, weight : arrays over the non-empty bins (weight sums to 1)
    edges : the bin edges
    """
    edges = bin_edges(confidence, n_bins, strategy, sample_weight)
    n = len(edges) - 1
    if strategy == "uniform":
        # arithmetic guess, then exact right-closed placement against the same edges that
        # searchsorted would use (twice as fast on 10^6 confidences)
        idx = np.clip(np.ceil(confidence * n).astype(np.intp) - 1, 0, n - 1)
        idx -= (idx > 0) & (confidence <= edges[idx])
        idx += (idx < n - 1) & (confidence > edges[idx + 1])
    else:
        idx = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, n - 1)
    if sample_weight is None:                      # every sample counts once
        w = np.bincount(idx, minlength=n).astype(np.float64)
        conf = np.bincount(idx, weights=confidence, minlength=n)
        acc = np.bincount(idx, weights=correct, minlength=n)
    else:
        w = np.bincount(idx, weights=sample_weight, minlength=n)
        conf = np.bincount(idx, weights=sample_weight * confidence, minlength=n)
        acc = np.bincount(idx, weights=sample_weight * correct, minlength=n)
    nonempty = w > 0
    w, conf, acc = w[nonempty], conf[nonempty], acc[nonempty]
    return conf / w, acc / w, w / w.sum(), edges


def _gap(mean_conf, acc, weight, norm):
    gap = np.abs(acc - mean_conf)
    if norm == "l1":
        return float((weight * gap).sum())
    if norm == "l2":
        return float(np.sqrt((weight * gap**2).sum()))
    return float(gap.max())


def _task_metric(per_task, y_true, y_proba, labels, sample_weight, multioutput,
                 unknown_labels="raise"):
    """Validate the inputs, apply ``per_task(codes, proba, sample_weight) -> float`` to every
    task and combine the tasks as ``multioutput`` says.

    Samples whose label is missing (NaN / None) are left out of their task; a task with no
    labelled sample gets NaN in ``'raw_values'`` and is left out of the averages (with a
    warning); all tasks unlabelled raises."""
    tasks, multitask = tasks_and_weights(y_true, y_proba, labels, sample_weight, unknown_labels)
    if all(t is None for t in tasks):
        raise ValueError("y_true has no labelled sample of positive weight (every label is "
                         "missing, or every labelled sample has weight 0)")
    values = np.array([np.nan if t is None else per_task(*t) for t in tasks])
    if np.isnan(values).any():
        warnings.warn(f"tasks {np.flatnonzero(np.isnan(values)).tolist()} have no labelled "
                      "sample: left out of the average (NaN in raw_values)", UserWarning,
                      stacklevel=3)
    return aggregate(values, multitask, multioutput)


def _true_class_proba(codes, proba):
    """p(true class) per sample; 0 for a label outside the known classes (code -1)."""
    picked = _pick(proba, np.maximum(codes, 0))
    return np.where(codes >= 0, picked.astype(np.float64), 0.0)


def _top_label(codes, proba):
    pred = proba.argmax(axis=1)
    return _pick(proba, pred), (pred == codes).astype(np.float64)


def _pick(proba, columns):
    """``proba[i, columns[i]]`` for every row (a flat take: twice as fast as fancy indexing)."""
    proba = np.ascontiguousarray(proba)
    return proba.ravel().take(columns + np.arange(len(columns)) * proba.shape[1])


def expected_calibration_error(y_true, y_proba, *, n_bins=10, strategy="uniform", norm="l1",
                               labels=None, sample_weight=None, multioutput="uniform_average",
                               unknown_labels="raise"):
    r"""Top-label expected calibration error.

    :math:`\mathrm{ECE} = \sum_m \frac{|B_m|}{N} |\mathrm{acc}(B_m) - \mathrm{conf}(B_m)|`
    over bins of the top-label confidence :math:`\max_c p(c|x)`, as in the MT-SGD paper
    (Appendix B.2.1; Guo et al., 2017).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_tasks)
        True labels (any hashable values: ints, strings, ...). A DataFrame works.
    y_proba : array-like of shape (n_samples, n_classes) or (n_samples,), or list of such arrays
        Predicted probabilities, columns in ``labels`` order. A 1-D array is the probability of
        the positive class ``labels[-1]`` of a binary problem; for multi-task ``y_true`` pass a
        list of one array per task, or an (n_samples, n_tasks) array of positive-class
        probabilities when every task is binary (the shapes scikit-learn's ``predict_proba``
        scorers hand over).
    n_bins : int, default=10
    strategy : {'uniform', 'quantile'}, default='uniform'
        Equal-width bins :math:`((m-1)/M, m/M]` (right-closed, edges
        ``np.linspace(0, 1, n_bins + 1)``), or bins holding equal numbers of samples.
    norm : {'l1', 'l2', 'max'}, default='l1'
        Weighted mean gap (ECE), root weighted mean squared gap, or the largest gap over
        non-empty bins (MCE).
    labels : array-like, or list of array-like per task, optional
        The class of each probability column (an estimator's ``classes_``). Default: the sorted
        unique labels of ``y_true``, which must then match the number of columns.
    sample_weight : array-like of shape (n_samples,), optional
    multioutput : {'uniform_average', 'raw_values'} or array-like of task weights
        How to combine the tasks of a multi-task ``y_true``.
    unknown_labels : {'raise', 'count_as_wrong'}, default='raise'
        A label of ``y_true`` that is not in ``labels`` raises, or counts as a sample whose
        true class got probability 0 (what a classifier deserves for a class its training
        fold never held; the scorers use this).

    Notes
    -----
    Missing labels (NaN / None in ``y_true``) are left out of their task; a task without any
    labelled sample gives NaN in ``'raw_values'`` and is left out of the averages.

    Returns
    -------
    float, or ndarray of shape (n_tasks,) with ``multioutput='raw_values'``

    Examples
    --------
    >>> from sklmoo.metrics import expected_calibration_error
    >>> y = [0, 1, 1, 0]
    >>> proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(expected_calibration_error(y, proba, n_bins=5), 4)  # bins (.4,.6], (.6,.8], (.8,1]
    0.25
    """
    _check_binning(n_bins, strategy, norm)

    def per_task(codes, proba, sw):
        conf, correct = _top_label(codes, proba)
        mean_conf, acc, weight, _ = binned_calibration(conf, correct, sw, n_bins, strategy)
        return _gap(mean_conf, acc, weight, norm)

    return _task_metric(per_task, y_true, y_proba, labels, sample_weight, multioutput,
                        unknown_labels)


def classwise_calibration_error(y_true, y_proba, *, n_bins=10, strategy="uniform", norm="l1",
                                labels=None, sample_weight=None,
                                multioutput="uniform_average", unknown_labels="raise"):
    r"""Class-wise ECE (Kull et al., 2019): the mean over classes c of the calibration error of
    :math:`p(c|x)` against the indicator :math:`1[y=c]`, each class binned on its own.

    Parameters are those of :func:`expected_calibration_error`.

    Examples
    --------
    >>> from sklmoo.metrics import classwise_calibration_error
    >>> y = [0, 1, 1, 0]
    >>> proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    >>> round(classwise_calibration_error(y, proba, n_bins=5), 4)
    0.2
    """
    _check_binning(n_bins, strategy, norm)

    def per_task(codes, proba, sw):
        per_class = []
        for c in range(proba.shape[1]):
            mean_conf, acc, weight, _ = binned_calibration(
                proba[:, c], (codes == c).astype(np.float64), sw, n_bins, strategy)
            per_class.append(_gap(mean_conf, acc, weight, norm))
        return float(np.mean(per_class))

    return _task_metric(per_task, y_true, y_proba, labels, sample_weight, multioutput,
                        unknown_labels)


def _check_scale_by_half(scale_by_half):
    if not (isinstance(scale_by_half, (bool, np.bool_)) or scale_by_half == "auto"):
        raise ValueError(f"scale_by_half must be True, False or 'auto', got {scale_by_half!r}")


def _positive_label_targets(y_true, y_proba, pos_label):
    """``y_true`` recoded as 1.0 (``pos_label``) / 0.0 (any other label), NaN where missing,
    for a 1-D ``y_proba`` of ``pos_label``'s probability (scikit-learn's ``pos_label``)."""
    y = _as_label_array(y_true)
    if y.ndim != 1 or np.ndim(y_proba) != 1:
        raise ValueError("pos_label applies to a single binary task with a 1-D y_proba (the "
                         "positive-class probabilities); pass labels= otherwise")
    missing = missing_label_mask(y)
    present = set(y[~missing].tolist())
    if len(present) > 2:
        raise ValueError(f"a 1-D y_proba needs a binary target; y_true has classes "
                         f"{sorted(present, key=str)}")
    return np.where(missing, np.nan, (y == pos_label).astype(np.float64))


def brier_score(y_true, y_proba, *, labels=None, pos_label=None, scale_by_half="auto",
                sample_weight=None, multioutput="uniform_average", unknown_labels="raise"):
    r"""Brier score, as :func:`sklearn.metrics.brier_score_loss` computes it.

    :math:`\frac1N\sum_i\sum_c (1[y_i=c] - p(c|x_i))^2` (in [0, 2]), halved for binary
    problems by default (``scale_by_half='auto'``) so that it is the mean squared error of the
    positive-class probability, :math:`\frac1N\sum_i (1[y_i=\text{pos}] - p_i)^2`, in [0, 1].
    A multi-task ``y_true`` gets one Brier score per task, combined as ``multioutput`` says.

    Parameters
    ----------
    y_true, y_proba, labels, sample_weight, multioutput, unknown_labels
        As in :func:`expected_calibration_error` (no binning).
    pos_label : label, optional
        With a 1-D ``y_proba`` of a single task: the class whose probability it holds (every
        other label is the negative class). Default: ``labels[-1]``, else the greater label
        of ``y_true`` (1 for {0, 1} and {-1, 1}).
    scale_by_half : bool or 'auto', default='auto'
        Halve the sum over classes: ``'auto'`` halves for two probability columns (binary,
        or a 1-D ``y_proba``) and not for three or more, scikit-learn's default (>= 1.7),
        decided per task. ``False`` keeps the sum over classes for any number of classes (the
        MT-SGD paper's multiclass Brier score, twice scikit-learn's default for a binary
        problem).

    Returns
    -------
    float, or ndarray of shape (n_tasks,) with ``multioutput='raw_values'``

    Examples
    --------
    >>> from sklmoo.metrics import brier_score
    >>> round(brier_score([0, 1], [[0.8, 0.2], [0.4, 0.6]]), 4)   # (0.2^2 + 0.4^2) / 2
    0.1
    >>> round(brier_score(["no", "yes"], [0.2, 0.6], pos_label="yes"), 4)   # 1-D: p(yes)
    0.1
    >>> round(brier_score([0, 1], [[0.8, 0.2], [0.4, 0.6]], scale_by_half=False), 4)
    0.2
    >>> round(brier_score([0, 2], [[0.8, 0.1, 0.1], [0.2, 0.2, 0.6]], labels=[0, 1, 2]), 4)
    0.15
    """
    _check_scale_by_half(scale_by_half)
    if pos_label is not None:
        y_true, labels = _positive_label_targets(y_true, y_proba, pos_label), [0.0, 1.0]

    def per_task(codes, proba, sw):
        # sum_c (1[y=c] - p_c)^2 = sum_c p_c^2 - 2 p_y + 1, without an (n, C) one-hot matrix
        squares = np.einsum("ij,ij->i", proba, proba, dtype=np.float64)
        value = float(np.average(squares - 2 * _true_class_proba(codes, proba) + 1, weights=sw))
        halve = proba.shape[1] < 3 if scale_by_half == "auto" else bool(scale_by_half)
        return 0.5 * value if halve else value

    return _task_metric(per_task, y_true, y_proba, labels, sample_weight, multioutput,
                        unknown_labels)


def negative_log_likelihood(y_true, y_proba, *, labels=None, sample_weight=None, eps="auto",
                            multioutput="uniform_average", unknown_labels="raise"):
    r"""Mean negative log-likelihood of the true labels, :math:`-\frac1N\sum_i\log p(y_i|x_i)`
    (probabilities clipped to ``[eps, 1 - eps]``); equal to :func:`sklearn.metrics.log_loss`,
    a probability of 0 included.

    ``eps='auto'`` (the default) is the machine epsilon of ``y_proba``'s floating-point type
    (float64 for other types), as in :func:`sklearn.metrics.log_loss`; a float in (0, 1)
    sets it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.metrics import negative_log_likelihood
    >>> bool(np.isclose(negative_log_likelihood([0, 1], [[0.5, 0.5], [0.5, 0.5]]), np.log(2)))
    True
    """
    if not (isinstance(eps, str) and eps == "auto"):
        check_eps(eps, allowed="'auto' or a number in (0, 1)")

    # the input's type, read before the checks convert the probabilities to float64
    floor = np.finfo(_float_dtype(y_proba)).eps if isinstance(eps, str) else eps

    def per_task(codes, proba, sw):
        p = np.clip(_true_class_proba(codes, proba), floor, 1.0 - floor)
        return float(np.average(-np.log(p), weights=sw))

    return _task_metric(per_task, y_true, y_proba, labels, sample_weight, multioutput,
                        unknown_labels)


def _float_dtype(y_proba):
    """The floating-point type of the probabilities as given (float64 for any other: lists,
    integers), of an array or of a list of per-task arrays."""
    try:
        dtype = np.asarray(y_proba).dtype
    except (ValueError, TypeError):                 # per-task arrays of other shapes
        dtype = np.result_type(*[np.asarray(p).dtype for p in y_proba])
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def pairwise_kl_diversity(member_proba, *, eps=1e-12):
    r"""Mean pairwise KL divergence between ensemble members' predictive distributions.

    The L2E paper's KLD (its Eq. 18): :math:`\mathbb E_x\big[\frac{1}{M(M-1)}\sum_{i\ne j}
    \mathrm{KL}(p(\cdot|x,\theta_i)\,\|\,p(\cdot|x,\theta_j))\big]`, with the KL summed over
    classes. Higher means a more diverse ensemble; 0 for identical members.

    Parameters
    ----------
    member_proba : array-like of shape (n_members, n_samples, n_classes), or list of such
        arrays (one per task; the mean over tasks is returned).

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.metrics import pairwise_kl_diversity
    >>> p = np.array([[[0.5, 0.5]], [[0.9, 0.1]]])
    >>> kl = lambda a, b: float((a * np.log(a / b)).sum())
    >>> bool(np.isclose(pairwise_kl_diversity(p), (kl(p[0, 0], p[1, 0]) + kl(p[1, 0], p[0, 0])) / 2))
    True
    """
    check_eps(eps)
    if isinstance(member_proba, (list, tuple)) and member_proba and np.ndim(member_proba[0]) == 3:
        return float(np.mean([pairwise_kl_diversity(p, eps=eps) for p in member_proba]))
    p = check_member_proba(member_proba, min_members=2)
    m = p.shape[0]
    logp = np.log(np.clip(p, eps, None))
    # sum_{i,j} KL(p_i || p_j) = M sum_i <p_i, log p_i> - <sum_i p_i, sum_j log p_j>
    self_term = (p * logp).sum(axis=(0, 2))
    cross = (p.sum(axis=0) * logp.sum(axis=0)).sum(axis=1)
    return float(((m * self_term - cross) / (m * (m - 1))).mean())

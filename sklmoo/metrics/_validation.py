"""Turning (y_true, y_proba) in any of the shapes scikit-learn produces into per-task pieces."""

import numpy as np
import pandas as pd

_SUM_TOL = 1e-4


def _is_multitask_y(y):
    return y.ndim == 2 and y.shape[1] >= 1


def _as_label_array(y):
    if hasattr(y, "to_numpy"):  # pandas Series / DataFrame
        y = y.to_numpy()
    y = np.asarray(y)
    if y.ndim == 0 or y.ndim > 2:
        raise ValueError(f"y_true must be 1-D (n,) or 2-D (n, n_tasks), got shape {y.shape}")
    return y


def _binary_labels_from(y, task=None):
    uniq = unique_labels(y)
    where = "" if task is None else f" for task {task}"
    if len(uniq) == 2:
        return uniq
    if len(uniq) == 1 and uniq[0] in (0, 1) and np.issubdtype(uniq.dtype, np.number):
        return np.array([0, 1], dtype=uniq.dtype)
    raise ValueError(
        f"y_proba holds one positive-class probability per sample{where}, which needs a binary "
        f"target; y_true has classes {uniq.tolist()}. Pass labels=[negative, positive]."
    )


def row_sum_tolerance(dtype):
    """How far from 1 a row of probabilities stored in ``dtype`` may sum: rounding each
    probability to the dtype moves the row sum by about one eps, so float16 (eps ~1e-3) needs
    a looser tolerance; 32 eps is scikit-learn's sqrt(eps) for float16 and far below
    ``_SUM_TOL`` for float32 / float64."""
    dtype = np.dtype(dtype)
    return max(_SUM_TOL, 32 * float(np.finfo(dtype).eps)) if dtype.kind == "f" else _SUM_TOL


def _check_proba_matrix(p, n_samples, task=None):
    where = "" if task is None else f" (task {task})"
    p = np.asarray(p)
    tol = row_sum_tolerance(p.dtype)
    if p.dtype.kind not in "fiub" or p.dtype.itemsize < 4:
        p = p.astype(np.float64)            # float16 / int8 / bool: compute in float64
    if p.ndim != 2:
        raise ValueError(f"y_proba{where} must be 2-D (n_samples, n_classes), got shape {p.shape}")
    if p.shape[0] != n_samples:
        raise ValueError(f"y_true has {n_samples} samples but y_proba{where} has {p.shape[0]}")
    if p.size == 0:
        raise ValueError(f"y_proba{where} is empty")
    # min / max see NaN (they propagate it) and inf (outside [0, 1]) without a separate pass
    lo, hi = float(p.min()), float(p.max())
    if np.isnan(lo) or np.isnan(hi):
        raise ValueError(f"y_proba{where} contains NaN or inf")
    if lo < -1e-12 or hi > 1 + 1e-12:
        kind = "inf" if np.isinf(lo) or np.isinf(hi) else "values outside [0, 1]"
        raise ValueError(f"y_proba{where} has {kind}" if kind != "inf"
                         else f"y_proba{where} contains NaN or inf")
    if p.shape[1] > 1:
        # einsum accumulates the row sums in float64 as fast as a float32 matrix-vector
        # product, and several times faster than sum(axis=1)
        deviation = float(np.abs(np.einsum("ij->i", p, dtype=np.float64) - 1.0).max())
        if deviation > tol:
            raise ValueError(f"y_proba{where} rows must sum to 1 (largest deviation "
                             f"{deviation:.3g})")
    return np.clip(p, 0.0, 1.0) if lo < 0 or hi > 1 else p


def float_targets(y):
    """``y`` (array-like, Series or DataFrame) as a float64 array, its missing values --
    NaN, None, pandas' ``pd.NA`` of nullable columns -- as NaN (the regressor's ``fit``
    reads them so; a nullable frame's ``to_numpy()`` holds ``pd.NA`` objects that numpy
    cannot cast)."""
    arr = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    if arr.dtype == object:
        arr = np.where(pd.isna(arr), np.nan, arr)
    return np.asarray(arr, dtype=np.float64)


def missing_label_mask(y):
    """True where a label is missing: NaN (of any float type), None, or pandas' ``pd.NA`` /
    ``NaT`` (what a nullable column holds; the estimators' fit and score skip the same)."""
    if y.dtype.kind == "f":
        return np.isnan(y)
    if y.dtype == object:
        return np.asarray(pd.isna(y), dtype=bool)
    return np.zeros(len(y), dtype=bool)


def _small_int_range(*arrays):
    """(lo, hi) when every array holds integers spanning a range a lookup table can cover."""
    if not all(a.dtype.kind in "iu" and a.size for a in arrays):
        return None
    lo = min(int(a.min()) for a in arrays)
    hi = max(int(a.max()) for a in arrays)
    return (lo, hi) if hi - lo <= 4 * max(len(a) for a in arrays) + 1024 else None


def unique_labels(y):
    """Sorted unique labels; linear time for integers of a small range (class codes)."""
    bounds = _small_int_range(y)
    if bounds is None:
        return np.unique(y)
    lo, _ = bounds
    return (np.flatnonzero(np.bincount(y - lo)) + lo).astype(y.dtype)


def label_kind(values):
    """'string' or 'number' when every label is one (None for a mix within the column)."""
    if values.dtype.kind in "US":
        return "string"
    if values.dtype.kind in "biuf":
        return "number"
    items = values.tolist()
    if all(isinstance(v, str) for v in items):
        return "string"
    if all(isinstance(v, (int, float, np.number, bool, np.bool_)) for v in items):
        return "number"
    return None


def check_label_kinds(true, predicted, where="", predicted_name="y_pred"):
    """``ValueError`` (prefixed by ``where``) when the labels ``true`` are strings and
    ``predicted`` numbers or the other way round: scikit-learn's ``accuracy_score`` refuses this
    too, since '1' never equals 1."""
    kinds = (label_kind(np.asarray(true)), label_kind(np.asarray(predicted)))
    if set(kinds) == {"string", "number"}:
        raise ValueError(f"{where}y_true holds {kinds[0]} labels and {predicted_name} "
                         f"{kinds[1]} labels (mix of label input types): convert one to the "
                         "other's type, e.g. y_true.astype(int) for labels read as text")


def _encode(y, labels, task=None, unknown="raise"):
    """Indices of ``y`` in ``labels``; a label not in ``labels`` raises (``unknown='raise'``) or
    gets -1 (``'count_as_wrong'``: probability 0 for its true class)."""
    where = "" if task is None else f" of task {task}"
    labels = np.asarray(labels)
    # numbers never equal strings: refused, not counted as unknown labels
    check_label_kinds(y, labels, "" if task is None else f"task {task}: ", "the classes")
    bounds = _small_int_range(np.asarray(y), labels)
    if bounds is not None:                       # integer labels: a lookup table, linear time
        lo, hi = bounds
        table = np.full(hi - lo + 1, -1, dtype=np.int64)
        table[labels.astype(np.int64) - lo] = np.arange(len(labels))
        codes = table[np.asarray(y, dtype=np.int64) - lo]
        found = codes >= 0
    else:
        codes, found = _encode_sorted(y, labels)
    if unknown == "raise" and not np.all(found):
        missing = sorted(set(np.asarray(y)[~found].tolist()), key=str)
        raise ValueError(f"y_true{where} contains labels {missing} not in labels "
                         f"{labels.tolist()}")
    return codes


def _encode_sorted(y, labels):
    try:
        sorter = np.argsort(labels, kind="stable")
        ordered = labels[sorter]
        pos = np.clip(np.searchsorted(ordered, y), 0, len(labels) - 1)
        found = ordered[pos] == y
        codes = np.where(found, sorter[pos], -1).astype(np.int64)
    except TypeError:                          # labels of mixed, unorderable types
        index = {lab: i for i, lab in enumerate(labels.tolist())}
        codes = np.array([index.get(v, -1) for v in y.tolist()], dtype=np.int64)
        found = codes >= 0
    return codes, found


def _single_task(y, proba, labels, task=None, unknown="raise"):
    """(codes (n,), proba (n, C)) for one task."""
    if y.ndim != 1:
        raise ValueError(f"y_true must be 1-D for one task, got shape {y.shape}")
    proba = np.asarray(proba) if not hasattr(proba, "to_numpy") else proba.to_numpy()
    if proba.ndim == 3:
        raise ValueError("y_proba looks like one array per task but y_true is 1-D; pass y_true "
                         "of shape (n_samples, n_tasks)")
    if proba.ndim == 1:
        labels = _binary_labels_from(y, task) if labels is None else np.asarray(labels)
        if len(labels) != 2:
            raise ValueError(f"a 1-D y_proba is binary: labels must have 2 entries, got {labels}")
        pos = _check_proba_matrix(proba[:, None], len(y), task)[:, 0]
        proba = np.column_stack([1.0 - pos, pos])
    else:
        proba = _check_proba_matrix(proba, len(y), task)
        if labels is None:
            labels = unique_labels(y)
            if len(labels) != proba.shape[1]:
                where = "" if task is None else f" in task {task}"
                raise ValueError(
                    f"y_true{where} has {len(labels)} classes but y_proba has {proba.shape[1]} "
                    "columns; pass labels= (the estimator's classes_) to map columns to classes"
                )
        labels = np.asarray(labels)
        if len(labels) != proba.shape[1]:
            raise ValueError(f"labels has {len(labels)} entries but y_proba has "
                             f"{proba.shape[1]} columns")
    return _encode(y, labels, task, unknown), proba


def _labelled_task(y, proba, labels, task=None, unknown="raise", keep=None):
    """:func:`_single_task` on the rows where ``keep`` is True (all rows when None); None when
    no row is kept."""
    if keep is None or keep.all():
        return _single_task(y, proba, labels, task, unknown)
    if not keep.any():
        return None
    p = np.asarray(proba)
    if p.shape[:1] != (len(y),):
        where = "" if task is None else f" (task {task})"
        raise ValueError(f"y_true has {len(y)} samples but y_proba{where} has "
                         f"{p.shape[0] if p.ndim else 0}")
    return _single_task(y[keep], p[keep], labels, task, unknown)


def split_tasks(y_true, y_proba, labels=None, unknown="raise", keep=None):
    """Normalise the inputs to a list of ``(codes, proba)`` per task, and whether multi-task.

    ``keep`` (optional): one boolean mask per task of the rows to use (labelled samples); a
    task with no row kept gives None.

    Accepted forms (scikit-learn's ``predict_proba`` scorer shapes included):

    * ``y_true`` (n,), ``y_proba`` (n, C): one task, columns in ``labels`` order (default: the
      sorted unique labels of ``y_true``);
    * ``y_true`` (n,), ``y_proba`` (n,): binary, probability of ``labels[-1]``;
    * ``y_true`` (n, T), ``y_proba`` (n, T) array: T binary tasks, column t the probability of
      task t's positive (last) label;
    * ``y_true`` (n, T), ``y_proba`` list of T arrays (n, C_t) or (n,).
    """
    y = _as_label_array(y_true)
    keep = keep or [None] * (1 if y.ndim == 1 else y.shape[1])
    if y.ndim == 1:
        return [_labelled_task(y, y_proba, labels, unknown=unknown, keep=keep[0])], False
    n_tasks = y.shape[1]
    if isinstance(y_proba, (list, tuple)):
        probas = list(y_proba)
    else:
        arr = np.asarray(y_proba)
        if arr.ndim != 2 or arr.shape[1] != n_tasks:
            raise ValueError(
                f"y_true has {n_tasks} tasks: y_proba must be a list of {n_tasks} arrays or an "
                f"(n, {n_tasks}) array of positive-class probabilities, got shape {arr.shape}"
            )
        probas = [arr[:, t] for t in range(n_tasks)]
    if len(probas) != n_tasks:
        raise ValueError(f"y_true has {n_tasks} tasks but y_proba has {len(probas)} arrays")
    if labels is None:
        labels = [None] * n_tasks
    elif len(labels) != n_tasks:
        raise ValueError(f"labels must hold one label array per task ({n_tasks}), "
                         f"got {len(labels)}")
    return [_labelled_task(y[:, t], probas[t], labels[t], task=t, unknown=unknown,
                           keep=keep[t]) for t in range(n_tasks)], True


#: the largest total weight the metrics accept: weighted sums of values up to a few hundred
#: (a log-loss term, a squared residual) must stay finite in float64
MAX_WEIGHT_SUM = 1e300


def check_weight_sum(w, name="sample_weight"):
    """``ValueError`` when the (finite, non-negative) weights ``w`` sum beyond
    :data:`MAX_WEIGHT_SUM`: their weighted sums would overflow, and a metric would come out as
    0 or NaN without a word."""
    with np.errstate(over="ignore"):               # the overflow is what this reports
        total = float(np.sum(w))
    if not total <= MAX_WEIGHT_SUM:
        raise ValueError(f"{name} sums to {total:.3g}, beyond what weighted sums in float64 "
                         f"can take ({MAX_WEIGHT_SUM:g}): rescale the weights, e.g. "
                         f"{name} / {name}.max() (a metric depends only on their ratios)")


def check_sample_weight(sample_weight, n):
    """Validated weights; ``None`` (all samples count once) stays ``None``."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or not (w > 0).any():
        raise ValueError("sample_weight must be finite, non-negative, with a positive sum")
    check_weight_sum(w)
    return w


#: what ``unknown_labels`` may be (see :func:`tasks_and_weights`)
UNKNOWN_LABELS = ("raise", "count_as_wrong")


def tasks_and_weights(y_true, y_proba, labels, sample_weight, unknown="raise"):
    """Per task ``(codes, proba, weights)`` with the samples whose label is missing (NaN /
    None) left out -- ``None`` for a task with no labelled sample (or no weight on one) --
    and whether ``y_true`` is multi-task.

    ``unknown``: ``'raise'`` for a label not in ``labels``, or ``'count_as_wrong'`` (code -1,
    probability 0 for the true class: what a classifier scores for a class it never saw);
    the metrics' and the reliability diagram's ``unknown_labels``."""
    if unknown not in UNKNOWN_LABELS:
        raise ValueError(f"unknown_labels must be one of {UNKNOWN_LABELS}, got {unknown!r}")
    y = _as_label_array(y_true)
    if len(y) == 0:
        raise ValueError("y_true is empty")
    sw = check_sample_weight(sample_weight, len(y))
    keep = [~missing_label_mask(y)] if y.ndim == 1 else [~missing_label_mask(y[:, t])
                                                         for t in range(y.shape[1])]
    tasks, multitask = split_tasks(y_true, y_proba, labels, unknown, keep=keep)
    out = []
    for task, kept in zip(tasks, keep):
        if task is None or kept.all():
            out.append(task if task is None else (*task, sw))
            continue
        # the unlabelled rows were dropped: their weights go too
        w = np.ones(kept.sum()) if sw is None else sw[kept]
        out.append((*task, w) if w.sum() > 0 else None)
    return out, multitask


def aggregate(values, multitask, multioutput):
    """Combine per-task values; NaN marks a task without labelled samples, left out of the
    averages."""
    values = np.asarray(values, dtype=np.float64)
    if isinstance(multioutput, str) and multioutput not in ("raw_values", "uniform_average"):
        # refused for one task too (a misspelling must not pass unnoticed until a 2-D y)
        raise ValueError(f"multioutput must be 'raw_values', 'uniform_average' or task weights, "
                         f"got {multioutput!r}")
    if not multitask:
        return float(values[0])
    present = ~np.isnan(values)
    if isinstance(multioutput, str):
        if multioutput == "raw_values":
            return values
        return float(values[present].mean())
    w = np.asarray(multioutput, dtype=np.float64)
    if w.shape != values.shape:
        raise ValueError(f"multioutput weights must have shape {values.shape}, got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or not (w[present] > 0).any():
        raise ValueError("multioutput weights must be finite, non-negative, with a positive sum "
                         "over the labelled tasks")
    check_weight_sum(w, "multioutput")
    return float(np.average(values[present], weights=w[present]))

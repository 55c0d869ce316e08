"""Turning (y_true, y_proba) in any of the shapes scikit-learn produces into per-task pieces."""

import numpy as np

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
    uniq = np.unique(y)
    where = "" if task is None else f" for task {task}"
    if len(uniq) == 2:
        return uniq
    if len(uniq) == 1 and uniq[0] in (0, 1) and np.issubdtype(uniq.dtype, np.number):
        return np.array([0, 1], dtype=uniq.dtype)
    raise ValueError(
        f"y_proba holds one positive-class probability per sample{where}, which needs a binary "
        f"target; y_true has classes {uniq.tolist()}. Pass labels=[negative, positive]."
    )


def _check_proba_matrix(p, n_samples, task=None):
    where = "" if task is None else f" (task {task})"
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"y_proba{where} must be 2-D (n_samples, n_classes), got shape {p.shape}")
    if p.shape[0] != n_samples:
        raise ValueError(f"y_true has {n_samples} samples but y_proba{where} has {p.shape[0]}")
    if not np.isfinite(p).all():
        raise ValueError(f"y_proba{where} contains NaN or inf")
    if (p < -1e-12).any() or (p > 1 + 1e-12).any():
        raise ValueError(f"y_proba{where} has values outside [0, 1]")
    sums = p.sum(axis=1)
    if p.shape[1] > 1 and not np.allclose(sums, 1.0, atol=_SUM_TOL):
        worst = float(np.abs(sums - 1).max())
        raise ValueError(f"y_proba{where} rows must sum to 1 (largest deviation {worst:.3g})")
    return np.clip(p, 0.0, 1.0)


def _encode(y, labels, task=None):
    where = "" if task is None else f" of task {task}"
    labels = np.asarray(labels)
    index = {lab: i for i, lab in enumerate(labels.tolist())}
    try:
        codes = np.array([index[v] for v in y.tolist()], dtype=np.int64)
    except KeyError:
        missing = sorted(set(y.tolist()) - set(index), key=str)
        raise ValueError(f"y_true{where} contains labels {missing} not in labels "
                         f"{labels.tolist()}") from None
    return codes


def _single_task(y, proba, labels, task=None):
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
            labels = np.unique(y)
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
    return _encode(y, labels, task), proba


def split_tasks(y_true, y_proba, labels=None):
    """Normalise the inputs to a list of ``(codes, proba)`` per task, and whether multi-task.

    Accepted forms (scikit-learn's ``predict_proba`` scorer shapes included):

    * ``y_true`` (n,), ``y_proba`` (n, C): one task, columns in ``labels`` order (default: the
      sorted unique labels of ``y_true``);
    * ``y_true`` (n,), ``y_proba`` (n,): binary, probability of ``labels[-1]``;
    * ``y_true`` (n, T), ``y_proba`` (n, T) array: T binary tasks, column t the probability of
      task t's positive (last) label;
    * ``y_true`` (n, T), ``y_proba`` list of T arrays (n, C_t) or (n,).
    """
    y = _as_label_array(y_true)
    if y.ndim == 1:
        return [_single_task(y, y_proba, labels)], False
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
    return [_single_task(y[:, t], probas[t], labels[t], task=t) for t in range(n_tasks)], True


def check_sample_weight(sample_weight, n):
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
        raise ValueError("sample_weight must be finite, non-negative, with a positive sum")
    return w


def tasks_and_weights(y_true, y_proba, labels, sample_weight):
    """:func:`split_tasks` plus the validated sample weights (ones when None)."""
    tasks, multitask = split_tasks(y_true, y_proba, labels)
    return tasks, multitask, check_sample_weight(sample_weight, len(tasks[0][0]))


def aggregate(values, multitask, multioutput):
    values = np.asarray(values, dtype=np.float64)
    if not multitask:
        return float(values[0])
    if isinstance(multioutput, str):
        if multioutput == "raw_values":
            return values
        if multioutput == "uniform_average":
            return float(values.mean())
        raise ValueError(f"multioutput must be 'raw_values', 'uniform_average' or task weights, "
                         f"got {multioutput!r}")
    w = np.asarray(multioutput, dtype=np.float64)
    if w.shape != values.shape:
        raise ValueError(f"multioutput weights must have shape {values.shape}, got {w.shape}")
    return float(np.average(values, weights=w))

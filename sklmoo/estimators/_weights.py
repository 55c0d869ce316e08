"""Row and class weights of a fit: validation of ``sample_weight`` and ``class_weight``, and the
per-target weight matrix the losses use.

A fit's weights form an (n_samples, n_targets) matrix ``W``: row i's ``sample_weight`` times,
for a classifier, the weight of its label in each task (``class_weight``). Rows whose weight is
zero in every task are left out of the fit altogether (a zero weight removes a row). Within
each part of the data (training rows, validation rows) the losses use ``W`` divided by its mean
over the part's observed targets, task by task: a mini-batch's weighted mean loss is then an
unbiased estimate of the weighted mean loss over the part, on the scale of an unweighted fit,
and unit weights change nothing.
"""

import numbers

import numpy as np
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import _check_sample_weight


def check_sample_weight(sample_weight, n_samples):
    """``sample_weight`` as a float64 array of shape (n_samples,): None -> ones; a number -> that
    weight for every row; otherwise finite, non-negative, one per row, not all zero
    (``ValueError`` naming the problem)."""
    if sample_weight is None:
        return np.ones(n_samples)
    if isinstance(sample_weight, np.ndarray) and sample_weight.ndim == 0:
        sample_weight = sample_weight.item()                    # a 0-d array is a number
    placeholder = np.empty((n_samples, 0))
    try:
        weight = _check_sample_weight(sample_weight, placeholder, dtype=np.float64,
                                      ensure_non_negative=True, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sample_weight: {exc}") from exc
    if not np.isfinite(weight).all():
        # scikit-learn checks arrays for NaN / inf, not a single number
        raise ValueError(f"sample_weight must be finite, got {sample_weight!r}")
    return weight


#: the range of the training rows' mean weight sklmoo accepts: weights count as observations,
#: and far outside it the likelihood's N over- or underflows the fit's arithmetic
MEAN_WEIGHT_RANGE = (1e-6, 1e6)


def check_data_weight(weights, source="sample_weight"):
    """``ValueError`` unless the mean of the rows' (positive) ``weights`` lies within
    ``MEAN_WEIGHT_RANGE``; ``source`` names the parameters the weights came from."""
    low, high = MEAN_WEIGHT_RANGE
    top = float(np.max(weights))
    mean = top * float(np.mean(np.asarray(weights) / top))    # no overflow near 1e308
    if not (np.isfinite(mean) and low <= mean <= high):
        raise ValueError(
            f"{source}: the training rows' mean weight is {mean:.3g}; a weight counts as "
            f"that many observations (as in scikit-learn), and a mean outside [{low:g}, "
            f"{high:g}] makes the likelihood's N over- or underflow: rescale the weights, "
            "e.g. sample_weight / sample_weight.mean()")


def check_weighted_classes(codes, weight, classes, task_names=None):
    """``ValueError`` when the weights leave a task of a fit (a fresh one or a warm start) one
    of the classes its labels hold: a zero weight (``sample_weight`` times ``class_weight``)
    removes a row, and a task whose every other class is removed would be fitted to one
    class, silently. ``codes`` (n, T)
    integer labels (-1: missing), ``weight`` (n, T) or (n,), ``classes`` one array per task.
    A task whose every labelled row has a zero weight is refused too (it would not be trained
    at all, as a task without labels, which the label check refuses); labels with fewer than
    two classes to begin with are left to the label check. Not called for ``partial_fit`` with
    ``classes`` given, whose chunks may hold or weigh one class."""
    codes = np.asarray(codes).reshape(len(codes), -1)
    weight = np.asarray(weight).reshape(len(codes), -1)
    for t in range(codes.shape[1]):
        labelled = codes[:, t] >= 0
        present = np.unique(codes[labelled, t])
        kept = np.unique(codes[labelled & (weight[:, t] > 0), t])
        task = f"task {task_names[t]!r}: " if task_names and codes.shape[1] > 1 else ""
        if len(present) >= 2 and len(kept) == 0:
            raise ValueError(
                f"{task}every labelled row has a zero weight (sample_weight times "
                "class_weight): the task would not be fitted at all; a classifier needs rows "
                "of at least two classes with a positive weight")
        if len(present) >= 2 and len(kept) == 1:
            labels = np.asarray(classes[t]).tolist()
            removed = [labels[c] for c in np.setdiff1d(present, kept)]
            raise ValueError(
                f"{task}every row of class(es) {removed} has a zero weight (sample_weight "
                f"times class_weight), which leaves {len(kept)} class(es) "
                f"{[labels[c] for c in kept]} to fit; a classifier needs rows of at least two "
                "classes with a positive weight")


def check_partial_fit_class_weight(class_weight):
    """Refuse ``class_weight='balanced'`` (for any task) in ``partial_fit``, as scikit-learn's
    ``partial_fit`` methods do: each chunk's own class counts would weigh the same label
    differently from one chunk to the next."""
    specs = class_weight if isinstance(class_weight, (list, tuple)) else [class_weight]
    if any(isinstance(spec, str) and spec == "balanced" for spec in specs):
        raise ValueError("class_weight='balanced' is not supported for partial_fit: each chunk "
                         "would be balanced on its own class counts. Compute the weights once "
                         "from the full label set (sklearn.utils.class_weight."
                         "compute_class_weight('balanced', classes=classes, y=y)) and pass "
                         "them as a {label: weight} dict (one per task)")


def class_weights(class_weight, codes, classes, row_weight, task_names=None):
    """(n, T) weights from ``class_weight`` for integer ``codes`` (n, T) (-1 = missing) of the
    tasks' ``classes``; ``row_weight`` (n,) is the sample weight ('balanced' counts it, as
    scikit-learn's ``compute_class_weight`` does). Missing entries get weight 1.

    ``class_weight``: None; 'balanced' (every task); a dict {label: weight} (a single task);
    or a list with one None / 'balanced' / dict per task."""
    codes = np.asarray(codes).reshape(len(codes), -1)
    n_tasks = codes.shape[1]
    out = np.ones(codes.shape)
    if class_weight is None:
        return out
    if isinstance(class_weight, (list, tuple)):
        if len(class_weight) != n_tasks:
            raise ValueError(f"class_weight is a list of {len(class_weight)} entries but y has "
                             f"{n_tasks} task(s): give one None, 'balanced' or dict per task")
        per_task = list(class_weight)
    elif n_tasks > 1 and isinstance(class_weight, dict):
        raise ValueError("class_weight is one dict but y has several tasks: give 'balanced' "
                         "or a list with one dict per task")
    else:
        per_task = [class_weight] * n_tasks
    for t, spec in enumerate(per_task):
        name = f"class_weight for task {task_names[t]!r}" if task_names and n_tasks > 1 \
            else "class_weight"
        if spec is None:
            continue
        labels = np.asarray(classes[t])
        rows = codes[:, t] >= 0
        if isinstance(spec, str):
            if spec != "balanced":
                raise ValueError(f"{name} must be None, 'balanced' or a dict, got {spec!r}")
            present = np.unique(codes[rows, t])
            weight = np.ones(len(labels))
            if not (row_weight[rows] > 0).any():
                continue              # no weighted label in this task (e.g. a chunk)
            # classes without any (weighted) row in this fit keep weight 1
            mass = np.bincount(codes[rows, t], weights=row_weight[rows], minlength=len(labels))
            present = present[mass[present] > 0]
            weight[present] = compute_class_weight(
                "balanced", classes=present, y=codes[rows, t][np.isin(codes[rows, t], present)],
                sample_weight=row_weight[rows][np.isin(codes[rows, t], present)])
        elif isinstance(spec, dict):
            known = labels.tolist()
            unknown = [k for k in spec if k not in known]
            if unknown:
                raise ValueError(f"{name} has labels {unknown} that are not in the classes "
                                 f"{known}")
            for key, value in spec.items():
                if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                        or not np.isfinite(value) or value < 0):
                    raise ValueError(f"{name}[{key!r}] must be a finite number >= 0, "
                                     f"got {value!r}")
            weight = np.array([float(spec.get(label, 1.0)) for label in known])
        else:
            raise ValueError(f"{name} must be None, 'balanced', a dict or a list of these, "
                             f"got {spec!r}")
        out[rows, t] = weight[codes[rows, t]]
    return out


def normalised(weight, observed, rows=None):
    """``weight`` (n, T) divided, task by task, by its mean over the observed entries of
    ``rows`` (all rows when None); entries outside ``rows`` are returned unchanged."""
    weight = np.array(weight, dtype=np.float64)
    index = np.arange(len(weight)) if rows is None else np.asarray(rows)
    part, seen = weight[index], np.asarray(observed)[index]
    for t in range(weight.shape[1]):
        values = part[seen[:, t], t]
        top = values.max() if len(values) else 0.0
        if top > 0:
            # in units of the largest: a plain mean of weights near 1e308 overflows
            part[:, t] = part[:, t] / top / (values / top).mean()
    weight[index] = part
    return weight

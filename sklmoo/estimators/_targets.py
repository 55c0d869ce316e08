"""Validation of targets: per-task label encoding for the classifiers, per-output values for
the regressor."""

import numpy as np
import pandas as pd

from ..metrics._validation import float_targets, label_kind


#: the names of unnamed targets: ``task_0``, ``task_1``, ... (classifiers) and ``output_0``, ...
#: (the regressor)
TASK_PREFIX, OUTPUT_PREFIX = "task_", "output_"


def default_names(n, prefix=TASK_PREFIX):
    """The names given to ``n`` unnamed targets."""
    return [f"{prefix}{t}" for t in range(n)]


def are_default_names(names):
    """Whether ``names`` are the ones :func:`default_names` gives (the targets had none)."""
    return all(n in (f"{TASK_PREFIX}{t}", f"{OUTPUT_PREFIX}{t}") for t, n in enumerate(names))


def check_missing_label(missing_label):
    """``ValueError`` unless ``missing_label`` is one label value: None, a number or a string
    (a list or a set would be compared with every label as a whole)."""
    if missing_label is None or isinstance(missing_label, str):
        return
    if isinstance(missing_label, (bool, np.bool_)) or not isinstance(
            missing_label, (int, float, np.integer, np.floating)):
        raise ValueError(f"missing_label must be one label value (a number, a string, NaN or "
                         f"None), got {missing_label!r} of type {type(missing_label).__name__}")


def _check_marker_kind(missing_label, labels, task):
    """``ValueError`` when a marker of one kind (string / number) meets labels of the other: it
    would never mark a label missing, and the marker would become a class."""
    if (missing_label is None or len(labels) == 0
            or (isinstance(missing_label, (float, np.floating)) and np.isnan(missing_label))):
        return                                        # NaN / None mark any kind of label
    marker = "string" if isinstance(missing_label, str) else "number"
    kind = label_kind(np.asarray(labels))
    if kind is not None and kind != marker:
        raise ValueError(f"missing_label={missing_label!r} is a {marker} but task {task!r} has "
                         f"{kind} labels: it would never mark one missing; give it as a {kind}")


def missing_mask(values, missing_label):
    mask = pd.isna(values)
    if missing_label is not None and not (isinstance(missing_label, float)
                                          and np.isnan(missing_label)):
        mask |= np.array([v == missing_label for v in values], dtype=bool)
    return np.asarray(mask, dtype=bool)


def as_task_columns(y):
    """A 1-D target (array, list, Series) becomes one task column; returns (y, single_task)."""
    if isinstance(y, pd.Series):
        return y.to_frame(name=str(y.name) if y.name is not None else default_names(1)[0]), True
    if isinstance(y, pd.DataFrame):
        return y, False
    if hasattr(y, "dtype"):
        arr = np.asarray(y)
    else:
        # as scikit-learn does (so classes_ gets the dtype it would); ragged rows need object
        try:
            arr = np.asarray(y)
        except ValueError:
            arr = np.empty(len(y), dtype=object)
            arr[:] = [np.asarray(v) if isinstance(v, (list, tuple)) else v for v in y]
    if arr.ndim == 1 and arr.dtype == object:
        rows = [v for v in arr if isinstance(v, (list, tuple, np.ndarray, pd.Series))]
        if rows:
            lengths = sorted({len(v) for v in rows})
            if len(rows) < len(arr) or len(lengths) > 1:
                raise ValueError(
                    f"y is ragged: its rows hold different numbers of labels ({lengths} and "
                    f"{len(arr) - len(rows)} scalar row(s)); a multi-task y needs one label "
                    "per task in every row (NaN or None for a missing label)")
            return np.array([list(v) for v in rows], dtype=object), False
    if arr.ndim == 1:
        return arr.reshape(-1, 1), True
    return y, False


def as_2d_targets(y, n_samples):
    names = [str(c) for c in y.columns] if isinstance(y, pd.DataFrame) else None
    arr = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    if arr.ndim != 2:
        raise ValueError(
            f"y must be 2-D (n_samples, n_tasks), one column per task; got shape {arr.shape}. "
            "For a single task pass y.reshape(-1, 1)."
        )
    if arr.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError("y has no task column")
    return arr, names


def task_column(y, arr, t):
    """Task t's labels: a DataFrame's column with its own dtype (the frame's ``to_numpy`` gives
    every column one common dtype: an integer task beside a float one with NaN became float,
    and beside a string one object), else column t of ``arr`` (:func:`as_2d_targets`)."""
    if isinstance(y, pd.DataFrame):
        return y.iloc[:, t].to_numpy()
    return arr[:, t]


def _tidy_classes(classes, had_missing):
    # a column with NaN becomes float; give back integer labels when they are integral
    if had_missing and classes.dtype.kind == "f" and np.all(classes == np.round(classes)):
        return classes.astype(np.int64)
    if had_missing and classes.dtype == object:
        # the column was object only to hold the missing marker: the labels' own dtype
        try:
            return np.asarray(classes.tolist())
        except (TypeError, ValueError):
            return classes
    return classes          # otherwise the dtype of y, as scikit-learn's classifiers keep it


def encode_targets(y, n_samples, missing_label=None):
    """Validate a multi-task target and encode each task's labels.

    Returns
    -------
    codes : ndarray (n_samples, n_tasks) of int64, -1 where the label is missing
    classes : list of ndarray, the sorted labels of each task
    task_names : list of str (DataFrame column names, else ``task_0``, ...)
    """
    arr, names = as_2d_targets(y, n_samples)
    n_tasks = arr.shape[1]
    task_names = names or default_names(n_tasks)
    codes = np.full(arr.shape, -1, dtype=np.int64)
    classes = []
    columns = [task_column(y, arr, t) for t in range(n_tasks)]
    masks = [missing_mask(col, missing_label) for col in columns]
    # an array's dtype is the whole y's: a missing label in one task made every task float (or
    # object), so every task gets its labels' own dtype back; a DataFrame's columns have their own
    shared = not isinstance(y, pd.DataFrame) and any(m.any() for m in masks)
    for t in range(n_tasks):
        col, missing = columns[t], masks[t]
        present = col[~missing]
        _check_marker_kind(missing_label, present, task_names[t])
        try:
            cls = np.unique(present)
        except TypeError:
            raise ValueError(f"task {task_names[t]!r} mixes label types "
                             f"({sorted({type(v).__name__ for v in present})})") from None
        if cls.dtype.kind == "f" and not np.all(cls == np.round(cls)):
            raise ValueError(f"Unknown label type: continuous target in task {task_names[t]!r}; "
                             "a classifier needs discrete labels")
        if len(cls) < 2:
            raise ValueError(
                f"task {task_names[t]!r} has {len(cls)} class(es) {cls.tolist()} among its "
                "labelled samples; every task needs at least two classes"
            )
        codes[~missing, t] = np.searchsorted(cls, present)
        classes.append(_tidy_classes(cls, shared or missing.any()))
    return codes, classes, task_names


def encode_with_classes(y, n_samples, classes, task_names, missing_label=None):
    """Encode ``y`` with already-fitted classes (for scoring); unseen labels raise."""
    arr, _ = as_2d_targets(y, n_samples)
    if arr.shape[1] != len(classes):
        raise ValueError(f"y has {arr.shape[1]} task columns but the estimator was fitted on "
                         f"{len(classes)} tasks")
    codes = np.full(arr.shape, -1, dtype=np.int64)
    for t, cls in enumerate(classes):
        col = task_column(y, arr, t)
        missing = missing_mask(col, missing_label)
        present = col[~missing]
        lookup = {v: i for i, v in enumerate(cls.tolist())}
        unseen = sorted({v for v in present.tolist() if v not in lookup}, key=str)
        if unseen:
            raise ValueError(f"task {task_names[t]!r} has labels {unseen} not seen in fit "
                             f"(known: {cls.tolist()})")
        codes[~missing, t] = [lookup[v] for v in present.tolist()]
    return codes


def decode_predictions(codes, classes):
    """(n, T) class indices -> original labels, one column per task."""
    cols = [cls[codes[:, t]] for t, cls in enumerate(classes)]
    if len({c.dtype for c in cols}) == 1:
        return np.column_stack(cols)
    out = np.empty(codes.shape, dtype=object)
    for t, c in enumerate(cols):
        out[:, t] = c
    return out


def regression_targets(y, n_samples, check_spread=True):
    """Validate a regression target -> (float64 array (n, T) with NaN = missing, single_output,
    output names); ``check_spread``: every output needs two different values (a fit's
    target; not a validation set's)."""
    single = False
    if isinstance(y, pd.Series):
        name = str(y.name) if y.name is not None else default_names(1, OUTPUT_PREFIX)[0]
        names, y, single = [name], y.to_frame(), True
    elif isinstance(y, pd.DataFrame):
        names = [str(c) for c in y.columns]
    else:
        names = None
    arr = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    if arr.ndim == 1:
        arr, single = arr.reshape(-1, 1), True
    if arr.ndim != 2:
        raise ValueError(f"y must be 1-D (n_samples,) or 2-D (n_samples, n_outputs), got shape "
                         f"{arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError("y has no output column")
    if arr.dtype.kind == "c":
        raise ValueError("y must be real numbers, got complex values")
    if arr.dtype.kind not in "fiub":
        try:                         # pd.NA / None (nullable pandas columns) is missing, as NaN
            arr = float_targets(arr)
        except (TypeError, ValueError):
            raise ValueError(f"y must be numeric, got dtype {arr.dtype}; for class labels use "
                             "a classifier") from None
    arr = arr.astype(np.float64)
    names = names or default_names(arr.shape[1], OUTPUT_PREFIX)
    if np.isinf(arr).any():
        bad = [names[t] for t in np.flatnonzero(np.isinf(arr).any(axis=0))]
        raise ValueError(f"y contains inf in output(s) {bad}; NaN marks a missing target")
    for t, name in enumerate(names if check_spread else ()):
        values = arr[~np.isnan(arr[:, t]), t]
        if len(values) < 2:
            raise ValueError(f"output {name!r} has {len(values)} sample(s) with a value "
                             f"(n_samples = {n_samples}); every output needs at least two")
        if np.ptp(values) == 0:
            raise ValueError(f"output {name!r} is constant ({values[0]!r}) on its "
                             f"{len(values)} observed samples: there is nothing to learn; drop "
                             "the column")
    return arr, single, names

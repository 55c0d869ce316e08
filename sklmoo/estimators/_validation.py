"""The estimators' internal validation split, early stopping with restore-best, and warnings that
point at the user's call."""

import math
import os
import sys

import numpy as np
from skorch.callbacks import EarlyStopping
from torch.utils.data import Subset


class ValidationSplit:
    """Hold out part of the training rows for validation, skorch's ``train_split`` protocol.

    Called as ``split(dataset, y)`` it returns ``(train_subset, valid_subset)``, or
    ``(dataset, None)`` (no validation) when the data are too small to spare rows: the
    held-out part is ``fraction`` of the n rows (rounded) but at least ``min_valid``, and the
    split is skipped when fewer than ``min_train`` rows would remain for training. Classification
    targets (integer codes, -1 = missing; one column per task) are stratified: on the joint
    labels of all tasks when every combination occurs twice or more, else on the first task
    whose every label does, else not at all. With unequal row weights (``sample_weight``,
    ``class_weight``), each stratum's held-out part is chosen to carry about the held-out
    share (``n_valid(n) / n``) of its weight rather than of its rows (the rows' split when
    that would hold out fewer than ``min_valid`` rows). The rows are shuffled with
    ``random_state``; with
    ``random_state=None`` the estimator's own seed is used, so the split follows the
    estimator's ``random_state``.

    Instances are immutable (the estimators share their default one): to change a setting,
    pass a new ``ValidationSplit`` as ``train_split``.

    Parameters
    ----------
    fraction : float or 'auto', default='auto'
        Fraction of the rows held out, in (0, 1). 'auto': 20 % of up to 10,000 rows, 2,000
        rows of 10,000 to 20,000 and 10 % of more (scikit-learn's MLPs and gradient boosting
        hold out 10 %): a large table keeps more rows for training, and its held-out part
        stays large enough to tell epochs apart (:ref:`ug-scale`). The regressor's default
        is ``fraction=0.2``.
    min_valid : int, default=5
        The fewest rows held out.
    min_train : int, default=10
        Below this many remaining training rows, nothing is held out.
    stratified : bool, default=True
        Stratify classification targets (float targets are never stratified).
    random_state : int or None, default=None
        Seed of the shuffle; None: the estimator's seed.

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.estimators import ValidationSplit
    >>> from skorch.dataset import Dataset
    >>> X, y = np.zeros((100, 3), np.float32), np.repeat([0, 1], 50)
    >>> train, valid = ValidationSplit(random_state=0)(Dataset(X, y), y)
    >>> len(train), len(valid), int(y[valid.indices].sum())
    (80, 20, 10)
    """

    #: ``fraction='auto'``: this share of up to ``_auto_rows`` rows at most, and at least
    #: ``_auto_large_share`` of more
    _auto_share = 0.2
    _auto_rows = 10_000
    _auto_large_share = 0.1

    def __init__(self, fraction="auto", min_valid=5, min_train=10, stratified=True,
                 random_state=None):
        vars(self).update(fraction=fraction, min_valid=min_valid, min_train=min_train,
                          stratified=stratified, random_state=random_state)

    def __setattr__(self, name, value):
        # immutable: the estimators' default is one instance shared by every estimator of a
        # class (a default argument), so changing it in place would change them all
        raise AttributeError(f"ValidationSplit is immutable: pass a new one, e.g. "
                             f"train_split=ValidationSplit({name}={value!r})")

    def _params(self):
        return dict(fraction=self.fraction, min_valid=self.min_valid, min_train=self.min_train,
                    stratified=self.stratified, random_state=self.random_state)

    def __repr__(self):
        defaults = ValidationSplit()._params()
        changed = [f"{k}={v!r}" for k, v in self._params().items() if defaults[k] != v]
        return f"ValidationSplit({', '.join(changed)})"

    def __eq__(self, other):
        return type(other) is type(self) and other._params() == self._params()

    def __hash__(self):
        return hash(tuple(self._params().items()))

    def check(self):
        """``ValueError`` naming the parameter when a setting is invalid."""
        if isinstance(self.fraction, str) and self.fraction == "auto":
            pass
        elif (isinstance(self.fraction, bool) or not isinstance(self.fraction, (float, int))
                or not 0 < self.fraction < 1):
            raise ValueError(f"ValidationSplit fraction must be 'auto' or in (0, 1), got "
                             f"{self.fraction!r}")
        for name in ("min_valid", "min_train"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"ValidationSplit {name} must be a positive integer, "
                                 f"got {value!r}")

    def n_valid(self, n):
        """Rows held out of ``n`` (0: no split)."""
        if isinstance(self.fraction, str):                 # 'auto' (check() ran)
            share = self._auto_share * min(n, self._auto_rows)
            share = max(share, self._auto_large_share * n)
        else:
            share = self.fraction * n
        valid = max(int(round(share)), self.min_valid)
        return 0 if n - valid < self.min_train else valid

    def __call__(self, dataset, y=None, seed=None, weight=None, **fit_params):
        self.check()
        n = len(dataset)
        n_valid = self.n_valid(n)
        if n_valid == 0:
            return dataset, None
        state = self.random_state if self.random_state is not None else seed
        rng = np.random.default_rng(state)
        key = self._strata(y) if self.stratified else None
        split = None
        if weight is not None and not np.all(np.asarray(weight) == np.asarray(weight)[0]):
            split = _weighted_indices(np.zeros(n, dtype=int) if key is None else key,
                                      n_valid / n, np.asarray(weight, dtype=np.float64), rng,
                                      min(self.min_valid, n_valid))
        if split is not None:
            valid, train = split
        elif key is None:
            order = rng.permutation(n)
            valid, train = order[:n_valid], order[n_valid:]
        else:
            valid, train = _stratified_indices(key, n_valid, rng)
        if y is not None and np.asarray(y).dtype.kind in "iu":
            valid, train = _keep_every_label_in_training(np.asarray(y), valid, train, rng)
        return Subset(dataset, np.sort(train).tolist()), Subset(dataset, np.sort(valid).tolist())

    @staticmethod
    def _strata(y):
        """One label per row to stratify on, or None."""
        if y is None:
            return None
        y = np.asarray(y)
        if y.dtype.kind not in "iu":
            return None
        y = y.reshape(len(y), -1)
        candidates = [np.unique(y, axis=0, return_inverse=True)[1].ravel()]
        candidates += [y[:, t] for t in range(y.shape[1])]
        for key in candidates:
            if np.unique(key, return_counts=True)[1].min() >= 2:
                return key
        return None


def _stratified_indices(key, n_valid, rng):
    """Held-out and training rows with every stratum split in proportion (largest remainders),
    each stratum keeping at least one training row."""
    groups = [np.flatnonzero(key == k) for k in np.unique(key)]
    share = np.array([len(g) for g in groups], dtype=float) * n_valid / len(key)
    take = np.minimum(np.floor(share).astype(int), [len(g) - 1 for g in groups])
    order = np.argsort(-(share - take), kind="stable")
    for i in order:
        if take.sum() >= n_valid:
            break
        if take[i] < len(groups[i]) - 1:
            take[i] += 1
    valid, train = [], []
    for g, k in zip(groups, take):
        g = rng.permutation(g)
        valid.append(g[:k])
        train.append(g[k:])
    return np.concatenate(valid), np.concatenate(train)


def _weighted_indices(key, fraction, weight, rng, min_valid):
    """Held-out and training rows of weighted data: in each stratum, rows are taken in a
    random order whenever taking one brings the held-out weight closer to ``fraction`` of the
    stratum's weight (a row heavier than the rest is skipped, not a stop), so that the
    held-out part carries its share of the weight rather than of the rows; each stratum keeps
    at least one training row. None when that holds out fewer than ``min_valid`` rows."""
    valid, train = [], []
    for k in np.unique(key):
        g = rng.permutation(np.flatnonzero(key == k))
        target = fraction * weight[g].sum()
        held, taken = 0.0, np.zeros(len(g), dtype=bool)
        for i, row in enumerate(g):
            if taken.sum() == len(g) - 1:
                break
            if abs(held + weight[row] - target) < abs(held - target):
                held += weight[row]
                taken[i] = True
        valid.append(g[taken])
        train.append(g[~taken])
    valid = np.concatenate(valid).astype(int)
    if len(valid) < min_valid:
        return None
    return valid, np.concatenate(train).astype(int)


def _keep_every_label_in_training(y, valid, train, rng):
    """Move held-out rows into training until every label of every task (integer codes, -1 =
    missing) has a training row, each time moving back a training row whose labels all keep
    one: a class with a single member must not be held out of training (the network would
    never see it). The held-out size is kept where such a row exists."""
    y = y.reshape(len(y), -1)
    valid, train = list(valid), list(train)
    for t in range(y.shape[1]):
        in_train = set(y[train, t].tolist())
        for label in np.unique(y[valid, t]):
            if label < 0 or label in in_train:
                continue
            row = next(i for i in valid if y[i, t] == label)
            valid.remove(row)
            train.append(row)
            in_train.add(label)
            counts = [dict(zip(*np.unique(y[train, s], return_counts=True)))
                      for s in range(y.shape[1])]
            for j in rng.permutation(len(train) - 1):
                candidate = train[j]
                if all(y[candidate, s] < 0 or counts[s][y[candidate, s]] >= 2
                       for s in range(y.shape[1])):
                    valid.append(train.pop(j))
                    break
    return np.asarray(valid, dtype=int), np.asarray(train, dtype=int)


class RestoreBestEarlyStopping(EarlyStopping):
    """skorch's ``EarlyStopping`` on the validation loss that restores the best epoch's weights,
    with a patience that follows the fit's budget, and that does nothing when the fit has no
    validation split.

    Parameters
    ----------
    monitor : str, default='valid_loss'
    patience : int or 'auto', default='auto'
        Epochs without improvement before stopping; 'auto': the estimator's rule -- for the
        classifiers an eighth of the fit's epoch budget (with ``max_epochs='auto'``, of the
        unextended one), at least 5, and 10 epochs on large tables (``batch_size='auto'``
        and ``max_epochs='auto'`` above 8,192 training rows); for the regressor 30 epochs
        (about 120 steps but at least 5 epochs when an epoch is more than 16 'auto' batches,
        480 steps but at least 10 epochs with a given ``batch_size``), 20 on large tables; on any other skorch net a
        fifth of its ``max_epochs``, at least 5.
    threshold, threshold_mode, lower_is_better, sink
        As in skorch's ``EarlyStopping``.
    load_best : bool, default=True
        Restore the weights of the best epoch at the end of the fit.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklmoo import MTSGDMultiTaskClassifier
    >>> from sklmoo.estimators import RestoreBestEarlyStopping
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = (X - X.mean(0)) / X.std(0)
    >>> clf = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=40, random_state=0,
    ...                                callbacks__early_stopping__patience=3).fit(X, y)
    >>> stopping = dict(clf.callbacks_)["early_stopping"]
    >>> isinstance(stopping, RestoreBestEarlyStopping), stopping.patience_
    (True, 3)
    >>> clf.history[-1, "best_epoch"] <= len(clf.history)
    True
    """

    def __init__(self, monitor="valid_loss", patience="auto", threshold=1e-4,
                 threshold_mode="rel", lower_is_better=True, sink=print, load_best=True):
        super().__init__(monitor=monitor, patience=patience, threshold=threshold,
                         threshold_mode=threshold_mode, lower_is_better=lower_is_better,
                         sink=sink, load_best=load_best)

    def on_train_begin(self, net, **kwargs):
        super().on_train_begin(net, **kwargs)
        budget = (getattr(net, "_patience_epochs", None) or getattr(net, "max_epochs_", None)
                  or net.max_epochs)
        if self.patience != "auto":
            self.patience_ = self.patience
        elif hasattr(net, "_auto_patience"):
            self.patience_ = net._auto_patience(budget)
        else:
            self.patience_ = max(5, math.ceil(budget / 5))

    def on_epoch_end(self, net, **kwargs):
        if self.monitor not in net.history[-1]:
            return
        score = net.history[-1, self.monitor]
        if self._is_score_improved(score):
            self.misses_ = 0
            self.dynamic_threshold_ = self._calc_new_threshold(score)
            self.best_epoch_ = net.history[-1, "epoch"]
            if self.load_best:
                from copy import deepcopy

                self.best_model_weights_ = deepcopy(net.module_.state_dict())
        else:
            self.misses_ += 1
        net.history.record("best_epoch", self.best_epoch_)
        if self.misses_ >= self.patience_:
            if net.verbose:
                self._sink(f"Stopping since {self.monitor} has not improved in the last "
                           f"{self.patience_} epochs.", verbose=net.verbose)
            raise KeyboardInterrupt


_SKIP = None


def _skipped_dirs():
    global _SKIP
    if _SKIP is None:
        import joblib
        import sklearn
        import skorch
        import torch

        import sklmoo

        _SKIP = tuple(os.path.dirname(m.__file__) + os.sep
                      for m in (sklmoo, skorch, sklearn, torch, joblib))
    return _SKIP


def user_stacklevel():
    """The ``stacklevel`` for a ``warnings.warn`` in the calling function that attributes the
    warning to the first frame outside sklmoo, skorch, scikit-learn, torch and joblib: the
    user's ``fit`` call (or the user's call of a pipeline / search that fits the estimator)."""
    skip = _skipped_dirs()
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level

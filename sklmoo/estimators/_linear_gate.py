"""The classifiers' linear gate: a Bayesian logistic regression
(:func:`~sklmoo.nn._logistic.fit_evidence_logistic`) judged against the networks on the
validation rows, standing in for them (its posterior draws in a
:class:`~sklmoo.nn.LinearLogits`) where it is not worse."""

import numpy as np
import torch

from ..nn._logistic import fit_evidence_logistic

#: a task's linear model is built when its (C - 1)(d + 1) parameters number at most this many
#: (d the flattened features): each of its few dozen Newton steps factors a p x p matrix
#: (0.3-1 s at 300 parameters on 2,000 rows, 2.6 s at 670); above, the networks predict alone
LINEAR_MAX_PARAMETERS = 300
#: ... and judged on at least this many labelled validation rows of the task (fewer cannot
#: tell the two apart; the networks are kept)
LINEAR_GATE_MIN_ROWS = 30


def builds_linear(n_classes, input_shape):
    """Whether a task of ``n_classes`` on inputs of ``input_shape`` gets a linear model."""
    return (n_classes - 1) * (int(np.prod(input_shape)) + 1) <= LINEAR_MAX_PARAMETERS


def posterior_draws(fit, n_draws, seed):
    """``(coef, intercept, center)`` of ``n_draws`` draws of ``fit``'s posterior, as
    :meth:`~sklmoo.nn.LinearLogits.set` takes them: pairs of opposite draws about the MAP
    (and the MAP itself for an odd number), so that their average is the MAP's to first
    order. ``seed``: numpy's seed sequence entropy."""
    p = fit.covariance.shape[0]
    z = np.random.default_rng(seed).standard_normal((n_draws // 2, p))
    z = np.concatenate([z, -z] + ([np.zeros((1, p))] if n_draws % 2 else []))
    coef, intercept = fit.parameter_draws(z)
    return coef, intercept, fit.center


def linear_proba(linear, t, X, batch_rows):
    """(n, C_t) task t's linear model's probabilities (its draws' average) on the rows
    ``X``, a batch of rows at a time."""
    return np.concatenate([linear_draw_proba(linear, t, X[i:i + batch_rows]).mean(0)
                           for i in range(0, len(X), batch_rows)])


def linear_draw_proba(linear, t, X):
    """(n_draws, n, C_t) float64 probabilities of task t's linear draws on the rows ``X``."""
    # in float64, as the chains' predictions: a row's probabilities do not depend on its batch
    x = torch.as_tensor(np.asarray(X, dtype=np.float64), device=linear.gate.device)
    with torch.no_grad():
        logits = linear.task_logits(t, x, dtype=torch.float64)
    return torch.softmax(logits, dim=-1).transpose(0, 1).cpu().numpy()


def judge_task(linear, t, parts, networks_proba, n_classes, n_draws, seed, batch_rows):
    """Fit task t's linear model and decide whether it stands in for the networks: True
    when its weighted validation NLL is not above the networks' (its draws then hold the
    model refitted on every row), False otherwise (the networks predict).

    ``parts``: ``(X, codes, weight, fit_rows)`` -- the fit's rows, task t's codes (-1
    unlabelled) and weights, and the training rows (a mask) --, ``(X_valid, codes_valid,
    w_valid)`` and ``every`` (the rows to refit on, ``(X, codes, weight)``);
    ``networks_proba()`` the networks' recalibrated (n_valid, C) probabilities.

    A task with a class that no weighted training row has (``class_weight`` of 0, a
    ``partial_fit`` chunk without it) keeps its networks: that class's intercept would be
    fixed by nothing but the nearly flat prior, and half its posterior draws would give
    the class a probability near 1."""
    (X, codes, weight, fit_rows), (X_valid, codes_valid, w_valid), every = parts
    judged = (codes_valid >= 0) & (w_valid > 0)
    labelled = fit_rows & (codes >= 0) & (weight > 0)
    if judged.sum() < LINEAR_GATE_MIN_ROWS or len(np.unique(codes[labelled])) < n_classes:
        return False
    fit = fit_evidence_logistic(X, codes, n_classes, rows=fit_rows, sample_weight=weight,
                                input_dtype=np.float32)
    linear.set(t, *posterior_draws(fit, n_draws, seed))
    y, w = codes_valid[judged], w_valid[judged]
    networks = -np.log(np.clip(networks_proba()[judged][np.arange(len(y)), y], 1e-300, None))
    alone = linear_proba(linear, t, X_valid[judged], batch_rows)
    alone = -np.log(np.clip(alone[np.arange(len(y)), y], 1e-300, None))
    if np.average(alone, weights=w) > np.average(networks, weights=w):
        return False
    fit = fit_evidence_logistic(every[0], every[1], n_classes, sample_weight=every[2],
                                input_dtype=np.float32)
    linear.set(t, *posterior_draws(fit, n_draws, seed))
    return True


def gate_rows(X, codes, weight, train, valid, rows):
    """The rows a gate reads, or None where it cannot judge: ``(fit, valid, every)`` for
    :func:`judge_task` with (n, T) ``codes`` and ``weight`` (the task's column to be taken),
    from the fit's split (``train`` / ``valid`` datasets) and its validation rows ``rows``
    ((X_valid, codes_valid, w_valid))."""
    if rows is None:
        return None
    own_rows = getattr(valid, "validation_rows", None) is None
    if own_rows and not hasattr(train, "indices"):
        return None
    X_valid, codes_valid, w_valid = rows
    n = len(codes)
    codes = np.asarray(codes).reshape(n, -1)
    weight = np.asarray(weight, dtype=np.float64).reshape(n, -1)
    codes_valid = np.asarray(codes_valid).reshape(len(codes_valid), -1)
    w_valid = np.asarray(w_valid, dtype=np.float64).reshape(len(codes_valid), -1)
    if own_rows:
        fit_rows = np.zeros(n, dtype=bool)
        fit_rows[np.asarray(train.indices, dtype=np.int64)] = True
        every = (X, codes, weight)
    else:
        # a validation set of other rows (skorch's predefined_split): X is the training
        # rows; the refit reads both, without a copy of X
        fit_rows = np.ones(n, dtype=bool)
        every = (_StackedRows(X, X_valid), np.concatenate([codes, codes_valid]),
                 np.concatenate([weight, w_valid]))
    return (X, codes, weight, fit_rows), (X_valid, codes_valid, w_valid), every


def task_parts(parts, t):
    """:func:`gate_rows`' rows with task t's column of the codes and weights."""
    (X, codes, weight, fit_rows), (X_valid, codes_valid, w_valid), every = parts
    return ((X, codes[:, t], weight[:, t], fit_rows),
            (X_valid, codes_valid[:, t], w_valid[:, t]),
            (every[0], every[1][:, t], every[2][:, t]))


class _StackedRows:
    """Two arrays' rows read as one array's, by slices of rows (what the logistic
    regression's passes read), never copied whole."""

    def __init__(self, first, second):
        self.parts = (first, np.asarray(second).reshape((len(second),) + first.shape[1:]))
        self.shape = (len(first) + len(second),) + tuple(first.shape[1:])

    def __getitem__(self, rows):
        first, second = self.parts
        n = len(first)
        start, stop = rows.start or 0, min(rows.stop, self.shape[0])
        pieces = ([np.asarray(first[start:min(stop, n)])] if start < n else []) + (
            [np.asarray(second[max(start - n, 0):stop - n])] if stop > n else [])
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

"""Property-based tests (hypothesis) of the classification and regression metrics and of the
estimators' label handling."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sklmoo.estimators._targets import decode_predictions, encode_targets
from sklmoo.metrics import (brier_score, classwise_calibration_error, entropy_decomposition,
                            expected_calibration_error, gaussian_nll, interval_coverage,
                            miscalibration_area, negative_log_likelihood, pairwise_kl_diversity)

METRICS = {
    "ece_uniform": lambda y, p, **kw: expected_calibration_error(y, p, n_bins=5, **kw),
    "ece_quantile": lambda y, p, **kw: expected_calibration_error(y, p, n_bins=5,
                                                                  strategy="quantile", **kw),
    "ece_max_quantile": lambda y, p, **kw: expected_calibration_error(
        y, p, n_bins=4, strategy="quantile", norm="max", **kw),
    "classwise": lambda y, p, **kw: classwise_calibration_error(y, p, n_bins=5, **kw),
    "classwise_quantile": lambda y, p, **kw: classwise_calibration_error(
        y, p, n_bins=3, strategy="quantile", **kw),
    "brier": brier_score,
    "nll": negative_log_likelihood,
}
BOUNDS = {"brier": (0, 2), "nll": (0, np.inf)}


@st.composite
def problems(draw, min_n=2, max_n=40):
    n = draw(st.integers(min_n, max_n))
    k = draw(st.integers(2, 4))
    raw = draw(arrays(np.float64, (n, k), elements=st.floats(0.0, 1.0)))
    raw = raw + 1e-3
    proba = raw / raw.sum(1, keepdims=True)
    y = draw(arrays(np.int64, n, elements=st.integers(0, k - 1)))
    return y, proba, np.arange(k)


PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(problems())
def test_bounds(problem):
    y, p, labels = problem
    for name, metric in METRICS.items():
        lo, hi = BOUNDS.get(name, (0, 1))
        value = metric(y, p, labels=labels)
        assert lo - 1e-12 <= value <= hi + 1e-12, name


@PROPS
@given(problems(), st.sampled_from(["auto", True, False]))
def test_brier_is_sklearn_brier_score_loss(problem, scale_by_half):
    y, p, labels = problem
    from sklearn.metrics import brier_score_loss

    assert brier_score(y, p, labels=labels, scale_by_half=scale_by_half) == pytest.approx(
        brier_score_loss(y, p, labels=labels, scale_by_half=scale_by_half), abs=1e-12)
    if len(labels) == 2:                                  # 1-D positive-class probabilities
        assert brier_score(y, p[:, 1], labels=labels) == pytest.approx(
            brier_score_loss(y, p[:, 1], pos_label=1), abs=1e-12)


@PROPS
@given(problems(), st.randoms(use_true_random=False))
def test_permutation_invariance(problem, rnd):
    y, p, labels = problem
    w = np.arange(1, len(y) + 1, dtype=float)
    perm = np.array(rnd.sample(range(len(y)), len(y)))
    for name, metric in METRICS.items():
        a = metric(y, p, labels=labels, sample_weight=w)
        b = metric(y[perm], p[perm], labels=labels, sample_weight=w[perm])
        assert a == pytest.approx(b, abs=1e-12), name


@PROPS
@given(problems(), st.data())
def test_integer_weight_is_repetition_and_zero_weight_is_absence(problem, data):
    y, p, labels = problem
    w = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(y), max_size=len(y))))
    assume(w.sum() > 0)
    rep = np.repeat(np.arange(len(y)), w)
    for name, metric in METRICS.items():
        weighted = metric(y, p, labels=labels, sample_weight=w.astype(float))
        repeated = metric(y[rep], p[rep], labels=labels)
        assert weighted == pytest.approx(repeated, abs=1e-10), name
        keep = w > 0
        absent = metric(y[keep], p[keep], labels=labels, sample_weight=w[keep].astype(float))
        assert weighted == pytest.approx(absent, abs=1e-10), name


@PROPS
@given(problems(), problems())
def test_multi_task_form_agrees_with_each_task(first, second):
    (y1, p1, l1), (y2, p2, l2) = first, second
    n = min(len(y1), len(y2))
    y = np.column_stack([y1[:n], y2[:n]])
    for name, metric in METRICS.items():
        raw = metric(y, [p1[:n], p2[:n]], labels=[l1, l2], multioutput="raw_values")
        single = [metric(y1[:n], p1[:n], labels=l1), metric(y2[:n], p2[:n], labels=l2)]
        np.testing.assert_allclose(raw, single, atol=1e-12, err_msg=name)
        mean = metric(y, [p1[:n], p2[:n]], labels=[l1, l2])
        assert mean == pytest.approx(np.mean(single), abs=1e-12)


@PROPS
@given(problems(min_n=4), st.data())
def test_missing_labels_are_absent_samples_and_unseen_labels_are_errors(problem, data):
    y, p, labels = problem
    missing = np.array(data.draw(st.lists(st.booleans(), min_size=len(y), max_size=len(y))))
    assume((~missing).any())
    y_obj = y.astype(object)
    y_obj[missing] = None
    for name, metric in METRICS.items():
        assert metric(y_obj, p, labels=labels) == pytest.approx(
            metric(y[~missing], p[~missing], labels=labels), abs=1e-12), name
    # a label outside `labels`: probability 0 for its true class, never an exception
    y_unseen = y.copy()
    y_unseen[0] = labels.max() + 1
    with pytest.raises(ValueError, match="not in labels"):
        brier_score(y_unseen, p, labels=labels)
    counted = brier_score(y_unseen, p, labels=labels, unknown_labels="count_as_wrong",
                          scale_by_half=False)
    others = ((np.eye(len(labels))[y[1:]] - p[1:]) ** 2).sum(1)
    assert counted == pytest.approx((others.sum() + (p[0] ** 2).sum() + 1) / len(y))
    nll = negative_log_likelihood(y_unseen, p, labels=labels, unknown_labels="count_as_wrong")
    assert nll >= -np.log(1e-15) / len(y)


@pytest.mark.parametrize("bad, match", [
    (np.array([[0.5, np.nan]]), "NaN or inf"), (np.array([[0.5, np.inf]]), "NaN or inf"),
    (np.array([[1.5, -0.5]]), "outside"), (np.array([[0.5, 0.6]]), "sum to 1"),
    (np.zeros((1, 0)), "empty"), (np.array([0.5, 0.5]), "1 samples but y_proba has 2"),
])
def test_malformed_probabilities_raise(bad, match):
    for metric in METRICS.values():
        with pytest.raises(ValueError, match=match):
            metric(np.array([0]), bad, labels=[0, 1])
    if bad.ndim == 2 and bad.size:
        for helper in (entropy_decomposition, pairwise_kl_diversity):
            with pytest.raises(ValueError):
                helper(np.stack([bad, bad]))


def test_degenerate_metric_arguments_raise():
    y, p = np.array([0, 1]), np.array([[0.6, 0.4], [0.3, 0.7]])
    with pytest.raises(ValueError, match="eps"):
        negative_log_likelihood(y, p, eps=0)
    with pytest.raises(ValueError, match="eps"):
        negative_log_likelihood(y, p, eps=1.5)
    with pytest.raises(ValueError, match="multioutput weights"):
        brier_score(np.column_stack([y, y]), [p, p], multioutput=[1.0, -1.0])
    with pytest.raises(ValueError, match="empty"):
        expected_calibration_error(np.array([], dtype=int), np.zeros((0, 2)))
    with pytest.raises(ValueError, match="no labelled sample"):
        expected_calibration_error(np.array([None, None], dtype=object), p, labels=[0, 1])
    # one task with no label: NaN in raw_values (with a warning), left out of the average
    y2 = np.array([[0, None], [1, None]], dtype=object)
    with pytest.warns(UserWarning, match="no labelled sample"):
        raw = brier_score(y2, [p, p], labels=[[0, 1], [0, 1]], multioutput="raw_values")
    assert np.isnan(raw[1]) and np.isfinite(raw[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert brier_score(y2, [p, p], labels=[[0, 1], [0, 1]]) == pytest.approx(raw[0])


# -- label handling of the estimators ------------------------------------------------------

LABELS = st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "zz", "é"]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(LABELS, min_size=2, max_size=2), min_size=3, max_size=30),
       st.data())
def test_multi_task_target_encoding_round_trips(rows, data):
    y = np.array(rows, dtype=object)
    # one label type per task column, as scikit-learn requires
    for t in range(2):
        kind = data.draw(st.sampled_from([int, str]))
        y[:, t] = [kind(v) if kind is str or isinstance(v, int) else len(v)
                   for v in y[:, t]]
    missing = np.array(data.draw(st.lists(st.booleans(), min_size=len(y), max_size=len(y))))
    y_missing = y.copy()
    y_missing[missing, 1] = None
    counts = [len(set(y_missing[~missing if t else slice(None), t].tolist())) for t in range(2)]
    if min(counts) < 2:
        with pytest.raises(ValueError, match="at least two classes"):
            encode_targets(y_missing, len(y))
        return
    codes, classes, names = encode_targets(y_missing, len(y))
    assert names == ["task_0", "task_1"]
    assert (codes[missing, 1] == -1).all() and (codes[~missing] >= 0).all()
    for t in range(2):
        assert list(classes[t]) == sorted(set(classes[t].tolist()))
    decoded = decode_predictions(np.where(codes < 0, 0, codes), classes)
    keep = ~missing
    assert [str(v) for v in decoded[:, 0]] == [str(v) for v in y[:, 0]]
    assert [str(v) for v in decoded[keep, 1]] == [str(v) for v in y[keep, 1]]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["cat", "dog", "emu", 3]), min_size=30, max_size=30),
       st.sampled_from(["l2e", "sghmc"]))
def test_l2e_classifier_labels(labels, sampler):
    from sklmoo import L2ESamplerClassifier

    y = np.array([str(v) for v in labels])
    X = np.random.default_rng(0).normal(size=(len(y), 3))
    n_classes = len(set(y))
    clf = L2ESamplerClassifier(sampler=sampler, n_chains=2, max_epochs=2, n_draws=1,
                               module__hidden_units=(4,), random_state=0)
    if n_classes < 2:
        with pytest.raises(ValueError, match="1 class"):
            clf.fit(X, y)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    assert clf.classes_.tolist() == sorted(set(y))
    assert set(clf.predict(X)) <= set(y)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), n_classes)
    np.testing.assert_allclose(proba.sum(1), 1, rtol=1e-6)
    assert 0 <= clf.score(X, np.where(y == y[0], "never-seen", y)) <= 1


# -- regression metrics ----------------------------------------------------------------------
REGRESSION_METRICS = {
    "gaussian_nll": gaussian_nll,
    "coverage": interval_coverage,
    "coverage_50": lambda *a, **kw: interval_coverage(*a, level=0.5, **kw),
    "miscalibration_area": lambda *a, **kw: miscalibration_area(*a, n_levels=11, **kw),
}


@st.composite
def gaussian_predictions(draw, min_n=2, max_n=30):
    n = draw(st.integers(min_n, max_n))
    finite = st.floats(-50, 50, allow_nan=False)
    y = draw(arrays(np.float64, n, elements=finite))
    mean = draw(arrays(np.float64, n, elements=finite))
    std = draw(arrays(np.float64, n, elements=st.floats(0.01, 20)))
    return y, mean, std


@pytest.mark.parametrize("name", list(REGRESSION_METRICS))
@given(gaussian_predictions(), st.randoms(use_true_random=False), st.data())
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_regression_metrics_bounds_permutation_weights_and_missing(name, problem, rnd, data):
    metric = REGRESSION_METRICS[name]
    y, mean, std = problem
    value = metric(y, mean, std)
    assert np.isfinite(value)
    if name != "gaussian_nll":
        assert 0.0 <= value <= 1.0
    order = list(range(len(y)))
    rnd.shuffle(order)
    assert metric(y[order], mean[order], std[order]) == pytest.approx(value, rel=1e-10,
                                                                      abs=1e-12)
    # an integer weight is a repetition, a zero weight an absence, a NaN target an absence
    counts = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(y),
                                         max_size=len(y))))
    assume(counts.sum() > 0)
    rep = np.repeat(np.arange(len(y)), counts)
    expected = metric(y[rep], mean[rep], std[rep])
    assert metric(y, mean, std, sample_weight=counts.astype(float)) == pytest.approx(
        expected, rel=1e-9, abs=1e-12)
    kept = counts > 0
    y_missing = np.where(kept, y, np.nan)
    assert metric(y_missing, mean, std) == pytest.approx(
        metric(y[kept], mean[kept], std[kept]), rel=1e-9, abs=1e-12)

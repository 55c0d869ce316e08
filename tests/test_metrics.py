"""Calibration metrics against hand computations and independent implementations."""

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import entropy
from sklearn.metrics import brier_score_loss, log_loss
from torchmetrics.functional.classification import (binary_calibration_error,
                                                    multiclass_calibration_error)

from sklmoo.metrics import (brier_score, classwise_calibration_error, entropy_decomposition,
                            expected_calibration_error, negative_log_likelihood,
                            pairwise_kl_diversity)


def _random_problem(seed, n=400, n_classes=4):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(n_classes, 0.7), size=n)
    y = np.array([rng.choice(n_classes, p=p) if rng.random() < 0.7 else rng.integers(n_classes)
                  for p in proba])
    return y, proba


def _away_from_edges(values, n_bins, margin=1e-3):
    scaled = values * n_bins
    return np.abs(scaled - np.round(scaled)) > margin * n_bins


def test_hand_computed_top_label_ece_l1_l2_max():
    y = [0, 1, 1, 0]
    proba = [[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.3, 0.7]]
    # bins (right-closed, width 0.2): {0.6: correct} gap .4; {0.7 wrong, 0.8 correct} gap .25;
    # {0.9 correct} gap .1; weights .25 / .5 / .25
    assert expected_calibration_error(y, proba, n_bins=5) == pytest.approx(0.25)
    assert expected_calibration_error(y, proba, n_bins=5, norm="l2") == pytest.approx(
        np.sqrt(0.25 * 0.16 + 0.5 * 0.0625 + 0.25 * 0.01))
    assert expected_calibration_error(y, proba, n_bins=5, norm="max") == pytest.approx(0.4)
    # bins are right-closed: 0.6 belongs to (0.4, 0.6], not (0.6, 0.8] (which would give 0.3)
    assert expected_calibration_error([1], [[0.4, 0.6]], n_bins=5,
                                      labels=[0, 1]) == pytest.approx(0.4)


@pytest.mark.parametrize("norm", ["l1", "l2", "max"])
@pytest.mark.parametrize("n_bins", [10, 15])
def test_ece_matches_torchmetrics_away_from_bin_edges(norm, n_bins):
    # torchmetrics bins are left-closed [lo, hi) and ours right-closed (lo, hi] as in the
    # MT-SGD paper; the two agree whenever no confidence sits on an edge.
    y, proba = _random_problem(n_bins)
    keep = _away_from_edges(proba.max(1), n_bins)
    y, proba = y[keep], proba[keep]
    ref = multiclass_calibration_error(torch.as_tensor(proba), torch.as_tensor(y),
                                       num_classes=4, n_bins=n_bins, norm=norm)
    assert expected_calibration_error(y, proba, n_bins=n_bins, norm=norm) == pytest.approx(
        float(ref), abs=1e-6)


def test_classwise_ece_matches_torchmetrics_binary_per_class():
    y, proba = _random_problem(3, n_classes=3)
    keep = _away_from_edges(proba, 10).all(axis=1)
    y, proba = y[keep], proba[keep]
    ref = np.mean([float(binary_calibration_error(torch.as_tensor(proba[:, c]),
                                                  torch.as_tensor((y == c).astype(int)),
                                                  n_bins=10)) for c in range(3)])
    assert classwise_calibration_error(y, proba) == pytest.approx(ref, abs=1e-6)


def test_quantile_bins_hold_equal_counts():
    rng = np.random.default_rng(0)
    pos = rng.uniform(0.01, 0.99, size=100)
    y = (rng.random(100) < pos).astype(int)
    proba = np.column_stack([1 - pos, pos])
    conf, correct = proba.max(1), (proba.argmax(1) == y)
    order = np.argsort(conf)
    ref = np.mean([abs(correct[g].mean() - conf[g].mean())
                   for g in np.array_split(order, 4)])  # 4 groups of 25
    assert expected_calibration_error(y, proba, n_bins=4, strategy="quantile") == pytest.approx(ref)


def test_sample_weight_equals_repetition():
    y, proba = _random_problem(5, n=60)
    w = np.random.default_rng(0).integers(1, 4, size=60)
    rep_y, rep_p = np.repeat(y, w), np.repeat(proba, w, axis=0)
    for fn in (expected_calibration_error, brier_score, negative_log_likelihood,
               classwise_calibration_error):
        assert fn(y, proba, sample_weight=w) == pytest.approx(fn(rep_y, rep_p))


def test_weights_whose_sum_overflows_are_refused_not_scored_zero():
    """Weights of 1e308 are finite, but their sum is not: the weighted means came out as 0.0."""
    from sklmoo.metrics import (interval_coverage, miscalibration_area,
                                multitask_accuracy_score)

    y, proba = _random_problem(5, n=60)
    huge = np.full(60, 1e308)
    for fn in (expected_calibration_error, brier_score, negative_log_likelihood,
               classwise_calibration_error):
        with pytest.raises(ValueError, match=r"sample_weight sums to inf.*rescale"):
            fn(y, proba, sample_weight=huge)
        # the same ratios, rescaled: the unweighted value
        assert fn(y, proba, sample_weight=huge / huge.max()) == pytest.approx(fn(y, proba))
    with pytest.raises(ValueError, match="sample_weight sums to"):
        multitask_accuracy_score(y, y, sample_weight=huge)
    mean, std = np.zeros((60, 2)), np.ones((60, 2))
    for fn in (interval_coverage, miscalibration_area):
        with pytest.raises(ValueError, match="sample_weight sums to"):
            fn(np.column_stack([y, y]), mean, std, sample_weight=huge)
        with pytest.raises(ValueError, match="multioutput sums to"):
            fn(np.column_stack([y, y]), mean, std, multioutput=[1e308, 1e308])


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("scale_by_half", ["auto", True, False])
def test_brier_equals_sklearn_brier_score_loss(n_classes, scale_by_half):
    # issue 20: binary was twice scikit-learn's; now its exact convention, options included
    y, proba = _random_problem(6 + n_classes, n_classes=n_classes)
    w = np.random.default_rng(n_classes).random(len(y))
    labels = list(range(n_classes))
    for sw in (None, w):
        ref = brier_score_loss(y, proba, labels=labels, scale_by_half=scale_by_half,
                               sample_weight=sw)
        assert brier_score(y, proba, scale_by_half=scale_by_half,
                           sample_weight=sw) == pytest.approx(ref, rel=1e-12)
        sub = y != n_classes - 1          # a class absent from y_true: labels give the columns
        ref = brier_score_loss(y[sub], proba[sub], labels=labels, scale_by_half=scale_by_half,
                               sample_weight=None if sw is None else sw[sub])
        assert brier_score(y[sub], proba[sub], labels=labels, scale_by_half=scale_by_half,
                           sample_weight=None if sw is None else sw[sub]) == pytest.approx(
            ref, rel=1e-12)


def test_binary_brier_is_the_squared_error_of_the_positive_probability():
    rng = np.random.default_rng(0)
    pos = rng.random(50)
    yb = np.where(rng.random(50) < pos, "yes", "no")
    mse = np.mean(((yb == "yes") - pos) ** 2)
    assert brier_score_loss(yb, pos, pos_label="yes") == pytest.approx(mse)
    assert brier_score(yb, pos) == pytest.approx(mse)                  # "yes" sorts last
    assert brier_score(yb, pos, labels=["no", "yes"]) == pytest.approx(mse)
    assert brier_score(yb, pos, pos_label="yes") == pytest.approx(mse)
    assert brier_score(yb, 1 - pos, pos_label="no") == pytest.approx(
        brier_score_loss(yb, 1 - pos, pos_label="no"))
    assert brier_score(yb, np.column_stack([1 - pos, pos])) == pytest.approx(mse)
    # the per-class sum (MT-SGD paper) stays available: twice the binary value
    assert brier_score(yb, pos, scale_by_half=False) == pytest.approx(2 * mse)
    yi = (yb == "yes").astype(int) * 2 - 1                             # {-1, 1}: 1 is positive
    assert brier_score(yi, pos) == pytest.approx(brier_score_loss(yi, pos))
    # pos_label with missing labels: the missing ones are left out
    y_obj = yb.astype(object)
    y_obj[:5] = None
    assert brier_score(y_obj, pos, pos_label="yes") == pytest.approx(
        brier_score_loss(yb[5:], pos[5:], pos_label="yes"))
    with pytest.raises(ValueError, match="scale_by_half"):
        brier_score(yb, pos, scale_by_half="yes")
    with pytest.raises(ValueError, match="pos_label applies"):
        brier_score(yb, np.column_stack([1 - pos, pos]), pos_label="yes")
    with pytest.raises(ValueError, match="binary target"):
        brier_score([0, 1, 2], [0.1, 0.2, 0.3], pos_label=2)


def test_nll_equals_log_loss_with_labels_missing_from_y():
    y, proba = _random_problem(7)
    assert negative_log_likelihood(y, proba) == pytest.approx(log_loss(y, proba))
    sub = y != 3  # class 3 absent from y_true: labels tell the column order
    assert negative_log_likelihood(y[sub], proba[sub], labels=[0, 1, 2, 3]) == pytest.approx(
        log_loss(y[sub], proba[sub], labels=[0, 1, 2, 3]))


def test_pairwise_kl_matches_double_loop():
    rng = np.random.default_rng(1)
    members = rng.dirichlet(np.ones(5), size=(4, 30))
    ref = np.mean([np.mean([entropy(members[i, n], members[j, n]) for i in range(4)
                            for j in range(4) if i != j]) for n in range(30)])
    assert pairwise_kl_diversity(members) == pytest.approx(ref)
    assert pairwise_kl_diversity(np.repeat(members[:1], 3, axis=0)) == pytest.approx(0, abs=1e-12)
    assert pairwise_kl_diversity([members, members[:, :, :3] / members[:, :, :3].sum(-1,
                                  keepdims=True)]) > 0


def test_multitask_forms_agree():
    rng = np.random.default_rng(2)
    n = 120
    y_a, p_a = _random_problem(8, n=n, n_classes=3)
    pos = rng.random(n)
    y_b = np.where(rng.random(n) < pos, "dog", "cat")
    y = pd.DataFrame({"digit": y_a, "animal": y_b})
    probas = [p_a, np.column_stack([1 - pos, pos])]
    for fn in (expected_calibration_error, brier_score, negative_log_likelihood,
               classwise_calibration_error):
        raw = fn(y, probas, multioutput="raw_values")
        assert raw.shape == (2,)
        assert raw[0] == pytest.approx(fn(y_a, p_a))
        assert raw[1] == pytest.approx(fn(y_b, probas[1]))
        assert fn(y, probas) == pytest.approx(raw.mean())
        assert fn(y, probas, multioutput=[3, 1]) == pytest.approx(0.75 * raw[0] + 0.25 * raw[1])
    # all-binary tasks as an (n, T) array of positive-class probabilities (scikit-learn's
    # multilabel predict_proba scorer shape) == list of (n, 2) arrays
    yb = np.column_stack([(pos > 0.5).astype(int), (rng.random(n) < pos).astype(int)])
    pos2 = np.column_stack([pos, 1 - pos])
    as_list = [np.column_stack([1 - pos2[:, t], pos2[:, t]]) for t in range(2)]
    assert brier_score(yb, pos2) == pytest.approx(brier_score(yb, as_list))


def test_float16_probabilities_are_accepted_and_scored_in_float64():
    # issue 17: float16 rows of a softmax miss 1 by ~4e-4 and were refused (tolerance 1e-4)
    y, proba = _random_problem(11, n_classes=10)
    p16 = proba.astype(np.float16)
    assert np.abs(p16.astype(np.float64).sum(1) - 1).max() > 1e-4
    exact = p16.astype(np.float64)
    # eps='auto' is float16's machine epsilon, as scikit-learn's log_loss takes it
    floor = float(np.finfo(np.float16).eps)
    assert negative_log_likelihood(y, p16) == pytest.approx(
        -np.log(np.clip(exact[np.arange(len(y)), y], floor, 1 - floor)).mean(), rel=1e-12)
    assert negative_log_likelihood(y, p16) == pytest.approx(log_loss(y, p16), rel=1e-3)
    zero = np.array([[0.0, 1.0], [0.5, 0.5]], dtype=np.float16)  # a true class at 0
    assert negative_log_likelihood([0, 1], zero) == pytest.approx(
        (-np.log(floor) - np.log(0.5)) / 2, rel=1e-12)
    assert negative_log_likelihood([0, 1], zero) == pytest.approx(log_loss([0, 1], zero),
                                                                  rel=1e-3)
    assert brier_score(y, p16) == pytest.approx(
        ((np.eye(10)[y] - exact) ** 2).sum(1).mean(), rel=1e-12)
    keep = _away_from_edges(proba, 10).all(axis=1)       # rounding moves no sample's bin
    for fn in (expected_calibration_error, classwise_calibration_error):
        assert fn(y[keep], p16[keep], labels=np.arange(10)) == pytest.approx(
            fn(y[keep], proba[keep], labels=np.arange(10)), abs=1e-3)
    with pytest.raises(ValueError, match="sum to 1"):     # not a probability in any precision
        brier_score([0, 1], np.array([[0.5, 0.6], [0.5, 0.5]], dtype=np.float16))


@pytest.mark.parametrize("y,proba,labels,match", [
    ([0, 1], [[0.5, 0.6], [0.5, 0.5]], None, "sum to 1"),
    ([0, 1], [[1.2, -0.2], [0.5, 0.5]], None, "outside"),
    ([0, 1], [[np.nan, 0.5], [0.5, 0.5]], None, "NaN"),
    ([0, 1, 1], [[0.5, 0.5], [0.5, 0.5]], None, "3 samples"),
    ([0, 2], [[0.5, 0.5], [0.5, 0.5]], [0, 1], r"labels \[2\] not in"),
    ([0, 1, 2], [[0.5, 0.5]] * 3, None, "3 classes but y_proba has 2"),
    ([[0, 1], [1, 0]], [[[0.5, 0.5]] * 2], None, "2 tasks but y_proba has 1"),
    ([0, 1], [[[0.5, 0.5]] * 2, [[0.5, 0.5]] * 2], None, "one array per task"),
    (["a", "b", "c"], [0.2, 0.3, 0.4], None, "binary"),
])
def test_bad_input_raises(y, proba, labels, match):
    with pytest.raises(ValueError, match=match):
        expected_calibration_error(np.array(y), proba, labels=labels)


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, n_bins=0)
    with pytest.raises(ValueError, match="strategy"):
        expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, strategy="kmeans")
    with pytest.raises(ValueError, match="norm"):
        expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, norm="l3")
    with pytest.raises(ValueError, match="sample_weight"):
        brier_score([0, 1], [[0.5, 0.5]] * 2, sample_weight=[1.0])


@pytest.mark.parametrize("n_bins", [1, 2, 3, 7, 10, 15, 100])
def test_uniform_binning_places_edges_like_searchsorted(n_bins):
    from sklmoo.metrics._calibration import bin_edges, binned_calibration

    edges = bin_edges(None, n_bins, "uniform")
    conf = np.concatenate([edges, np.nextafter(edges, 2), np.nextafter(edges, -1),
                           edges.astype(np.float32).astype(float), np.arange(1001) / 1000,
                           np.random.default_rng(n_bins).random(1000)]).clip(0, 1)
    ref = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, n_bins - 1)
    weight = np.bincount(ref, minlength=n_bins).astype(float)
    mean_conf, _, w, _ = binned_calibration(conf, np.ones_like(conf), None, n_bins)
    np.testing.assert_allclose(w, weight[weight > 0] / weight.sum())
    expected = np.bincount(ref, weights=conf, minlength=n_bins)[weight > 0] / weight[weight > 0]
    np.testing.assert_allclose(mean_conf, expected)


def test_nll_equals_log_loss_when_a_probability_is_zero():
    """A probability of 0 for the true class is clipped at the machine epsilon, as in
    scikit-learn's log_loss (it was 1e-15: 0.5 nats apart on three rows)."""
    from sklearn.metrics import log_loss

    from sklmoo.metrics import negative_log_likelihood

    y = [0, 1, 1, 0]
    proba = np.array([[0.0, 1.0], [0.2, 0.8], [1.0, 0.0], [1.0, 0.0]])
    assert negative_log_likelihood(y, proba) == pytest.approx(log_loss(y, proba), rel=1e-12)
    assert negative_log_likelihood(y, proba, eps=1e-3) == pytest.approx(
        -np.mean(np.log(np.clip([0.0, 0.8, 0.0, 1.0], 1e-3, 1 - 1e-3))))


@pytest.mark.parametrize("n_bins", [True, False, 2.0, 0, 10 ** 8, 10 ** 12])
def test_ece_refuses_a_bin_count_that_is_not_a_positive_integer_or_too_large(n_bins):
    from sklmoo.metrics import expected_calibration_error

    with pytest.raises(ValueError, match="n_bins.* (must be a positive integer|is more than)"):
        expected_calibration_error([0, 1], [[0.6, 0.4], [0.3, 0.7]], n_bins=n_bins)


def test_entropy_decomposition_takes_half_precision_probabilities():
    """float16 probabilities sum to 1 within a few of its eps (2.6e-4 here): accepted, as the
    calibration metrics accept them, and decomposed as their float64 originals."""
    from sklmoo.metrics import entropy_decomposition

    p = np.random.default_rng(0).dirichlet(np.ones(10), size=(5, 200))
    half = entropy_decomposition(p.astype(np.float16))
    for a, b in zip(half, entropy_decomposition(p)):
        np.testing.assert_allclose(a, b, atol=1e-3)
    with pytest.raises(ValueError, match="sum to 1"):
        entropy_decomposition((p * 1.1).astype(np.float16))


@pytest.mark.parametrize("eps", [0, -1e-12, 1.0, 2.0, "1e-12"])
def test_diversity_and_entropy_floors_must_be_in_the_unit_interval(eps):
    p = np.array([[[0.5, 0.5]], [[0.9, 0.1]]])
    with pytest.raises(ValueError, match="eps must be a number in"):
        entropy_decomposition(p, eps=eps)
    with pytest.raises(ValueError, match="eps must be a number in"):
        pairwise_kl_diversity(p, eps=eps)
    # a nested list is one task's members, as an array of it is
    assert pairwise_kl_diversity(p.tolist()) == pytest.approx(pairwise_kl_diversity(p))

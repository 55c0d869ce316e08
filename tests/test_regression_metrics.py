"""Regression calibration metrics, scorers and display against direct computations and the
closed forms of Gaussian data."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from scipy.integrate import quad  # noqa: E402
from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import RBF, WhiteKernel  # noqa: E402
from sklearn.linear_model import BayesianRidge, LinearRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402

from sklmoo.metrics import (RegressionCalibrationDisplay, gaussian_nll,  # noqa: E402
                            gaussian_nll_scorer, interval_coverage, make_regression_scorer,
                            miscalibration_area, miscalibration_area_scorer)


@pytest.fixture(scope="module")
def gaussian():
    rng = np.random.RandomState(0)
    n = 200_000
    mean = rng.uniform(-3, 3, n)
    std = rng.uniform(0.5, 2.0, n)
    return mean + std * rng.standard_normal(n), mean, std


def test_gaussian_nll_is_the_mean_log_density_and_matches_the_closed_form(gaussian):
    y, mean, std = gaussian
    direct = -stats.norm.logpdf(y[:1000], mean[:1000], std[:1000]).mean()
    assert gaussian_nll(y[:1000], mean[:1000], std[:1000]) == pytest.approx(direct, rel=1e-12)
    # E[NLL] of the true distribution = entropy = 1/2 log(2 pi e sigma^2)
    expected = np.mean(0.5 * np.log(2 * np.pi * np.e * std ** 2))
    assert gaussian_nll(y, mean, std) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("level", [0.5, 0.9])
def test_interval_coverage_matches_the_closed_form(gaussian, scale, level):
    y, mean, std = gaussian
    z = stats.norm.ppf(0.5 + level / 2)
    expected = 2 * stats.norm.cdf(z * scale) - 1     # std reported `scale` times too large
    assert interval_coverage(y, mean, scale * std, level=level) == pytest.approx(expected,
                                                                                 abs=0.005)
    inside = np.abs(y - mean) <= z * scale * std
    assert interval_coverage(y, mean, scale * std, level=level) == inside.mean()


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_miscalibration_area_matches_the_closed_form(gaussian, scale):
    y, mean, std = gaussian

    def gap(p):
        return abs(2 * stats.norm.cdf(scale * stats.norm.ppf(0.5 + p / 2)) - 1 - p)
    expected = quad(gap, 0, 1, limit=200)[0]
    assert miscalibration_area(y, mean, std / scale) == pytest.approx(expected, abs=0.005)


def test_miscalibration_area_integrates_crossing_curves_exactly():
    from sklmoo.metrics._regression import _abs_area
    x = np.array([0.0, 1.0])
    assert _abs_area(x, np.array([-1.0, 1.0])) == pytest.approx(0.5)   # two triangles
    assert _abs_area(x, np.array([1.0, 3.0])) == pytest.approx(2.0)
    fine = np.linspace(0, 1, 100001)
    d = np.interp(fine, [0, 0.3, 1], [0.2, -0.1, 0.4])
    assert _abs_area(np.array([0, 0.3, 1]), np.array([0.2, -0.1, 0.4])) == pytest.approx(
        np.trapezoid(np.abs(d), fine), abs=1e-8)


def test_multioutput_missing_targets_and_sample_weight(gaussian):
    y, mean, std = gaussian
    Y = np.column_stack([y[:3000], y[3000:6000]])
    M = np.column_stack([mean[:3000], mean[3000:6000]])
    S = np.column_stack([std[:3000], 2 * std[3000:6000]])
    for metric in (gaussian_nll, interval_coverage, miscalibration_area):
        raw = metric(Y, M, S, multioutput="raw_values")
        assert raw.shape == (2,)
        assert raw[1] == pytest.approx(metric(Y[:, 1], M[:, 1], S[:, 1]))
        assert metric(Y, M, S) == pytest.approx(raw.mean())
        assert metric(Y, M, S, multioutput=[1, 3]) == pytest.approx((raw[0] + 3 * raw[1]) / 4)
        # a missing target is left out of its output only
        Yn = Y.copy()
        Yn[:500, 0] = np.nan
        raw_n = metric(Yn, M, S, multioutput="raw_values")
        assert raw_n[0] == pytest.approx(metric(Y[500:, 0], M[500:, 0], S[500:, 0]))
        assert raw_n[1] == pytest.approx(raw[1])
        # an integer weight is a repetition
        w = np.r_[np.full(10, 2.0), np.ones(90)]
        rep = np.r_[np.arange(10), np.arange(100)]
        assert metric(y[:100], mean[:100], std[:100], sample_weight=w) == pytest.approx(
            metric(y[rep], mean[rep], std[rep]))


def test_gaussian_nll_is_finite_wherever_the_true_value_is():
    # issue 17: the square of the standardised residual overflowed to a silent inf
    log_norm = 0.5 * np.log(2 * np.pi)
    assert gaussian_nll([0.0], [0.0], [1e-200]) == pytest.approx(log_norm + np.log(1e-200))
    assert gaussian_nll([1e-100], [0.0], [1e-200]) == pytest.approx(
        log_norm + np.log(1e-200) + 0.5e200)
    assert gaussian_nll([1.5e154], [0.0], [1.0]) == pytest.approx(log_norm + 1.125e308)
    # y - mean overflows, its ratio to std does not
    assert gaussian_nll([1e308], [-1e308], [1e308]) == pytest.approx(log_norm + np.log(1e308) + 2)
    # one huge term among others: the mean is finite although the sum is not
    assert gaussian_nll([1.5e154, 0.0], [0.0, 0.0], [1.0, 1.0], sample_weight=[1, 3]) == (
        pytest.approx(log_norm + 0.25 * 1.125e308))


@pytest.mark.parametrize("y, std", [([1.0], [1e-200]), ([1e200], [1.0]),
                                    ([1.0, 0.0], [1e-160, 1.0])])
def test_gaussian_nll_beyond_float64_raises(y, std):
    with pytest.raises(ValueError, match="overflows float64.*standardised residual"):
        gaussian_nll(y, np.zeros(len(y)), std)


@pytest.mark.parametrize("args, match", [
    (([1.0, 2.0], [1.0, 2.0], [1.0, 0.0]), "positive"),
    (([1.0, 2.0], [1.0, np.nan], [1.0, 1.0]), "finite"),
    (([1.0, np.inf], [1.0, 2.0], [1.0, 1.0]), "inf"),
    (([1.0, 2.0], [1.0, 2.0, 3.0], [1.0, 1.0]), "same shape"),
    (([np.nan, np.nan], [1.0, 2.0], [1.0, 1.0]), "no observed"),
])
def test_bad_input_is_named(args, match):
    with pytest.raises(ValueError, match=match):
        gaussian_nll(*args)
    with pytest.raises(ValueError, match="level"):
        interval_coverage([1.0], [1.0], [1.0], level=1.5)


def test_scorers_in_cross_validation_and_search():
    X, y = load_diabetes(return_X_y=True)
    gp = GaussianProcessRegressor(RBF(10.0) + WhiteKernel(1.0), normalize_y=True)
    nll = cross_val_score(gp, X[:200], y[:200], cv=2, scoring=gaussian_nll_scorer)
    assert np.isfinite(nll).all() and (nll < 0).all()
    area = cross_val_score(BayesianRidge(), X, y, cv=3, scoring=miscalibration_area_scorer)
    assert ((area <= 0) & (area > -0.5)).all()
    mean, std = BayesianRidge().fit(X[:300], y[:300]).predict(X[300:], return_std=True)
    scorer = make_regression_scorer("interval_coverage", greater_is_better=True, level=0.8)
    assert scorer(BayesianRidge().fit(X[:300], y[:300]), X[300:], y[300:]) == pytest.approx(
        interval_coverage(y[300:], mean, std, level=0.8))
    search = GridSearchCV(BayesianRidge(), {"alpha_1": [1e-6, 1.0]}, cv=2,
                          scoring=gaussian_nll_scorer).fit(X, y)
    assert np.isfinite(search.best_score_)
    with pytest.raises(TypeError, match="return_std"):
        gaussian_nll_scorer(LinearRegression().fit(X, y), X, y)


def test_display_curves_and_areas(gaussian):
    y, mean, std = gaussian
    Y = np.column_stack([y[:5000], y[5000:10000]])
    M = np.column_stack([mean[:5000], mean[5000:10000]])
    S = np.column_stack([std[:5000], 0.5 * std[5000:10000]])
    disp = RegressionCalibrationDisplay.from_predictions(Y, M, S, output_names=["a", "b"])
    assert len(disp.lines_) == 2 and disp.expected[0] == 0 and disp.expected[-1] == 1
    np.testing.assert_allclose(disp.miscalibration_area,
                               miscalibration_area(Y, M, S, multioutput="raw_values"))
    assert (disp.observed[1][1:-1] < disp.expected[1:-1]).all()     # too narrow: below
    assert "area" in disp.lines_[0].get_label()


def test_coverage_does_not_count_overflowing_residuals_as_covered():
    from sklmoo.metrics import interval_coverage

    # y - mean overflows (2e308): 13 std away with std 1.5e307, 2 std away with std 1e308
    y, mean = np.array([1e308]), np.array([-1e308])
    assert interval_coverage(y, mean, np.array([1.5e307]), level=0.99) == 0.0
    assert interval_coverage(y, mean, np.array([1e308]), level=0.99) == 1.0
    assert interval_coverage(y, mean, np.array([1e308]), level=0.9) == 0.0
    # 2.86 std away, and std * z (2.576) overflows as well: outside, not "inf <= inf"
    assert interval_coverage(y, mean, np.array([7e307]), level=0.99) == 0.0
    # ordinary values unchanged
    assert interval_coverage([0.0, 1.0, 3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0],
                             level=0.9) == 2 / 3


@pytest.mark.parametrize("n_levels", [0, 1, 2.7, "10", -5, True, 10 ** 7])
def test_n_levels_is_checked_by_the_metric_and_the_display(gaussian, n_levels):
    y, mean, std = (a[:100] for a in gaussian)
    with pytest.raises(ValueError, match="n_levels must be an integer from 2 to 10000"):
        miscalibration_area(y, mean, std, n_levels=n_levels)
    with pytest.raises(ValueError, match="n_levels must be an integer from 2 to 10000"):
        RegressionCalibrationDisplay.from_predictions(y, mean, std, n_levels=n_levels)

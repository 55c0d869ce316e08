"""Expected-vs-observed coverage curves for Gaussian predictions, following scikit-learn's
Display pattern."""

import numpy as np

from ._regression import check_levels, coverage_curve, regression_outputs
from ._scorers import in_fit_order, predict_with_std


class RegressionCalibrationDisplay:
    """Calibration curve of a regressor's predictive Gaussians: observed against expected
    proportion of targets inside the central intervals, one curve per output.

    The diagonal is perfect calibration; a curve below it means intervals that are too narrow
    (overconfident), above it too wide. The legend gives each output's miscalibration area
    (:func:`~sklmoo.metrics.miscalibration_area`) and its 90 % coverage. Create it with
    :meth:`from_estimator` (calls ``predict(X, return_std=True)``) or :meth:`from_predictions`.

    Parameters
    ----------
    expected : ndarray of shape (n_levels,)
    observed : list of ndarray of shape (n_levels,), one per output
    miscalibration_area : list of float, one per output
    output_names : list of str
    estimator_name : str, optional

    Attributes
    ----------
    lines_ : list of matplotlib Line2D, one per output
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.linear_model import BayesianRidge
    >>> from sklmoo.metrics import RegressionCalibrationDisplay
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = BayesianRidge().fit(X[:300], y[:300])
    >>> disp = RegressionCalibrationDisplay.from_estimator(reg, X[300:], y[300:])
    >>> len(disp.lines_), round(float(disp.observed[0][-1]), 2)   # every target in the 100 % interval
    (1, 1.0)
    """

    def __init__(self, expected, observed, miscalibration_area, *, output_names,
                 estimator_name=None):
        self.expected = expected
        self.observed = observed
        self.miscalibration_area = miscalibration_area
        self.output_names = output_names
        self.estimator_name = estimator_name

    def plot(self, *, ax=None, name=None):
        """Draw the curves.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Created if None.
        name : str, optional
            Title; defaults to ``estimator_name``.

        Returns
        -------
        self
        """
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(5.2, 5.2))
        else:
            fig = ax.figure
        ax.plot([0, 1], [0, 1], "k:", label="perfectly calibrated")
        at90 = int(np.argmin(np.abs(self.expected - 0.9)))
        lines = []
        for label, obs, area in zip(self.output_names, self.observed,
                                    self.miscalibration_area):
            (line,) = ax.plot(self.expected, obs, "-",
                              label=f"{label} (area {area:.3f}, 90 %: {obs[at90]:.2f})")
            lines.append(line)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="Expected proportion in interval",
               ylabel="Observed proportion in interval")
        ax.set_aspect("equal")
        name = self.estimator_name if name is None else name
        if name is not None:
            ax.set_title(str(name))
        ax.legend(loc="upper left", fontsize="small", frameon=False)
        self.ax_, self.figure_, self.lines_ = ax, fig, lines
        return self

    @classmethod
    def from_predictions(cls, y_true, y_mean, y_std, *, n_levels=100, sample_weight=None,
                         output_names=None, name=None, ax=None):
        """Plot from targets and predictive means and standard deviations, of shape (n,) or
        (n, n_outputs) (NaN in ``y_true`` = missing). ``output_names`` default to the
        DataFrame's column names, else ``output 0`` ...

        Returns
        -------
        RegressionCalibrationDisplay
        """
        check_levels(n_levels)
        outputs, _ = regression_outputs(y_true, y_mean, y_std, sample_weight)
        if any(o is None for o in outputs):
            raise ValueError("every output needs observed values to draw its curve")
        observed, areas = [], []
        for y, m, s, w in outputs:
            expected, obs, area = coverage_curve(y, m, s, w, n_levels)
            observed.append(obs)
            areas.append(area)
        if output_names is None:
            output_names = (list(map(str, y_true.columns)) if hasattr(y_true, "columns")
                            else [f"output {t}" for t in range(len(outputs))])
        if len(output_names) != len(outputs):
            raise ValueError(f"output_names has {len(output_names)} names for "
                             f"{len(outputs)} outputs")
        disp = cls(expected, observed, areas, output_names=list(output_names),
                   estimator_name=name)
        return disp.plot(ax=ax)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, n_levels=100, sample_weight=None,
                       output_names=None, name=None, ax=None):
        """Plot from a fitted regressor's ``predict(X, return_std=True)``. ``name`` defaults
        to the estimator's class name and ``output_names`` to its ``task_names_`` when it has
        them.

        Returns
        -------
        RegressionCalibrationDisplay
        """
        mean, std = predict_with_std(estimator, X, "the regression calibration display needs")
        if output_names is None and np.ndim(mean) == 2:
            output_names = getattr(estimator, "task_names_", None)
        return cls.from_predictions(in_fit_order(estimator, y), mean, std, n_levels=n_levels,
                                    sample_weight=sample_weight, output_names=output_names,
                                    name=type(estimator).__name__ if name is None else name,
                                    ax=ax)

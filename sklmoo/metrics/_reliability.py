"""Reliability diagram, following scikit-learn's Display pattern."""

import numpy as np

from ._calibration import _check_binning, _gap, _top_label, binned_calibration
from ._scorers import _classes_of, in_fit_order, with_missing_marked
from ._validation import tasks_and_weights


class ReliabilityDiagramDisplay:
    """Reliability diagram: accuracy against top-label confidence per bin.

    One panel per task. Bars show the accuracy of each confidence bin, the shaded "gap" bars the
    difference to the bin's mean confidence, and the line the (confidence, accuracy) points; the
    diagonal is perfect calibration and the legend gives the ECE. Under each panel a histogram
    gives the number of samples per bin, and the bars and markers fade with it, so that a bin
    holding a handful of samples does not draw the eye as much as one holding most of them.
    Create it with :meth:`from_estimator` or :meth:`from_predictions`.

    Parameters
    ----------
    mean_confidence, accuracy, bin_weight : list of ndarray, one per task
        Per non-empty bin: mean confidence, accuracy and share of samples.
    bin_edges : list of ndarray, one per task
    ece : list of float, one per task
    bin_count : list of ndarray, one per task, optional
        Samples (total sample weight) per non-empty bin; default: ``bin_weight`` (shares).
    estimator_name : str, optional
    task_names : list of str, optional

    Attributes
    ----------
    line_ : matplotlib Line2D, or list of them (multi-task)
    bars_ : matplotlib BarContainer, or list of them (multi-task)
    ax_ : matplotlib Axes, or ndarray of Axes (multi-task)
    hist_ax_ : matplotlib Axes, or list of them (multi-task)
        The per-bin sample counts under each panel.
    figure_ : matplotlib Figure

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklmoo.metrics import ReliabilityDiagramDisplay
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = LogisticRegression(max_iter=500).fit(X, y)
    >>> disp = ReliabilityDiagramDisplay.from_estimator(clf, X, y, n_bins=5)
    >>> disp.hist_ax_.get_xlabel()
    'Confidence (top-label probability)'
    >>> int(sum(p.get_height() for p in disp.hist_ax_.patches))   # samples per bin, all of them
    150
    """

    def __init__(self, mean_confidence, accuracy, bin_weight, bin_edges, ece, *,
                 bin_count=None, estimator_name=None, task_names=None):
        self.mean_confidence = mean_confidence
        self.accuracy = accuracy
        self.bin_weight = bin_weight
        self.bin_edges = bin_edges
        self.ece = ece
        self.bin_count = bin_count
        self.estimator_name = estimator_name
        self.task_names = task_names

    @property
    def _multitask(self):
        return self.task_names is not None

    def plot(self, *, ax=None, name=None, show_gaps=True):
        """Draw the diagram.

        Parameters
        ----------
        ax : matplotlib Axes, or sequence of one Axes per task, optional
            Created if None.
        name : str, optional
            Legend name; defaults to ``estimator_name``.
        show_gaps : bool, default=True
            Shade the gap between accuracy and mean confidence in each bin.

        Returns
        -------
        self
        """
        import matplotlib.pyplot as plt
        from matplotlib.ticker import LogLocator, NullFormatter
        from mpl_toolkits.axes_grid1 import make_axes_locatable

        n_tasks = len(self.ece)
        if ax is None:
            fig, axes = plt.subplots(1, n_tasks, figsize=(4.4 * n_tasks, 6.2), squeeze=False)
            axes = axes[0]
        else:
            axes = np.atleast_1d(np.asarray(ax, dtype=object))
            if len(axes) != n_tasks:
                raise ValueError(f"ax must hold one Axes per task ({n_tasks}), got {len(axes)}")
            fig = axes[0].figure
        name = self.estimator_name if name is None else name
        lines, bars, hists = [], [], []
        for t, axis in enumerate(axes):
            edges = self.bin_edges[t]
            widths = np.diff(edges)
            idx = np.clip(np.searchsorted(edges, self.mean_confidence[t], side="left") - 1,
                          0, len(widths) - 1)
            centres, width = edges[idx] + widths[idx] / 2, widths[idx]
            share = np.asarray(self.bin_weight[t], dtype=float)
            # opacity follows the bin's share of the samples: near-empty bins stay faint
            alpha = 0.15 + 0.7 * share / share.max()
            bar = axis.bar(centres, self.accuracy[t], width=width * 0.95, color="tab:blue",
                           edgecolor="black", label="accuracy")
            for patch, a in zip(bar, alpha):
                patch.set_alpha(float(a))
            if show_gaps:
                gap = self.mean_confidence[t] - self.accuracy[t]
                gaps = axis.bar(centres, gap, bottom=self.accuracy[t], width=width * 0.95,
                                color="tab:red", hatch="//", edgecolor="tab:red", label="gap")
                for patch, a in zip(gaps, alpha):
                    patch.set_alpha(float(a) * 0.45)
            axis.plot([0, 1], [0, 1], "k:", label="perfectly calibrated")
            label = f"ECE = {self.ece[t]:.3f}" if name is None else f"{name} (ECE = {self.ece[t]:.3f})"
            (line,) = axis.plot(self.mean_confidence[t], self.accuracy[t], "-", color="black",
                                label=label)
            axis.scatter(self.mean_confidence[t], self.accuracy[t], marker="s", color="black",
                         s=12 + 60 * share / share.max(), zorder=3)
            axis.set(xlim=(0, 1), ylim=(0, 1), ylabel="Accuracy")
            axis.tick_params(labelbottom=False)
            if self._multitask:
                axis.set_title(str(self.task_names[t]))
            counts = share if self.bin_count is None else np.asarray(self.bin_count[t])
            hist = make_axes_locatable(axis).append_axes("bottom", size="22%", pad=0.08,
                                                        sharex=axis)
            hist.bar(centres, counts, width=width * 0.95, color="tab:gray")
            hist.set_yscale("log")
            hist.yaxis.set_major_locator(LogLocator(numticks=3))
            hist.yaxis.set_minor_formatter(NullFormatter())
            hist.set(xlim=(0, 1), xlabel="Confidence (top-label probability)",
                     ylabel="samples" if self.bin_count is not None else "share")
            hist.tick_params(axis="y", labelsize="x-small")
            axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5), ncol=2,
                        fontsize="small", frameon=False)
            lines.append(line)
            bars.append(bar)
            hists.append(hist)
        if ax is None:
            fig.tight_layout()
        self.figure_ = fig
        if self._multitask:
            self.ax_, self.line_, self.bars_ = np.asarray(axes, dtype=object), lines, bars
            self.hist_ax_ = hists
        else:
            self.ax_, self.line_, self.bars_, self.hist_ax_ = axes[0], lines[0], bars[0], hists[0]
        return self

    @classmethod
    def from_predictions(cls, y_true, y_proba, *, labels=None, n_bins=10, strategy="uniform",
                         sample_weight=None, name=None, task_names=None, ax=None,
                         show_gaps=True, unknown_labels="raise"):
        """Plot from true labels and predicted probabilities.

        ``y_true``, ``y_proba``, ``labels`` and ``unknown_labels`` take every form
        :func:`~sklmoo.metrics.expected_calibration_error` accepts (a label of ``y_true``
        not among ``labels`` raises unless ``unknown_labels='count_as_wrong'``); a
        multi-task ``y_true`` (n, T) gives one panel per task, titled by ``task_names``
        (default: the DataFrame's column names, else ``task 0`` ...).

        Returns
        -------
        ReliabilityDiagramDisplay
        """
        _check_binning(n_bins, strategy)
        tasks, multitask = tasks_and_weights(y_true, y_proba, labels, sample_weight,
                                             unknown=unknown_labels)
        if any(t is None for t in tasks):
            raise ValueError("every task needs labelled samples to draw its reliability "
                             "diagram")
        stats, counts = [[], [], [], [], []], []
        for codes, proba, sw in tasks:
            conf, correct = _top_label(codes, proba)
            mean_conf, acc, weight, edges = binned_calibration(conf, correct, sw, n_bins,
                                                               strategy)
            for lst, v in zip(stats, (mean_conf, acc, weight, edges,
                                      _gap(mean_conf, acc, weight, "l1"))):
                lst.append(v)
            counts.append(weight * (len(codes) if sw is None else sw.sum()))
        if multitask and task_names is None:
            task_names = (list(map(str, y_true.columns)) if hasattr(y_true, "columns")
                          else [f"task {t}" for t in range(len(tasks))])
        if multitask and len(task_names) != len(tasks):
            raise ValueError(f"task_names has {len(task_names)} names for {len(tasks)} tasks")
        disp = cls(*stats, bin_count=counts, estimator_name=name,
                   task_names=task_names if multitask else None)
        return disp.plot(ax=ax, show_gaps=show_gaps)

    @classmethod
    def from_estimator(cls, estimator, X, y, *, n_bins=10, strategy="uniform",
                       sample_weight=None, name=None, task_names=None, ax=None, show_gaps=True):
        """Plot from a fitted classifier's ``predict_proba`` on ``X``; columns are mapped to labels
        through ``estimator.classes_``. ``name`` defaults to the estimator's class name and
        ``task_names`` to its ``task_names_`` when it has them. As in the calibration
        scorers, labels equal to the estimator's ``missing_label`` (e.g. -1) are left out,
        and a label the estimator never saw counts as a wrong prediction.

        Returns
        -------
        ReliabilityDiagramDisplay
        """
        proba = estimator.predict_proba(X)
        if task_names is None:
            task_names = getattr(estimator, "task_names_", None)
        return cls.from_predictions(
            with_missing_marked(estimator, in_fit_order(estimator, y)), proba,
            labels=_classes_of(estimator), n_bins=n_bins, strategy=strategy,
            sample_weight=sample_weight,
            name=type(estimator).__name__ if name is None else name, task_names=task_names,
            ax=ax, show_gaps=show_gaps, unknown_labels="count_as_wrong")

"""The user guide's figures: ``python docs/make_user_guide_figures.py`` writes
``docs/_static/ug_reliability.png``, ``ug_uncertainty.png`` and ``ug_regression.png`` (add
``regression`` or ``classifier`` to make only those).

The same code as the guide's blocks with a few more epochs (600 training canvases, 3
particles, 6 epochs of Adam 1e-2; a 1-D regression toy). Seeds are fixed.
"""

import pathlib
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sklmoo import MTSGDMultiTaskClassifier, MTSGDRegressor  # noqa: E402
from sklmoo.datasets import make_multi_digits  # noqa: E402
from sklmoo.metrics import ReliabilityDiagramDisplay  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "_static"
plt.rcParams.update({"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12,
                     "legend.fontsize": 11})


def rotated(X, size=12):
    return np.rot90(X.reshape(-1, size, size), axes=(1, 2)).reshape(len(X), -1).copy()


def classifier_figures():
    X, y = make_multi_digits(600, random_state=0, return_X_y=True, as_frame=True)
    X_test, y_test = make_multi_digits(500, subset="test", random_state=1, return_X_y=True,
                                       as_frame=True)
    X, X_test = X.to_numpy(), X_test.to_numpy()
    clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=6, lr=1e-2,
                                   input_shape=(1, 12, 12), random_state=0).fit(X, y)

    disp = ReliabilityDiagramDisplay.from_estimator(clf, X_test, y_test, name="MT-SGD")
    disp.figure_.set_size_inches(10, 5)
    disp.figure_.tight_layout()
    disp.figure_.savefig(OUT / "ug_reliability.png", dpi=100)

    u, u_rot = clf.predict_uncertainty(X_test), clf.predict_uncertainty(rotated(X_test))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, part in zip(axes, ("aleatoric", "epistemic")):
        a, b = u[part].mean(axis=1), u_rot[part].mean(axis=1)   # mean over the two tasks
        bins = np.linspace(0, max(a.max(), b.max()), 30)
        ax.hist(a, bins=bins, alpha=0.6, label="test canvases")
        ax.hist(b, bins=bins, alpha=0.6, label="rotated by 90 degrees")
        ax.set(xlabel=f"{part} entropy (nats, mean over tasks)", title=part)
    axes[0].set_ylabel("canvases")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(OUT / "ug_uncertainty.png", dpi=100)


def regression_figure():
    rng = np.random.RandomState(0)
    x = np.concatenate([rng.uniform(-3, -1, 100), rng.uniform(1, 3, 100)])[:, None]
    y = np.sin(x[:, 0]) + 0.1 * rng.standard_normal(200)
    reg = MTSGDRegressor(n_particles=5, max_epochs=100, lr=1e-2, mean_function="linear",
                         random_state=0).fit(x, y)
    grid = np.linspace(-6, 6, 400)[:, None]
    mean, std = reg.predict(grid, return_std=True)
    parts = reg.predict_uncertainty(grid)

    fig, (ax, parts_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax.fill_between(grid[:, 0], mean - 1.645 * std, mean + 1.645 * std, alpha=0.3,
                    label="90 % interval")
    ax.plot(grid[:, 0], mean, color="tab:blue", label="ensemble mean")
    ax.scatter(x[:, 0], y, s=8, color="black", label="training data")
    ax.set(xlabel="x", ylabel="y", title="prediction")
    ax.legend(loc="upper left")
    parts_ax.plot(grid[:, 0], np.sqrt(parts["epistemic"]), color="tab:red",
                  label="epistemic (disagreement)")
    parts_ax.plot(grid[:, 0], np.sqrt(parts["aleatoric"]), color="tab:green",
                  label="aleatoric (learned noise)")
    for lo, hi in ((-3, -1), (1, 3)):
        parts_ax.axvspan(lo, hi, color="black", alpha=0.07)
    parts_ax.set(xlabel="x (shaded: training inputs)", ylabel="standard deviation",
                 title="the two parts of std")
    parts_ax.legend(loc="upper center")
    fig.tight_layout()
    fig.savefig(OUT / "ug_regression.png", dpi=100)


if __name__ == "__main__":
    which = sys.argv[1:] or ["regression", "classifier"]     # or name one of them
    start = time.perf_counter()
    if "regression" in which:
        regression_figure()
        print(f"ug_regression.png after {time.perf_counter() - start:.0f} s", flush=True)
    if "classifier" in which:
        classifier_figures()
    print(f"wrote {OUT}/ug_*.png in {time.perf_counter() - start:.0f} s")

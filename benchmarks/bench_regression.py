"""SARCOS stand-in: is MT-SGD the lowest-error method on every output? With calibration.

Run: ``python benchmarks/bench_regression.py`` (about 20 minutes on one core; ``--quick`` for a
smoke run, ``--replot`` to rewrite the page and figure from the saved
results). Writes ``docs/benchmarks/regression.md`` / ``.json`` and
``docs/_static/regression_calibration.png``.

The MT-SGD paper's multi-output regression experiment (Table 3: SARCOS, 7 torques, every output
a task, M = 5, MT-SGD lowest MSE on every output) at CPU scale, on
:func:`sklmoo.datasets.make_inverse_dynamics` (7-joint arm, 21 inputs, 7 torques, 2 % noise):
one data set of 7000 samples per seed, split 4000 train / 1000 unused / 2000 test. Every
sklmoo configuration is :class:`sklmoo.MTSGDRegressor` with the same trunk (MLP 128-128), 5
particles, Adam 1e-3, batch 128, at most 60 epochs, inputs standardised, seeds 0-2, and the
estimator's defaults otherwise: its own validation split (a fifth of the 4000 training rows,
not trained on) drives early stopping with restore-best and fits the per-output variance
factor; only ``method`` and ``kernel`` change (``mgda`` and ``linear`` have no kernel). References: scikit-learn's ``MLPRegressor`` (same
architecture, Adam, early stopping on 10 % of the training set, targets standardised; no
predictive spread) and per-output ``GaussianProcessRegressor`` (ARD RBF + white noise,
hyperparameters by marginal likelihood) on a 500-sample subset of the training set (1000
would take about 15 minutes per seed).

Errors are on standardised targets (each torque divided by its training standard deviation), so
the average over outputs is not dominated by the base joint; NLL is per output in those units.
"""

import json
import pathlib
import sys
import time

import numpy as np
import torch

QUICK = "--quick" in sys.argv
SEEDS = (0,) if QUICK else (0, 1, 2)
N_TRAIN, N_VAL, N_TEST = (600, 200, 400) if QUICK else (4000, 1000, 2000)
EPOCHS = 2 if QUICK else 60
GP_SUBSET = 200 if QUICK else 500
CONFIGS = [("mtsgd", "parameter"), ("mtsgd", "function"), ("moo_svgd", "parameter"),
           ("moo_svgd", "function"), ("mgda", None), ("linear", None),
           # every training row, the whole budget, no variance factor
           ("mtsgd", "function", "all rows"), ("mgda", None, "all rows")]
#: estimator parameters of the optional third entry of a configuration
VARIANT_PARAMS = {"all rows": dict(train_split=None)}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _label(method, kernel, variant=None):
    label = method if kernel is None else f"{method} ({kernel})"
    return label if variant is None else f"{label}, {variant}"


def _scores(y, mean, std=None):
    from sklmoo.metrics import gaussian_nll, interval_coverage, miscalibration_area

    out = {"mse": ((y - mean) ** 2).mean(axis=0).tolist()}
    if std is not None:
        for name, metric in (("nll", gaussian_nll), ("coverage90", interval_coverage),
                             ("miscal_area", miscalibration_area)):
            out[name] = metric(y, mean, std, multioutput="raw_values").tolist()
    return out


def run_seed(seed):
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.neural_network import MLPRegressor
    from sklearn.preprocessing import StandardScaler

    from sklmoo import MTSGDRegressor
    from sklmoo.datasets import make_inverse_dynamics

    X, y = make_inverse_dynamics(N_TRAIN + N_VAL + N_TEST, random_state=seed, return_X_y=True)
    order = np.random.RandomState(seed).permutation(len(X))
    tr, te = order[:N_TRAIN], order[N_TRAIN + N_VAL:]
    xs = StandardScaler().fit(X[tr])
    loc, scale = y[tr].mean(0), y[tr].std(0)
    Xtr, Xte = xs.transform(X[tr]), xs.transform(X[te])
    ytr, yte = y[tr], (y[te] - loc) / scale                      # test in standardised units
    rows = {}
    for method, kernel, *variant in CONFIGS:
        reg = MTSGDRegressor(method=method, kernel=kernel or "parameter", n_particles=5,
                             module__hidden_units=(128, 128), lr=1e-3, batch_size=128,
                             max_epochs=EPOCHS, random_state=seed,
                             **VARIANT_PARAMS.get(variant[0] if variant else None, {}))
        start = time.perf_counter()
        reg.fit(Xtr, ytr)
        seconds = time.perf_counter() - start
        mean, std = reg.predict(Xte, return_std=True)
        row = _scores(yte, (mean - loc) / scale, std / scale)
        row["seconds"] = seconds
        row["task_weights"] = reg.history[-1, "task_weights_mean"]
        valid = [e.get("valid_loss") for e in reg.history]
        row["epochs"] = len(reg.history)
        row["best_epoch"] = (int(np.argmin(valid)) + 1) if None not in valid else None
        rows[_label(method, kernel, *variant)] = row
        print(f"seed {seed} {_label(method, kernel, *variant):22s} mse {np.mean(row['mse']):.4f} "
              f"nll {np.mean(row['nll']):.3f} cov90 {np.mean(row['coverage90']):.3f} "
              f"{seconds:.0f}s", flush=True)
    # scikit-learn's MLP: same architecture, early stopping (its own 10 % validation split)
    mlp = TransformedTargetRegressor(
        MLPRegressor(hidden_layer_sizes=(128, 128), learning_rate_init=1e-3, batch_size=128, max_iter=EPOCHS * 3,
                     early_stopping=True, random_state=seed), transformer=StandardScaler())
    start = time.perf_counter()
    mlp.fit(Xtr, ytr)
    rows["MLPRegressor"] = dict(_scores(yte, (mlp.predict(Xte) - loc) / scale),
                                seconds=time.perf_counter() - start)
    # one GP per output (ARD RBF + noise) on a subset
    sub = np.random.RandomState(seed).choice(N_TRAIN, GP_SUBSET, replace=False)
    means, stds = [], []
    start = time.perf_counter()
    for t in range(y.shape[1]):
        kern = ConstantKernel(1.0) * RBF(np.full(X.shape[1], 3.0), (1e-2, 1e3)) + WhiteKernel(
            1e-2, (1e-6, 1.0))
        gp = GaussianProcessRegressor(kern, normalize_y=True, random_state=seed)
        gp.fit(Xtr[sub], ytr[sub, t])
        m, s = gp.predict(Xte, return_std=True)
        means.append(m)
        stds.append(s)
    rows[f"GP ({GP_SUBSET} samples)"] = dict(
        _scores(yte, (np.column_stack(means) - loc) / scale, np.column_stack(stds) / scale),
        seconds=time.perf_counter() - start)
    for name in ("MLPRegressor", f"GP ({GP_SUBSET} samples)"):
        print(f"seed {seed} {name:22s} mse {np.mean(rows[name]['mse']):.4f}", flush=True)
    return rows


def summarise(results):
    names = list(results[0])
    out = {}
    for name in names:
        entry = {}
        for key in ("mse", "nll", "coverage90", "miscal_area"):
            if key in results[0][name]:
                per = np.array([r[name][key] for r in results])          # (seeds, outputs)
                entry[key] = dict(per_output=per.mean(0).tolist(),
                                  average=float(per.mean()), std=float(per.mean(1).std()))
        entry["seconds"] = float(np.mean([r[name]["seconds"] for r in results]))
        for key in ("epochs", "best_epoch"):
            values = [r[name].get(key) for r in results]
            entry[key] = None if None in values else float(np.mean(values))
        out[name] = entry
    return out


def write(results, summary):
    from sklmoo._io import atomic_write, atomic_write_text

    names = list(summary)
    lines = ["# MT-SGD regression on the SARCOS stand-in", "",
             "Generated by `python benchmarks/bench_regression.py` (seeds "
             f"{', '.join(map(str, SEEDS))}; {N_TRAIN} training / {N_TEST} test samples of "
             "`make_inverse_dynamics`, 5 particles, MLP 128-128, Adam 1e-3, batch 128, at "
             f"most {EPOCHS} epochs; the sklmoo estimators otherwise at their defaults: a "
             "fifth of the training rows held out for early stopping with restore-best and "
             "the per-output variance factor). Errors in standardised units; mean over seeds "
             "(std over seeds of the output-averaged value).", "",
             "## Test MSE per output", "",
             "| method | " + " | ".join(f"tau{t + 1}" for t in range(7)) + " | average |",
             "|---" * 9 + "|"]
    best = np.min([[summary[n]["mse"]["per_output"][t] for n in names] for t in range(7)], 1)
    for n in names:
        per = summary[n]["mse"]["per_output"]
        cells = [f"**{v:.4f}**" if np.isclose(v, best[t]) else f"{v:.4f}"
                 for t, v in enumerate(per)]
        lines.append(f"| {n} | " + " | ".join(cells) +
                     f" | {summary[n]['mse']['average']:.4f} ± {summary[n]['mse']['std']:.4f} |")
    lines += ["", "## Calibration (averaged over the 7 outputs)", "",
              "| method | NLL | 90 % coverage | miscalibration area | epochs run (best) "
              "| seconds per fit |", "|---|---|---|---|---|---|"]
    for n in names:
        s = summary[n]
        if "nll" in s:
            epochs = ("n/a" if s.get("epochs") is None else f"{s['epochs']:.0f}" + (
                "" if s.get("best_epoch") is None else f" ({s['best_epoch']:.0f})"))
            lines.append(f"| {n} | {s['nll']['average']:.3f} ± {s['nll']['std']:.3f} | "
                         f"{s['coverage90']['average']:.3f} | "
                         f"{s['miscal_area']['average']:.3f} | {epochs} | {s['seconds']:.0f} |")
        else:
            lines.append(f"| {n} | n/a | n/a | n/a | n/a | {s['seconds']:.0f} |")
    text = "\n".join(lines) + "\n"
    out = ROOT / "docs" / "benchmarks"
    suffix = "_quick" if QUICK else ""
    atomic_write_text(out / f"regression{suffix}.md", text)
    atomic_write_text(out / f"regression{suffix}.json",
                      json.dumps(dict(summary=summary, per_seed=results), indent=1))
    _figure(summary, lambda write_png: atomic_write(
        ROOT / "docs" / "_static" / f"regression_calibration{suffix}.png", write_png))
    print(text)


def _figure(summary, save):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in summary if "nll" in summary[n]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    x = np.arange(7)
    for i, n in enumerate(names + ["MLPRegressor"]):
        axes[0].plot(x, summary[n]["mse"]["per_output"], "o-", label=n, alpha=0.85)
    axes[0].set(yscale="log", xticks=x, xticklabels=[f"tau{t + 1}" for t in x],
                ylabel="test MSE (standardised)", title="Error per output")
    axes[0].legend(fontsize="x-small")
    for n in names:
        axes[1].plot(x, summary[n]["coverage90"]["per_output"], "o-", label=n, alpha=0.85)
    axes[1].axhline(0.9, color="k", ls=":")
    axes[1].set(xticks=x, xticklabels=[f"tau{t + 1}" for t in x],
                ylabel="share of test targets in the 90 % interval", title="90 % coverage")
    fig.tight_layout()
    save(lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


def main():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)    # GP length scales at their bounds
    if "--replot" in sys.argv:
        saved = json.loads((ROOT / "docs" / "benchmarks" / "regression.json").read_text())
        write(saved["per_seed"], saved["summary"])
        return
    torch.set_num_threads(1)
    results = [run_seed(seed) for seed in SEEDS]
    write(results, summarise(results))


if __name__ == "__main__":
    main()

"""The MT-SGD estimators' 'auto' budget on larger data: fixed at ~1000 steps, or extended while
the validation loss improves?

Run: ``python benchmarks/bench_auto_budget.py`` (about 8 minutes on one core for the regressor,
12 for the classifier; ``--part=regressor`` / ``--part=classifier`` runs one part and keeps the
other's saved results; ``--quick`` for a smoke run, ``--replot`` to rewrite the page from the
saved results). Writes ``docs/benchmarks/auto_budget.md`` / ``.json``.

:class:`sklmoo.MTSGDRegressor` at its defaults (only ``random_state``) on 4000 training rows of
:func:`sklmoo.datasets.make_inverse_dynamics` (the SARCOS stand-in: 21 inputs, 7 torques),
2000 test rows, seeds 0-2, inputs standardised. ``fixed``: the budget of about 1000 optimiser
steps (20 epochs of the 3200 rows left after the validation split, batches of 64) -- the
behaviour before the extension; ``extended`` (the default): the same, but while early stopping
sees the validation loss improve the fit may run on to three times that (60 epochs here). Test
metrics in standardised units (each torque divided by its training standard deviation), mean
over the 7 outputs.

Classifier part: :class:`sklmoo.MTSGDMultiTaskClassifier` at its defaults (``input_shape=(1,
12, 12)`` and ``random_state`` only) on 3000 Multi-Digits training images (two tasks; 2400 left
after the split: 27 epochs of 38 steps for ~1000 steps, extended up to 81), 1000 test canvases
from held-out source digits, seeds 0-2; test accuracy and NLL of ``predict_proba``, mean over
the two tasks.
"""

import json
import pathlib
import sys
import time

import numpy as np
import torch

from sklmoo import MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo._io import atomic_write_text
from sklmoo.datasets import make_inverse_dynamics, make_multi_digits
from sklmoo.metrics import gaussian_nll, interval_coverage, negative_log_likelihood

QUICK = "--quick" in sys.argv
SEEDS = (0,) if QUICK else (0, 1, 2)
N_TRAIN, N_TEST = (600, 300) if QUICK else (4000, 2000)
N_IMAGES = 300 if QUICK else 3000
BUDGETS = {"fixed": 1, "extended (default)": MTSGDRegressor._auto_extension}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(seed):
    from sklearn.preprocessing import StandardScaler

    X, y = make_inverse_dynamics(N_TRAIN + N_TEST, random_state=seed, return_X_y=True)
    order = np.random.RandomState(seed).permutation(len(X))
    tr, te = order[:N_TRAIN], order[N_TRAIN:]
    xs = StandardScaler().fit(X[tr])
    loc, scale = y[tr].mean(0), y[tr].std(0)
    rows = []
    for label, extension in BUDGETS.items():
        reg = MTSGDRegressor(random_state=seed)
        reg._auto_extension = extension
        start = time.perf_counter()
        reg.fit(xs.transform(X[tr]), y[tr])
        seconds = time.perf_counter() - start
        mean, std = reg.predict(xs.transform(X[te]), return_std=True)
        mean, std, target = (mean - loc) / scale, std / scale, (y[te] - loc) / scale
        valid = [e["valid_loss"] for e in reg.history]
        rows.append(dict(
            seed=seed, budget=label, max_epochs=reg.max_epochs_, epochs=len(reg.history),
            best_epoch=int(np.argmin(valid)) + 1, seconds=seconds,
            mse=float(((mean - target) ** 2).mean()),
            nll=float(np.mean(gaussian_nll(target, mean, std, multioutput="raw_values"))),
            coverage90=float(np.mean(interval_coverage(target, mean, std, level=0.9,
                                                       multioutput="raw_values")))))
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[-1].items()},
              flush=True)
    return rows


def run_classifier(seed):
    X, y = make_multi_digits(N_IMAGES, random_state=seed, return_X_y=True)
    Xt, yt = make_multi_digits(1000, subset="test", random_state=seed + 1, return_X_y=True)
    rows = []
    for label, extension in BUDGETS.items():
        clf = MTSGDMultiTaskClassifier(input_shape=(1, 12, 12), random_state=seed)
        clf._auto_extension = extension
        start = time.perf_counter()
        clf.fit(X, y)
        seconds = time.perf_counter() - start
        proba = clf.predict_proba(Xt)
        valid = [e["valid_loss"] for e in clf.history]
        rows.append(dict(
            seed=seed, budget=label, max_epochs=clf.max_epochs_, epochs=len(clf.history),
            best_epoch=int(np.argmin(valid)) + 1, seconds=seconds,
            accuracy=float(np.mean([(p.argmax(1) == yt[:, t]).mean()
                                    for t, p in enumerate(proba)])),
            nll=float(np.mean([negative_log_likelihood(yt[:, t], p, labels=np.arange(p.shape[1]))
                               for t, p in enumerate(proba)]))))
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in rows[-1].items()},
              flush=True)
    return rows


def write(rows, clf_rows=()):
    lines = ["# MTSGDRegressor's 'auto' budget on 4,000 rows", "",
             "Command: `python benchmarks/bench_auto_budget.py` (protocol in its docstring). "
             "Mean over seeds "
             f"{', '.join(str(s) for s in sorted({r['seed'] for r in rows}))} (range over "
             "seeds in brackets); test metrics in standardised units.", "",
             "## MTSGDRegressor on 4,000 rows of the SARCOS stand-in", "",
             "| budget | epochs: budget / run (best) | test MSE | NLL | 90 % coverage "
             "| fit s |", "|---|---|---|---|---|---|"]

    def cell(values, fmt):
        v = np.asarray(values, dtype=float)
        return f"{v.mean():{fmt}} [{v.min():{fmt}}, {v.max():{fmt}}]"

    for label in BUDGETS:
        rs = [r for r in rows if r["budget"] == label]
        if not rs:
            continue
        get = lambda key: [r[key] for r in rs]  # noqa: E731
        lines.append(
            f"| {label} | {np.mean(get('max_epochs')):.0f} / {np.mean(get('epochs')):.0f} "
            f"({np.mean(get('best_epoch')):.0f}) | {cell(get('mse'), '.4f')} | "
            f"{cell(get('nll'), '.3f')} | {cell(get('coverage90'), '.3f')} | "
            f"{np.mean(get('seconds')):.0f} |")
    if clf_rows:
        lines += ["", "## MTSGDMultiTaskClassifier on 3,000 Multi-Digits images", "",
                  "| budget | epochs: budget / run (best) | test accuracy | test NLL | fit s |",
                  "|---|---|---|---|---|"]
        for label in BUDGETS:
            rs = [r for r in clf_rows if r["budget"] == label]
            get = lambda key: [r[key] for r in rs]  # noqa: E731
            lines.append(
                f"| {label} | {np.mean(get('max_epochs')):.0f} / {np.mean(get('epochs')):.0f} "
                f"({np.mean(get('best_epoch')):.0f}) | {cell(get('accuracy'), '.4f')} | "
                f"{cell(get('nll'), '.4f')} | {np.mean(get('seconds')):.0f} |")
    text = "\n".join(lines) + "\n"
    suffix = "_quick" if QUICK else ""
    atomic_write_text(ROOT / "docs" / "benchmarks" / f"auto_budget{suffix}.md", text)
    atomic_write_text(ROOT / "docs" / "benchmarks" / f"auto_budget{suffix}.json",
                      json.dumps(dict(regressor=list(rows), classifier=list(clf_rows)),
                                 indent=1))
    print(text)


def main():
    path = ROOT / "docs" / "benchmarks" / "auto_budget.json"
    saved = json.loads(path.read_text()) if path.exists() and not QUICK else {}
    if isinstance(saved, list):             # the first version saved the regressor's rows only
        saved = dict(regressor=saved)
    if "--replot" not in sys.argv:
        torch.set_num_threads(1)
        part = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--part=")]
        if not part or part[0] == "regressor":
            saved["regressor"] = [row for seed in SEEDS for row in run(seed)]
        if not part or part[0] == "classifier":
            saved["classifier"] = [row for seed in SEEDS for row in run_classifier(seed)]
    write(saved.get("regressor", []), saved.get("classifier", []))


if __name__ == "__main__":
    main()

"""Multi-Digits, both regimes of the MT-SGD study: the pooled ensemble before and after the
default recalibration (one temperature per task, fitted on the 20 % validation split).

Run: ``nice -n 10 python benchmarks/bench_recalibration.py`` (about 15 minutes on one core;
``--quick`` for a smoke run). Writes ``docs/benchmarks/recalibration.md`` and
``docs/benchmarks/recalibration.json``.

The data, trunk, optimiser and regimes of ``bench_multi_digits.py``: 5 particles, LeNet-style
trunk, Adam 3e-3, batch 64, seeds 0-2; regime (a) 3000 training images and 15 epochs, regime
(b) 300 images and 100 epochs (overfitting networks). Each estimator runs with the defaults of
this version -- the validation split (20 % of the training images, stratified, not trained
on), early stopping with restore-best, temperature calibration -- and the regime's
``max_epochs`` as the budget. "before" is the particles' averaged probabilities of that same
fit (the mean of ``predict_proba_members``), "after" is ``predict_proba``; the test images come
from held-out source digits.
"""

import json
import pathlib
import sys
import time

import numpy as np
import torch

from sklmoo import MTSGDMultiTaskClassifier
from sklmoo._io import atomic_write_text
from sklmoo.datasets import make_multi_digits
from sklmoo.metrics import expected_calibration_error, negative_log_likelihood

# the regimes, seeds and --quick of the Multi-Digits study
from bench_multi_digits import QUICK, REGIMES, SEEDS  # noqa: E402
CONFIGS = (("mtsgd (default)", dict()), ("linear (independent ensemble)",
                                         dict(method="linear")))
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _metrics(y, proba):
    """Mean over the two tasks of accuracy, NLL, ECE and the signed confidence - accuracy gap."""
    out = {"accuracy": [], "nll": [], "ece": [], "gap": []}
    for t, p in enumerate(proba):
        hit = p.argmax(1) == y[:, t]
        out["accuracy"].append(hit.mean())
        out["nll"].append(negative_log_likelihood(y[:, t], p))
        out["ece"].append(expected_calibration_error(y[:, t], p))
        out["gap"].append(p.max(1).mean() - hit.mean())
    return {k: float(np.mean(v)) for k, v in out.items()}


def run():
    torch.set_num_threads(1)
    results = []
    for regime, kw in REGIMES.items():
        for seed in SEEDS:
            X, y = make_multi_digits(kw["n_train"], random_state=seed, return_X_y=True)
            Xt, yt = make_multi_digits(1000, subset="test", random_state=seed + 1,
                                       return_X_y=True)
            for label, params in CONFIGS:
                clf = MTSGDMultiTaskClassifier(n_particles=5, lr=3e-3, batch_size=64,
                                               max_epochs=kw["max_epochs"],
                                               input_shape=(1, 12, 12), random_state=seed,
                                               **params)
                start = time.perf_counter()
                clf.fit(X, y)
                seconds = time.perf_counter() - start
                before = [m.mean(0) for m in clf.predict_proba_members(Xt)]
                after = clf.predict_proba(Xt)
                row = dict(regime=regime, seed=seed, config=label, seconds=seconds,
                           epochs=len(clf.history), best_epoch=int(clf.history[-1, "best_epoch"]),
                           temperature=clf.temperature_.tolist(),
                           before=_metrics(yt, before), after=_metrics(yt, after),
                           warnings=len(clf.fit_warnings_))
                results.append(row)
                print(f"{regime} | seed {seed} | {label} | T {np.round(clf.temperature_, 3)} | "
                      f"NLL {row['before']['nll']:.4f} -> {row['after']['nll']:.4f} | gap "
                      f"{100 * row['before']['gap']:+.2f} -> {100 * row['after']['gap']:+.2f} "
                      f"| {seconds:.0f} s, {row['epochs']} epochs (best {row['best_epoch']})",
                      flush=True)
    return results


def write(results):
    lines = ["# Multi-Digits: recalibration of the pooled ensemble", "",
             "`python benchmarks/bench_recalibration.py`: both regimes of the Multi-Digits "
             "study, the estimator's defaults (20 % validation split, early stopping with "
             "restore-best, one temperature per task), mean over the two tasks and over seeds "
             f"{', '.join(map(str, SEEDS))} (range over seeds in brackets). 'before' = the "
             "particles' averaged probabilities of the same fit, 'after' = `predict_proba`.", "",
             "| regime | configuration | epochs run (best) | temperature | accuracy | NLL before "
             "| NLL after | ECE % before | ECE % after | conf - acc % before | conf - acc % after |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(values, scale=1, fmt=".3f"):
        v = np.asarray(values) * scale
        return f"{v.mean():{fmt}} [{v.min():{fmt}}, {v.max():{fmt}}]"

    for regime in REGIMES:
        for label, _ in CONFIGS:
            rows = [r for r in results if r["regime"] == regime and r["config"] == label]
            if not rows:
                continue
            get = lambda part, key: [r[part][key] for r in rows]  # noqa: E731
            epochs = f"{np.mean([r['epochs'] for r in rows]):.0f} " \
                     f"({np.mean([r['best_epoch'] for r in rows]):.0f})"
            temps = [t for r in rows for t in r["temperature"]]
            lines.append(
                f"| {regime} | {label} | {epochs} | {min(temps):.2f}-{max(temps):.2f} | "
                f"{cell(get('after', 'accuracy'))} | {cell(get('before', 'nll'), fmt='.4f')} | "
                f"{cell(get('after', 'nll'), fmt='.4f')} | {cell(get('before', 'ece'), 100, '.2f')}"
                f" | {cell(get('after', 'ece'), 100, '.2f')} | "
                f"{cell(get('before', 'gap'), 100, '+.2f')} | "
                f"{cell(get('after', 'gap'), 100, '+.2f')} |")
    n_better = sum(r["after"]["nll"] < r["before"]["nll"] for r in results)
    worst_gap = max(abs(r["after"]["gap"]) for r in results)
    lines += ["", f"Over all {len(results)} fits: the recalibrated NLL is lower in {n_better}; "
              f"the largest |confidence - accuracy| after recalibration is "
              f"{100 * worst_gap:.2f} points.", ""]
    atomic_write_text(ROOT / "docs" / "benchmarks" / "recalibration.md", "\n".join(lines))


def main():
    path = ROOT / "docs" / "benchmarks" / "recalibration.json"
    if "--replot" in sys.argv:
        results = json.loads(path.read_text())
    else:
        results = run()
        if not QUICK:
            atomic_write_text(path, json.dumps(results, indent=1))
    write(results)


if __name__ == "__main__":
    main()

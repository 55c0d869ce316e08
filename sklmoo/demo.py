"""``make demo``: MT-SGD and its baselines on Multi-Digits, as a table and a reliability diagram.

Run with ``python -m sklmoo.demo`` (add ``--toy`` for the three-Gaussian-mixture sampler
comparison of the MT-SGD paper's Section 4.1.1). Fits :class:`~sklmoo.MTSGDMultiTaskClassifier`
with each ``method`` on the same data and seed, prints per-task accuracy, Brier score and ECE on
held-out images made from unseen source digits, and writes ``reliability_mtsgd.png``.
"""

import argparse
import time

import numpy as np
import torch

from sklmoo.datasets import (gaussian_mixture_statistics, make_gaussian_mixture_targets,
                             make_multi_digits)
from sklmoo.metrics import brier_score, expected_calibration_error
from sklmoo.samplers import MULTI_TARGET_METHODS as METHODS
from sklmoo.samplers import sample_multi_target


def multi_digits_comparison(n_train=3000, n_test=1000, max_epochs=15, n_particles=5, lr=3e-3,
                            random_state=0, methods=METHODS):
    """Fit each method; return ``(rows, fitted)`` with one row of per-task metrics per method."""
    from sklmoo import MTSGDMultiTaskClassifier

    X, y = make_multi_digits(n_train, random_state=random_state, return_X_y=True)
    Xt, yt = make_multi_digits(n_test, subset="test", random_state=random_state + 1,
                               return_X_y=True)
    rows, fitted = [], {}
    for method in methods:
        start = time.perf_counter()
        clf = MTSGDMultiTaskClassifier(n_particles=n_particles, method=method,
                                       max_epochs=max_epochs, lr=lr, input_shape=(1, 12, 12),
                                       random_state=random_state).fit(X, y)
        elapsed = time.perf_counter() - start
        proba = clf.predict_proba(Xt)
        pred = clf.predict(Xt)
        rows.append(dict(
            method=method, seconds=elapsed,
            accuracy=[float((pred[:, t] == yt[:, t]).mean()) for t in range(2)],
            brier=brier_score(yt, proba, multioutput="raw_values").tolist(),
            ece=expected_calibration_error(yt, proba, multioutput="raw_values").tolist(),
        ))
        fitted[method] = (clf, Xt, yt)
    return rows, fitted


def toy_comparison(seeds=(0, 1, 2), n_particles=50, n_steps=1000, methods=METHODS):
    """Three Gaussian mixtures: per method, the mean over ``seeds`` of the toy statistics."""
    targets = make_gaussian_mixture_targets()
    rows = []
    for method in methods:
        stats = []
        for seed in seeds:
            init = torch.randn(n_particles, 2, generator=torch.Generator().manual_seed(seed),
                               dtype=torch.float64) * np.sqrt(5.0)
            start = time.perf_counter()
            p = sample_multi_target(targets, init, n_steps, method=method, lr=3e-2).particles
            elapsed = time.perf_counter() - start
            stats.append(dict(gaussian_mixture_statistics(p, targets),
                              ms_per_step=1e3 * elapsed / n_steps))
        rows.append(dict(method=method, **{k: float(np.mean([st[k] for st in stats]))
                                           for k in stats[0]}))
    return rows


def _print_multi_digits(rows):
    print(f"{'method':9s} {'acc TL':>7s} {'acc BR':>7s} {'Brier TL':>9s} {'Brier BR':>9s} "
          f"{'ECE TL':>7s} {'ECE BR':>7s} {'fit s':>6s}")
    for r in rows:
        print(f"{r['method']:9s} {r['accuracy'][0]:7.3f} {r['accuracy'][1]:7.3f} "
              f"{r['brier'][0]:9.3f} {r['brier'][1]:9.3f} {r['ece'][0]:7.3f} {r['ece'][1]:7.3f} "
              f"{r['seconds']:6.1f}")


def _print_toy(rows):
    print(f"{'method':10s} {'near origin':>12s} {'on a major mode':>16s} "
          f"{'joint log p':>12s} {'spread':>7s} {'ms/step':>8s}")
    for r in rows:
        print(f"{r['method']:10s} {r['near_origin']:12.0%} {r['on_major_mode']:16.0%} "
              f"{r['joint_log_density']:12.1f} {r['spread']:7.2f} {r['ms_per_step']:8.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="also run the toy sampler comparison")
    parser.add_argument("--out", default="reliability_mtsgd.png", help="reliability diagram PNG")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))

    print("Multi-Digits (two 8x8 digits on a 12x12 canvas; tasks: top-left, bottom-right digit)")
    print("3000 training / 1000 test images from disjoint source digits; 5 particles, "
          "LeNet-style trunk, 15 epochs, Adam 3e-3, seed 0")
    rows, fitted = multi_digits_comparison()
    _print_multi_digits(rows)

    import matplotlib

    matplotlib.use("Agg")
    from sklmoo.metrics import ReliabilityDiagramDisplay

    clf, Xt, yt = fitted["mtsgd"]
    disp = ReliabilityDiagramDisplay.from_estimator(clf, Xt, yt, name="MT-SGD",
                                                    task_names=["top-left", "bottom-right"])
    disp.figure_.savefig(args.out, dpi=90)
    print(f"reliability diagram written to {args.out}")

    if args.toy:
        print("\nThree Gaussian mixtures (MT-SGD paper, Sec. 4.1.1): 50 particles, 1000 Adam "
              "steps, lr 3e-2, init N(0, 5I); mean over seeds 0-2")
        _print_toy(toy_comparison())


if __name__ == "__main__":
    main()

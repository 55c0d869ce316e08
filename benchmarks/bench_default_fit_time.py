"""How long a default fit takes: every estimator at its defaults on a 1,000 x 10 table, one core.

Run: ``nice -n 10 python benchmarks/bench_default_fit_time.py`` (about 2 minutes; run it alone
on the machine). Writes ``docs/benchmarks/default_fit_time.md``.

One torch thread (``torch.set_num_threads(1)``). The tables are synthetic
(``make_classification`` with 6 informative features, binary and 3-class;
``make_regression`` with 1 and 2 outputs), standardised; each estimator is fitted with
``random_state=0`` and nothing else, after a 1-epoch warm-up fit that pays the one-off costs
(imports, loading the meta-sampler). Next to each time, in the same process: scikit-learn's
``MLPClassifier`` / ``MLPRegressor`` (64-64, ``early_stopping=True``) on the same table, so the
ratio says what the machine's speed does not.
"""

import pathlib
import platform
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.datasets import make_classification, make_regression
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import StandardScaler

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo._io import atomic_write_text

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _time(est, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - start
    return seconds, len(caught)


def main():
    torch.set_num_threads(1)
    rows = []
    Xc, y2 = make_classification(1000, 10, n_informative=6, random_state=0)
    Xm, y3 = make_classification(1000, 10, n_informative=6, n_classes=3, random_state=1)
    Xr, r1 = make_regression(1000, 10, n_informative=6, noise=10.0, random_state=0)
    Xr2, r2 = make_regression(1000, 10, n_informative=6, n_targets=2, noise=10.0,
                              random_state=1)
    cases = [
        ("MTSGDMultiTaskClassifier", "binary", MTSGDMultiTaskClassifier, Xc, y2, MLPClassifier),
        ("MTSGDMultiTaskClassifier", "3 classes", MTSGDMultiTaskClassifier, Xm, y3,
         MLPClassifier),
        ("L2ESamplerClassifier", "binary", L2ESamplerClassifier, Xc, y2, MLPClassifier),
        ("L2ESamplerClassifier", "3 classes", L2ESamplerClassifier, Xm, y3, MLPClassifier),
        ("MTSGDRegressor", "1 output", MTSGDRegressor, Xr, r1, MLPRegressor),
        ("MTSGDRegressor", "2 outputs", MTSGDRegressor, Xr2, r2, MLPRegressor),
    ]
    for name, kind, cls, X, y, baseline in cases:
        X = StandardScaler().fit_transform(X).astype(np.float32)
        cls(max_epochs=1, random_state=0).fit(X, y)                  # warm-up
        seconds, n_warnings = _time(cls(random_state=0), X, y)
        est = cls(random_state=0).fit(X, y)
        base, _ = _time(baseline(hidden_layer_sizes=(64, 64), early_stopping=True, random_state=0,
                                 max_iter=500), X, y)
        epochs = len(est.history)
        rows.append(f"| {name} | {kind} | {seconds:.1f} | {epochs} / {est.max_epochs_} | "
                    f"{n_warnings} | {base:.2f} | {seconds / base:.0f}x |")
        print(rows[-1], flush=True)
    text = "\n".join([
        "# Default fit time, 1,000 x 10", "",
        f"`python benchmarks/bench_default_fit_time.py` ({platform.processor() or 'CPU'}, "
        f"one torch thread, Python {sys.version.split()[0]}, torch {torch.__version__}). "
        "Each estimator at its defaults (`random_state=0` only) on a standardised synthetic "
        "table of 1,000 rows and 10 features; epochs run / the budget `max_epochs='auto'` "
        "chose (early stopping ends the MT-SGD fits sooner); warnings raised by the fit; "
        "scikit-learn's MLP (64-64, early stopping) on the same table in the same process.", "",
        "| estimator | target | fit (s) | epochs / budget | warnings | sklearn MLP (s) "
        "| ratio |",
        "|---|---|---|---|---|---|---|", *rows, ""])
    atomic_write_text(ROOT / "docs" / "benchmarks" / "default_fit_time.md", text)


if __name__ == "__main__":
    main()

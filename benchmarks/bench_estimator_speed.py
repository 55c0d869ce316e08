"""Speed and memory of MTSGDMultiTaskClassifier fits, as ratios measured in one process.

Run: ``python benchmarks/bench_estimator_speed.py``. Writes ``docs/benchmarks/estimator_speed.md``.

* MT-SGD epoch / linear-scalarisation epoch (same M = 5, data, batches): the price of the
  per-task scores, the kernel and the QP;
* one M = 5 batched ensemble epoch / 5 x one single-network epoch: the benefit of evaluating
  the particles in one vmapped call;
* peak resident memory of a whole fit (each in a fresh subprocess), MT-SGD vs linear.

Epoch times are the median of ``REPEATS`` interleaved runs (one thread), so machine noise hits
every configuration alike.
"""

import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPEATS, EPOCHS, N = 5, 2, 2000


def _fit_seconds(method, n_particles, X, y):
    from sklmoo import MTSGDMultiTaskClassifier

    clf = MTSGDMultiTaskClassifier(n_particles=n_particles, method=method, max_epochs=EPOCHS,
                                   input_shape=(1, 12, 12), random_state=0)
    start = time.perf_counter()
    clf.fit(X, y)
    return (time.perf_counter() - start) / EPOCHS


def _peak_rss_mb(method):
    code = (
        "import resource, torch; torch.set_num_threads(1)\n"
        "from sklmoo import MTSGDMultiTaskClassifier\n"
        "from sklmoo.datasets import make_multi_digits\n"
        f"X, y = make_multi_digits({N}, random_state=0, return_X_y=True)\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"MTSGDMultiTaskClassifier(n_particles=5, method={method!r}, max_epochs=1, "
        "input_shape=(1, 12, 12), random_state=0).fit(X, y)\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(base / 1024, peak / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [float(v) for v in out.stdout.split()]


def main():
    from sklmoo.datasets import make_multi_digits

    torch.set_num_threads(1)
    X, y = make_multi_digits(N, random_state=0, return_X_y=True)
    configs = {"mtsgd M=5": ("mtsgd", 5), "moo_svgd M=5": ("moo_svgd", 5),
               "mgda M=5": ("mgda", 5), "linear M=5": ("linear", 5), "linear M=1": ("linear", 1)}
    _fit_seconds("mtsgd", 5, X[:256], y[:256])  # warm-up
    times = {k: [] for k in configs}
    for _ in range(REPEATS):
        for key, (method, m) in configs.items():
            times[key].append(_fit_seconds(method, m, X, y))
    med = {k: float(np.median(v)) for k, v in times.items()}
    mem = {m: _peak_rss_mb(m) for m in ("mtsgd", "linear")}
    lines = [
        "# Estimator speed and memory (Multi-Digits, one CPU thread)",
        "",
        f"`python benchmarks/bench_estimator_speed.py`: {N} images, batch 64, LeNet-style trunk, "
        f"median of {REPEATS} interleaved fits of {EPOCHS} epochs, torch {torch.__version__}.",
        "",
        "| configuration | s / epoch |",
        "|---|---|",
    ] + [f"| {k} | {v:.3f} |" for k, v in med.items()] + [
        "",
        "| ratio | measured | target |",
        "|---|---|---|",
        f"| MT-SGD epoch / linear epoch (M=5) | {med['mtsgd M=5'] / med['linear M=5']:.2f} "
        "| <= 1.3 |",
        f"| MOO-SVGD epoch / linear epoch (M=5) | {med['moo_svgd M=5'] / med['linear M=5']:.2f}"
        " | |",
        f"| batched M=5 linear epoch / (5 x M=1 epoch) "
        f"| {med['linear M=5'] / (5 * med['linear M=1']):.2f} | <= 1.0 |",
        "",
        "| fit (M=5, 1 epoch) | RSS before fit (MB) | peak RSS (MB) |",
        "|---|---|---|",
    ] + [f"| {m} | {b:.0f} | {p:.0f} |" for m, (b, p) in mem.items()]
    (ROOT / "docs" / "benchmarks" / "estimator_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(json.dumps(times))


if __name__ == "__main__":
    main()

"""Public metrics against reference implementations, in one process, one thread.

Run: ``python benchmarks/bench_metrics.py``. Writes ``docs/benchmarks/metrics_speed.md``.
10^6 samples x 10 classes of float32 probabilities, integer labels; every call includes its
input validation. Best of 7 interleaved calls each; the ratio is what the table is for (the
machine is noisy; absolute times are not comparable across runs).
"""

import pathlib
import time

import numpy as np
import torch
from sklearn.metrics import brier_score_loss, log_loss
from torchmetrics.functional.classification import multiclass_calibration_error

from sklmoo.metrics import brier_score, expected_calibration_error, negative_log_likelihood

ROOT = pathlib.Path(__file__).resolve().parents[1]
N, C, REPEATS = 10**6, 10, 7


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(N, C))
    proba = np.exp(logits)
    proba = (proba / proba.sum(1, keepdims=True)).astype(np.float32)
    y = rng.integers(0, C, N)
    labels = np.arange(C)
    pt, yt = torch.from_numpy(proba), torch.from_numpy(y)
    pairs = {
        "ECE (10 bins)": (lambda: expected_calibration_error(y, proba),
                          "torchmetrics multiclass_calibration_error",
                          lambda: multiclass_calibration_error(pt, yt, num_classes=C, n_bins=10)),
        "Brier": (lambda: brier_score(y, proba), "sklearn brier_score_loss(scale_by_half=False)",
                  lambda: brier_score_loss(y, proba, scale_by_half=False, labels=labels)),
        "NLL": (lambda: negative_log_likelihood(y, proba), "sklearn log_loss",
                lambda: log_loss(y, proba, labels=labels)),
    }
    lines = ["# Metric speed against reference implementations", "",
             f"`python benchmarks/bench_metrics.py`: {N:,} samples x {C} classes, float32 "
             f"probabilities, one thread, best of {REPEATS} interleaved calls, validation "
             "included. Target: ratio <= 1.", "",
             "| metric | sklmoo ms | reference | reference ms | sklmoo / reference |",
             "|---|---|---|---|---|"]
    for name, (ours, ref_name, ref) in pairs.items():
        a = float(ours()), float(ref())
        times = {"ours": [], "ref": []}
        for _ in range(REPEATS):
            for key, fn in (("ours", ours), ("ref", ref)):
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
        t_ours, t_ref = min(times["ours"]), min(times["ref"])
        lines.append(f"| {name} | {1e3 * t_ours:.1f} | {ref_name} | {1e3 * t_ref:.1f} | "
                     f"{t_ours / t_ref:.2f} |")
        print(lines[-1], f"(values {a[0]:.6f} vs {a[1]:.6f})", flush=True)
    (ROOT / "docs" / "benchmarks" / "metrics_speed.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

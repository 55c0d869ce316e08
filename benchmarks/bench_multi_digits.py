"""Multi-Digits: MT-SGD against MOO-SVGD, MGDA and linear scalarisation (M = 5, 3 seeds).

Run: ``python benchmarks/bench_multi_digits.py`` (about 5 minutes on 2 cores). Writes
``docs/benchmarks/multi_digits.md`` and ``docs/_static/multi_digits.png``.

The CPU-sized analogue of the MT-SGD paper's Figure 5 / Table 1: the same estimator, data and
seeds for every method; per task (top-left, bottom-right digit) accuracy, Brier score and ECE
(10 bins) of the particle ensemble on test images built from held-out source digits.
"""

import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from sklmoo.demo import METHODS, multi_digits_comparison  # noqa: E402

SEEDS = (0, 1, 2)
ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    results = {m: {"accuracy": [], "brier": [], "ece": [], "seconds": []} for m in METHODS}
    for seed in SEEDS:
        rows, _ = multi_digits_comparison(random_state=seed)
        for r in rows:
            for key in results[r["method"]]:
                results[r["method"]][key].append(r[key])
            print(seed, r, flush=True)
    lines = [
        "# Multi-Digits, 5 particles, 3 seeds",
        "",
        "`python benchmarks/bench_multi_digits.py`: 3000 training / 1000 test images (disjoint "
        "source digits), LeNet-style trunk, 15 epochs, Adam (lr 3e-3), batch 64, seeds 0-2; "
        f"torch {torch.__version__}. Mean ± std over seeds; TL = top-left task, BR = "
        "bottom-right task. Higher accuracy, lower Brier and ECE are better.",
        "",
        "| method | acc TL | acc BR | Brier TL | Brier BR | ECE TL (%) | ECE BR (%) | fit s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in METHODS:
        r = {k: np.asarray(v) for k, v in results[m].items()}
        cell = []
        for key, scale, fmt in (("accuracy", 1, ".3f"), ("brier", 1, ".3f"), ("ece", 100, ".2f")):
            for t in range(2):
                v = r[key][:, t] * scale
                cell.append(f"{v.mean():{fmt}} ± {v.std():{fmt}}")
        lines.append(f"| {m} | " + " | ".join(cell) + f" | {r['seconds'].mean():.1f} |")
    (ROOT / "docs" / "benchmarks" / "multi_digits.md").write_text("\n".join(lines) + "\n")

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    width = 0.2
    for ax, key, label in zip(axes, ("accuracy", "brier", "ece"),
                              ("accuracy", "Brier score", "ECE")):
        for i, m in enumerate(METHODS):
            v = np.asarray(results[m][key])
            ax.bar(np.arange(2) + (i - 1.5) * width, v.mean(0), width, yerr=v.std(0), label=m)
        ax.set_xticks([0, 1], ["top-left", "bottom-right"])
        ax.set_title(label)
    axes[0].set_ylim(0.8, 1.0)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "_static" / "multi_digits.png", dpi=90)


if __name__ == "__main__":
    sys.exit(main())

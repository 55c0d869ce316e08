"""Peak memory of prediction against the number of rows, for every estimator.

Each cell runs in a fresh process that fits the estimator on a small table (500 rows, 10
features), builds n rows and measures the peak resident memory (``ru_maxrss``) of one
prediction call above the memory in use just before it, minus the size of what the call
returns. Streaming over batches of rows keeps this flat in n; holding every draw's
probabilities for every row (the code before the fix) grows linearly.

Two allocator settings are measured: glibc's default, whose dynamic mmap threshold keeps freed
batch buffers in the process (a plateau of a few hundred MB that does not grow with n), and
``MALLOC_MMAP_THRESHOLD_=65536``, which returns them at once and so shows the algorithm's own
footprint. ``--baseline DIR`` also runs the same cells (up to 10^5 rows) on another checkout of
sklmoo (e.g. ``git worktree add /tmp/old b2d9544``) in the same run, for the ratio.

Run: ``python benchmarks/bench_prediction_memory.py [--baseline DIR]`` (about 10 minutes on 2
cores); writes ``docs/benchmarks/prediction_memory.md`` and ``.json``.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "prediction_memory"
ROWS = (10_000, 100_000, 1_000_000)
BASELINE_ROWS = (10_000, 100_000)

CHILD = r"""
import gc, json, resource, sys, warnings
import numpy as np
import torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
import sklmoo
name, method, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(0)
X = rng.normal(size=(500, 10)).astype(np.float32)
y_cls = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 1)
if name == "L2ESamplerClassifier":
    import inspect
    draws = "n_draws" if "n_draws" in inspect.signature(sklmoo.L2ESamplerClassifier).parameters else "n_samples"
    # 10 draws: one per epoch end after the 10 burn-in epochs (the page said 20 until code
    # e675441's warning showed that 10 were collected; the fit is the same)
    # the chains' predictions (a closed linear gate would predict with 20 linear draws)
    est = sklmoo.L2ESamplerClassifier(max_epochs=20, random_state=0, linear_gate=False,
                                      **{draws: 10}).fit(X, y_cls)
elif name == "MTSGDMultiTaskClassifier":
    est = sklmoo.MTSGDMultiTaskClassifier(max_epochs=5, random_state=0, linear_gate=False).fit(
        X, np.column_stack([y_cls, (X[:, 3] > 0).astype(int)]))
else:
    est = sklmoo.MTSGDRegressor(max_epochs=5, random_state=0).fit(
        X, np.column_stack([X[:, 0] + 0.1 * rng.normal(size=500), X[:, 1] ** 2]))
Xn = np.random.default_rng(1).normal(size=(n, 10)).astype(np.float32)
est.predict(Xn[:10])
del X
gc.collect()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if method == "predict_std":
    out = est.predict(Xn, return_std=True)
else:
    out = getattr(est, method)(Xn)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
parts = out if isinstance(out, (list, tuple)) else (list(out.values()) if isinstance(out, dict) else [out])
size = sum(np.asarray(a).nbytes for a in parts)
print(json.dumps({"extra_mb": max(0, peak - before) / 1024 - size / 2 ** 20, "result_mb": size / 2 ** 20}))
"""

CELLS = {"L2ESamplerClassifier": ("predict_proba", "predict_uncertainty"),
         "MTSGDMultiTaskClassifier": ("predict_proba", "predict_uncertainty"),
         "MTSGDRegressor": ("predict_std", "predict_uncertainty")}


def _cell(code_dir, name, method, n, fixed_threshold):
    env = dict(os.environ, PYTHONPATH=str(code_dir))
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if fixed_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    out = subprocess.run([sys.executable, "-c", CHILD, name, method, str(n)], env=env,
                         check=True, capture_output=True, text=True, cwd="/").stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    from sklmoo._io import atomic_write_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=pathlib.Path, help="another sklmoo checkout")
    parser.add_argument("--quick", action="store_true",
                        help="only the fixed-threshold allocator and the first method of each "
                             "estimator (about a third of the time)")
    args = parser.parse_args()
    allocators = (True,) if args.quick else (False, True)
    runs = [("this code", ROOT, ROWS)]
    if args.baseline:
        runs.append((f"baseline ({args.baseline.name})", args.baseline.resolve(), BASELINE_ROWS))
    rows = []
    for label, code_dir, sizes in runs:
        for name, methods in CELLS.items():
            for method in methods[:1] if args.quick else methods:
                for fixed in allocators:
                    for n in sizes:
                        r = _cell(code_dir, name, method, n, fixed)
                        rows.append({"code": label, "estimator": name, "method": method,
                                     "allocator": "fixed mmap threshold" if fixed else "default",
                                     "rows": n, **r})
                        print(rows[-1], flush=True)
    lines = ["# Prediction memory against the number of rows", "",
             "Peak resident memory of one prediction call on n rows of 10 features, above the "
             "memory in use before the call and above the size of the result, in MB (fresh "
             "process per cell, one torch thread; estimators at their defaults but for a short "
             "fit, on 500 rows: L2E 20 epochs, 4 chains x 10 draws; MT-SGD 5 epochs, 5 "
             "particles). *default*: glibc's allocator as it is; "
             "*fixed*: `MALLOC_MMAP_THRESHOLD_=65536`, which returns freed batch buffers to the "
             "system at once, so the column shows the algorithm's own footprint.", "",
             f"Command: `python benchmarks/bench_prediction_memory.py"
             f"{' --quick' if args.quick else ''}"
             f"{' --baseline ' + str(args.baseline) if args.baseline else ''}`.", ""]
    for label, _, sizes in runs:
        lines += [f"## {label}", "",
                  "| estimator | method | allocator | "
                  + " | ".join(f"n = {n:,}" for n in sizes) + " |",
                  "|---|---|---|" + "---|" * len(sizes)]
        for name, methods in CELLS.items():
            for method in methods:
                for alloc in ("default", "fixed mmap threshold"):
                    if not any(r["allocator"] == alloc and r["method"] == method for r in rows):
                        continue
                    cells = [f"{r['extra_mb']:.0f}" for r in rows
                             if (r["code"], r["estimator"], r["method"], r["allocator"])
                             == (label, name, method, alloc)]
                    lines.append(f"| {name} | {method} | {alloc} | " + " | ".join(cells) + " |")
        lines.append("")
    atomic_write_text(OUT.with_suffix(".md"), "\n".join(lines))
    atomic_write_text(OUT.with_suffix(".json"), json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

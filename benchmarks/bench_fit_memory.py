"""Peak memory of a fit and a prediction at 1,000,000 rows x 50 features, for every estimator,
against the float32 size of X.

Each cell runs in a fresh process: it opens X (float32, written once to a ``.npy`` file) either
loaded into memory or as a read-only memory map (``np.load(..., mmap_mode='r')``), fits the
estimator once on 200 rows (the imports a first fit triggers are no data's memory), then
resets the kernel's high-water mark (``/proc/self/clear_refs``) and measures the peak resident
memory (the larger of VmHWM and the resident size sampled every 2 ms) of ``fit`` (one epoch at the estimator's default batch size: the memory does
not depend on the number of epochs) and, after another reset, of ``predict`` on all rows, each
above the memory resident just before the call. Computing ``y`` from X reads every page of
a memory map first, so for both kinds of X the figures are the memory beyond X.
``--baseline DIR`` also runs the in-memory cells on another checkout (e.g. ``git worktree add
/tmp/old a7e680f``), for the before / after ratio.

Run: ``python benchmarks/bench_fit_memory.py [--baseline DIR] [--rows N]`` (about 10 minutes
on 2 cores at the default 1,000,000 rows); writes ``docs/benchmarks/fit_memory.md`` and
``.json``.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "fit_memory"
ESTIMATORS = ("MTSGDMultiTaskClassifier", "MTSGDRegressor", "L2ESamplerClassifier")
FEATURES = 50

CHILD = r"""
import json, os, sys, time, warnings
import numpy as np
import torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
import sklmoo
name, path, kind = sys.argv[1], sys.argv[2], sys.argv[3]
X = np.load(path, mmap_mode="r")
if kind == "in memory":
    X = np.array(X)
score = np.asarray(X[:, 0] + 0.5 * X[:, 1], dtype=np.float64)
y = score if name == "MTSGDRegressor" else (score > 0).astype(int)

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20

import threading
sampled = [0.0]

def sample():
    # the kernel updates the high-water mark lazily (on unmapping), so a sampler thread
    # also watches the resident size; the larger of the two is reported
    while True:
        sampled[0] = max(sampled[0], rss())
        time.sleep(0.002)

threading.Thread(target=sample, daemon=True).start()

def peak():
    with open("/proc/self/status") as f:
        hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
    return max(hwm, sampled[0])

def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    sampled[0] = rss()

make = getattr(sklmoo, name)
make(max_epochs=1, random_state=0).fit(np.array(X[:200]), y[:200]).predict(np.array(X[:10]))
est = make(max_epochs=1, random_state=0)
reset(); before = rss()
est.fit(X, y)
fit_mb = peak() - before
reset(); before = rss()
est.predict(X)
predict_mb = peak() - before
model_mb = sum(p.numel() * p.element_size() for p in est.module_.parameters()) / 2 ** 20
model_mb += sum(b.numel() * b.element_size() for b in est.module_.buffers()) / 2 ** 20
print(json.dumps(dict(fit_mb=fit_mb, predict_mb=predict_mb, model_mb=model_mb,
                      sklmoo=os.path.dirname(sklmoo.__file__))))
"""


def run_cell(name, path, kind, pythonpath=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    # run from X's directory: with ``-c`` the working directory comes first on sys.path, and
    # from a checkout it would shadow the baseline's sklmoo
    out = subprocess.run([sys.executable, "-c", CHILD, name, path, kind], env=env,
                         cwd=os.path.dirname(path), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", help="another sklmoo checkout, run on the in-memory cells")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    import numpy as np

    from sklmoo._io import atomic_write_text

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "X.npy")
        rng = np.random.default_rng(0)
        X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                      shape=(args.rows, FEATURES))
        for start in range(0, args.rows, 100_000):
            stop = min(start + 100_000, args.rows)
            X[start:stop] = rng.normal(size=(stop - start, FEATURES))
        X.flush()
        del X
        x_mb = args.rows * FEATURES * 4 / 2 ** 20
        cells = [(name, kind, None) for name in ESTIMATORS
                 for kind in ("in memory", "memory map (read-only)")]
        if args.baseline:
            cells += [(name, "in memory", args.baseline) for name in ESTIMATORS]
        for name, kind, other in cells:
            row = run_cell(name, path, kind, other)
            row.update(estimator=name, X=kind, code="baseline" if other else "this version",
                       rows=args.rows, x_mb=x_mb)
            print(row, flush=True)
            results.append(row)
    lines = [f"# Peak memory of fit and predict, {args.rows:,} rows x {FEATURES} features", "",
             f"float32 X: {x_mb:.0f} MB. Reproduce: `python benchmarks/bench_fit_memory.py"
             f"{' --baseline DIR' if args.baseline else ''}`.", "",
             "| estimator | X | code | fit: peak extra MB | / float32 X | predict: peak extra MB "
             "| model MB |", "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['estimator']} | {r['X']} | {r['code']} | {r['fit_mb']:.0f} | "
                     f"{r['fit_mb'] / r['x_mb']:.2f} | {r['predict_mb']:.0f} | "
                     f"{r['model_mb']:.2f} |")
    atomic_write_text(OUT.with_suffix(".md"), "\n".join(lines) + "\n")
    atomic_write_text(OUT.with_suffix(".json"), json.dumps(results, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

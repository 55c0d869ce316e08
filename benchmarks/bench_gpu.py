"""GPU readiness: every estimator at its defaults on ``device='cuda'`` against the CPU, and what
each optimiser step asks of the host.

Run: ``python benchmarks/bench_gpu.py`` (``--rows=20000,200000`` the training sizes,
``--audit-only`` skips the timing). Writes ``docs/benchmarks/gpu.md`` and ``gpu.json``.

Two parts:

* **Step audit** (any machine): a default fit of each estimator on 2,000 rows under
  :class:`sklmoo.diagnostics._step_audit.StepAudit`, which counts, inside every optimiser step,
  the calls that copy a value to the host (``.item()``, ``float(t)``, ``bool(t)``, ``.tolist()``,
  ``.numpy()``, ``.cpu()``: each one a synchronisation on a GPU) and the tensor factories
  called without a device (a CPU tensor, and a copy, when the module is on a GPU), each with
  the line that makes it (sklmoo, skorch).
* **CUDA against CPU** (only when ``torch.cuda.is_available()``): per estimator and size, a
  default fit (``random_state=0``) on each device, fit time and test metrics. Classifiers on
  Multi-Digits (``make_multi_digits``, canvas 12: the two-task classifier on both digits, L2E on
  the top-left one), the regressor on the inverse-dynamics stand-in
  (``make_inverse_dynamics``, 7 torques); 4,000 test rows. The devices draw different random
  numbers (dropout, sampler noise, batch order is the same), so predictions are compared as
  distributions: the check is test accuracy within ``ACCURACY_TOLERANCE`` and test NLL within
  ``NLL_TOLERANCE`` of the CPU fit's, with the mean absolute difference of the predicted
  probabilities (regression: of the means, in the targets' standard deviations) reported.
  Without CUDA, ``tests/test_bench_gpu.py`` runs this comparison's code with the CPU on both
  sides (``compare(name, n, device='cpu')``: the fits must agree exactly) and checks the
  page it writes.
"""

import json
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MD = os.path.join(ROOT, "docs", "benchmarks", "gpu.md")
JSON = os.path.join(ROOT, "docs", "benchmarks", "gpu.json")
ACCURACY_TOLERANCE = 0.02
NLL_TOLERANCE = 0.05
N_TEST = 4000
AUDIT_ROWS = 2000


def _data(name, n, subset, seed):
    from sklmoo.datasets import make_inverse_dynamics, make_multi_digits
    if name == "MTSGDRegressor":
        X, Y = make_inverse_dynamics(n, random_state=seed, return_X_y=True)
        return np.asarray(X, dtype=np.float32), np.asarray(Y, dtype=np.float32)
    X, Y = make_multi_digits(n, subset=subset, random_state=seed, return_X_y=True)
    X = np.asarray(X, dtype=np.float32)
    return (X, Y) if name == "MTSGDMultiTaskClassifier" else (X, Y[:, 0])


def _estimator(name, **params):
    import sklmoo
    return getattr(sklmoo, name)(random_state=0, **params)


NAMES = ("MTSGDMultiTaskClassifier", "L2ESamplerClassifier", "MTSGDRegressor")


def audit(name):
    from sklmoo.diagnostics._step_audit import StepAudit
    X, y = _data(name, AUDIT_ROWS, "train", 0)
    est = _estimator(name)
    with StepAudit(est) as record:
        est.fit(X, y)
    return dict(estimator=name, steps=record.steps,
                syncs_per_step=record.per_step(record.syncs),
                factories_per_step=record.per_step(record.factories),
                syncs={k: v / record.steps for k, v in record.syncs.most_common()},
                factories={k: v / record.steps for k, v in record.factories.most_common()})


def _metrics(name, est, X, y):
    from sklmoo.metrics import gaussian_nll
    if name == "MTSGDRegressor":
        mean, std = est.predict(X, return_std=True)
        scale = y.std(axis=0)
        return dict(nll=float(gaussian_nll(y / scale, mean / scale, std / scale)),
                    accuracy=None), np.asarray(mean) / scale
    proba = est.predict_proba(X)
    probas = proba if isinstance(proba, list) else [proba]
    ys = y.T if y.ndim == 2 else [y]
    nll = np.mean([-np.mean(np.log(np.clip(p[np.arange(len(t)), t], 1e-12, None)))
                   for p, t in zip(probas, ys)])
    acc = np.mean([np.mean(p.argmax(1) == t) for p, t in zip(probas, ys)])
    return dict(nll=float(nll), accuracy=float(acc)), np.concatenate(probas, axis=1)


def compare(name, n, device="cuda", **params):
    """One estimator's default fit on ``n`` rows on the CPU and on ``device`` (its results
    under the ``cuda_`` keys whatever the device: ``device='cpu'`` checks this script on a
    machine without CUDA); ``params`` go to both estimators."""
    X, y = _data(name, n, "train", 0)
    X_te, y_te = _data(name, N_TEST, "test", 1)
    out = dict(estimator=name, rows=n)
    preds = {}
    for key, dev in (("cpu", "cpu"), ("cuda", device)):
        est = _estimator(name, device=dev, **params)
        start = time.perf_counter()
        est.fit(X, y)
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        out[f"{key}_seconds"] = time.perf_counter() - start
        metrics, preds[key] = _metrics(name, est, X_te, y_te)
        out.update({f"{key}_{k}": v for k, v in metrics.items()})
    out["mean_abs_diff"] = float(np.mean(np.abs(preds["cpu"] - preds["cuda"])))
    out["speedup"] = out["cpu_seconds"] / out["cuda_seconds"]
    out["agree"] = bool(abs(out["cpu_nll"] - out["cuda_nll"]) <= NLL_TOLERANCE and (
        out["cpu_accuracy"] is None
        or abs(out["cpu_accuracy"] - out["cuda_accuracy"]) <= ACCURACY_TOLERANCE))
    return out


def write(audits, comparisons, rows, md=MD, json_path=JSON):
    from sklmoo._io import atomic_write_text
    lines = ["<!-- written by benchmarks/bench_gpu.py; reproduce: python benchmarks/bench_gpu.py"
             " -->", "", "# GPU readiness", "",
             f"Command: `python benchmarks/bench_gpu.py`; torch {torch.__version__}, one thread.",
             "", "## Per optimiser step, default fit on "
             f"{AUDIT_ROWS:,} rows", "",
             "| estimator | steps | host syncs / step | device-less tensors / step |",
             "|---|---|---|---|"]
    for a in audits:
        lines.append(f"| {a['estimator']} | {a['steps']} | {a['syncs_per_step']:.2f} | "
                     f"{a['factories_per_step']:.2f} |")
    lines += ["", "Where the host synchronisations are (calls per step, the line that makes them):", ""]
    for a in audits:
        lines.append(f"* **{a['estimator']}**: " + "; ".join(
            f"`{k}` {v:.2f}" for k, v in a["syncs"].items()))
    lines += ["", "## CUDA against CPU", ""]
    if not comparisons:
        lines.append("Not run: no CUDA device on the machine that wrote this page "
                     f"(`torch.cuda.is_available()` False). Sizes it would run: "
                     f"{', '.join(f'{n:,}' for n in rows)} training rows.")
    else:
        lines += [f"Agreement: test NLL within {NLL_TOLERANCE} and accuracy within "
                  f"{ACCURACY_TOLERANCE} of the CPU fit's.", "",
                  "| estimator | rows | CPU s | CUDA s | speed-up | NLL CPU / CUDA | "
                  "accuracy CPU / CUDA | mean abs diff | agree |", "|---|---|---|---|---|---|---|---|---|"]
        for c in comparisons:
            acc = ("—" if c["cpu_accuracy"] is None
                   else f"{c['cpu_accuracy']:.3f} / {c['cuda_accuracy']:.3f}")
            lines.append(f"| {c['estimator']} | {c['rows']:,} | {c['cpu_seconds']:.1f} | "
                         f"{c['cuda_seconds']:.1f} | {c['speedup']:.1f}x | {c['cpu_nll']:.4f} / "
                         f"{c['cuda_nll']:.4f} | {acc} | {c['mean_abs_diff']:.4f} | "
                         f"{'yes' if c['agree'] else '**no**'} |")
    atomic_write_text(md, "\n".join(lines) + "\n")
    atomic_write_text(json_path, json.dumps(dict(audits=audits, comparisons=comparisons),
                                            indent=1))


def main(argv):
    torch.set_num_threads(1)
    rows = [20000, 200000]
    for arg in argv:
        if arg.startswith("--rows="):
            rows = [int(v) for v in arg.split("=", 1)[1].split(",")]
    audits = []
    for name in NAMES:
        audits.append(audit(name))
        print(f"{name}: {audits[-1]['steps']} steps, "
              f"{audits[-1]['syncs_per_step']:.2f} host syncs / step, "
              f"{audits[-1]['factories_per_step']:.2f} device-less tensors / step", flush=True)
    comparisons = []
    if "--audit-only" not in argv and torch.cuda.is_available():
        for n in rows:
            for name in NAMES:
                comparisons.append(compare(name, n))
                print(comparisons[-1], flush=True)
    elif "--audit-only" not in argv:
        print("CUDA is not available: the CPU / CUDA comparison is skipped", flush=True)
    write(audits, comparisons, rows)
    failed = [c for c in comparisons if not c["agree"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

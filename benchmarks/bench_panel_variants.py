"""Which defaults? MTSGDRegressor (and a few MTSGDMultiTaskClassifier) variants on the real-data
panel's tables.

Run: ``nice -n 10 python benchmarks/bench_panel_variants.py`` (about 2 minutes per variant on
one core; ``--variants=default,refit`` for a subset, merged into the saved results;
``--replot`` rewrites the page). Needs the ``bench`` extra. Writes
``docs/benchmarks/panel_variants.md`` and ``docs/benchmarks/panel_variants.json``.

The tables, splits, scaling and metric of ``bench_panel.py`` (test Gaussian NLL in units of the
training target's standard deviation, mean over outputs and seeds 0-2). Variants:

* ``default``: ``MTSGDRegressor(random_state=seed)``;
* ``refit``: the default fit, then a second fit on every training row (``train_split=None``)
  for the epochs the first one kept (its ``best_epoch``), with the first fit's variance scales:
  does refitting on the rows held out for validation beat keeping the split?
* ``nocal``: ``calibration=None`` (no variance scale);
* ``no_mean_function``: ``mean_function=None``, the networks alone without the Bayesian
  linear mean function (the default before it was added);
* ``heteroscedastic``: ``heteroscedastic=True`` (per-input noise scales);
* ``prior_by_validation``: ``prior_precision`` chosen on the validation split, the way the
  estimator could do it itself: one default fit per value in ``PRIOR_CANDIDATES``, keeping the
  one whose best validation loss (the restore-best epoch's) is lowest;
* ``two_sided_scale``: the variance scale applied as fitted in both directions (the estimator
  applies a narrowing only beyond two standard errors of its logarithm; this variant sets
  ``sklmoo.estimators._regressor.NARROWING_MARGIN`` to 0 for its fits);
* ``clf_default`` / ``clf_nocal`` / ``clf_temperature``: ``MTSGDMultiTaskClassifier`` at its
  defaults / with ``calibration=None`` / with ``calibration='temperature'`` (the temperature on
  the particles' averaged probabilities instead of their log-linear pool, the default before)
  on the classification tables (test NLL of ``predict_proba``, and a second table of its
  15-bin top-label ECE, the panel's metric);
* ``clf_fixed_budget``: the classifier's 'auto' budget without the extension (~1000 steps;
  the default now may run on to three times that, at most 500 epochs, while early stopping
  sees the validation loss improve).
* ``clf_patience_fifth``: the classifier's early-stopping patience as before, a fifth of the
  unextended 'auto' budget (at least 5 epochs) instead of an eighth.
* ``clf_prior05``: the classifier's temperature prior as before (standard deviation 0.5 on
  log T instead of ``sklmoo.estimators._multitask.TEMPERATURE_PRIOR_SCALE``, set for its fits).
* ``clf_l2e_prior_by_validation``: ``L2ESamplerClassifier`` with its ``prior_precision``
  chosen on its validation split: one default fit per value in ``L2E_PRIOR_CANDIDATES``,
  keeping the one whose calibrated prediction has the lowest NLL on the validation rows. The
  same run records each candidate on its own (rows ``clf_l2e_prior=<value>``; 1.0 is the
  default);
* ``previous_default``: ``lr=1e-3`` with the early-stopping patience a fifth of the epoch
  budget (``callbacks__early_stopping__patience='auto'``), the defaults before ``lr=1e-2``
  and a patience of 30 epochs; ``lr1e-3`` and ``patience_auto`` change one of the two;
* ``fixed_budget``: the 'auto' budget without the extension (~1000 steps; the default may run
  on to three times that, at most 500 epochs, while early stopping sees the validation loss
  improve);
* ``particles10``, ``parameter_kernel``, ``mgda``, ``lr3e-3``, ``prior0``, ``prior10``,
  ``hidden32``: one parameter changed (10 particles; ``kernel='parameter'``;
  ``method='mgda'``; ``lr=3e-3``; ``prior_precision=0`` and ``10``; one hidden layer of 32
  units).
"""

import json
import sys
import time
import warnings

import numpy as np
import torch
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import bench_panel as bp
from sklmoo import MTSGDRegressor
from sklmoo.metrics import negative_log_likelihood
from sklmoo._io import atomic_write_text

VARIANTS = {
    "default": {}, "refit": {}, "particles10": dict(n_particles=10),
    "parameter_kernel": dict(kernel="parameter"), "mgda": dict(method="mgda"),
    "lr1e-3": dict(lr=1e-3), "lr3e-3": dict(lr=3e-3),
    "patience_auto": dict(callbacks__early_stopping__patience="auto"),
    "previous_default": dict(lr=1e-3, callbacks__early_stopping__patience="auto"),
    "fixed_budget": {},
    "prior0": dict(prior_precision=0.0),
    "prior10": dict(prior_precision=10.0),
    "hidden32": dict(module__hidden_units=(32,)), "nocal": dict(calibration=None),
    "no_mean_function": dict(mean_function=None), "heteroscedastic": dict(heteroscedastic=True),
    "two_sided_scale": {}, "prior_by_validation": {}, "clf_l2e_prior_by_validation": {},
    "clf_default": {}, "clf_nocal": dict(calibration=None), "clf_fixed_budget": {},
    "clf_temperature": dict(calibration="temperature"), "clf_prior05": {},
    "clf_patience_fifth": {},
}
OUT_JSON = bp.ROOT / "docs" / "benchmarks" / "panel_variants.json"
OUT_MD = bp.ROOT / "docs" / "benchmarks" / "panel_variants.md"
TABLES = [t[0] for t in bp.TABLES if t[1] == "regression"]
PRIOR_CANDIDATES = (1.0, 3.0, 10.0, 30.0)
L2E_PRIOR_CANDIDATES = (0.3, 1.0, 3.0)
CLF_TABLES = [t[0] for t in bp.TABLES if t[1] == "classification"]
CLF_MTSGD_ROWS = ("clf_default", "clf_nocal", "clf_temperature", "clf_fixed_budget",
                  "clf_prior05", "clf_patience_fifth")


def _classifier_metrics(variant, seed, table, X, y):
    from sklmoo import MTSGDMultiTaskClassifier
    X_tr, X_te, y_tr, y_te = bp.split_table(table, X, y, seed)
    # the networks' variants (the page's runs predate the linear gate)
    model = MTSGDMultiTaskClassifier(random_state=seed, linear_gate=False, **VARIANTS[variant])
    if variant == "clf_fixed_budget":
        model._auto_extension = 1        # the 'auto' budget of the previous version
    if variant == "clf_patience_fifth":
        model._patience_share = 5        # the patience of the previous version
    import sklmoo.estimators._multitask as multitask
    scale = multitask.TEMPERATURE_PRIOR_SCALE
    if variant == "clf_prior05":
        multitask.TEMPERATURE_PRIOR_SCALE = 0.5
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipe = Pipeline([("scale", StandardScaler()), ("model", model)]).fit(X_tr, y_tr)
    finally:
        multitask.TEMPERATURE_PRIOR_SCALE = scale
    # the panel's metrics (NLL, 15-bin top-label ECE)
    m = bp._classification_metrics(y_te, pipe.predict_proba(X_te), pipe[-1].classes_)
    return m["nll"], m["ece"], _oracle_log_temperature(pipe, X_te, y_te)


def _oracle_log_temperature(pipe, X_te, y_te):
    """log of the temperature of the particles' log-linear pool that minimises the *test* NLL
    (an oracle, not an estimator: how far from 1 the pool's best temperature lies; the search
    is bounded to |log T| <= 4), or None where the pool classifies every test row right (then
    sharper is always better and the optimum is the bound or the NLL's clipping)."""
    from scipy.optimize import minimize_scalar

    from sklmoo.metrics._recalibration import apply_temperature, pool_log_linear
    est = pipe[-1]
    pooled = pool_log_linear(est.predict_proba_members(pipe[:-1].transform(X_te)))
    known = np.isin(y_te, est.classes_)
    codes = np.searchsorted(est.classes_, np.asarray(y_te)[known])
    if known.all() and (pooled.argmax(axis=1) == codes).all():
        return None
    res = minimize_scalar(
        lambda lt: negative_log_likelihood(codes, apply_temperature(pooled[known], np.exp(lt)),
                                           labels=np.arange(pooled.shape[1])),
        bounds=(-4.0, 4.0), method="bounded", options={"xatol": 1e-4})
    return float(res.x)


def _l2e_prior_selection(table, X, y):
    """Per candidate prior precision and for the validation-chosen one: test NLLs per seed,
    and the seconds the candidate's fits took."""
    from skorch.dataset import Dataset

    from sklmoo import L2ESamplerClassifier
    nll = {c: [] for c in L2E_PRIOR_CANDIDATES}
    nll["chosen"], seconds = [], {c: 0.0 for c in L2E_PRIOR_CANDIDATES}
    for seed in bp.SEEDS:
        X_tr, X_te, y_tr, y_te = bp.split_table(table, X, y, seed)
        valid_nll, test_nll = {}, {}
        for c in L2E_PRIOR_CANDIDATES:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pipe = Pipeline([("scale", StandardScaler()),
                                 ("model", L2ESamplerClassifier(random_state=seed,
                                                                prior_precision=c,
                                                                linear_gate=False))])
                pipe.fit(X_tr, y_tr)
            seconds[c] += time.perf_counter() - start
            est, Xs = pipe[-1], pipe[0].transform(X_tr).astype(np.float32)
            codes = np.searchsorted(est.classes_, y_tr)
            _, valid = est.train_split(Dataset(Xs, codes), codes, seed=est.seed_)
            rows = np.asarray(valid.indices)
            valid_nll[c] = negative_log_likelihood(np.asarray(y_tr)[rows],
                                                   est.predict_proba(Xs[rows]),
                                                   labels=est.classes_)
            test_nll[c] = float(negative_log_likelihood(y_te, pipe.predict_proba(X_te),
                                                        labels=est.classes_))
            nll[c].append(test_nll[c])
        nll["chosen"].append(test_nll[min(valid_nll, key=valid_nll.get)])
    return nll, seconds


def _fit(variant, seed, X, y):
    params = VARIANTS[variant]
    if variant == "prior_by_validation":
        fits = [Pipeline([("scale", StandardScaler()),
                          ("model", MTSGDRegressor(random_state=seed, prior_precision=c))]).fit(X, y)
                for c in PRIOR_CANDIDATES]
        return min(fits, key=lambda p: min(h["valid_loss"] for h in p[-1].history))
    if variant == "two_sided_scale":
        import sklmoo.estimators._regressor as reg
        margin, reg.NARROWING_MARGIN = reg.NARROWING_MARGIN, 0.0
        try:
            return Pipeline([("scale", StandardScaler()),
                             ("model", MTSGDRegressor(random_state=seed))]).fit(X, y)
        finally:
            reg.NARROWING_MARGIN = margin
    model = MTSGDRegressor(random_state=seed, **params)
    if variant == "fixed_budget":
        model._auto_extension = 1        # the 'auto' budget without the extension
    pipe = Pipeline([("scale", StandardScaler()), ("model", model)]).fit(X, y)
    if variant != "refit":
        return pipe
    first = pipe[-1]
    epochs = (int(first.history[-1, "best_epoch"]) if "best_epoch" in first.history[-1]
              else len(first.history))
    second = MTSGDRegressor(random_state=seed, train_split=None, max_epochs=max(1, epochs))
    pipe = Pipeline([("scale", StandardScaler()), ("model", second)]).fit(X, y)
    second.variance_scale_ = first.variance_scale_.copy()
    second._store_recalibration(second.variance_scale_)
    return pipe


def run(variants):
    results = {}
    for variant in variants:
        start, per_table, ece, oracle = time.perf_counter(), {}, {}, {}
        for table in (CLF_TABLES if variant.startswith("clf_") else TABLES):
            X, _, y = bp.load_table(table)
            if variant == "clf_l2e_prior_by_validation":
                nll, secs = _l2e_prior_selection(table, X, y)
                per_table[table] = nll["chosen"]
                for c in L2E_PRIOR_CANDIDATES:
                    row = results.setdefault(f"clf_l2e_prior={c:g}", dict(nll={}, seconds=0.0))
                    row["nll"][table] = nll[c]
                    row["seconds"] += secs[c]
                continue
            if variant.startswith("clf_"):
                nll_ece = [_classifier_metrics(variant, s, table, X, y) for s in bp.SEEDS]
                per_table[table] = [v[0] for v in nll_ece]
                ece[table] = [v[1] for v in nll_ece]
                oracle[table] = [v[2] for v in nll_ece]
                continue
            nlls = []
            for seed in bp.SEEDS:
                X_tr, X_te, y_tr, y_te = bp.split_table(table, X, y, seed)
                T = y_tr.shape[1]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pipe = _fit(variant, seed, X_tr, y_tr[:, 0] if T == 1 else y_tr)
                mean, std = pipe.predict(X_te, return_std=True)
                pred = dict(mean=np.asarray(mean).reshape(len(X_te), T),
                            std=np.asarray(std).reshape(len(X_te), T))
                nlls.append(bp._regression_metrics(y_te, pred, y_tr.std(0))["nll"])
            per_table[table] = nlls
        results[variant] = dict(nll=per_table, seconds=time.perf_counter() - start)
        if ece:
            results[variant]["ece"] = ece
            results[variant]["oracle_log_temperature"] = oracle
        print(variant, {t: round(float(np.mean(v)), 3) for t, v in per_table.items()},
              f"{results[variant]['seconds']:.0f} s", flush=True)
    return results


def _mean_abs(values):
    values = [abs(v) for v in values if v is not None]
    return f"{np.mean(values):.2f}" if values else "—"


def write(results):
    reg_names = [v for v in VARIANTS if not v.startswith("clf_") and v in results]
    # the tables every variant shown was run on (the panel's later tables are not in the
    # earlier runs)
    reg_tables = [t for t in TABLES if all(t in results[v]["nll"] for v in reg_names)]
    lines = ["# MTSGDRegressor variants on the panel's regression tables", "",
             "`python benchmarks/bench_panel_variants.py`: test Gaussian NLL (standardised "
             "units), mean over seeds 0-2, per table; lower is better. The tables, splits and "
             "metric of the real-data panel; the variants are described in the script's "
             "docstring. Times: all fits of the variant (24, or 30 for the classifier), one "
             "torch thread, on 2 cores shared with one other benchmark; compare within a "
             "column only roughly.", "",
             "| variant | " + " | ".join(reg_tables) + " | mean | tables better than default "
             "| time, all fits (s) |",
             "|---|" + "---|" * (len(reg_tables) + 3)]
    def table(tables, names, base_name):
        base = results.get(base_name)
        for variant in names:
            if variant not in results:
                continue
            means = [float(np.mean(results[variant]["nll"][t])) for t in tables]
            better = ("" if base is None or variant == base_name else
                      str(sum(m < float(np.mean(base["nll"][t])) for m, t in zip(means, tables))))
            lines.append(f"| {variant} | " + " | ".join(f"{m:.3f}" for m in means)
                         + f" | {np.mean(means):.3f} | {better} "
                         + f"| {results[variant]['seconds']:.0f} |")

    table(reg_tables, reg_names, "default")
    if any(v in results for v in CLF_MTSGD_ROWS):
        lines += ["", "MTSGDMultiTaskClassifier, test NLL on the classification tables:", "",
                  "| variant | " + " | ".join(CLF_TABLES) + " | mean | tables better than "
                  "clf_default | time, all fits (s) |", "|---|" + "---|" * (len(CLF_TABLES) + 3)]
        table(CLF_TABLES, list(CLF_MTSGD_ROWS), "clf_default")
        with_ece = [v for v in CLF_MTSGD_ROWS if "ece" in results.get(v, {})]
        if with_ece:
            lines += ["", "MTSGDMultiTaskClassifier, test ECE % (15 bins, as the panel; mean "
                      "over seeds per table):", "",
                      "| variant | " + " | ".join(CLF_TABLES) + " | median over tables |",
                      "|---|" + "---|" * (len(CLF_TABLES) + 1)]
            for v in with_ece:
                per = [100 * float(np.mean(results[v]["ece"][t])) for t in CLF_TABLES]
                lines.append(f"| {v} | " + " | ".join(f"{e:.1f}" for e in per)
                             + f" | {np.median(per):.2f} |")
        base = results.get("clf_default", {}).get("oracle_log_temperature")
        if base:
            logs = np.array([v for t in CLF_TABLES for v in base[t] if v is not None])
            n_fits = sum(len(base[t]) for t in CLF_TABLES)
            lines += ["", "How far from 1 the best temperature lies: the temperature of "
                      "`clf_default`'s log-linear pool that minimises each fit's *test* NLL "
                      "(an oracle, not the fitted one), |log T| per table (mean over the "
                      "seeds whose test rows the pool does not all classify right: there "
                      "sharper is always better and no temperature is best):", "",
                      "| " + " | ".join(CLF_TABLES) + " | median over fits |",
                      "|" + "---|" * (len(CLF_TABLES) + 1),
                      "| " + " | ".join(_mean_abs(base[t]) for t in CLF_TABLES)
                      + f" | {np.median(np.abs(logs)):.2f} |", "",
                      f"{len(logs)} of {n_fits} fits have a best temperature; in half of them "
                      f"it lies within a factor of {np.exp(np.median(np.abs(logs))):.2f} of "
                      "1."]
    l2e_rows = [f"clf_l2e_prior={c:g}" for c in L2E_PRIOR_CANDIDATES]
    if "clf_l2e_prior_by_validation" in results:
        lines += ["", "L2ESamplerClassifier, test NLL on the classification tables "
                  "(`clf_l2e_prior=1` is the default):", "",
                  "| variant | " + " | ".join(CLF_TABLES) + " | mean | tables better than "
                  "clf_l2e_prior=1 | time, all fits (s) |",
                  "|---|" + "---|" * (len(CLF_TABLES) + 3)]
        table(CLF_TABLES, l2e_rows + ["clf_l2e_prior_by_validation"], "clf_l2e_prior=1")
    atomic_write_text(OUT_MD, "\n".join(lines) + "\n")


def main():
    torch.set_num_threads(1)
    saved = json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else {}
    if "--replot" not in sys.argv:
        arg = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--variants=")]
        variants = arg[0].split(",") if arg else list(VARIANTS)
        saved.update(run(variants))
        atomic_write_text(OUT_JSON, json.dumps(saved, indent=1))
    write(saved)


if __name__ == "__main__":
    main()

"""Multi-Digits, both regimes of the MT-SGD study: the pooled ensemble before and after the
default recalibration (one temperature per task on the particles' log-linear pool, fitted on
the 20 % validation split), with the temperature on their averaged probabilities instead
(``calibration='temperature'``), and with the default's temperature prior of earlier versions
(scale 0.5 on log T instead of ``TEMPERATURE_PRIOR_SCALE``, 0.25, set for those fits).

Run: ``nice -n 10 python benchmarks/bench_recalibration.py`` (about 3 minutes on one core of
the machine of November 2026, far longer on older ones; ``--quick`` for a smoke run). Writes
``docs/benchmarks/recalibration.md`` and ``docs/benchmarks/recalibration.json``.

The data, trunk, optimiser and regimes of ``bench_multi_digits.py``: 5 particles, LeNet-style
trunk, Adam 3e-3, batch 64, seeds 0-2; regime (a) 3000 training images and 15 epochs, regime
(b) 300 images and 100 epochs (overfitting networks). Each estimator runs with the defaults of
this version -- the validation split (20 % of the training images, stratified, not trained
on), early stopping with restore-best, temperature calibration of the log-linear pool -- and
the regime's ``max_epochs`` as the budget. "before" is the particles' averaged probabilities of
that same fit (the mean of ``predict_proba_members``), "after" is ``predict_proba``; the test
images come from held-out source digits.

A second table bounds what any temperature could do, with temperatures fitted on the *test*
labels themselves (oracles, not estimators): the one that minimises the test NLL of the pooled
probabilities (pool, then calibrate, as the estimator does), the one that makes their mean
confidence equal the test accuracy, one test-NLL-optimal temperature on every particle's
probabilities before averaging (calibrate, then pool), and the test-NLL-optimal temperature of
the log-linear pool (what the default map could do at best).
"""

import json
import pathlib
import sys
import time

import numpy as np
import torch

from scipy.optimize import brentq, minimize_scalar

import sklmoo.estimators._multitask as multitask
from sklmoo import MTSGDMultiTaskClassifier
from sklmoo._io import atomic_write_text
from sklmoo.datasets import make_multi_digits
from sklmoo.metrics import expected_calibration_error, negative_log_likelihood
from sklmoo.metrics._recalibration import apply_temperature, pool_log_linear

# the regimes, seeds and --quick of the Multi-Digits study
from bench_multi_digits import QUICK, REGIMES, SEEDS  # noqa: E402
#: the default with the temperature prior of earlier versions (scale 0.5 instead of 0.25)
PREVIOUS_PRIOR = "mtsgd, temperature prior 0.5 (previous)"
CONFIGS = (("mtsgd (default)", dict()),
           ("mtsgd, calibration='temperature'", dict(calibration="temperature")),
           ("linear (independent ensemble)", dict(method="linear")),
           (PREVIOUS_PRIOR, dict()))
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _metrics(y, proba):
    """Mean over the two tasks of accuracy, NLL, ECE and the signed confidence - accuracy gap."""
    out = {"accuracy": [], "nll": [], "ece": [], "gap": []}
    for t, p in enumerate(proba):
        hit = p.argmax(1) == y[:, t]
        out["accuracy"].append(hit.mean())
        out["nll"].append(negative_log_likelihood(y[:, t], p))
        out["ece"].append(expected_calibration_error(y[:, t], p))
        out["gap"].append(p.max(1).mean() - hit.mean())
    return {k: float(np.mean(v)) for k, v in out.items()}


def _tempered(proba, temperature):
    """``proba`` (n, C) or per member (M, n, C) at temperature T (sklmoo's own map, member by
    member for the calibrate-then-pool oracle)."""
    if proba.ndim == 2:
        return apply_temperature(proba, temperature)
    return np.stack([apply_temperature(p, temperature) for p in proba])


def _best_temperature(objective):
    """exp of the log-temperature in [-3, 3] minimising ``objective(T)``: an oracle on the test
    labels, so no prior and a tighter tolerance than ``fit_temperature``'s search."""
    res = minimize_scalar(lambda lt: objective(np.exp(lt)), bounds=(-3.0, 3.0),
                          method="bounded", options={"xatol": 1e-5})
    return float(np.exp(res.x))


def _oracles(members, y):
    """Per oracle temperature (fitted on the test labels ``y``): mean over the tasks of its
    temperature, test NLL and signed confidence - accuracy gap."""
    out = {}
    for t, mem in enumerate(members):
        pooled, yt = mem.mean(0), y[:, t]
        nll = lambda p: negative_log_likelihood(yt, p, labels=np.arange(p.shape[1]))  # noqa: E731
        gap = lambda p: p.max(1).mean() - (p.argmax(1) == yt).mean()             # noqa: E731
        gap_at = lambda lt: gap(_tempered(pooled, np.exp(lt)))                  # noqa: E731
        temps = {"nll": _best_temperature(lambda T: nll(_tempered(pooled, T))),
                 "gap0": (float(np.exp(brentq(gap_at, -3.0, 3.0, xtol=1e-6)))
                          if gap_at(-3.0) > 0 > gap_at(3.0) else np.nan),
                 "members": _best_temperature(lambda T: nll(_tempered(mem, T).mean(0))),
                 "log_linear": _best_temperature(
                     lambda T: nll(_tempered(pool_log_linear(mem), T)))}
        for name, T in temps.items():
            if np.isnan(T):         # the gap keeps one sign over the whole range: no gap-0 T
                values = (("temperature", T), ("nll", T), ("gap", T))
            else:
                p = (_tempered(mem, T).mean(0) if name == "members" else
                     _tempered(pool_log_linear(mem), T) if name == "log_linear" else
                     _tempered(pooled, T))
                values = (("temperature", T), ("nll", nll(p)), ("gap", gap(p)))
            for key, value in values:
                out.setdefault(name, {}).setdefault(key, []).append(float(value))
    return {name: {k: float(np.mean(v)) for k, v in d.items()} for name, d in out.items()}


def run():
    torch.set_num_threads(1)
    results = []
    for regime, kw in REGIMES.items():
        for seed in SEEDS:
            X, y = make_multi_digits(kw["n_train"], random_state=seed, return_X_y=True)
            Xt, yt = make_multi_digits(1000, subset="test", random_state=seed + 1,
                                       return_X_y=True)
            for label, params in CONFIGS:
                clf = MTSGDMultiTaskClassifier(n_particles=5, lr=3e-3, batch_size=64,
                                               max_epochs=kw["max_epochs"],
                                               input_shape=(1, 12, 12), random_state=seed,
                                               **params)
                scale = multitask.TEMPERATURE_PRIOR_SCALE
                if label == PREVIOUS_PRIOR:
                    multitask.TEMPERATURE_PRIOR_SCALE = 0.5
                try:
                    start = time.perf_counter()
                    clf.fit(X, y)
                    seconds = time.perf_counter() - start
                finally:
                    multitask.TEMPERATURE_PRIOR_SCALE = scale
                members = clf.predict_proba_members(Xt)
                before = [m.mean(0) for m in members]
                after = clf.predict_proba(Xt)
                row = dict(regime=regime, seed=seed, config=label, seconds=seconds,
                           epochs=len(clf.history), best_epoch=int(clf.history[-1, "best_epoch"]),
                           temperature=clf.temperature_.tolist(),
                           before=_metrics(yt, before), after=_metrics(yt, after),
                           oracle=_oracles(members, yt),
                           warnings=len(clf.fit_warnings_))
                results.append(row)
                print(f"{regime} | seed {seed} | {label} | T {np.round(clf.temperature_, 3)} | "
                      f"NLL {row['before']['nll']:.4f} -> {row['after']['nll']:.4f} | gap "
                      f"{100 * row['before']['gap']:+.2f} -> {100 * row['after']['gap']:+.2f} "
                      f"| {seconds:.0f} s, {row['epochs']} epochs (best {row['best_epoch']})",
                      flush=True)
    return results


def write(results):
    lines = ["# Multi-Digits: recalibration of the pooled ensemble", "",
             "`python benchmarks/bench_recalibration.py`: both regimes of the Multi-Digits "
             "study, the estimator's defaults (20 % validation split, early stopping with "
             "restore-best, one temperature per task on the particles' log-linear pool, "
             "`calibration='logit_temperature'`, a prior of scale 0.25 on log T; the second "
             "configuration tempers their averaged probabilities instead, the last one fits "
             "the default's temperature with the prior of earlier versions, scale 0.5), mean "
             "over the two tasks and over seeds "
             f"{', '.join(map(str, SEEDS))} (range over seeds in brackets). 'before' = the "
             "particles' averaged probabilities of the same fit (uncalibrated), 'after' = "
             "`predict_proba`.", "",
             "| regime | configuration | epochs run (best) | temperature | accuracy | NLL before "
             "| NLL after | ECE % before | ECE % after | conf - acc % before | conf - acc % after |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(values, scale=1, fmt=".3f"):
        v = np.asarray(values, dtype=float) * scale
        if np.isnan(v).all():
            return "n/a"
        return f"{np.nanmean(v):{fmt}} [{np.nanmin(v):{fmt}}, {np.nanmax(v):{fmt}}]"

    for regime in REGIMES:
        for label, _ in CONFIGS:
            rows = [r for r in results if r["regime"] == regime and r["config"] == label]
            if not rows:
                continue
            get = lambda part, key: [r[part][key] for r in rows]  # noqa: E731
            epochs = f"{np.mean([r['epochs'] for r in rows]):.0f} " \
                     f"({np.mean([r['best_epoch'] for r in rows]):.0f})"
            temps = [t for r in rows for t in r["temperature"]]
            lines.append(
                f"| {regime} | {label} | {epochs} | {min(temps):.2f}-{max(temps):.2f} | "
                f"{cell(get('after', 'accuracy'))} | {cell(get('before', 'nll'), fmt='.4f')} | "
                f"{cell(get('after', 'nll'), fmt='.4f')} | {cell(get('before', 'ece'), 100, '.2f')}"
                f" | {cell(get('after', 'ece'), 100, '.2f')} | "
                f"{cell(get('before', 'gap'), 100, '+.2f')} | "
                f"{cell(get('after', 'gap'), 100, '+.2f')} |")
    n_better = sum(r["after"]["nll"] < r["before"]["nll"] for r in results)
    worst_gap = max(abs(r["after"]["gap"]) for r in results)
    lines += ["", f"Over all {len(results)} fits: the recalibrated NLL is lower in {n_better}; "
              f"the largest |confidence - accuracy| after recalibration is "
              f"{100 * worst_gap:.2f} points.", ""]
    lines += ["What a temperature could do at best: temperatures fitted on the test labels "
              "themselves (oracles; mean over the two tasks and the seeds, range over seeds in "
              "brackets).", "",
              "| regime | configuration | NLL before | NLL after | NLL-optimal T: NLL "
              "| NLL-optimal T: conf - acc % | gap-0 T: NLL | calibrate, then pool: NLL "
              "| calibrate, then pool: conf - acc % | log-linear pool, NLL-optimal T: NLL "
              "| log-linear pool, NLL-optimal T: conf - acc % |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for regime in REGIMES:
        for label, _ in CONFIGS:
            rows = [r for r in results if r["regime"] == regime and r["config"] == label
                    and "oracle" in r]
            if not rows:
                continue
            orc = lambda name, key: [r["oracle"][name][key] for r in rows]  # noqa: E731
            lines.append(
                f"| {regime} | {label} | {cell([r['before']['nll'] for r in rows], fmt='.4f')} | "
                f"{cell([r['after']['nll'] for r in rows], fmt='.4f')} | "
                f"{cell(orc('nll', 'nll'), fmt='.4f')} | {cell(orc('nll', 'gap'), 100, '+.2f')} | "
                f"{cell(orc('gap0', 'nll'), fmt='.4f')} | {cell(orc('members', 'nll'), fmt='.4f')}"
                f" | {cell(orc('members', 'gap'), 100, '+.2f')} | "
                f"{cell(orc('log_linear', 'nll'), fmt='.4f')} | "
                f"{cell(orc('log_linear', 'gap'), 100, '+.2f')} |")
    suffix = "_quick" if QUICK else ""
    atomic_write_text(ROOT / "docs" / "benchmarks" / f"recalibration{suffix}.md",
                      "\n".join(lines))


def main():
    path = ROOT / "docs" / "benchmarks" / "recalibration.json"
    if "--replot" in sys.argv:
        results = json.loads(path.read_text())
    else:
        results = run()
        if not QUICK:
            atomic_write_text(path, json.dumps(results, indent=1))
    write(results)


if __name__ == "__main__":
    main()

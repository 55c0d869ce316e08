"""``make demo``: MT-SGD against an independent ensemble on Multi-Digits, with both kernels.

Run with ``python -m sklmoo.demo`` (add ``--toy`` for the three-Gaussian-mixture sampler
comparison of the MT-SGD paper's Section 4.1.1). Fits :class:`~sklmoo.MTSGDMultiTaskClassifier`
as an independent ensemble and by MT-SGD with the parameter- and the function-space kernel on
the same data and seed, prints accuracy, NLL, Brier score, ECE, the signed confidence gap and the
out-of-distribution AUROC of the epistemic uncertainty on held-out images made from unseen
source digits, then one line comparing each MT-SGD configuration with the independent ensemble
(the default, the parameter kernel, first; the time ratio is the one measured in the run), and
writes ``reliability_mtsgd.png``, the reliability diagram of the default configuration.
Sizes (:data:`DEMO_SIZES`: 1000 training images, 8 epochs) keep it under a minute on 2 quiet
cores; it prints a line per epoch of every fit (``--quiet`` for none) and, at the end, the
wall-clock and CPU time it measured.
"""

import argparse
import pathlib
import time

import numpy as np
import torch

from sklmoo._io import atomic_write
from sklmoo.datasets import (gaussian_mixture_statistics, make_gaussian_mixture_targets,
                             make_multi_digits)
from sklmoo.metrics import brier_score, expected_calibration_error
from sklmoo.samplers import MULTI_TARGET_METHODS as METHODS
from sklmoo.samplers import sample_multi_target


#: the configurations the Multi-Digits study compares: (label, estimator parameters)
STUDY_CONFIGS = (
    ("linear", dict(method="linear")),
    ("mgda", dict(method="mgda")),
    ("mtsgd / parameter", dict(method="mtsgd", kernel="parameter")),
    ("mtsgd / parameter, smoothed", dict(method="mtsgd", kernel="parameter",
                                         smooth_drive=True)),
    ("moo_svgd / parameter", dict(method="moo_svgd", kernel="parameter")),
    ("mtsgd / function", dict(method="mtsgd", kernel="function")),
    ("moo_svgd / function", dict(method="moo_svgd", kernel="function")),
    ("mtsgd / function x10", dict(method="mtsgd", kernel="function", repulsion=1e-2,
                                  head_repulsion=1e-1)),
    ("mtsgd / function, smoothed", dict(method="mtsgd", kernel="function", smooth_drive=True)),
)


def _rotated(X, size=12):
    """The canvases rotated by 90 degrees: the same pixels, no digit in its usual pose."""
    return np.rot90(X.reshape(-1, size, size), axes=(1, 2)).reshape(len(X), -1).copy()


def ensemble_report(clf, Xt, yt):
    """Per-task and summary metrics of a fitted multi-task particle ensemble on ``(Xt, yt)``:
    accuracy, Brier, ECE, NLL and the signed confidence - accuracy gap of ``predict_proba``
    (recalibrated by default), the gap of the particles' plain average, the particles' own ECE,
    their diversity (pairwise KL) and how well epistemic uncertainty separates the test images
    from the same images rotated by 90 degrees (AUROC)."""
    from sklearn.metrics import roc_auc_score

    from sklmoo.metrics import negative_log_likelihood, pairwise_kl_diversity

    members = clf.predict_proba_members(Xt)
    members = members if isinstance(members, list) else [members]
    raw = [m.mean(axis=0) for m in members]            # the particles' average, uncalibrated
    proba = clf.predict_proba(Xt)                      # what users get: recalibrated
    proba = proba if isinstance(proba, list) else [proba]
    yt = yt.reshape(len(yt), -1)
    pred = np.column_stack([p.argmax(1) for p in proba])
    labels = [np.arange(p.shape[1]) for p in proba]
    acc = [float((pred[:, t] == yt[:, t]).mean()) for t in range(yt.shape[1])]
    gap = [float(p.max(1).mean()) - a for p, a in zip(proba, acc)]
    # the average's own argmax: the default log-linear pool can pick another label
    raw_gap = [float(p.max(1).mean() - (p.argmax(1) == yt[:, t]).mean())
               for t, p in enumerate(raw)]
    member_ece = float(np.mean([expected_calibration_error(yt[:, t], m, labels=labels[t])
                                for t, mem in enumerate(members) for m in mem]))
    epi = clf.predict_uncertainty(Xt)["epistemic"].reshape(len(Xt), -1).mean(1)
    epi_rot = clf.predict_uncertainty(_rotated(Xt))["epistemic"].reshape(len(Xt), -1).mean(1)
    auroc = float(roc_auc_score(np.r_[np.zeros(len(epi)), np.ones(len(epi_rot))],
                                np.r_[epi, epi_rot]))
    return dict(
        accuracy=acc, signed_gap=gap, raw_signed_gap=raw_gap,
        brier=brier_score(yt, proba, labels=labels, multioutput="raw_values").tolist(),
        ece=expected_calibration_error(yt, proba, labels=labels,
                                       multioutput="raw_values").tolist(),
        nll=negative_log_likelihood(yt, proba, labels=labels, multioutput="raw_values").tolist(),
        member_ece=member_ece,
        diversity=float(pairwise_kl_diversity(members)) if len(members[0]) > 1 else 0.0,
        rotated_auroc=auroc)


def _epoch_printer(label, index, n_configs):
    """A skorch callback printing one flushed line per epoch: which configuration, which
    epoch of how many, the training loss and the seconds so far."""
    from skorch.callbacks import Callback

    class EpochLine(Callback):
        def on_train_begin(self, net, **kwargs):
            self.start_ = time.perf_counter()

        def on_epoch_end(self, net, **kwargs):
            print(f"  [{index}/{n_configs}] {label}: epoch {len(net.history)}/{net.max_epochs_}, "
                  f"train loss {net.history[-1, 'train_loss']:.3f}, "
                  f"{time.perf_counter() - self.start_:.0f} s", flush=True)

    return EpochLine()


def multi_digits_comparison(n_train=3000, n_test=1000, max_epochs=15, n_particles=5, lr=3e-3,
                            random_state=0, configs=None, progress=False):
    """Fit each configuration on the same data and seed; return ``(rows, fitted)`` with one row
    of :func:`ensemble_report` metrics (plus fit seconds per epoch) per configuration.

    ``configs``: sequence of ``(label, estimator parameters)``; default one per method of
    :data:`~sklmoo.samplers.MULTI_TARGET_METHODS` at the estimator's defaults. ``progress``:
    print a line per epoch of every fit (flushed, so that a pipe or a log shows it at once)."""
    import warnings

    from sklmoo import MTSGDMultiTaskClassifier

    configs = configs or [(m, dict(method=m)) for m in METHODS]
    X, y = make_multi_digits(n_train, random_state=random_state, return_X_y=True)
    Xt, yt = make_multi_digits(n_test, subset="test", random_state=random_state + 1,
                               return_X_y=True)
    rows, fitted = [], {}
    for i, (label, params) in enumerate(configs, 1):
        callbacks = [_epoch_printer(label, i, len(configs))] if progress else None
        clf = MTSGDMultiTaskClassifier(n_particles=n_particles, max_epochs=max_epochs, lr=lr,
                                       input_shape=(1, 12, 12), random_state=random_state,
                                       callbacks=callbacks, **params)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)      # repulsion warnings: in history
            clf.fit(X, y)
        elapsed = time.perf_counter() - start
        if progress:
            print(f"  [{i}/{len(configs)}] {label}: fitted in {elapsed:.0f} s; scoring on "
                  f"{len(Xt)} test and {len(Xt)} rotated images", flush=True)
        # the median epoch: a burst of load from other processes, or the first epoch's one-off
        # costs, moves it far less than the mean
        rows.append(dict(method=label, seconds=elapsed,
                         sec_per_epoch=elapsed / len(clf.history),
                         median_epoch_seconds=float(np.median(clf.history[:, "dur"])),
                         **ensemble_report(clf, Xt, yt)))
        fitted[label] = (clf, Xt, yt)
    return rows, fitted


def toy_comparison(seeds=(0, 1, 2), n_particles=50, n_steps=1000, methods=METHODS):
    """Three Gaussian mixtures: per method, the mean over ``seeds`` of the toy statistics."""
    targets = make_gaussian_mixture_targets()
    rows = []
    for method in methods:
        stats = []
        for seed in seeds:
            init = torch.randn(n_particles, 2, generator=torch.Generator().manual_seed(seed),
                               dtype=torch.float64) * np.sqrt(5.0)
            start = time.perf_counter()
            p = sample_multi_target(targets, init, n_steps, method=method, lr=3e-2).particles
            elapsed = time.perf_counter() - start
            stats.append(dict(gaussian_mixture_statistics(p, targets),
                              ms_per_step=1e3 * elapsed / n_steps))
        rows.append(dict(method=method, **{k: float(np.mean([st[k] for st in stats]))
                                           for k in stats[0]}))
    return rows


DEMO_CONFIGS = (("linear (independent ensemble)", dict(method="linear")),
                ("mtsgd / parameter kernel (default)", dict(method="mtsgd", kernel="parameter")),
                ("mtsgd / function kernel", dict(method="mtsgd", kernel="function")))
#: the configuration the demo summarises and draws: the estimator's defaults
DEFAULT_CONFIG = DEMO_CONFIGS[1][0]


def comparison_lines(rows):
    """One line per configuration after the first (the independent ensemble), the default's
    first: its NLL and signed gap minus the ensemble's, and its median epoch's seconds over the
    ensemble's, as measured in this run."""
    base = rows[0]
    ordered = sorted(rows[1:], key=lambda r: r["method"] != DEFAULT_CONFIG)
    lines = []
    for r in ordered:
        d_nll = np.mean(r["nll"]) - np.mean(base["nll"])
        d_gap = 100 * (np.mean(r["signed_gap"]) - np.mean(base["signed_gap"]))
        ratio = r["median_epoch_seconds"] / base["median_epoch_seconds"]
        lines.append(f"{r['method']} minus the independent ensemble: NLL {d_nll:+.3f}, signed "
                     f"gap {d_gap:+.2f} points; time per epoch x{ratio:.1f} (median epoch, "
                     "this run).")
    return lines


def _print_multi_digits(rows):
    width = max(len("configuration"), *(len(r["method"]) for r in rows))
    print(f"{'configuration':{width}s} {'acc':>6s} {'NLL':>6s} {'Brier':>6s} {'ECE %':>6s} "
          f"{'conf-acc %':>10s} {'raw conf-acc %':>14s} {'member ECE %':>12s} "
          f"{'AUROC rot.':>10s} {'fit s':>6s} {'s/epoch':>7s}")
    for r in rows:
        print(f"{r['method']:{width}s} {np.mean(r['accuracy']):6.3f} {np.mean(r['nll']):6.3f} "
              f"{np.mean(r['brier']):6.3f} {100 * np.mean(r['ece']):6.2f} "
              f"{100 * np.mean(r['signed_gap']):+10.2f} "
              f"{100 * np.mean(r['raw_signed_gap']):+14.2f} {100 * r['member_ece']:12.2f} "
              f"{r['rotated_auroc']:10.3f} {r['seconds']:6.1f} {r['median_epoch_seconds']:7.2f}")
    print("(conf-acc: of predict_proba, recalibrated on the fifth of the training images held "
          "out by default; raw: of the particles' plain average; s/epoch: the median epoch)")
    print()
    for line in comparison_lines(rows):
        print(line)
    gaps = [np.mean(r["raw_signed_gap"]) for r in rows]
    if max(gaps) < 0:
        print("Before recalibration every ensemble here is underconfident (negative raw gap): "
              "averaging the particles lowers confidence below accuracy, so more diversity "
              "cannot help ECE (member ECE: the particles' own, on average); the temperature "
              "fitted on held-out images (on the particles' log-linear pool, by default) "
              "corrects most of it.")
    elif min(gaps) > 0:
        print("Before recalibration every ensemble here is overconfident (positive raw gap): "
              "the regime where diversity between particles can improve calibration.")
    print("Where MT-SGD helps and where a plain ensemble is as good: "
          "docs/benchmarks/multi_digits.md.")


def _print_toy(rows):
    print(f"{'method':10s} {'near origin':>12s} {'on a major mode':>16s} "
          f"{'joint log p':>12s} {'spread':>7s} {'ms/step':>8s}")
    for r in rows:
        print(f"{r['method']:10s} {r['near_origin']:12.0%} {r['on_major_mode']:16.0%} "
              f"{r['joint_log_density']:12.1f} {r['spread']:7.2f} {r['ms_per_step']:8.2f}")


#: sizes of ``make demo``: small enough for well under a minute on 2 quiet cores, large enough
#: for a first look at the three configurations (the full study:
#: ``benchmarks/bench_multi_digits.py``)
DEMO_SIZES = dict(n_train=1000, n_test=500, max_epochs=8, n_particles=5, lr=1e-2)


def main(argv=None):
    """Run the demo; return the Multi-Digits rows and the reliability display it drew."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="also run the toy sampler comparison")
    parser.add_argument("--out", default="reliability_mtsgd.png", help="reliability diagram PNG")
    parser.add_argument("--quiet", action="store_true", help="no line per epoch")
    args = parser.parse_args(argv)
    # the figure is written at the end, after minutes of fitting: check where it goes first
    out = pathlib.Path(args.out)
    if out.suffix.lower() != ".png":
        parser.error(f"--out must name a .png file, got {args.out!r}")
    if out.is_dir():
        parser.error(f"--out {args.out!r} is a directory: name a .png file")
    if not out.parent.is_dir():
        parser.error(f"--out {args.out!r}: the directory {str(out.parent)!r} does not exist")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    wall, cpu = time.perf_counter(), time.process_time()

    sz = DEMO_SIZES
    print("Multi-Digits (two 8x8 digits on a 12x12 canvas; tasks: top-left, bottom-right digit)")
    print(f"{sz['n_train']} training / {sz['n_test']} test images from disjoint source digits; "
          f"{sz['n_particles']} particles, LeNet-style trunk, {sz['max_epochs']} epochs, Adam "
          f"{sz['lr']:g}, seed 0; mean over the two tasks; AUROC rot.: epistemic uncertainty, "
          "test canvases against the same canvases rotated by 90 degrees")
    print(f"Fitting {len(DEMO_CONFIGS)} configurations (their time per epoch, measured, is "
          f"compared at the end); torch uses {torch.get_num_threads()} thread(s).", flush=True)
    rows, fitted = multi_digits_comparison(configs=DEMO_CONFIGS, progress=not args.quiet, **sz)
    print()
    _print_multi_digits(rows)

    import matplotlib

    matplotlib.use("Agg")
    from sklmoo.metrics import ReliabilityDiagramDisplay

    clf, Xt, yt = fitted[DEFAULT_CONFIG]
    disp = ReliabilityDiagramDisplay.from_estimator(clf, Xt, yt, name=DEFAULT_CONFIG,
                                                    task_names=["top-left", "bottom-right"])
    # above the panels' own titles (the tasks'); bbox_inches='tight' keeps it in the file
    disp.figure_.suptitle(f"Held-out Multi-Digits, {DEFAULT_CONFIG}", y=1.04)
    atomic_write(out, lambda f: disp.figure_.savefig(f, format="png", dpi=90,
                                                     bbox_inches="tight"))
    print(f"reliability diagram of {DEFAULT_CONFIG} written to {args.out}")

    if args.toy:
        print("\nThree Gaussian mixtures (MT-SGD paper, Sec. 4.1.1): 50 particles, 1000 Adam "
              "steps, lr 3e-2, init N(0, 5I); mean over seeds 0-2", flush=True)
        _print_toy(toy_comparison())
    print(f"\nThis run: {time.perf_counter() - wall:.0f} s wall clock, "
          f"{time.process_time() - cpu:.0f} s CPU in this process (imports excluded). "
          "Small sizes for a quick look: the full study (3000 and 300 images, 3 seeds) is "
          "benchmarks/bench_multi_digits.py.")
    return rows, disp


if __name__ == "__main__":
    main()

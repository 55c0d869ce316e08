"""What ``fit`` prints with ``verbose``: at 1 a narrow row per epoch (epoch / budget, the
losses, the time), at 2 the sampler's internals too; colour only on a terminal."""

import sys

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.preprocessing import StandardScaler
from skorch.callbacks import Callback

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor
from sklmoo.estimators._progress import DIAGNOSTIC_KEYS, ProgressLog

ANSI = "\x1b["


def _iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _two_tasks():
    X, y = _iris()
    return X, np.column_stack([y, (X[:, 0] > 0).astype(int)])     # two tasks: internals are lists


def _diabetes():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y / 100


ESTIMATORS = {
    "l2e": (lambda **kw: L2ESamplerClassifier(max_epochs=4, n_draws=2, n_chains=2, **kw), _iris),
    "mtsgd_classifier": (lambda **kw: MTSGDMultiTaskClassifier(
        n_particles=2, max_epochs=4, kernel="function", **kw), _two_tasks),
    "mtsgd_regressor": (lambda **kw: MTSGDRegressor(n_particles=2, max_epochs=4, **kw),
                        _diabetes),
}


def _fit_output(name, capsys, **params):
    make, data = ESTIMATORS[name]
    est = make(random_state=0, **params)
    X, y = data()
    capsys.readouterr()
    est.fit(X, y)
    return est, capsys.readouterr().out


@pytest.mark.parametrize("name", ESTIMATORS)
def test_verbose_1_prints_a_narrow_row_per_epoch_with_budget_losses_and_time(name, capsys):
    est, out = _fit_output(name, capsys, verbose=1)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, out
    assert ANSI not in out                      # captured output is not a terminal
    header = lines[0].split()
    assert header[:3] == ["epoch", "train_loss", "valid_loss"]
    assert header[-2:] == ["dur", "elapsed"]
    assert not DIAGNOSTIC_KEYS & set(header)
    rows = [line.split() for line in lines[2:] if line.split()[0].count("/") == 1]
    assert [r[0] for r in rows] == [f"{e}/4" for e in range(1, 5)]
    for row in rows:
        float(row[1]), float(row[2])            # the losses
        assert row[-1].endswith("s") and row[-2].endswith("s")
    elapsed = [float(r[-1][:-1]) for r in rows]
    assert elapsed == sorted(elapsed)           # seconds since fit began
    # the internals stay in history for whoever wants them
    if name.startswith("mtsgd"):
        assert "trunk_repulsion" in est.history[-1]
    else:
        assert "n_draws" in header


def test_verbose_2_adds_the_internals_rounded(capsys):
    est, out = _fit_output("mtsgd_classifier", capsys, verbose=2)
    header = out.splitlines()[0].split()
    assert {"task_weights_mean", "trunk_repulsion", "head_drive_norm"} <= set(header)
    assert header[-2:] == ["dur", "elapsed"]
    # two task weights, three significant digits each rather than full precision
    row = out.splitlines()[2]
    assert "[0.5, 0.5]" in row or all(len(w) <= 6 for w in row.split("[")[1].split("]")[0]
                                      .split(", "))
    assert len(est.history[-1, "task_weights_mean"]) == 2


def test_verbose_0_prints_nothing(capsys):
    _, out = _fit_output("l2e", capsys)
    assert out == ""


def test_continued_fit_counts_epochs_against_the_whole_run(capsys):
    est, _ = _fit_output("mtsgd_regressor", capsys, verbose=1, warm_start=True,
                         callbacks__early_stopping=None)
    est.fit(*_diabetes())
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()
            if "/" in line.split()[0]]
    assert rows == [f"{e}/8" for e in range(5, 9)]


def test_best_losses_are_coloured_only_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    _, out = _fit_output("l2e", capsys, verbose=1)
    assert ANSI in out
    visible = [line for line in out.splitlines()]
    assert max(len(line) - line.count(ANSI) * 5 for line in visible) <= 100


class _RecordEpochSquare(Callback):
    def on_epoch_end(self, net, **kwargs):
        net.history.record("epoch_squared", len(net.history) ** 2)


def test_user_callbacks_columns_are_shown(capsys):
    _, out = _fit_output("l2e", capsys, verbose=1, callbacks=[_RecordEpochSquare()])
    header = out.splitlines()[0].split()
    assert "epoch_squared" in header and header[-2:] == ["dur", "elapsed"]


def test_print_log_is_the_progress_log_and_keeps_skorchs_parameters():
    for make, _ in ESTIMATORS.values():
        est = make(callbacks__print_log__floatfmt=".2f")
        assert isinstance(dict(est.get_default_callbacks())["print_log"], ProgressLog)
        assert est.get_params()["callbacks__print_log__floatfmt"] == ".2f"

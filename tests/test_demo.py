"""``make demo`` (``sklmoo.demo``) says what its run shows: the summary and the figure are the
default configuration's, labelled so, and the time ratios are the measured ones."""

import re

import matplotlib
import numpy as np
import pytest

from sklmoo import MTSGDMultiTaskClassifier, demo

matplotlib.use("Agg")


def test_the_default_configuration_is_the_estimators_default():
    label, params = next((lbl, p) for lbl, p in demo.DEMO_CONFIGS if lbl == demo.DEFAULT_CONFIG)
    defaults = MTSGDMultiTaskClassifier().get_params()
    assert all(defaults[k] == v for k, v in params.items())
    assert "default" in label


@pytest.fixture
def demo_run(monkeypatch, tmp_path, capsys):
    import matplotlib.pyplot as plt

    monkeypatch.setattr(demo, "DEMO_SIZES", dict(n_train=80, n_test=40, max_epochs=3,
                                                 n_particles=2, lr=1e-2))
    out = tmp_path / "reliability.png"
    rows, disp = demo.main(["--quiet", "--out", str(out)])
    yield rows, disp, capsys.readouterr().out, out
    plt.close("all")


@pytest.mark.parametrize("out, match", [("figure.txt", "must name a .png file"),
                                        ("missing/figure.png", "does not exist"),
                                        ("folder.png", "is a directory")])
def test_an_unusable_out_is_refused_before_any_fit(monkeypatch, tmp_path, capsys, out, match):
    def no_fit(**kwargs):
        raise AssertionError("fitted before checking --out")

    monkeypatch.setattr(demo, "multi_digits_comparison", no_fit)
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(SystemExit) as exc:
        demo.main(["--quiet", "--out", str(tmp_path / out)])
    assert exc.value.code == 2 and match in capsys.readouterr().err


def test_demo_summarises_and_draws_the_default_with_the_measured_time_ratios(demo_run):
    rows, disp, text, png = demo_run
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in png.parent.iterdir()] == [png.name]      # no temporary left
    assert "3-4x" not in text                       # no hard-coded cost
    comparisons = [line for line in text.splitlines()
                   if "minus the independent ensemble" in line]
    assert comparisons[0].startswith(demo.DEFAULT_CONFIG)
    by_label = {r["method"]: r for r in rows}
    base = rows[0]["median_epoch_seconds"]
    for line in comparisons:
        label = line.split(" minus ")[0]
        shown = float(re.search(r"time per epoch x([0-9.]+)", line).group(1))
        assert shown == pytest.approx(by_label[label]["median_epoch_seconds"] / base, abs=0.051)
        nll = float(re.search(r"NLL ([-+][0-9.]+)", line).group(1))
        assert nll == pytest.approx(np.mean(by_label[label]["nll"]) - np.mean(rows[0]["nll"]),
                                    abs=5e-4)
    # the figure is the default configuration's and says so
    assert demo.DEFAULT_CONFIG in disp.figure_._suptitle.get_text()
    legends = [t.get_text() for ax in disp.figure_.axes if ax.get_legend() is not None
               for t in ax.get_legend().get_texts()]
    legends += [t.get_text() for leg in disp.figure_.legends for t in leg.get_texts()]
    assert any(demo.DEFAULT_CONFIG in t for t in legends)
    assert f"reliability diagram of {demo.DEFAULT_CONFIG}" in text

"""The meta-training CLI: argument validation, refused resumes, atomic outputs, and interruption
at any point (between steps, inside a step, in the middle of a write) followed by an exact
resume."""

import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import sklmoo._io
import sklmoo.meta._train as train_module
from sklmoo.meta._train import MetaTrainer, main
from sklmoo.samplers import MetaSampler

TINY = ["--outer-steps", "4", "--inner-steps", "3", "--n-pairs", "1", "--checkpoint-every", "2"]


@pytest.fixture(autouse=True)
def _restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _outputs(out):
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    meta = MetaSampler.load(out / "l2e_meta.npz")
    return state, {k: v.detach().numpy() for k, v in meta.weights().items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    main(["--out", str(out), *TINY])
    return _outputs(out)


class _Injector:
    """Raises KeyboardInterrupt (what SIGINT does) at the k-th instrumented point, once."""

    def __init__(self, k):
        self.k, self.ticks, self.fired = k, 0, False

    def tick(self, where):
        self.ticks += 1
        if self.ticks == self.k and not self.fired:
            self.fired = True
            raise KeyboardInterrupt(where)


def _instrument(monkeypatch, injector):
    real_step, real_write, real_replace = (MetaTrainer.outer_step, sklmoo._io.atomic_write,
                                           os.replace)
    real_writes = sklmoo._io.atomic_writes

    def outer_step(self):
        injector.tick("before an outer step")
        real_losses = self._losses

        def losses(task, batch):            # inside the step, between ES evaluations
            injector.tick("inside an outer step")
            return real_losses(task, batch)

        self._losses = losses
        try:
            return real_step(self)
        finally:
            del self._losses

    def half_then_rest(f, write):
        injector.tick("before writing")
        buffer = io.BytesIO()
        write(buffer)
        blob = buffer.getvalue()
        f.write(blob[: len(blob) // 2])
        injector.tick("half-way through a write")
        f.write(blob[len(blob) // 2:])

    def atomic_write(path, write):
        return real_write(path, lambda f: half_then_rest(f, write))

    def atomic_writes(writes):
        return real_writes({path: (lambda write: lambda f: half_then_rest(f, write))(write)
                            for path, write in writes.items()})

    def replace(src, dst):
        injector.tick("before the rename")
        return real_replace(src, dst)

    monkeypatch.setattr(MetaTrainer, "outer_step", outer_step)
    monkeypatch.setattr(train_module, "atomic_write", atomic_write)
    monkeypatch.setattr(sys.modules["sklmoo.samplers._l2e"], "atomic_writes", atomic_writes)
    monkeypatch.setattr(sklmoo._io.os, "replace", replace)


def _interrupt_then_resume(tmp_path, monkeypatch, k, reference):
    out = tmp_path / f"run{k}"
    injector = _Injector(k)
    with monkeypatch.context() as m:
        _instrument(m, injector)
        try:
            main(["--out", str(out), *TINY])
            interrupted = False
        except SystemExit as exc:
            assert exc.code == 130
            interrupted = True
    assert interrupted == injector.fired
    # every interruption leaves a loadable checkpoint and meta-sampler ...
    state, _ = _outputs(out)
    assert not list(out.glob(".*.tmp"))
    # ... and --resume finishes with exactly the uninterrupted result
    if interrupted:
        main(["--out", str(out), *TINY, "--resume"])
    state, weights = _outputs(out)
    ref_state, ref_weights = reference
    assert state["step"] == 4 and state["curve"] == ref_state["curve"]
    assert torch.equal(state["phi"], ref_state["phi"])
    for key, value in ref_weights.items():
        np.testing.assert_array_equal(weights[key], value)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 13, 21])
def test_interrupted_anywhere_resumes_exactly(tmp_path, monkeypatch, reference, k):
    _interrupt_then_resume(tmp_path, monkeypatch, k, reference)


@pytest.mark.benchmark
def test_interrupted_anywhere_resumes_exactly_long(tmp_path, monkeypatch, reference):
    """Every instrumented point of a run, one interruption each (~2 min)."""
    for k in range(1, 40):
        _interrupt_then_resume(tmp_path, monkeypatch, k, reference)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_real_signal_saves_and_exits(tmp_path, signum, reference):
    out = tmp_path / "signal"
    args = [sys.executable, "-m", "sklmoo.meta.train", "--out", str(out), "--outer-steps",
            "400", "--inner-steps", "3", "--n-pairs", "1", "--checkpoint-every", "1000"]
    # a shell without job control starts background jobs with SIGINT ignored, and Python keeps
    # an inherited SIG_IGN: give the child the default disposition, as a terminal would
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen, deadline = "", time.time() + 120
    while "meta-training" not in seen and time.time() < deadline:
        seen += proc.stderr.read(1)            # the progress bar (\r, no newline): training began
    time.sleep(0.5)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "continue with --resume" in err
    state, _ = _outputs(out)
    assert 0 <= state["step"] < 400


@pytest.mark.parametrize("extra, match", [
    (["--sigma", "0"], "--sigma must be a finite positive"),
    (["--outer-steps", "0"], "--outer-steps must be at least 1"),
    (["--n-pairs", "0"], "--n-pairs must be at least 1"),
    (["--inner-steps", "0"], "--inner-steps must be at least 1"),
    (["--checkpoint-every", "0"], "--checkpoint-every must be at least 1"),
    (["--lr", "nan"], "--lr must be a finite positive"),
    (["--resume"], "no checkpoint at"),
    (["--out", ""], "--out must name a directory, got ''"),
    (["--seed", "-1"], "--seed must be an integer from 0 to 2**63 - 1, got -1"),
    (["--seed", str(2 ** 64)], "--seed must be an integer from 0 to 2**63 - 1"),
])
def test_degenerate_arguments_exit_2(tmp_path, capsys, extra, match):
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "x"), "--outer-steps", "2", *extra])
    assert exc.value.code == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "x").exists() or extra == ["--resume"]


@pytest.mark.parametrize("seed", [-1, 1.5, 2 ** 64, True, "3"])
def test_meta_trainer_names_a_bad_seed(seed):
    with pytest.raises(ValueError, match=r"seed must be an integer from 0 to 2\*\*63 - 1"):
        MetaTrainer(inner_steps=2, n_pairs=1, seed=seed)
    # a numpy integer is a seed like any other
    assert MetaTrainer(inner_steps=2, n_pairs=1, seed=np.int64(3)).config["seed"] == 3


def test_resume_with_other_settings_and_overwrite_are_refused(tmp_path, capsys):
    out = str(tmp_path / "run")
    main(["--out", out, *TINY])
    with pytest.raises(SystemExit) as exc:
        main(["--out", out, *TINY, "--resume", "--sigma", "0.02"])
    assert exc.value.code == 2
    assert "sigma: 0.01 != 0.02" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--out", out, *TINY])
    assert "pass --resume" in capsys.readouterr().err
    # a longer run may continue a finished one
    main(["--out", out, "--outer-steps", "5", *TINY[2:], "--resume"])
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["step"] == 5


def test_an_interrupted_run_restores_the_signal_handlers(tmp_path, monkeypatch):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    injector = _Injector(2)
    with monkeypatch.context() as m:
        _instrument(m, injector)
        with pytest.raises(SystemExit):
            main(["--out", str(tmp_path / "run"), *TINY])
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.parametrize("corrupt, match", [
    (lambda opt: opt["param_groups"][0].__setitem__("lr", float("nan")), "learning rates"),
    (lambda opt: opt["state"][0]["exp_avg"].fill_(float("nan")), "exp_avg holds NaN"),
    (lambda opt: opt["state"][0]["exp_avg_sq"].fill_(-1.0), "negative values"),
])
def test_resume_refuses_an_optimiser_state_that_would_make_phi_nan(tmp_path, capsys, corrupt,
                                                                   match):
    """Such a state was accepted: phi turned NaN, the NaN checkpoint replaced the good one and
    every later --resume was refused."""
    out = tmp_path / "run"
    main(["--out", str(out), *TINY[:1], "2", *TINY[2:]])
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    corrupt(state["optimizer"])
    torch.save(state, out / "checkpoint.pt")
    good = (out / "l2e_meta.npz").read_bytes()
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(out), *TINY, "--resume"])
    assert exc.value.code == 2
    assert match in capsys.readouterr().err
    assert (out / "l2e_meta.npz").read_bytes() == good


def test_a_diverging_step_writes_nothing_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    out = tmp_path / "run"
    main(["--out", str(out), *TINY[:1], "2", *TINY[2:]])
    before = (out / "checkpoint.pt").read_bytes()
    real = MetaTrainer.outer_step

    def diverging(self):
        result = real(self)
        with torch.no_grad():
            self.phi.fill_(float("nan"))
        return result

    monkeypatch.setattr(MetaTrainer, "outer_step", diverging)
    with pytest.raises(SystemExit, match="diverged at outer step 3.*holds outer step 2, the "
                                         "last finite one.*replay the same draws"):
        main(["--out", str(out), *TINY, "--resume"])
    assert (out / "checkpoint.pt").read_bytes() == before


def test_a_diverging_step_saves_the_last_finite_one_not_yet_written(tmp_path, monkeypatch):
    """With --checkpoint-every above 1 the steps since the last save are not lost: the last
    finite one is written, and --resume continues from it."""
    out = tmp_path / "run"
    real = MetaTrainer.outer_step

    def diverging(self):
        result = real(self)
        if self.step == 3:
            with torch.no_grad():
                self.phi.fill_(float("nan"))
        return result

    monkeypatch.setattr(MetaTrainer, "outer_step", diverging)
    with pytest.raises(SystemExit, match="diverged at outer step 3.*holds outer step 2"):
        main(["--out", str(out), *TINY, "--checkpoint-every", "10"])
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 2
    monkeypatch.undo()
    assert main(["--out", str(out), *TINY, "--checkpoint-every", "10", "--resume"]).step == 4


def test_every_pair_diverging_saves_the_last_finite_step(tmp_path, monkeypatch):
    """When every antithetic pair's inner chains diverge there is no meta-gradient: the run
    stops with the last finite step written, not a traceback that loses it."""
    import sklmoo.meta._train as train

    out = tmp_path / "run"
    real, calls = train.chain_group_losses, []

    def diverging(*args):
        calls.append(1)
        losses = real(*args)
        return losses if len(calls) <= 2 else torch.full_like(losses, float("inf"))

    monkeypatch.setattr(train, "chain_group_losses", diverging)
    with pytest.raises(SystemExit, match="diverged at outer step 3: every antithetic pair.*"
                                         "holds outer step 2.*new run"):
        main(["--out", str(out), *TINY, "--checkpoint-every", "10"])
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 2

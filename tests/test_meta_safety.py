"""Loading meta-samplers and meta-training checkpoints is safe by construction (DESIGN.md,
"Reliability rules"): nothing is unpickled, only the expected members are read, shapes are
bounded before anything is decompressed, and a run directory has one owner at a time."""

import copy
import io
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import time
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
import torch

from _hostile import inflated_member, members_of, peak_rss_of, write_zip
from sklmoo.meta import MetaTrainer, load_default_meta_sampler
from sklmoo.meta._train import main
from sklmoo.samplers import MetaSampler
from sklmoo.samplers._l2e import MAX_HIDDEN_UNITS, MAX_NPY_HEADER_BYTES

GiB = 2 ** 30


def _npy_header(shape, descr="<f4"):
    """The .npy header (format 1.0) of an array of ``shape``, without its data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def _layout(hidden):
    return {"linear_0_w": (9, hidden), "linear_0_b": (hidden,), "linear_1_w": (hidden, hidden),
            "linear_1_b": (hidden,), "linear_2_w": (hidden, 2), "linear_2_b": (2,)}


def _craft(path, members):
    """A zip whose members are ``{name: bytes}`` (headers that may promise far more data than
    follows)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, blob in members.items():
            archive.writestr(name, blob)
    return path


def _genuine_members():
    buffer = io.BytesIO()
    arrays = {k: v.detach().numpy() for k, v in MetaSampler().weights().items()}
    np.savez(buffer, **arrays)
    with zipfile.ZipFile(buffer) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _refused_with_peak(path):
    """The ValueError ``MetaSampler.load(path)`` raises and the peak traced allocation (numpy
    reports its buffers to tracemalloc) while it ran."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as exc:
            MetaSampler.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2 ** 20, f"loading {path} allocated {peak / 2 ** 20:.0f} MB"
    return str(exc.value)


def test_an_extra_member_declaring_a_huge_array_is_refused_unread(tmp_path):
    members = _genuine_members()
    # 375M float64 (3 GB) promised, 16 bytes present
    members["extra.npy"] = _npy_header((375_000_000,), "<f8") + bytes(16)
    path = _craft(tmp_path / "extra.npz", members)
    message = _refused_with_peak(path)
    assert f"{path}: unexpected member 'extra.npy'" in message


@pytest.fixture(scope="module")
def header_bomb(tmp_path_factory):
    """1.5 MB on disk: a member whose version-2 .npy header declares (and holds) 1.5 GiB of
    header text (3 GB peak before)."""
    path = MetaSampler().save(tmp_path_factory.mktemp("bomb") / "bomb")
    members = members_of(path)
    length = 3 * GiB // 2
    members["linear_0_w.npy"] = [b"\x93NUMPY\x02\x00" + length.to_bytes(4, "little"),
                                 (b" ", length)]
    return write_zip(path, members)


def test_a_npy_header_declaring_gigabytes_is_refused_unread(header_bomb):
    assert header_bomb.stat().st_size < 2 * 2 ** 20
    message = _refused_with_peak(header_bomb)
    assert (f"{header_bomb}: member 'linear_0_w' declares a .npy header of {3 * GiB // 2} "
            f"bytes, more than {MAX_NPY_HEADER_BYTES}") in message


def test_a_version_1_header_is_bounded_too(tmp_path):
    members = _genuine_members()
    members["linear_0_b.npy"] = b"\x93NUMPY\x01\x00" + (65_535).to_bytes(2, "little") + bytes(16)
    message = _refused_with_peak(_craft(tmp_path / "v1.npz", members))
    assert "member 'linear_0_b' declares a .npy header of 65535 bytes" in message


def test_a_member_declaring_more_bytes_than_its_shape_needs_is_refused(tmp_path):
    path = MetaSampler().save(tmp_path / "long")
    inflated_member(path, "linear_1_w.npy", GiB)        # the array, then 1 GiB of zeros
    message = _refused_with_peak(path)
    assert (f"{path}: member 'linear_1_w' declares {GiB + 128 + 32 * 32 * 4} bytes, more than "
            f"the {128 + 32 * 32 * 4} its (32, 32) float32 array needs") in message


def test_the_estimators_meta_sampler_path_is_checked_the_same_way(header_bomb):
    from sklmoo import L2ESamplerClassifier

    X, y = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32), np.arange(20) % 2
    est = L2ESamplerClassifier(meta_sampler=str(header_bomb), max_epochs=1, n_chains=2)
    with pytest.raises(ValueError, match=f"{header_bomb}: member 'linear_0_w' declares"):
        est.fit(X, y)
    assert not est.__sklearn_is_fitted__()


@pytest.mark.parametrize("hidden", [19_364, MAX_HIDDEN_UNITS + 1])
def test_a_huge_hidden_width_is_refused_before_decompressing(tmp_path, hidden):
    members = {f"{k}.npy": _npy_header(shape) + bytes(8) for k, shape in _layout(hidden).items()}
    path = _craft(tmp_path / "wide.npz", members)
    message = _refused_with_peak(path)
    assert f"{path}: hidden width {hidden} is outside 1..{MAX_HIDDEN_UNITS}" in message


def test_hidden_width_zero_is_refused(tmp_path):
    np.savez(tmp_path / "empty.npz", **{k: np.zeros(s, np.float32)
                                        for k, s in _layout(0).items()})
    with pytest.raises(ValueError, match="empty.npz: hidden width 0 is outside"):
        MetaSampler.load(tmp_path / "empty.npz")


def test_a_moderate_hidden_width_still_loads(tmp_path):
    meta = MetaSampler(hidden_units=64)
    loaded = MetaSampler.load(meta.save(tmp_path / "wide"))
    x = torch.randn(7, 9)
    torch.testing.assert_close(loaded(x), meta(x))


@pytest.mark.parametrize("value, kind", [
    (np.array(["a", "b"]), "<U1"),
    (np.array([{"x": 1}, None], dtype=object), "object"),
])
def test_non_float_members_are_refused_by_name(tmp_path, value, kind):
    arrays = {k: v.detach().numpy() for k, v in MetaSampler().weights().items()}
    arrays["linear_2_b"] = value
    np.savez(tmp_path / "typed.npz", **arrays)     # savez pickles the object array
    with pytest.raises(ValueError, match=rf"typed\.npz: member 'linear_2_b' holds {kind}"):
        MetaSampler.load(tmp_path / "typed.npz")


def test_a_member_shorter_than_its_header_is_refused(tmp_path):
    members = _genuine_members()
    members["linear_1_w.npy"] = members["linear_1_w.npy"][:200]
    path = _craft(tmp_path / "short.npz", members)
    with pytest.raises(ValueError, match=r"short\.npz: member 'linear_1_w' is incomplete"):
        MetaSampler.load(path)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\udcff"])
def test_a_broken_card_warns_once_and_the_weights_load(tmp_path, text):
    meta = MetaSampler(card={"seed": 1})
    path = meta.save(tmp_path / "m")
    path.with_suffix(".json").write_bytes(text.encode("utf-8", "surrogateescape"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = MetaSampler.load(path)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and str(path.with_suffix(".json")) in messages[0], messages
    assert caught[0].filename == __file__                  # points at the user's call
    assert loaded.card == {}
    x = torch.randn(4, 9)
    torch.testing.assert_close(loaded(x), meta(x))


@pytest.mark.parametrize("depth, match", [(100, "nests JSON 101 levels deep"),
                                          (100_000, "nests JSON deeper than Python can parse")])
def test_a_deeply_nested_card_warns_and_the_weights_load(tmp_path, depth, match):
    meta = MetaSampler()
    path = meta.save(tmp_path / "m")
    path.with_suffix(".json").write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    with pytest.warns(UserWarning, match=match):
        loaded = MetaSampler.load(path)
    assert loaded.card == {}
    torch.testing.assert_close(loaded.flat_parameters(), meta.flat_parameters())


def test_a_dotted_name_gets_npz_appended_not_replaced(tmp_path):
    older = MetaSampler(card={"run": "older"})
    older.save(tmp_path / "run.2024")
    newer = MetaSampler(card={"run": "newer"})
    assert newer.save(tmp_path / "run.2024.01") == tmp_path / "run.2024.01.npz"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "run.2024.01.json", "run.2024.01.npz", "run.2024.json", "run.2024.npz"]
    for name, meta in (("run.2024.npz", older), ("run.2024.01.npz", newer),
                       ("run.2024.01", newer)):         # load finds what save wrote for a name
        loaded = MetaSampler.load(tmp_path / name)
        assert loaded.card == meta.card, name
        torch.testing.assert_close(loaded.flat_parameters(), meta.flat_parameters())
    assert MetaSampler(card={"x": 1}).save(tmp_path / "plain.npz") == tmp_path / "plain.npz"
    assert MetaSampler.load(tmp_path / "plain.npz").card == {"x": 1}


def test_a_failed_load_names_the_version_that_wrote_the_file(tmp_path):
    path = MetaSampler(card={"sklmoo_version": "0.0.1"}).save(tmp_path / "old")
    members = members_of(path)
    members["linear_1_w.npy"] = members["linear_1_w.npy"][:200]
    _craft(path, members)
    with pytest.raises(ValueError, match=r"is incomplete .*\(its card says sklmoo 0\.0\.1 "
                                         r"wrote it; this is sklmoo "):
        MetaSampler.load(path)


def test_the_shipped_meta_sampler_loads_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        meta = load_default_meta_sampler()
    assert meta.card["outer_steps"] > 0
    assert meta.net[0].weight.shape == (32, 9)


# --- meta-training: checkpoints, the run directory, the command line -----------------------

TINY = ["--inner-steps", "3", "--n-pairs", "1"]


def _usage_error(capsys, argv):
    """Run the CLI, expect argparse's usage error (exit 2) and return its stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "Traceback" not in err
    return err


class _RunsCode:
    """Unpickling it runs a shell command (what a planted checkpoint could do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def test_resume_refuses_a_checkpoint_that_would_run_code(tmp_path, capsys):
    out, marker = tmp_path / "run", tmp_path / "marker"
    out.mkdir()
    torch.save({"phi": _RunsCode(marker), "step": 0}, out / "checkpoint.pt")
    err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "1", *TINY, "--resume"])
    assert f"--resume: refusing to load {out / 'checkpoint.pt'}" in err
    assert "system" in err                    # names what it refused
    assert not marker.exists()


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    out = tmp_path_factory.mktemp("two") / "run"
    main(["--out", str(out), "--outer-steps", "2", *TINY])
    return out


def test_the_checkpoint_holds_only_plain_data(two_steps):
    state = torch.load(two_steps / "checkpoint.pt", weights_only=True)
    assert state["step"] == 2 and len(state["curve"]) == 2


@pytest.mark.parametrize("damage, match", [
    (lambda blob: blob[:0], "it is truncated or not a checkpoint"),
    (lambda blob: blob[:100], "it is truncated or not a checkpoint"),
    (lambda blob: blob[:len(blob) // 2], "it is truncated or not a checkpoint"),
    (lambda blob: blob[:-30], "it is truncated or not a checkpoint"),
    (lambda blob: None, "lacks ['optimizer'"),
])
def test_a_damaged_checkpoint_is_a_usage_error(tmp_path, capsys, two_steps, damage, match):
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    ckpt = out / "checkpoint.pt"
    blob = damage(ckpt.read_bytes())
    if blob is None:                          # a loadable dict that is not a trainer state
        torch.save({"phi": torch.zeros(3), "config": {}}, ckpt)
    else:
        ckpt.write_bytes(blob)
    err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "3", *TINY, "--resume"])
    assert str(ckpt) in err and match in err, err


def test_unusable_out_directories_are_usage_errors(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    err = _usage_error(capsys, ["--out", str(afile), "--outer-steps", "1", *TINY])
    assert f"--out {afile} exists and is not a directory" in err
    err = _usage_error(capsys, ["--out", str(afile / "sub"), "--outer-steps", "1", *TINY])
    assert f"--out {afile / 'sub'}: cannot create or write this directory" in err
    if os.geteuid() != 0:
        readonly = tmp_path / "readonly"
        readonly.mkdir(mode=0o555)
        unwritable = [readonly / "run", readonly]
    else:                                     # root writes anywhere except in pseudo-files
        unwritable = [pathlib.Path("/proc/sklmoo-meta-out")]
    for out in unwritable:
        err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "1", *TINY])
        assert f"--out {out}: cannot create or write this directory" in err, err


def test_resume_repairs_a_save_cut_short_and_removes_dead_temporaries(tmp_path, two_steps):
    three = tmp_path / "three"
    main(["--out", str(three), "--outer-steps", "3", *TINY])
    for left in (["checkpoint.pt"], ["checkpoint.pt", "l2e_meta.npz"]):
        # killed while saving step 3: the checkpoint (and maybe the weights) written, the rest
        # still at step 2, and the temporary of the write in progress left behind
        out = tmp_path / f"killed{len(left)}"
        shutil.copytree(two_steps, out)
        for name in left:
            shutil.copy(three / name, out / name)
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
        stale = out / f".curve.json.{int(dead.stdout)}.tmp"
        stale.write_text("[[1, 0.5")
        unrelated = out / "notes.tmp"
        unrelated.write_text("mine")
        main(["--out", str(out), "--outer-steps", "3", *TINY, "--resume"])
        assert not stale.exists() and unrelated.exists()
        meta, reference = (MetaSampler.load(d / "l2e_meta.npz") for d in (out, three))
        assert meta.card["outer_steps"] == 3
        torch.testing.assert_close(meta.flat_parameters(), reference.flat_parameters(),
                                   rtol=0, atol=0)
        assert (json.loads((out / "curve.json").read_text())
                == json.loads((three / "curve.json").read_text()))


def test_a_directory_has_one_run_at_a_time(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "sklmoo.meta.train", "--out", str(out), *TINY]
    first = subprocess.Popen(command + ["--outer-steps", "100000", "--checkpoint-every",
                                        "100000"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        seen, deadline = "", time.time() + 120
        while "meta-training" not in seen and time.time() < deadline:
            seen += first.stderr.read(1)        # the progress bar: the first run owns `out`
        assert first.poll() is None, seen
        second = subprocess.run(command + ["--outer-steps", "1"], capture_output=True,
                                text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert (f"--out {out} is in use by another meta-training run (pid {first.pid})"
                in second.stderr)
    finally:
        first.kill()                            # no clean-up: the lock file stays behind
        first.wait()
    # the kernel released the dead owner's lock: the next run goes ahead
    third = subprocess.run(command + ["--outer-steps", "1"], capture_output=True, text=True,
                           timeout=120)
    assert third.returncode == 0, third.stderr
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 1


def test_a_restored_state_is_copied_not_aliased():
    trainer = MetaTrainer(inner_steps=3, n_pairs=1, seed=0)
    trainer.outer_step()
    state = trainer.state_dict()
    before = copy.deepcopy(state)
    other = MetaTrainer(inner_steps=3, n_pairs=1, seed=0)
    other.load_state_dict(state)
    other.outer_step()                          # Adam updates its moments in place
    for index, moments in before["optimizer"]["state"].items():
        for key, value in moments.items():
            assert torch.equal(state["optimizer"]["state"][index][key], value), key
    assert torch.equal(state["phi"], before["phi"])
    assert torch.equal(state["generator"], before["generator"])
    assert state["rng"] == before["rng"] and state["curve"] == before["curve"]


def test_a_meta_sampler_card_does_not_alias_the_trainer_settings():
    trainer = MetaTrainer(inner_steps=3, n_pairs=1, seed=0)
    meta = trainer.meta_sampler()
    meta.card["config"]["sigma"] = 5.0
    assert trainer.config["sigma"] == 0.01
    assert trainer.state_dict()["config"]["sigma"] == 0.01


def test_resume_refuses_a_checkpoint_that_inflates_to_gigabytes(tmp_path, two_steps):
    # 1.5 MB on disk whose pickle member inflates to 1.5 GiB: 3 GB peak and exit 0 before
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    inflated_member(out / "checkpoint.pt", "data.pkl", 3 * GiB // 2)
    assert (out / "checkpoint.pt").stat().st_size < 2 * 2 ** 20
    argv = ["--out", str(out), "--outer-steps", "2", *TINY, "--resume"]
    peak, printed = peak_rss_of("from sklmoo.meta._train import main", f"""
        import contextlib, io
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                main({argv!r})
        except SystemExit as exc:
            print(exc.code, err.getvalue().strip().splitlines()[-1])
        """)
    assert printed.startswith("2 ")
    assert f"--resume: {out / 'checkpoint.pt'}: its members declare" in printed
    assert "refusing to load it" in printed
    assert peak < 400 * 2 ** 20, f"{peak / 2 ** 20:.0f} MB"


def test_resume_refuses_unknown_keys_by_name(tmp_path, capsys, two_steps):
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    state["extra"] = torch.zeros(3)
    torch.save(state, out / "checkpoint.pt")
    err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "3", *TINY, "--resume"])
    assert f"--resume: {out / 'checkpoint.pt'}: " in err
    assert "unknown keys ['extra']" in err


def test_resume_refuses_views_claiming_more_than_their_data(tmp_path, capsys, two_steps):
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    moments = state["optimizer"]["state"][0]
    moments["exp_avg"] = moments["exp_avg"][:1].expand(10_000_000)      # 40 MB from 4 bytes
    torch.save(state, out / "checkpoint.pt")
    err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "3", *TINY, "--resume"])
    assert "1 tensor(s) of the state claim more elements than their data holds" in err


def test_resume_names_the_version_that_wrote_a_refused_checkpoint(tmp_path, capsys, two_steps):
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert isinstance(state["sklmoo_version"], str)
    state.update(sklmoo_version="0.0.1", phi=torch.zeros(3))
    torch.save(state, out / "checkpoint.pt")
    err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "3", *TINY, "--resume"])
    assert "(written by sklmoo 0.0.1; this is sklmoo " in err and "phi must be" in err


def test_resume_with_fewer_outer_steps_than_done_is_a_usage_error(tmp_path, capsys, two_steps):
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    before = (out / "checkpoint.pt").read_bytes()
    err = _usage_error(capsys, ["--out", str(out), "--outer-steps", "1", *TINY, "--resume"])
    assert "is at outer step 2, beyond --outer-steps 1" in err
    assert (out / "checkpoint.pt").read_bytes() == before


def test_resume_rewrites_a_deeply_nested_curve(tmp_path, two_steps):
    # curve.json crashed --resume with RecursionError; now it is a mismatch, rewritten
    out = tmp_path / "run"
    shutil.copytree(two_steps, out)
    (out / "curve.json").write_text("[" * 100_000 + "]" * 100_000)
    main(["--out", str(out), "--outer-steps", "2", *TINY, "--resume"])
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert json.loads((out / "curve.json").read_text()) == json.loads(json.dumps(state["curve"]))


def test_paths_that_name_no_file_are_refused_clearly(tmp_path):
    from sklmoo import L2ESamplerClassifier

    meta = MetaSampler()
    for bad in ("", tmp_path):
        with pytest.raises(ValueError, match="must name a file"):
            meta.save(bad)
        with pytest.raises(ValueError, match="must name a file"):
            MetaSampler.load(bad)
    X = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    with pytest.raises(ValueError, match="must name a file"):
        L2ESamplerClassifier(meta_sampler="", max_epochs=2).fit(X, (X[:, 0] > 0).astype(int))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_named_pipe_beside_the_file_does_not_hang_the_load(tmp_path):
    path = MetaSampler().save(tmp_path / "run")
    (tmp_path / "run.json").unlink()
    os.mkfifo(tmp_path / "run.json")             # opening it for reading would block
    with pytest.warns(UserWarning, match="not a regular file"):
        MetaSampler.load(path)

"""Loading meta-samplers and meta-training checkpoints is safe by construction (DESIGN.md,
"Reliability rules"): nothing is unpickled, only the expected members are read, shapes are
bounded before anything is decompressed, and a run directory has one owner at a time."""

import io
import json
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
import torch

from sklmoo.meta import MetaTrainer, load_default_meta_sampler
from sklmoo.samplers import MetaSampler
from sklmoo.samplers._l2e import MAX_HIDDEN_UNITS


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


def test_the_shipped_meta_sampler_loads_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        meta = load_default_meta_sampler()
    assert meta.card["outer_steps"] > 0
    assert meta.net[0].weight.shape == (32, 9)

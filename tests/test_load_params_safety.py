"""``load_params`` is safe by construction (DESIGN.md, "Reliability rules"): a small hostile file
cannot make it allocate GBs (declared sizes are bounded by what the estimator holds before
torch reads anything; draws must be backed by data in the file), parameters that are not the
module's, or not finite, or a non-positive temperature are refused by name, and a failed load
leaves the estimator exactly as it was."""

import copy
import io
import json
import os
import pathlib
import pickle
import shutil
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from skorch.callbacks import Checkpoint

from _hostile import inflated_member, peak_rss_of
from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier

GiB = 2 ** 30
#: what a refused load may cost at most (the bombs below cost 3 to 3.5 GB before)
PEAK_BOUND = 400 * 2 ** 20


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32), y


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, y)


def _l2e(**kw):
    return L2ESamplerClassifier(**{**dict(n_chains=2, max_epochs=4, n_draws=3, burn_in=1,
                                          batch_size=32, train_split=None, random_state=0,
                                          module__hidden_units=(8,)), **kw})


def _mtsgd(**kw):
    return MTSGDMultiTaskClassifier(**{**dict(n_particles=2, max_epochs=2, random_state=0,
                                              module__hidden_units=(8,)), **kw})


MAKERS = {"l2e": _l2e, "mtsgd": _mtsgd}


@pytest.fixture(scope="module")
def fitted(iris, tmp_path_factory):
    """``{name: (pickled fitted estimator, its saved parameters' path)}``."""
    X, y = iris
    out, made = tmp_path_factory.mktemp("fitted"), {}
    for name, make in MAKERS.items():
        est = _fit(make(), X, y)
        est.save_params(f_params=out / f"{name}.pt", f_optimizer=out / f"{name}_opt.pt",
                        f_history=out / f"{name}_history.json")
        made[name] = pickle.dumps(est)
    return out, made


def _estimator(fitted, name):
    return pickle.loads(fitted[1][name])


def _state(est):
    """Everything a load may change, to compare before / after."""
    return ({k: v.clone() for k, v in est.module_.state_dict().items()},
            json.dumps(est.history.to_list()), getattr(est, "n_draws_", None),
            est.fitted_, np.asarray(getattr(est, "temperature_", 0.0)).tolist())


def _assert_unchanged(est, before, X):
    after = _state(est)
    assert after[0].keys() == before[0].keys()
    for key, value in before[0].items():
        assert torch.equal(after[0][key], value), key
    assert after[1:] == before[1:]
    est.predict_proba(X)                    # still fitted and usable


def _refused(est, X, match, **files):
    before = _state(est)
    with pytest.raises(ValueError, match=match):
        est.load_params(**files)
    _assert_unchanged(est, before, X)


# -- the serious cases: bombs, measured in a fresh interpreter --------------------------------

def _unpickle(path):
    """Source that unpickles the estimator at ``path`` as ``est`` (the setup of a measure)."""
    return f"import pickle; est = pickle.loads(open({str(path)!r}, 'rb').read())"


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_deflated_params_file_is_refused_before_torch_reads_it(fitted, tmp_path, name):
    # 1.5 MB on disk whose pickle member inflates to 1.5 GiB (3 GB peak before)
    bomb = shutil.copy(fitted[0] / f"{name}.pt", tmp_path / "bomb.pt")
    inflated_member(bomb, "data.pkl", 3 * GiB // 2)
    blob = tmp_path / "est.pkl"
    blob.write_bytes(fitted[1][name])
    peak, printed = peak_rss_of(_unpickle(blob), f"""
        before = est.predict_proba([[0.0] * 4])
        try:
            est.load_params(f_params={str(bomb)!r})
        except ValueError as exc:
            print(exc)
        print((est.predict_proba([[0.0] * 4]) == before).all())
        """)
    assert f"{bomb}: its members declare" in printed and "refusing to load it" in printed
    assert printed.endswith("True")
    assert peak < PEAK_BOUND, f"{peak / 2 ** 20:.0f} MB"


def test_draws_that_are_stride0_views_are_refused_unallocated(iris, tmp_path):
    # 100,000 draws claimed by one stored draw (3.5 GB allocated and n_draws_ = 100000 before)
    X, y = iris
    est = _fit(_l2e(module__hidden_units=(64, 64)), X, y)
    state = est.module_.state_dict()
    forged = {k: v[:1].expand(100_000, *v.shape[1:]) if ".draw__" in k else v
              for k, v in state.items()}
    torch.save(forged, tmp_path / "forged.pt")
    assert (tmp_path / "forged.pt").stat().st_size < 200_000
    (tmp_path / "est.pkl").write_bytes(pickle.dumps(est))
    peak, printed = peak_rss_of(_unpickle(tmp_path / "est.pkl"), f"""
        try:
            est.load_params(f_params={str(tmp_path / 'forged.pt')!r})
        except ValueError as exc:
            print(exc)
        print(est.n_draws_, len(est.module_.samples), est.fitted_)
        """)
    assert f"{tmp_path / 'forged.pt'}: tensors ['samples.draw__" in printed
    assert "claim more elements than their data holds" in printed
    assert printed.endswith(f"{est.n_draws_} {est.n_draws_} True")
    assert peak < PEAK_BOUND, f"{peak / 2 ** 20:.0f} MB"


# -- what is refused, by name, leaving the estimator as it was --------------------------------

@pytest.mark.parametrize("name", list(MAKERS))
def test_unknown_and_missing_keys_are_refused_by_name(fitted, iris, tmp_path, name):
    est = _estimator(fitted, name)
    state = torch.load(fitted[0] / f"{name}.pt", weights_only=True)
    state["extra"] = torch.zeros(3)
    torch.save(state, tmp_path / "extra.pt")
    _refused(est, iris[0], r"extra\.pt does not hold this estimator's parameters: unknown keys "
             r"\['extra'\]", f_params=tmp_path / "extra.pt")
    del state["extra"], state["recalibration"]
    torch.save(state, tmp_path / "missing.pt")
    _refused(est, iris[0], r"missing keys \['recalibration'\]", f_params=tmp_path / "missing.pt")


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_a_non_positive_or_non_finite_temperature_is_refused(fitted, iris, tmp_path, name, value):
    est = _estimator(fitted, name)
    state = torch.load(fitted[0] / f"{name}.pt", weights_only=True)
    state["recalibration"][0] = value
    torch.save(state, tmp_path / "t.pt")
    match = "recalibration.*must be positive" if np.isfinite(value) else r"\['recalibration'\] hold"
    _refused(est, iris[0], match, f_params=tmp_path / "t.pt")


@pytest.mark.parametrize("name", list(MAKERS))
def test_non_finite_weights_are_refused(fitted, iris, tmp_path, name):
    est = _estimator(fitted, name)
    state = torch.load(fitted[0] / f"{name}.pt", weights_only=True)
    key = next(k for k in state if k.endswith("weight"))
    state[key].view(-1)[3] = float("nan")
    torch.save(state, tmp_path / "nan.pt")
    _refused(est, iris[0], rf"nan\.pt: \['{key}'\] hold NaN or inf", f_params=tmp_path / "nan.pt")


def test_draws_that_do_not_fit_the_chains_are_refused(fitted, iris, tmp_path):
    est = _estimator(fitted, "l2e")
    state = torch.load(fitted[0] / "l2e.pt", weights_only=True)
    key = next(k for k in state if ".draw__" in k)
    other = dict(state, **{key: torch.cat([state[key]] * 2, dim=1)})       # 4 chains, not 2
    torch.save(other, tmp_path / "chains.pt")
    _refused(est, iris[0], rf"chains\.pt: draw buffer '{key}' has shape",
             f_params=tmp_path / "chains.pt")
    other = dict(state, **{key: state[key][:2]})                             # 2 draws, others 3
    torch.save(other, tmp_path / "count.pt")
    _refused(est, iris[0], "hold different numbers of draws", f_params=tmp_path / "count.pt")


def test_more_draws_than_the_estimator_holds_still_load(fitted, iris, tmp_path):
    # the draw store's legitimate growth: a file of 40 draws into an estimator of 3
    X, y = iris
    many = _fit(_l2e(n_draws=40, max_epochs=42), X, y)
    many.save_params(f_params=tmp_path / "many.pt")
    est = _estimator(fitted, "l2e")
    est.load_params(f_params=tmp_path / "many.pt")
    assert est.n_draws_ == 40
    np.testing.assert_array_equal(est.predict_proba(X), many.predict_proba(X))


def test_a_legacy_format_file_is_refused(fitted, iris, tmp_path):
    est = _estimator(fitted, "mtsgd")
    state = torch.load(fitted[0] / "mtsgd.pt", weights_only=True)
    torch.save(state, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    _refused(est, iris[0], r"legacy\.pt is not a zip archive written by torch\.save",
             f_params=tmp_path / "legacy.pt")


def test_a_deflated_optimizer_file_is_refused(fitted, iris, tmp_path):
    est = _estimator(fitted, "l2e")
    bomb = shutil.copy(fitted[0] / "l2e_opt.pt", tmp_path / "opt.pt")
    inflated_member(bomb, "data.pkl", GiB)
    _refused(est, iris[0], r"f_optimizer=\.\.\.\): .*opt\.pt: its members declare",
             f_optimizer=bomb)


def test_file_objects_are_checked_and_put_back(fitted, iris, tmp_path):
    est = _estimator(fitted, "l2e")
    bomb = shutil.copy(fitted[0] / "l2e.pt", tmp_path / "bomb.pt")
    inflated_member(bomb, "data.pkl", GiB)
    with open(bomb, "rb") as f:
        _refused(est, iris[0], "bomb.pt: its members declare", f_params=f)
    blob = io.BytesIO(b"x" * 5 + (fitted[0] / "l2e.pt").read_bytes())
    blob.seek(5)
    est.load_params(f_params=blob)            # a genuine one loads from where it was
    np.testing.assert_array_equal(est.predict_proba(iris[0]),
                                  _estimator(fitted, "l2e").predict_proba(iris[0]))


@pytest.mark.parametrize("text, match", [
    ("[" * 100 + "]" * 100, "nests JSON 100 levels deep"),
    ("[" * 100_000 + "]" * 100_000, "nests JSON deeper than Python can parse"),
    ('{"epoch": 1}', "is not a skorch history"),
    ('[{"batches": 5}]', "is not a skorch history: epoch 0 has 'batches' that are not"),
    ('[{"epoch": 1}, {"epoch": "2"}]', "is not a skorch history: epoch 1 has 'epoch' '2'"),
    ('[{"epoch": 1, "batches": [{"train_loss": "x"}]}]',
     "is not a skorch history: epoch 0 has 'train_loss' 'x', not"),
    (" " * (16 * 2 ** 20 + 1), "is larger than"),
])
def test_a_hostile_history_is_refused(fitted, iris, tmp_path, text, match):
    est = _estimator(fitted, "mtsgd")
    (tmp_path / "h.json").write_text(text)
    _refused(est, iris[0], rf"f_history=\.\.\.\): .*h\.json {match}" if "history" not in match
             else rf"h\.json {match}", f_history=tmp_path / "h.json")


def test_a_loaded_history_is_one_a_later_fit_can_continue(fitted, iris):
    est = _estimator(fitted, "mtsgd")
    est.load_params(f_history=fitted[0] / "mtsgd_history.json")
    before = len(est.history)
    _fit(est.set_params(warm_start=True), *iris)
    assert len(est.history) == before + est.max_epochs


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["device", "fifo", "device object"])
def test_a_device_or_fifo_is_refused_without_reading_it(fitted, iris, tmp_path, kind):
    # /dev/zero would stream zeros without end (GBs in seconds), a FIFO block forever
    est = _estimator(fitted, "mtsgd")
    before = _state(est)
    path = tmp_path / "p.pt"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(OSError, match="p.pt is not a regular file|/dev/zero is not a regular"):
        if kind == "device object":
            with open("/dev/zero", "rb") as f:
                est.load_params(f_params=f)
        else:
            est.load_params(f_params=path)
    with pytest.raises(OSError, match="is not a regular file"):
        est.load_params(f_history=path if kind != "device object" else "/dev/zero")
    _assert_unchanged(est, before, iris[0])


def test_a_file_of_another_state_is_refused_as_an_optimizer(fitted, iris):
    est = _estimator(fitted, "mtsgd")
    _refused(est, iris[0], r"mtsgd\.pt: a file does not hold the state it is loaded as",
             f_optimizer=fitted[0] / "mtsgd.pt")
    _refused(est, iris[0], r"a file does not hold the state",
             f_optimizer=fitted[0] / "l2e_opt.pt")


def test_a_failed_load_puts_back_the_history_and_the_optimizer(fitted, iris, tmp_path):
    # skorch loads the history and the optimiser before it reaches a bad f_params
    est = _estimator(fitted, "l2e")
    other = _fit(_l2e(max_epochs=6, random_state=1), *iris)
    other.save_params(f_optimizer=tmp_path / "opt.pt", f_history=tmp_path / "h.json")
    state = torch.load(fitted[0] / "l2e.pt", weights_only=True)
    state["extra"] = torch.zeros(1)
    torch.save(state, tmp_path / "p.pt")
    optimizer = copy.deepcopy(est.optimizer_.state_dict())
    assert len(other.history) != len(est.history)
    assert other.optimizer_.param_groups[0]["sampler_step"] != optimizer["param_groups"][0][
        "sampler_step"]
    _refused(est, iris[0], "unknown keys", f_history=tmp_path / "h.json",
             f_optimizer=tmp_path / "opt.pt", f_params=tmp_path / "p.pt")
    _assert_same(est.optimizer_.state_dict(), optimizer)


def _assert_same(a, b):
    """Equal nested states (tensors compared by value)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        assert a == b


def test_a_checkpoint_is_checked_like_its_files(fitted, iris, tmp_path):
    est = _estimator(fitted, "mtsgd")
    checkpoint = Checkpoint(dirname=str(tmp_path), f_params="params.pt", f_optimizer=None,
                            f_criterion=None, f_history=None, event_name=None)
    shutil.copy(fitted[0] / "mtsgd.pt", tmp_path / "params.pt")
    inflated_member(tmp_path / "params.pt", "data.pkl", GiB)
    _refused(est, iris[0], r"f_params=\.\.\.\): .*params\.pt: its members declare",
             checkpoint=checkpoint)


# -- saving: every path is written atomically -------------------------------------------------

@pytest.mark.parametrize("name", list(MAKERS))
def test_a_failed_save_leaves_the_previous_files(fitted, iris, tmp_path, monkeypatch, name):
    """A save that fails mid-write (a full disk) keeps every earlier file whole and leaves no
    temporary behind; the earlier files still load."""
    est = _estimator(fitted, name)
    files = {"f_params": tmp_path / "p.pt", "f_optimizer": tmp_path / "o.pt",
             "f_history": tmp_path / "h.json"}
    est.save_params(**files)
    before = {key: path.read_bytes() for key, path in files.items()}

    def full_disk(obj, f, *args, **kwargs):
        with open(f, "wb") as partial:
            partial.write(b"PK\x03\x04 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        est.save_params(**files)
    monkeypatch.undo()
    assert {key: path.read_bytes() for key, path in files.items()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.json", "o.pt", "p.pt"]
    fresh = _estimator(fitted, name)
    fresh.load_params(**files)
    np.testing.assert_array_equal(fresh.predict_proba(iris[0]), est.predict_proba(iris[0]))


def test_saving_writes_paths_and_file_objects_and_names_a_missing_directory(fitted, iris,
                                                                          tmp_path):
    est = _estimator(fitted, "mtsgd")
    buffer = io.BytesIO()
    est.save_params(f_params=buffer, f_history=str(tmp_path / "h.json"))
    assert buffer.getvalue()[:2] == b"PK" and json.loads((tmp_path / "h.json").read_text())
    with pytest.raises(FileNotFoundError, match="directory .*nowhere.* does not exist"):
        est.save_params(f_params=tmp_path / "nowhere" / "p.pt")
    # nothing is written when one path cannot be: a directory, the same file twice
    est.save_params(f_params=tmp_path / "p.pt")
    before = (tmp_path / "p.pt").read_bytes()
    (tmp_path / "adir").mkdir()
    with pytest.raises(IsADirectoryError, match="adir.*is a directory"):
        est.save_params(f_params=tmp_path / "p.pt", f_optimizer=tmp_path / "adir")
    with pytest.raises(ValueError, match="f_params and f_criterion name the same file"):
        est.save_params(f_params=tmp_path / "p.pt", f_criterion=str(tmp_path / "p.pt"))
    assert (tmp_path / "p.pt").read_bytes() == before
    # a symbolic link: its target gets the new file, the link stays a link
    (tmp_path / "link.pt").symlink_to(tmp_path / "p.pt")
    est.save_params(f_params=tmp_path / "link.pt", f_history=os.devnull)
    assert (tmp_path / "link.pt").is_symlink() and os.path.exists(os.devnull)
    # a file skorch does not write from save_params (f_pickle) leaves the others saved
    est.save_params(f_params=tmp_path / "q.pt", f_pickle=tmp_path / "x.pkl")
    assert (tmp_path / "q.pt").exists() and not (tmp_path / "x.pkl").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # skorch's Checkpoint saves through save_params
    Checkpoint(dirname=str(tmp_path / "ck"), f_optimizer=None, f_criterion=None,
               event_name=None, f_history="h.json").initialize().save_model(est)
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["h.json", "params.pt"]
    assert not (pathlib.Path(os.devnull).is_file())


def test_saving_over_a_file_keeps_its_permissions(fitted, tmp_path):
    # the atomic rename replaces the file: a file made private stays private
    est = _estimator(fitted, "mtsgd")
    private, new = tmp_path / "private.pt", tmp_path / "new.pt"
    est.save_params(f_params=private)
    os.chmod(private, 0o600)
    est.save_params(f_params=private, f_history=new)
    assert private.stat().st_mode & 0o777 == 0o600
    est.save_params(f_params=new)              # a new file: the process's usual mode
    assert new.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("name", list(MAKERS))
def test_a_file_of_the_other_linear_gate_setting_is_refused_naming_it(fitted, iris, tmp_path,
                                                                        name):
    """A file saved with the linear gate, loaded into an estimator without one, is refused
    naming ``linear_gate``, the setting to change. (The other way round loads, as a file
    from before the gate does: its networks predict.)"""
    X, y = iris
    ungated = _fit(MAKERS[name](linear_gate=False), X, y)
    _refused(ungated, X, r"differ in linear_gate \(module_\.", f_params=fitted[0] / f"{name}.pt")
    ungated.save_params(f_params=tmp_path / "ungated.pt")
    gated = _estimator(fitted, name)
    gated.load_params(f_params=tmp_path / "ungated.pt")
    np.testing.assert_allclose(gated.predict_proba(X), ungated.predict_proba(X), atol=1e-6)


def test_a_file_too_large_for_these_settings_says_which_settings_to_match(tmp_path):
    """The size bound refuses a larger estimator's file before torch reads it; the message
    says that other settings are the likely cause (here the regressor's kernel mean function,
    absent with ``mean_function=None``)."""
    from sklmoo import MTSGDRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = 2 * X[:, 0]
    small = dict(n_particles=2, max_epochs=2, random_state=0)
    MTSGDRegressor(**small).fit(X, y).save_params(f_params=tmp_path / "kernel.pt")
    plain = MTSGDRegressor(mean_function=None, **small).fit(X, y)
    before = plain.predict(X)
    with pytest.raises(ValueError, match=r"refusing to load it\. If sklmoo saved this file, it "
                       r"came from an estimator with other settings .*mean_function"):
        plain.load_params(f_params=tmp_path / "kernel.pt")
    np.testing.assert_array_equal(plain.predict(X), before)

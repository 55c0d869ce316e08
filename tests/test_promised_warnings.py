"""The warnings the documentation promises are the warnings the code gives.

Every mention of a warning ("warn", "warning", "ConvergenceWarning", ...) in README.md,
docs/*.rst, docs/benchmarks/*, the gallery's examples and sklmoo's docstrings must be covered
by one entry of :data:`CLAIMS`: a promise, with the test that triggers the warning (or, for
"this stays quiet", the test that turns warnings into errors), or a mention that promises
nothing (a Sphinx setting, a code line, the record of a benchmark run). A new mention fails
:func:`test_every_mention_of_a_warning_is_a_tested_claim` until it is classified here, and an
entry that no longer matches anything fails it too, so the table follows the documents.
"""

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone
from sklearn.datasets import load_iris, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import get_scorer
from sklearn.model_selection import cross_val_score, cross_validate
from sklearn.preprocessing import StandardScaler

from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier
from sklmoo.metrics import expected_calibration_error, negative_log_likelihood

ROOT = pathlib.Path(__file__).resolve().parents[1]
HERE = "tests/test_promised_warnings.py"

# -- what the documents say --------------------------------------------------------------------

#: (documents (glob), regular expression over the whitespace-collapsed text without backticks,
#: what backs it: "test_file.py::test_name" or "not a promise: why")
CLAIMS = [
    # a continued regressor fit with closed gates says its new rows change those outputs not
    ("docs/changelog.rst", r"A continued regressor fit warns when outputs' gates are closed",
     "tests/test_regressor.py::test_the_linear_gate_per_output_and_continued_fits"),
    ("docs/user_guide.rst", r"a closed output's predictions do not change, and the continued "
     r"fit warns that they do not",
     "tests/test_regressor.py::test_the_linear_gate_per_output_and_continued_fits"),
    # light weights (e.g. normalised to sum to 1) where their scale matters
    ("docs/changelog.rst", r"Weights that average below 0.1 a row warn where their scale "
     r"matters.{0,400}the warning says so",
     "tests/test_weights.py::"
     "test_weights_that_sum_to_one_are_warned_about_where_their_scale_matters"),
    ("docs/changelog.rst", r"Light sample weights are warned about in the MT-SGD classifier "
     r"too.{0,300}it now warns as well where linear_gate=True",
     "tests/test_weights.py::"
     "test_weights_that_sum_to_one_are_warned_about_where_their_scale_matters"),
    ("docs/user_guide.rst", r"Weights that average below 0.1 a row .{0,70} are warned about "
     r"where their scale matters",
     "tests/test_weights.py::"
     "test_weights_that_sum_to_one_are_warned_about_where_their_scale_matters"),
    # a fit on unstandardised features says so
    ("docs/changelog.rst", r"A fit on features that are all tiny warns too\*\*: where every "
     r"value of X is within 0.1",
     "tests/test_input_contracts.py::test_a_fit_on_unstandardised_features_says_so"),
    ("docs/changelog.rst", r"A fit on features far from order one warns\*\* \(every estimator, "
     r"as a fit starts",
     "tests/test_input_contracts.py::test_a_fit_on_unstandardised_features_says_so"),
    ("docs/changelog.rst", r"A float64 memory map of unstandardised features warns as an "
     r"array does\*\*: the warning about features beyond 1,000 in magnitude skipped",
     "tests/test_input_contracts.py::test_unstandardised_features_in_a_memory_map_warn_too"),
    # a DataFrame-fitted estimator predicting on a memory map gets scikit-learn's warning
    ("docs/changelog.rst", r"Predicting on a memory map after a DataFrame fit warns\*\* as "
     r"predicting on any array without column names does",
     "tests/test_torch_dataset.py::"
     "test_a_memory_map_after_a_dataframe_fit_warns_as_an_array_does"),
    # L2E spreads its draws over steps, and still warns when the steps are too few
    ("docs/changelog.rst", r"max_epochs=8 with n_draws=10 and mini-batches \(seven an epoch\) "
     r"now collects 10 draws instead of 4 and a warning; the warning remains for fits with "
     r"fewer sampler steps",
     "tests/test_l2e_classifier.py::test_more_draws_than_the_fit_can_collect_are_warned_about"),
    # the end-of-fit reports on draws cut short (early stopping, a short iterator)
    ("docs/changelog.rst", r"early stopping that ended the fit after burn-in cut the draws "
     r"short without a word .{0,40}; it now warns",
     "tests/test_l2e_classifier.py::test_early_stopping_that_cuts_the_draws_short_says_so"),
    ("docs/changelog.rst", r"gave two warnings that contradicted each other .{0,60}; it now "
     r"gives the one of what happened",
     "tests/test_l2e_classifier.py::test_every_planned_draw_is_collected_with_drop_last"),
    ("docs/changelog.rst", r"A continued fit's warning no longer says \"after burn-in\"",
     "tests/test_l2e_classifier.py::test_more_draws_than_the_fit_can_collect_are_warned_about"),
    # L2E asked for more draws than its fit can collect says so
    ("docs/changelog.rst", r"L2E collected fewer draws than it was asked for, silently.*"
     r"fewer candidate steps than n_draws warns, once.*"
     r"test_more_draws_than_the_fit_can_collect_are_warned_about",
     "tests/test_l2e_classifier.py::test_more_draws_than_the_fit_can_collect_are_warned_about"),
    ("docs/user_guide.rst", r"An L2E fit that cannot hold n_draws draws .{0,80}says so in a "
     r"warning",
     "tests/test_l2e_classifier.py::test_more_draws_than_the_fit_can_collect_are_warned_about"),
    ("sklmoo/estimators/_l2e_classifier.py", r"Draws collected per chain and fit call \(fewer, "
     r"with a warning, when the fit has fewer steps\)",
     "tests/test_l2e_classifier.py::test_more_draws_than_the_fit_can_collect_are_warned_about"),
    # an L2E fit whose custom iterator gives fewer batches than counted says so
    ("docs/changelog.rst", r"an L2E fit whose custom iterator_train gives fewer batches than "
     r"counted warns",
     "tests/test_l2e_classifier.py::test_every_planned_draw_is_collected_with_drop_last"),
    # the stuck-chain warning names X's scale; a warm-up covering the whole fit warns
    ("docs/changelog.rst", r"A stuck-chain warning on features of huge magnitude",
     "tests/test_input_contracts.py::test_l2e_stuck_on_huge_features_names_their_scale"),
    ("docs/changelog.rst", r"a warmup_epochs that covers the whole fit is warned about",
     "tests/test_input_contracts.py::test_a_warm_up_longer_than_the_fit_is_warned_about"),
    ("docs/changelog.rst", r"burn_in_method='adam' with a burn-in of no epochs \('csgmcmc''s "
     r"default\) is warned about",
     "tests/test_input_contracts.py::test_an_adam_burn_in_of_no_epochs_is_warned_about"),
    # the regressor gives no repulsion advice about networks a fit will ignore
    ("docs/changelog.rst", r"No warnings in the 45 fits \(networks that a fit will ignore no "
     r"longer produce repulsion advice\)",
     "tests/test_kernel_mean.py::test_no_advice_about_networks_whose_output_is_ignored"),
    # a read-only X (memory map) fits without torch's non-writable-tensor warning
    ("docs/benchmarks/fit_memory.rst", r"torch warns on such arrays",
     "tests/test_evidence_ridge.py::test_a_read_only_memory_map_trains_without_a_copy_warning"),
    # the stuck-chain ConvergenceWarning (and nothing for a large R-hat)
    ("docs/faq.rst", r"Have the chains converged\? \(ConvergenceWarning, R-hat\)",
     f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("docs/faq.rst", r"It warns only about a stuck chain\.\*\* A ConvergenceWarning \(also kept "
     r"in fit_warnings_\)", f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("docs/user_guide.rst", r"it warns \(ConvergenceWarning, also kept in fit_warnings_\) only "
     r"when a chain is stuck", f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("docs/user_guide.rst", r"it warns only when a chain is stuck",
     f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("docs/changelog.rst", r"it warns when a chain is stuck",
     f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("docs/benchmarks/l2e_classifier.rst", r"only a stuck chain raises a ConvergenceWarning",
     f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("examples/plot_l2e_classifier.py", r"warns only when a chain is stuck",
     f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("sklmoo/estimators/_l2e_classifier.py", r"Only a stuck chain raises a ConvergenceWarning|"
     r"a ConvergenceWarning only for a stuck chain",
     f"{HERE}::test_a_stuck_chain_warns_and_the_warning_is_kept"),
    ("docs/faq.rst", r"It does not warn about a large R-hat",
     f"{HERE}::test_a_large_rhat_is_reported_not_warned_about"),
    ("docs/faq.rst", r"# no chain stuck: no warning",
     f"{HERE}::test_a_large_rhat_is_reported_not_warned_about"),
    ("docs/user_guide.rst", r"fit does not warn about it",
     f"{HERE}::test_a_large_rhat_is_reported_not_warned_about"),
    ("docs/benchmarks/l2e_classifier.rst", r"not warned about",
     f"{HERE}::test_a_large_rhat_is_reported_not_warned_about"),
    ("docs/changelog.rst", r"L2E no longer warns when the function-space R-hat exceeds 1\.1",
     f"{HERE}::test_a_large_rhat_is_reported_not_warned_about"),
    ("sklmoo/estimators/_l2e_classifier.py", r"reported in convergence_, not warned about",
     f"{HERE}::test_a_large_rhat_is_reported_not_warned_about"),
    ("docs/changelog.rst", r"function-space R-hat / ESS with a ConvergenceWarning",
     "not a promise: the first release's entry; the 'Quiet fits' entry above it says what "
     "changed since"),
    # the repulsion warning
    ("docs/user_guide.rst", r"the estimator warns when the repulsion exceeds the largest drive",
     f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("docs/user_guide.rst", r"is no reason to warn",
     "tests/test_multitask_estimator.py::"
     "test_no_repulsion_warning_once_a_fitted_task_stops_driving_but_one_for_a_real_excess"),
    ("sklmoo/estimators/_multitask.py", r"A UserWarning says when the repulsion outweighs the "
     r"drive in an epoch|Lower it when the estimator warns that the repulsion outweighs the drive",
     f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("sklmoo/estimators/_mtsgd_base.py", r"warn when the repulsion outweighs the drive's scale",
     f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("sklmoo/nn/_multitask_update.py", r"a warning when the repulsion outweighs the drive's "
     r"scale", f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("docs/changelog.rst", r"The repulsion warning compares the repulsion with the drive's "
     r"largest scale", "tests/test_multitask_estimator.py::"
     "test_no_repulsion_warning_once_a_fitted_task_stops_driving_but_one_for_a_real_excess"),
    # where warnings point and where they are kept
    ("docs/user_guide.rst", r"The warnings sklmoo's own checks raise point at your own fit "
     r"call and are also kept in fit_warnings_",
     f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("docs/user_guide.rst", r"scikit-learn's input checks warn as they do in scikit-learn "
     r"\(e\.g\. a y of shape \(n, 1\)\) and are not kept",
     "not a promise: scikit-learn's own warnings, named as such"),
    ("docs/changelog.rst", r"Every warning points at the user's fit call and is kept in "
     r"fit_warnings_", f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("sklmoo/estimators/_guard.py", r"Warn once, attributed to the user's call, and keep the "
     r"message in fit_warnings_ \(warnings raised in joblib workers are otherwise lost\)",
     f"{HERE}::test_warnings_of_fits_in_joblib_workers_are_kept_in_fit_warnings_"),
    ("sklmoo/estimators/_validation.py", r"warnings that point at the user's call",
     f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("sklmoo/estimators/_validation.py", r"The stacklevel for a warnings\.warn in the calling "
     r"function that attributes the warning to the first frame outside sklmoo",
     f"{HERE}::test_repulsion_that_outweighs_the_drive_warns"),
    ("*", r"fit_warnings_ : list of str The warnings of the last fit \((?:also )?kept when they "
     r"were raised in a joblib worker(?: too)?\)",
     f"{HERE}::test_warnings_of_fits_in_joblib_workers_are_kept_in_fit_warnings_"),
    ("*", r"fit_warnings_",
     f"{HERE}::test_warnings_of_fits_in_joblib_workers_are_kept_in_fit_warnings_"),
    # warnings under n_jobs
    ("docs/faq.rst", r"Warnings under n_jobs",
     f"{HERE}::test_warnings_under_n_jobs_behave_as_the_faq_says"),
    ("docs/faq.rst", r"their warnings \(the stuck-chain ConvergenceWarning, the repulsion "
     r"warning\) are printed by each worker",
     f"{HERE}::test_warnings_under_n_jobs_behave_as_the_faq_says"),
    ("docs/faq.rst", r"pass the main process's warning filters on to the workers",
     f"{HERE}::test_warnings_under_n_jobs_behave_as_the_faq_says"),
    ("docs/faq.rst", r"PYTHONWARNINGS takes only built-in categories; ConvergenceWarning and the "
     r"repulsion warning are both UserWarning subclasses, so this silences every UserWarning",
     f"{HERE}::test_warnings_under_n_jobs_behave_as_the_faq_says"),
    ("docs/faq.rst", r"PYTHONWARNINGS=ignore::UserWarning",
     f"{HERE}::test_warnings_under_n_jobs_behave_as_the_faq_says"),
    ("docs/faq.rst", r"the numbers behind the warnings stay on the fitted estimators",
     f"{HERE}::test_warnings_of_fits_in_joblib_workers_are_kept_in_fit_warnings_"),
    # the metrics
    ("sklmoo/metrics/_calibration.py", r"left out of the averages \(with a warning\)",
     f"{HERE}::test_a_task_without_labels_is_left_out_with_a_warning"),
    ("sklmoo/metrics/_multitask.py", r"left out of the averages \(with a warning\)",
     f"{HERE}::test_a_task_without_labels_is_left_out_with_a_warning"),
    # the meta-sampler's card
    ("sklmoo/samplers/_l2e.py", r"an unreadable card is ignored with a warning",
     "tests/test_meta_safety.py::test_a_broken_card_warns_once_and_the_weights_load"),
    ("sklmoo/samplers/_l2e.py", r"that cannot be read is ignored with a warning",
     "tests/test_meta_safety.py::test_a_broken_card_warns_once_and_the_weights_load"),
    ("docs/changelog.rst", r"an unreadable card warns and loads the weights",
     "tests/test_meta_safety.py::test_a_broken_card_warns_once_and_the_weights_load"),
    ("docs/changelog.rst", r"a deeply nested card is ignored with a warning",
     "tests/test_meta_safety.py::test_a_deeply_nested_card_warns_and_the_weights_load"),
    # scikit-learn's own warnings the documents describe
    ("docs/api.rst", r"treat the T positive-class probabilities as one distribution \(a "
     r"warning;", f"{HERE}::test_sklearns_probability_scorers_warn_on_a_multilabel_y"),
    ("docs/user_guide.rst", r"so cross_val_score reports NaN and a warning",
     f"{HERE}::test_sklearns_scorers_fail_on_a_multitask_y_with_nan_and_a_warning"),
    # quiet fits
    ("docs/user_guide.rst", r"Fits are quiet: a default fit on well-posed data raises no "
     r"warning", "tests/test_defaults.py::test_default_fit_on_a_well_posed_table_is_silent"),
    ("README.md", r"No warnings\.",
     "tests/test_defaults.py::test_default_fit_on_a_well_posed_table_is_silent"),
    ("docs/user_guide.rst", r"No fit of the study raised a warning",
     "not a promise: the record of benchmarks/bench_unequal_tasks.py (its 'warned' column)"),
    ("docs/benchmarks/unequal_tasks.*", r"warned",
     "not a promise: the record of benchmarks/bench_unequal_tasks.py"),
    ("docs/benchmarks/unequal_tasks.md", r"fits that raised a warning",
     "not a promise: the record of benchmarks/bench_unequal_tasks.py"),
    ("docs/benchmarks/panel.md", r"[Ww]arnings?",
     "not a promise: the record of benchmarks/bench_panel.py (warnings counted per fit)"),
    ("docs/benchmarks/default_fit_time.md", r"warnings",
     "not a promise: the record of benchmarks/bench_default_fit_time.py"),
    ("docs/changelog.rst", r"CyclicalSGHMC warns when its cycles never reach a sampling "
     r"phase", "tests/test_sgmcmc_l2e.py::test_settings_and_callbacks_that_cannot_work_are_named"),
    ("sklmoo/metrics/_scorers.py", r"would otherwise turn each score into NaN with a warning",
     "not a promise: scikit-learn's behaviour, which the scorer's early check avoids"),
    # mentions that promise nothing
    ("*", r"warnings are errors|warnings as errors",
     "not a promise: Sphinx's -W setting of make docs"),
    ("docs/index.rst", r"convergence warnings", "not a promise: a pointer to the FAQ"),
    ("docs/faq.rst", r"import warnings|from sklearn\.exceptions import ConvergenceWarning|"
     r"warnings\.filterwarnings\(\"ignore\", category=ConvergenceWarning\)",
     "not a promise: code of the FAQ's example (run by tests/test_doc_snippets.py)"),
]


def _documents():
    """(path relative to the root, text) of every document a user reads."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.rst")),
             *sorted((ROOT / "docs" / "benchmarks").glob("*.rst")),
             *sorted((ROOT / "docs" / "benchmarks").glob("*.md")),
             *sorted((ROOT / "examples").glob("*.py"))]
    for path in paths:
        yield path.relative_to(ROOT).as_posix(), path.read_text()
    for path in sorted((ROOT / "sklmoo").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = [ast.get_docstring(node, clean=True) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))]
        yield path.relative_to(ROOT).as_posix(), "\n\n".join(d for d in docstrings if d)


def _normalised(text):
    return re.sub(r"\s+", " ", text.replace("`", ""))


def _applies(pattern, path):
    return pathlib.PurePosixPath(path).match(pattern) if pattern != "*" else True


def _scan(documents):
    """The mentions of a warning no entry of CLAIMS covers, and the entries that covered one."""
    used, unclassified = set(), []
    for path, text in documents:
        text = _normalised(text)
        spans = []
        for i, (pattern, regex, _) in enumerate(CLAIMS):
            if _applies(pattern, path):
                spans += [(m.start(), m.end(), i) for m in re.finditer(regex, text)]
        for mention in re.finditer(r"warn", text, re.IGNORECASE):
            covering = [i for start, end, i in spans if start <= mention.start() < end]
            used.update(covering)
            if not covering:
                context = text[max(0, mention.start() - 80):mention.start() + 80]
                unclassified.append(f"{path}: ...{context}...")
    return unclassified, used


def test_every_mention_of_a_warning_is_a_tested_claim():
    unclassified, used = _scan(_documents())
    assert not unclassified, ("mentions of warnings that no entry of CLAIMS covers (add the "
                              "test that triggers the warning, or say why it is no promise):\n"
                              + "\n".join(unclassified))
    stale = [CLAIMS[i][:2] for i in range(len(CLAIMS)) if i not in used]
    assert not stale, f"entries of CLAIMS that match no mention any more: {stale}"


def test_the_scan_flags_a_new_promise_and_accepts_a_classified_one():
    new = ("docs/faq.rst", "The estimator warns when\nthe moon is full.")
    known = ("docs/faq.rst", "**It warns only about a stuck chain.** A ``ConvergenceWarning``\n"
                             "(also kept in ``fit_warnings_``)")
    unclassified, _ = _scan([new, known])
    assert len(unclassified) == 1 and "moon" in unclassified[0]


@pytest.mark.parametrize("backing", sorted({b for _, _, b in CLAIMS
                                            if not b.startswith("not a promise")}))
def test_each_promise_is_backed_by_a_test_that_triggers_or_forbids_warnings(backing):
    path, name = backing.split("::")
    source = (ROOT / path).read_text()
    tree = ast.parse(source)
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert name in functions, f"{backing} does not exist"
    body = ast.get_source_segment(source, functions[name])
    assert re.search(r"pytest\.warns|catch_warnings\(record=True\)|simplefilter\(\"error\"|"
                     r"fit_warnings_|\bstderr\b", body), \
        f"{backing} neither triggers nor forbids a warning"


# -- the tests behind the promises ---------------------------------------------------------------

def _stuck_chains():
    """Noise-free chains with a tiny step, started apart: each stays where it began."""
    X, y = make_classification(200, n_features=5, n_informative=3, n_redundant=0,
                               random_state=0)
    X = StandardScaler().fit_transform(X).astype(np.float32)
    est = L2ESamplerClassifier(module=torch.nn.Linear, module__in_features=5,
                               module__out_features=2, sampler="sghmc", temperature=0.0,
                               step_size=1e-7, max_epochs=10, burn_in=0, n_draws=5,
                               random_state=0)
    return est, X, y


def test_a_stuck_chain_warns_and_the_warning_is_kept():
    est, X, y = _stuck_chains()
    with pytest.warns(ConvergenceWarning, match="are stuck") as record:
        est.fit(X, y)
    assert [w.filename for w in record if "stuck" in str(w.message)] == [__file__]
    assert est.convergence_["stuck_chains"] == [0, 1, 2, 3]
    assert len(est.fit_warnings_) == 1 and "ConvergenceWarning" in est.fit_warnings_[0]


def test_a_large_rhat_is_reported_not_warned_about():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    est = L2ESamplerClassifier(max_epochs=30, n_draws=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.fit(X, y)
    assert est.convergence_["rhat"] > 1.1 and est.convergence_["stuck_chains"] == []
    assert est.fit_warnings_ == []


def _repulsive():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return MTSGDMultiTaskClassifier(n_particles=3, max_epochs=3, kernel="function",
                                    head_repulsion=100.0, random_state=0), X, y


def test_repulsion_that_outweighs_the_drive_warns():
    est, X, y = _repulsive()
    with pytest.warns(UserWarning, match="head repulsion outweighs the drive") as record:
        est.fit(X, y)
    assert {w.filename for w in record if "repulsion" in str(w.message)} == {__file__}
    assert any("repulsion outweighs" in m for m in est.fit_warnings_)


def test_warnings_of_fits_in_joblib_workers_are_kept_in_fit_warnings_():
    est, X, y = _stuck_chains()
    with warnings.catch_warnings(record=True):       # the workers' own printing aside
        result = cross_validate(est, X, y, cv=2, n_jobs=2, return_estimator=True)
    for fitted in result["estimator"]:
        assert any("are stuck" in m for m in fitted.fit_warnings_)


_N_JOBS_SCRIPT = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, {tests!r})
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import cross_val_score
    from test_promised_warnings import _stuck_chains

    if sys.argv[1] == "filter":
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
    est, X, y = _stuck_chains()
    cross_val_score(est, X, y, cv=2, n_jobs=2)
""")


def _run_search(tmp_path, mode, **env):
    script = tmp_path / "search.py"
    script.write_text(_N_JOBS_SCRIPT.format(tests=str(ROOT / "tests")))
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]), **env}
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                          env=environ, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_warnings_under_n_jobs_behave_as_the_faq_says(tmp_path):
    stderr = _run_search(tmp_path, "filter")
    filters_reach_workers = tuple(int(v) for v in sklearn.__version__.split(".")[:2]) >= (1, 7)
    if filters_reach_workers:
        assert "are stuck" not in stderr
        return
    # scikit-learn 1.6: each worker prints its fit's warning, located in the worker
    lines = [line for line in stderr.splitlines() if "are stuck" in line]
    assert len(lines) == 2, stderr
    assert all("process.py" in line and "search.py" not in line for line in lines)
    # ... and the environment silences them
    assert "are stuck" not in _run_search(tmp_path, "none", PYTHONWARNINGS="ignore::UserWarning")


def test_a_task_without_labels_is_left_out_with_a_warning():
    y = np.column_stack([[0, 1, 0, 1], [np.nan] * 4])
    proba = [np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.4, 0.6]])] * 2
    for metric in (expected_calibration_error, negative_log_likelihood):
        with pytest.warns(UserWarning, match="no labelled sample"):
            values = metric(y, proba, multioutput="raw_values")
        assert np.isnan(values[1]) and np.isfinite(values[0])


def _binary_tasks():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X, np.column_stack([y == 0, X[:, 0] > 0]).astype(int)


def test_sklearns_probability_scorers_warn_on_a_multilabel_y():
    X, Y = _binary_tasks()
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0).fit(X, Y)
    for name in ("neg_log_loss", "neg_brier_score"):
        with pytest.warns(UserWarning, match="do not sum to one"):
            get_scorer(name)(est, X, Y)


def test_sklearns_scorers_fail_on_a_multitask_y_with_nan_and_a_warning():
    X, Y = _binary_tasks()
    Y[:, 0] = load_iris(return_X_y=True)[1]                 # a three-class task: multiclass
    est = MTSGDMultiTaskClassifier(n_particles=2, max_epochs=2, random_state=0)
    with pytest.warns(UserWarning, match="Scoring failed"):
        scores = cross_val_score(clone(est), X, Y, cv=2, scoring="accuracy")
    assert np.isnan(scores).all()

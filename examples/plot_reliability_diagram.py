"""
===========================================================
Reliability diagrams and calibration scorers with sklearn
===========================================================

:class:`sklmoo.metrics.ReliabilityDiagramDisplay` plots accuracy against top-label confidence,
bin by bin, with the expected calibration error (ECE) in the legend. The scorers
(:data:`~sklmoo.metrics.ece_scorer`, :data:`~sklmoo.metrics.brier_scorer`,
:data:`~sklmoo.metrics.nll_scorer`) work in ``cross_val_score`` and ``GridSearchCV`` for any
probabilistic classifier, single- or multi-task.
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.multioutput import MultiOutputClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklmoo.metrics import ReliabilityDiagramDisplay, brier_scorer, ece_scorer

X, digit = load_digits(return_X_y=True)
X_train, X_test, d_train, d_test = train_test_split(X, digit, test_size=0.4, random_state=0)

# %%
# Single task: a well-calibrated and a poorly calibrated classifier
# ------------------------------------------------------------------
fig, axes = plt.subplots(1, 2, figsize=(9, 5))
models = {
    "Logistic regression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
    "Gaussian naive Bayes": GaussianNB(),
}
for ax, (name, model) in zip(axes, models.items()):
    model.fit(X_train, d_train)
    ReliabilityDiagramDisplay.from_estimator(model, X_test, d_test, n_bins=10, name=name, ax=ax)
    ece = -cross_val_score(model, X, digit, scoring=ece_scorer, cv=5)
    brier = -cross_val_score(model, X, digit, scoring=brier_scorer, cv=5)
    print(f"{name:22s} 5-fold ECE {ece.mean():.3f} +- {ece.std():.3f}, "
          f"Brier {brier.mean():.3f} +- {brier.std():.3f}")
fig.tight_layout()
fig.savefig("reliability_single_task.png", dpi=80)

# %%
# Multi-task: one panel per task
# ------------------------------
# Two tasks on the same images, one with ten classes and one binary, with string labels
# (scikit-learn needs one label type across the frame).
y = pd.DataFrame({"digit": digit.astype(str), "parity": np.where(digit % 2 == 0, "even", "odd")})
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, random_state=0)
clf = MultiOutputClassifier(make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)))
clf.fit(X_train, y_train)
disp = ReliabilityDiagramDisplay.from_estimator(clf, X_test, y_test, task_names=list(y.columns))
print("multi-task ECE per task:", np.round(disp.ece, 3))
disp.figure_.savefig("reliability_multi_task.png", dpi=80)
plt.show()

"""
=================================================================
Multi-task classification with MT-SGD particle networks
=================================================================

:class:`sklmoo.MTSGDMultiTaskClassifier` fits an ensemble of particle networks on a
multi-task target and behaves like any scikit-learn classifier. Here: Multi-Digits (two digits
per image, one task per digit), the reliability diagram of each task, and the epistemic part
of the predictive uncertainty, which grows on inputs unlike the training images.
"""

import matplotlib.pyplot as plt
import numpy as np

from sklmoo import MTSGDMultiTaskClassifier
from sklmoo.datasets import make_multi_digits
from sklmoo.metrics import ReliabilityDiagramDisplay, brier_score, expected_calibration_error

X, y = make_multi_digits(2000, random_state=0, return_X_y=True)
X_test, y_test = make_multi_digits(600, subset="test", random_state=1, return_X_y=True)

clf = MTSGDMultiTaskClassifier(n_particles=5, max_epochs=10, lr=3e-3, input_shape=(1, 12, 12),
                               random_state=0)
clf.fit(X, y)
proba = clf.predict_proba(X_test)
print("mean task accuracy:", round(clf.score(X_test, y_test), 3))
print("Brier per task:", np.round(brier_score(y_test, proba, multioutput="raw_values"), 3))
print("ECE per task:", np.round(expected_calibration_error(y_test, proba,
                                                           multioutput="raw_values"), 3))

# %%
# Calibration of each task
ReliabilityDiagramDisplay.from_estimator(clf, X_test, y_test, name="MT-SGD",
                                         task_names=["top-left", "bottom-right"])

# %%
# Epistemic uncertainty: test digits versus pixel noise
rng = np.random.default_rng(0)
noise = rng.uniform(0, 1, size=X_test.shape).astype(np.float32)
epi_test = clf.predict_uncertainty(X_test)["epistemic"].mean(axis=1)
epi_noise = clf.predict_uncertainty(noise)["epistemic"].mean(axis=1)
print(f"mean epistemic entropy: digits {epi_test.mean():.3f}, noise {epi_noise.mean():.3f}")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.hist(epi_test, bins=30, alpha=0.6, label="test digits", density=True)
ax.hist(epi_noise, bins=30, alpha=0.6, label="uniform noise", density=True)
ax.set_xlabel("epistemic entropy (nats, mean over tasks)")
ax.legend()
fig.tight_layout()
plt.show()

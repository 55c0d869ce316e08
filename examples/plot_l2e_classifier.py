"""
==================================================================
Bayesian neural-network classification with L2ESamplerClassifier
==================================================================

:class:`~sklmoo.L2ESamplerClassifier` runs four SG-MCMC chains of a small MLP, moved by the
L2E sampler sklmoo meta-trained and ships (on digits-derived and synthetic tasks only), and
predicts with the Bayesian model average (BMA) of the samples it collected. Here it meets the
breast-cancer data set, which meta-training never saw, inside an ordinary scikit-learn
pipeline, next to an SGHMC chain at its defaults.

Three questions a user asks: is the model-averaged prediction calibrated (the reliability
diagram), how many samples does the average need (accuracy and NLL as samples accumulate),
and have the chains converged (the function-space R-hat that ``fit`` checks).
"""


import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklmoo import L2ESamplerClassifier
from sklmoo.metrics import ReliabilityDiagramDisplay, negative_log_likelihood

X, y = load_breast_cancer(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y,
                                                    random_state=0)

# %%
# Fit: a pipeline like any other
# ------------------------------
# 100 epochs, the first half burn-in, then 20 draws per chain at evenly spaced epochs; 20 % of
# the training rows are held out to fit the temperature of the model average. Neural-network
# posteriors have many modes and chains rarely agree on every input, so R-hat above 1.1 is
# normal: ``fit`` reports it in ``convergence_`` (and warns only when a chain is stuck).
models = {}
for sampler in ("l2e", "sghmc"):
    pipe = make_pipeline(StandardScaler(),
                         L2ESamplerClassifier(sampler=sampler, max_epochs=100, random_state=0))
    models[sampler] = pipe.fit(X_train, y_train)
    clf = pipe[-1]
    print(f"{sampler:6s} test accuracy {pipe.score(X_test, y_test):.3f}, NLL "
          f"{negative_log_likelihood(y_test, pipe.predict_proba(X_test)):.3f}, "
          f"function-space R-hat {clf.convergence_['rhat']:.2f}, "
          f"bulk ESS {clf.convergence_['ess_bulk']:.0f} of {clf.n_chains * clf.n_draws_} draws")

# %%
# Reliability and the value of more samples
# -----------------------------------------
# ``predict_proba_samples`` returns every draw's probabilities, chain by chain; averaging the
# first k draws of each chain shows how the BMA improves as samples accumulate (the L2E
# paper's Figure 1).
fig, axes = plt.subplots(1, 3, figsize=(13, 4))
ReliabilityDiagramDisplay.from_estimator(models["l2e"], X_test, y_test, n_bins=10,
                                         name="L2E (BMA)", ax=axes[0])
for sampler, pipe in models.items():
    clf = pipe[-1]
    draws = clf.predict_proba_samples(pipe[0].transform(X_test))
    draws = draws.reshape(clf.n_chains, clf.n_draws_, *draws.shape[1:])
    k = np.arange(1, clf.n_draws_ + 1)
    bma = (np.cumsum(draws, axis=1) / k[None, :, None, None]).mean(axis=0)
    axes[1].plot(k * clf.n_chains, [np.mean(p.argmax(1) == y_test) for p in bma], label=sampler)
    axes[2].plot(k * clf.n_chains, [negative_log_likelihood(y_test, p) for p in bma],
                 label=sampler)
axes[1].set(xlabel="collected samples (4 chains)", ylabel="BMA test accuracy")
axes[2].set(xlabel="collected samples (4 chains)", ylabel="BMA test NLL")
axes[2].legend()
fig.tight_layout()

# %%
# Where the model is unsure
# -------------------------
# The entropy of the BMA splits into the draws' own uncertainty (aleatoric) and their
# disagreement (epistemic, the mutual information).
unc = models["l2e"][-1].predict_uncertainty(models["l2e"][0].transform(X_test))
wrong = models["l2e"].predict(X_test) != y_test
print(f"mean epistemic entropy: {unc['epistemic'][~wrong].mean():.4f} nats on correct "
      f"predictions, {unc['epistemic'][wrong].mean():.4f} on the {wrong.sum()} errors")
plt.show()

"""Why are the regression ensembles' intervals too wide? Members' own coverage against the
ensemble's, on the SARCOS stand-in.

Run: ``python benchmarks/bench_regression_members.py`` (about a minute; prints). One
``MTSGDRegressor(method='mgda')`` (5 particles, MLP 128-128, 40 epochs, batch 128) on 3000
samples of ``make_inverse_dynamics``, 1000 held-out: the 90 % coverage of each particle's own
Gaussian, of the ensemble mean with only the aleatoric variance, and of the full predictive
(aleatoric + epistemic); standardised MSE of the members and of the ensemble mean.
"""
import numpy as np
from sklearn.preprocessing import StandardScaler
from sklmoo import MTSGDRegressor
from sklmoo.datasets import make_inverse_dynamics
from sklmoo.metrics import interval_coverage
X, y = make_inverse_dynamics(4000, random_state=0, return_X_y=True)
s = StandardScaler().fit(X[:3000])
reg = MTSGDRegressor(method="mgda", max_epochs=40, batch_size=128, module__hidden_units=(128, 128), random_state=0).fit(s.transform(X[:3000]), y[:3000])
Xt, yt = s.transform(X[3000:]), y[3000:]
mean, std = reg.predict(Xt, return_std=True)
means, stds = reg.predict_members(Xt, return_std=True)
print("ensemble cov90", interval_coverage(yt, mean, std))
print("ensemble mean with aleatoric only", interval_coverage(yt, mean, np.sqrt((stds**2).mean(0))))
print("members' own cov90", [round(interval_coverage(yt, means[m], stds[m]), 3) for m in range(len(means))])
print("mse ensemble", (((yt-mean)/yt.std(0))**2).mean(), "members", [round((((yt-means[m])/yt.std(0))**2).mean(), 4) for m in range(len(means))])

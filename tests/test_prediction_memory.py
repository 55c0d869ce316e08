"""Prediction memory is bounded by the batch, also after the call returns (DESIGN.md,
"Reliability rules"): measured in a fresh process, as a user's process would see it."""

import json
import subprocess
import sys

import pytest

CHILD = r"""
import gc, json, warnings
import numpy as np, torch
torch.set_num_threads(1)
warnings.simplefilter("ignore")
from sklmoo import L2ESamplerClassifier

def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2 ** 20

rng = np.random.default_rng(0)
X = rng.normal(size=(500, 10)).astype(np.float32)
s = X[:, 0] + X[:, 1]
y = np.digitize(s, np.quantile(s, np.linspace(0.1, 0.9, 9)))          # 10 classes
est = L2ESamplerClassifier(max_epochs=20, n_draws=10, random_state=0).fit(X, y)
Xn = rng.normal(size=(400_000, 10)).astype(np.float32)
est.predict_proba(Xn[:10])
gc.collect()
before = resident_mb()
proba = est.predict_proba(Xn)
gc.collect()
print(json.dumps({"extra_mb": resident_mb() - before - proba.nbytes / 2 ** 20,
                  "result_mb": proba.nbytes / 2 ** 20}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_l2e_predict_proba_leaves_no_memory_behind_on_many_rows():
    # 400,000 rows x 40 networks (4 chains x 10 draws) x 10 classes: the per-batch pattern of
    # the earlier code left
    # ~250 MB resident after returning (heap fragmentation), growing with the rows
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True, timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["extra_mb"] < 100, result

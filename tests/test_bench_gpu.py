"""benchmarks/bench_gpu.py's CUDA-against-CPU comparison, checked on the CPU: the part of the
GPU readiness benchmark that only a CUDA machine runs for real (``compare(..., device='cpu')``
compares two CPU fits, which must agree exactly), and the page it writes."""

import importlib.util
import os
from unittest import mock

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_gpu", os.path.join(ROOT, "benchmarks", "bench_gpu.py"))
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(os.environ):       # it sets the thread variables a benchmark wants
        spec.loader.exec_module(module)
    module.N_TEST = 300
    return module


@pytest.mark.parametrize("name, rows, params", [
    ("MTSGDMultiTaskClassifier", 200, {}),
    ("L2ESamplerClassifier", 200, {"n_draws": 2}),      # 2 sampler steps: 2 draws
    ("MTSGDRegressor", 1200, {}),
])
def test_compare_runs_every_estimator_and_two_equal_fits_agree(bench, name, rows, params):
    result = bench.compare(name, rows, device="cpu", max_epochs=2, **params)
    assert result["agree"] is True
    assert result["mean_abs_diff"] == 0.0                   # same device, same seed
    assert result["cpu_nll"] == result["cuda_nll"] and np.isfinite(result["cpu_nll"])
    if name == "MTSGDRegressor":
        assert result["cpu_accuracy"] is None
    else:
        assert 0.0 <= result["cpu_accuracy"] <= 1.0
    assert result["cpu_seconds"] > 0 and result["speedup"] > 0


def test_the_page_has_a_row_per_comparison_and_flags_disagreement(bench, tmp_path):
    row = dict(estimator="MTSGDRegressor", rows=1000, cpu_seconds=2.0, cuda_seconds=1.0,
               cpu_nll=0.1, cuda_nll=0.3, cpu_accuracy=None, cuda_accuracy=None,
               mean_abs_diff=0.2, speedup=2.0, agree=False)
    md, js = tmp_path / "gpu.md", tmp_path / "gpu.json"
    bench.write([], [row], [1000], md=str(md), json_path=str(js))
    text = md.read_text()
    assert "| MTSGDRegressor | 1,000 | 2.0 | 1.0 | 2.0x | 0.1000 / 0.3000 | — |" in text
    assert text.rstrip().endswith("**no** |")
    assert js.exists()

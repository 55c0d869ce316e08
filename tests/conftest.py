import numpy as np
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` run where a CUDA device is visible and are skipped elsewhere."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed_everything():
    np.random.seed(0)
    torch.manual_seed(0)
    yield

"""Test-wide settings: one torch thread, headless plotting, offline Hugging Face, fixed seeds."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed_all():
    import random

    import numpy as np
    import pyro

    random.seed(0)
    np.random.seed(0)  # noqa: NPY002
    torch.manual_seed(0)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    yield

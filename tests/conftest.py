import os
import sys

import numpy as np
import pytest
from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("sheaflinalg", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("sheaflinalg")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)

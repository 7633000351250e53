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


@pytest.fixture(autouse=True)
def no_figure_left_open(request):
    """A test that leaves a pyplot figure open fails (after closing it): the suite never piles up figures."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")      # never imported here: most tests draw nothing
    if plt is not None and plt.get_fignums():
        count = len(plt.get_fignums())
        plt.close("all")
        pytest.fail(f"{request.node.nodeid} left {count} matplotlib figure(s) open")


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory):
    """A wheel of this tree installed in a fresh environment outside the repository (tests/installed.py)."""
    from installed import Installed

    installed = Installed(tmp_path_factory.mktemp("wheel"))
    installed.wheel = installed.build()
    return installed


@pytest.fixture(scope="session")
def quick_reproduction(installed_wheel):
    """``sheaflinalg reproduce --quick`` run by the installed wheel in its own directory: the output folder.

    Shared by the wheel's test and the reproduction's tests, so the suite runs it once.
    """
    run = installed_wheel.run("sheaflinalg", "reproduce", "--quick", "--out", "paper", "--jobs", "1", "--no-progress")
    assert run.returncode == 0, run.stdout + run.stderr
    return installed_wheel.work / "paper"

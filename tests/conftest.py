import os
import signal
import sys

import numpy as np
import pytest
from hypothesis import settings

# The tests' shared code is imported as ``helpers.<module>`` (tests/helpers), from any folder of tests.
sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("sheaflinalg", deadline=None, max_examples=30, derandomize=True)
settings.load_profile("sheaflinalg")

# A suite started in the background of a non-interactive shell inherits SIGINT ignored, and every child
# process it starts would inherit that too: the Ctrl-C tests need Python's default handler in their children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


class _Reproduction:
    """The wheel's build, installation and ``sheaflinalg reproduce --quick``, run in a background thread.

    Started as soon as the collected tests are known to need it, so that its compilation (a fresh
    installation compiles every kernel) runs on the second core while the rest of the suite runs;
    the fixtures below wait for it.  Subprocesses release the GIL while the thread waits.
    """

    def __init__(self, base):
        import threading

        from helpers.installed import Installed

        self.installed, self.run, self.error = Installed(base), None, None
        self.thread = threading.Thread(target=self._work, name="installed-wheel", daemon=True)
        self.thread.start()

    def _work(self):
        try:
            self.installed.wheel = self.installed.build()
            self.run = self.installed.run("sheaflinalg", "reproduce", "--quick", "--out", "paper", "--jobs", "1",
                                          "--no-progress")
        except BaseException as exc:  # reported by the fixtures, in the tests that need them
            self.error = exc

    def result(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.installed, self.run


_BACKGROUND = {}


def pytest_collection_modifyitems(session, config, items):
    if any({"installed_wheel", "quick_reproduction"} & set(getattr(item, "fixturenames", ())) for item in items):
        import tempfile

        _BACKGROUND["base"] = tempfile.mkdtemp(prefix="sheaflinalg-wheel-")
        _BACKGROUND["job"] = _Reproduction(_BACKGROUND["base"])


def pytest_sessionfinish(session, exitstatus):
    job = _BACKGROUND.pop("job", None)
    if job is not None and (exitstatus == 0 or not job.thread.is_alive()):  # never wait after Ctrl-C
        import shutil

        job.thread.join()
        shutil.rmtree(_BACKGROUND.pop("base"), ignore_errors=True)


@pytest.fixture(scope="session")
def installed_wheel():
    """A wheel of this tree installed in a fresh environment outside the repository (tests/helpers/installed.py)."""
    return _BACKGROUND["job"].result()[0]


@pytest.fixture(scope="session")
def quick_reproduction(installed_wheel):
    """``sheaflinalg reproduce --quick`` run by the installed wheel in its own directory: the output folder.

    Shared by the wheel's test and the reproduction's tests, so the suite runs it once (in the
    background, from the start of the session).
    """
    run = _BACKGROUND["job"].result()[1]
    assert run.returncode == 0, run.stdout + run.stderr
    return installed_wheel.work / "paper"

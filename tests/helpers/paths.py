"""Places of the repository that the tests read, independent of the folder of the test reading them."""

import pathlib

#: The repository's root (the folder of ``setup.cfg``).
ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The package's source tree.
PACKAGE = ROOT / "sheaflinalg"
#: The tests' own data files.
DATA = ROOT / "tests" / "data"
#: The folder put on ``sys.path`` by the root conftest: ``helpers`` is imported from there.
TESTS = ROOT / "tests"

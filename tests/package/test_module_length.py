"""No module of the package is over 600 lines: a module that grows past that is split along its seams."""

import pytest

from helpers.paths import PACKAGE

LIMIT = 600
MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_modules_to_measure():
    assert len(MODULES) > 100 and PACKAGE / "kernels" / "force.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_module_is_at_most_600_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= LIMIT, f"{path.relative_to(PACKAGE)} has {n} lines (at most {LIMIT})"

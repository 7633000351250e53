"""The README's and the user guide's Python examples run as written, in order, in one namespace each."""

import re

import pytest
from helpers.paths import ROOT

DOCS = [ROOT / "README.md", ROOT / "docs" / "guide.md"]


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_have_examples(path):
    assert len(python_blocks(path)) >= 2


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_examples_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for i, block in enumerate(python_blocks(path)):
        exec(compile(block, f"{path.name} python block {i}", "exec"), namespace)


def test_readme_figures_exist():
    for rel in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "README.md").read_text()):
        assert (ROOT / rel).stat().st_size > 1000, rel

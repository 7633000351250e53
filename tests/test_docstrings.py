"""Docstring examples of the public modules run as doctests."""

import doctest
import importlib

import pytest

MODULES = [
    "sheaflinalg.activations", "sheaflinalg.validation", "sheaflinalg.network", "sheaflinalg.layout",
    "sheaflinalg.sparse_blocks", "sheaflinalg.assembly", "sheaflinalg.harmonic", "sheaflinalg.factor",
    "sheaflinalg.verify", "sheaflinalg.state", "sheaflinalg.atomic", "sheaflinalg.checkpoint",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0

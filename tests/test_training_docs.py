"""Docstring examples of the training modules run as doctests."""

import doctest
import importlib

import pytest

MODULES = ["sheaflinalg.training", "sheaflinalg.baseline", "sheaflinalg.tasks", "sheaflinalg.losses",
           "sheaflinalg.history", "sheaflinalg.parameter_sheaf", "sheaflinalg.plotting.training"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0

"""Docstring examples of every module of the package run as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import sheaflinalg

ALL_MODULES = sorted(m.name for m in pkgutil.walk_packages(sheaflinalg.__path__, "sheaflinalg."))
# Modules whose docstrings must carry examples (the API a user reads first).
WITH_EXAMPLES = [
    "sheaflinalg.network.activations", "sheaflinalg._common.validation", "sheaflinalg.network.model",
    "sheaflinalg.sheaf.layout", "sheaflinalg.sheaf.assembled.sparse_blocks", "sheaflinalg.sheaf.assembled.assembly",
    "sheaflinalg.sheaf.assembled.system", "sheaflinalg.sheaf.harmonic", "sheaflinalg.sheaf.assembled.factor", "sheaflinalg.sheaf.verification.verify", "sheaflinalg.sheaf.state",
    "sheaflinalg._common.atomic", "sheaflinalg.training.checkpoint", "sheaflinalg.spectral.drivers",
    "sheaflinalg.spectral.operators.chain", "sheaflinalg.spectral.result", "sheaflinalg.spectral.tracker",
    "sheaflinalg.plotting.spectral", "sheaflinalg.training.train", "sheaflinalg.training.sgd",
    "sheaflinalg.training.losses", "sheaflinalg.training.history", "sheaflinalg.training.parameter_sheaf",
    "sheaflinalg.tasks", "sheaflinalg.plotting.training", "sheaflinalg.discord.edge_residuals",
    "sheaflinalg.discord.pinning.analysis", "sheaflinalg.plotting.discord", "sheaflinalg._common.threads",
    "sheaflinalg._common.rounds", "sheaflinalg.sheaf.pins.completion", "sheaflinalg.sheaf.pins.specs",
    "sheaflinalg.sheaf.edge_groups", "sheaflinalg.discord.edges", "sheaflinalg._common.resources",
    "sheaflinalg.plotting.figure", "sheaflinalg.reproduce.registry", "sheaflinalg.reproduce.output",
    "sheaflinalg._common.options", "sheaflinalg._common.blocks", "sheaflinalg.dynamics.heat",
    "sheaflinalg.dynamics.problem", "sheaflinalg.dynamics.exact.dense", "sheaflinalg.discord.node_residuals",
    "sheaflinalg.plotting.case_study", "sheaflinalg.reproduce.case_analysis",
    "sheaflinalg.training.optim", "sheaflinalg.training.optim.sgd", "sheaflinalg.training.optim.adam",
    "sheaflinalg.training.optim.schedules", "sheaflinalg.training.optim.choose", "sheaflinalg.training.batches",
]


def test_every_listed_module_exists():
    assert set(WITH_EXAMPLES) <= set(ALL_MODULES)


@pytest.mark.parametrize("name", ALL_MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name in WITH_EXAMPLES:
        assert result.attempted > 0

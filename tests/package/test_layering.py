"""The folder tree is the architecture: every import inside the package points down.

Layers, bottom to top: ``_common`` and ``kernels``; ``network``; ``sheaf``;
``dynamics``, ``discord``, ``training`` and ``spectral`` (side by side, none
imports another); ``tasks``; ``sweep`` and ``plotting`` (side by side); ``reproduce``; ``commands``; ``cli`` (the dispatcher).  Only the
package root (which exports the API) and ``commands`` may import the root.  Inside ``dynamics``,
``euler`` and ``exact`` do not import each other, and no module cycle exists anywhere
(tests/package/test_import_cycles.py, over the same import graph: tests/helpers/module_graph.py).
"""

import pytest
from helpers.module_graph import MODULES, PACKAGE, imported_modules, module_name

RANK = {"_common": 0, "kernels": 0, "network": 1, "sheaf": 2, "dynamics": 3, "discord": 3, "training": 3, "spectral": 3,
        "tasks": 4, "sweep": 5, "plotting": 5, "reproduce": 6, "commands": 7, "cli": 8}


def layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_top_level_entry_has_a_layer():
    entries = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"}
    assert entries == set(RANK)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path):
    own = layer(module_name(path))
    for target in imported_modules(path):
        other = layer(target)
        if other is None:
            assert own == "commands", f"{module_name(path)} imports the package root"
            continue
        if other == own:
            continue
        assert other in RANK, f"{module_name(path)} imports unknown {target}"
        assert RANK[other] < RANK[own], f"{module_name(path)} (layer {own}) imports {target} (layer {other})"

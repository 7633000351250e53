"""Tests of the package as a whole: layering, import cycles, docstrings, function length, README, the wheel."""

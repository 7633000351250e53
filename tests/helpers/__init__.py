"""What the tests share: naive dense twins, hypothesis strategies, example networks, oracles, paths.

Imported as ``helpers.<module>``: the root ``conftest.py`` puts ``tests/`` on ``sys.path``.
"""

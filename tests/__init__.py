"""The test suite, in one folder per layer of the package; shared helpers in ``tests/helpers``."""

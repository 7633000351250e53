"""The package version (one place; ``sheaflinalg.__version__`` reads it)."""

VERSION = "0.1.0"

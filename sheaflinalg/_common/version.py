"""The package version, written here only: ``sheaflinalg.__version__`` reads it, and setup.cfg
(``version = attr: sheaflinalg._common.version.VERSION``) gives it to the wheel."""

VERSION = "0.1.0"

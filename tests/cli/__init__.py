"""Tests of the command line (sheaflinalg/commands, sheaflinalg/cli.py)."""

"""Tests of discord (sheaflinalg/discord)."""

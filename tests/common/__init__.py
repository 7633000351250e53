"""Tests of the shared rules (sheaflinalg/_common): threads, writes, file readers, refusals of bad input."""

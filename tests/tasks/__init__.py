"""Tests of task generators and experiment files (sheaflinalg/tasks.py)."""

"""Tests of networks, graphs, their files and importers (sheaflinalg/network)."""

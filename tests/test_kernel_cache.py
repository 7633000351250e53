"""The numba cache is dropped when any kernel source changes (numba itself only watches each file)."""

from sheaflinalg.kernels import drop_stale_numba_cache


def test_cache_survives_unchanged_sources_and_goes_when_one_changes(tmp_path):
    (tmp_path / "force.py").write_text("x = 1\n")
    (tmp_path / "heat.py").write_text("y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    (cache / "heat.run-10.py311.nbi").write_text("old")
    drop_stale_numba_cache(str(tmp_path))  # no stamp yet: unknown provenance, dropped
    assert not (cache / "heat.run-10.py311.nbi").exists()
    (cache / "heat.run-10.py311.nbi").write_text("new")
    (cache / "heat.run-10.py311.1.nbc").write_text("new")
    drop_stale_numba_cache(str(tmp_path))
    assert (cache / "heat.run-10.py311.nbi").exists() and (cache / "heat.run-10.py311.1.nbc").exists()
    (tmp_path / "force.py").write_text("x = 3\n")  # only the callee changes
    drop_stale_numba_cache(str(tmp_path))
    assert not (cache / "heat.run-10.py311.nbi").exists() and not (cache / "heat.run-10.py311.1.nbc").exists()

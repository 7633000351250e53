"""Issue 31: process pools sized by their work, and resume files that were edited (reproduce)."""

import contextlib
import dataclasses
import json
import os

import pytest

import sheaflinalg as sl

from sheaflinalg import __version__
from sheaflinalg._common import threads
from sheaflinalg._common.npzfile import FileFormatError
from sheaflinalg.reproduce import registry, table_e1


class _Pool(contextlib.nullcontext):
    """An inline process pool that records how many workers it was asked for."""

    sizes = []
    map = staticmethod(map)

    def __init__(self, jobs, *args):
        self.sizes.append(jobs)
        super().__init__(self)


def _fake_run(name, method, steps):
    record = {"name": name, "method": method, "task": name.split("_")[0], "depth": name.split("_")[1],
              "arch": [2, 3, 1], "reference_seconds": None, "train": 0.5, "test": 0.25, "seconds": 0.0,
              "max_rel_error": 0.0, "records": 2, "parameters": [0.0] * 13}
    return dict(record, stagnation={}) if method == "sheaf" else record


@pytest.fixture
def fake_table(monkeypatch):
    _Pool.sizes = []
    monkeypatch.setattr(table_e1, "process_pool", _Pool)
    monkeypatch.setattr(table_e1, "run_one", _fake_run)
    monkeypatch.setattr(threads, "available_cores", lambda: 64)
    return _Pool.sizes


def test_table_e1_starts_no_more_workers_than_runs(tmp_path, fake_table):
    names = ["paraboloid_1H", "blobs_1H"]                        # 4 runs
    table_e1.run_all(names, 1000, 24, str(tmp_path), resume=False, progress=False)
    table_e1.run_all(names, 1000, 24, str(tmp_path), resume=True, progress=False)     # all cached
    (tmp_path / "runs" / "blobs_1H-sgd-1000.json").unlink()
    table_e1.run_all(names, 1000, 24, str(tmp_path), resume=True, progress=False)     # one to run
    assert fake_table == [4, 1]


def test_workers_are_capped_by_the_cores(monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 3)
    assert [threads.pool_workers(24, 4), threads.pool_workers(2, 4), threads.pool_workers(24, 0)] == [3, 2, 0]


@pytest.mark.parametrize("edit", [lambda r: r.pop("train"), lambda r: r.update(test="0.25"),
                                  lambda r: r.update(name="blobs_1H")])
def test_an_edited_cached_run_is_refused_before_any_run(tmp_path, fake_table, monkeypatch, edit):
    table_e1.run_all(["paraboloid_1H"], 1000, 1, str(tmp_path), resume=False, progress=False)
    path = tmp_path / "runs" / "paraboloid_1H-sgd-1000.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))
    (tmp_path / "runs" / "paraboloid_1H-sheaf-1000.json").unlink()

    def must_not_run(*args):
        raise AssertionError("a run started before the cache was checked")

    monkeypatch.setattr(table_e1, "run_one", must_not_run)
    with pytest.raises(FileFormatError, match="paraboloid_1H-sgd-1000.json: .*delete it to compute that run again"):
        table_e1.run_all(["paraboloid_1H"], 1000, 1, str(tmp_path), resume=True, progress=False)


def _items(monkeypatch, ran):
    def fake(outputs, quick, **options):
        ran.append(options)
        return [], "fake"
    items = tuple(dataclasses.replace(item, run=fake) for item in registry.ITEMS[:2])
    monkeypatch.setattr(registry, "ITEMS", items)
    return [item.key for item in items]


def test_a_marker_lacking_a_key_is_refused_before_the_first_item(tmp_path, monkeypatch):
    ran = []
    keys = _items(monkeypatch, ran)
    (tmp_path / "done").mkdir()
    marker = {"settings": {"quick": True, "version": __version__}, "paths": [], "seconds": 1.0}   # no notes
    (tmp_path / "done" / f"{keys[1]}.json").write_text(json.dumps(marker))
    with pytest.raises(FileFormatError, match=f"{keys[1]}.json: lacks the key 'notes'.*without --resume"):
        registry.run_items(tmp_path, quick=True, resume=True, progress=False, log=lambda *a: None)
    assert ran == []
    registry.run_items(tmp_path, quick=True, resume=False, progress=False, log=lambda *a: None)   # starts over
    assert len(ran) == 2


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", json.dumps({"settings": {}, "paths": [3], "seconds": 1,
                                                                      "notes": ""})])
def test_a_marker_of_another_kind_is_refused(tmp_path, monkeypatch, text):
    keys = _items(monkeypatch, [])
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / f"{keys[0]}.json").write_text(text)
    with pytest.raises(FileFormatError, match=f"{keys[0]}.json: .*delete it to run {keys[0]} again"):
        registry.run_items(tmp_path, quick=True, resume=True, progress=False, log=lambda *a: None)


HEAT = {"sweep": {"function": "heat", "metrics": ["steps"]}, "fixed": {"arch": [2, 4, 1], "n_inputs": 2},
        "grid": {"seed": [0, 1]}}


def _unwritable_directory(place):
    place.mkdir()
    place.chmod(0o500)


@pytest.mark.parametrize("make,match", [
    (lambda place: place.symlink_to(place.parent / "nowhere" / "dir"), "a link to nowhere has its name"),
    (_unwritable_directory, "it cannot be written"),
])
def test_an_artifacts_place_the_first_run_could_not_write_is_refused_before_it(tmp_path, make, match):
    make(tmp_path / "r.db.artifacts")
    if match == "it cannot be written" and os.access(tmp_path / "r.db.artifacts", os.W_OK):
        pytest.skip("this user writes anywhere (root)")
    with pytest.raises(sl.sweep.StoreError, match=match):
        sl.sweep.run(HEAT, tmp_path / "r.db", jobs=1, progress=False)
    assert not (tmp_path / "r.db").exists()

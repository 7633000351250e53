"""Entries a file reader does not know are ignored with one warning naming them; known entries stay checked;
sizes an archive declares are checked before anything is decompressed."""

import importlib
import struct
import warnings
import zipfile

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg._common.npzfile import UnreadEntriesWarning
from sheaflinalg.tasks import DATA_DIR


def _network_file(tmp_path):
    path = tmp_path / "net.npz"
    sl.Network.random([2, 3, 1], seed=0).save(str(path))
    return path


def _experiment_file(tmp_path):
    return DATA_DIR / "paraboloid_1H.npz"


READERS = {
    "network": (_network_file, lambda p: sl.Network.load(str(p)), lambda a, b: a.parameters().tolist()
                == b.parameters().tolist()),
    "experiment": (_experiment_file, sl.tasks.load_experiment,
                   lambda a, b: a.network.parameters().tolist() == b.network.parameters().tolist()
                   and np.array_equal(a.init, b.init) and a.meta == b.meta),
}


def _with_extra(source, target, extra):
    with np.load(source) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez(target, **arrays, **extra)
    return target


@pytest.mark.parametrize("kind", sorted(READERS))
def test_extra_entries_warn_once_and_change_nothing(kind, tmp_path):
    make, read, same = READERS[kind]
    source = make(tmp_path)
    extra = {"final_W1": np.ones((3, 2)), "notes": np.array("trained on Tuesday"), "zz_counts": np.arange(4)}
    path = _with_extra(source, tmp_path / "with-extra.npz", extra)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = read(path)
    unread = [w for w in caught if issubclass(w.category, UnreadEntriesWarning)]
    assert len(unread) == 1, [str(w.message) for w in caught]
    message = str(unread[0].message)
    assert str(path) in message and all(repr(name) in message for name in extra)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(got, read(source))


def test_a_file_of_another_kind_is_not_read_as_a_network():
    # an experiment's output activation is in its meta: read as a network file it would be lost
    with pytest.raises(ValueError, match="not a network file .*load_experiment"):
        sl.Network.load(str(DATA_DIR / "blobs_2H.npz"))


@pytest.mark.parametrize("kind", sorted(READERS))
def test_known_entries_that_contradict_stay_errors(kind, tmp_path):
    make, read, _ = READERS[kind]
    path = _with_extra(make(tmp_path), tmp_path / "gap.npz", {"W7": np.ones((1, 1)), "b7": np.ones(1)})
    with pytest.raises(ValueError, match="W7"):
        read(path)


def test_declared_sizes_are_checked_before_anything_is_decompressed(tmp_path, monkeypatch):
    source = _network_file(tmp_path)
    with np.load(source) as z:
        arrays = {k: z[k] for k in z.files}
    big = tmp_path / "compressed.npz"
    np.savez_compressed(big, **arrays, notes=np.zeros(2**17))        # 1 MiB of zeros in a few kB
    memory = importlib.import_module("sheaflinalg._common.memory")
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**19)
    with pytest.raises(sl.InsufficientMemoryError, match="the entries of this network file: about 1 MiB needed"):
        sl.Network.load(str(big))
    monkeypatch.undo()
    # a member that declares more than deflate can produce from its compressed bytes is crafted
    data = bytearray(big.read_bytes())
    with zipfile.ZipFile(big) as archive:
        info = archive.getinfo("notes.npy")
    start = data.index(b"notes.npy", data.index(b"PK\x01\x02")) - 46      # its central directory record
    assert data[start:start + 4] == b"PK\x01\x02"
    struct.pack_into("<I", data, start + 24, info.compress_size * 2000)  # uncompressed size
    crafted = tmp_path / "crafted.npz"
    crafted.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="more than compression can give"):
        sl.Network.load(str(crafted))

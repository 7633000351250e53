"""Fuzzing every file reader with crafted files, each read in a child process.

Readers: ``Network.load`` (chain and graph network files), training checkpoints (``train(..., checkpoint=FILE)`` resuming the
run), recorded experiments (``tasks.load_experiment``, behind ``table_e1`` and ``train
--experiment``).  Mutations: truncations, byte flips, entries dropped, added, reshaped,
retyped or made non-finite, and JSON metadata fields changed or removed (checkpoints both
with the digest left stale and re-signed, so that the checks behind the digest are reached).
The outcome must be one ValueError naming the file (and, for a changed entry, an entry of the
file) or a result identical to the pristine file's, never a dead or hung child process.
"""

import io
import json
import os
import select
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import fuzz_worker
from helpers.paths import ROOT, TESTS
from sheaflinalg._common.npzfile import content_digest

TIMEOUT = 60.0
# SHEAFLINALG_FUZZ_EXAMPLES=500 runs a longer, randomised search (default: 40 fixed examples per test).
_LONG = os.environ.get("SHEAFLINALG_FUZZ_EXAMPLES")
FUZZ = settings(max_examples=int(_LONG or 40), derandomize=not _LONG, deadline=None,
                suppress_health_check=list(HealthCheck))


class Files(dict):
    """The fixture's state (a short repr keeps hypothesis' failure reports readable)."""

    def __repr__(self):
        return "<fuzz files>"


class Worker:
    """One long-lived child running tests/helpers/fuzz_worker.py; restarted after it dies."""

    def __init__(self, tmp):
        self.tmp, self.proc = tmp, None

    def start(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")]))
        self.stderr = open(os.path.join(self.tmp, "worker.err"), "w+b")
        self.proc = subprocess.Popen([sys.executable, "-m", "helpers.fuzz_worker"], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True)

    def read(self, reader, path):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(json.dumps({"reader": reader, "path": path}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"the {reader} reader hung for {TIMEOUT} s on {path}")
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self.stderr.seek(0)
            pytest.fail(f"the {reader} reader killed its process (return code {code}) on {path}:\n"
                        + self.stderr.read().decode(errors="replace")[-2000:])
        return json.loads(line)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Pristine file, its bytes, entries and reference outcome for each reader; the shared worker."""
    tmp = str(tmp_path_factory.mktemp("fuzz"))
    worker = Worker(tmp)
    out = Files(worker=worker, tmp=tmp, count=[0])
    for reader, make in fuzz_worker.MAKERS.items():
        path = os.path.join(tmp, f"pristine-{reader}.npz")
        make(path)
        data = open(path, "rb").read()
        with np.load(io.BytesIO(data), allow_pickle=False) as f:
            entries = {k: f[k] for k in f.files}
        reference = worker.read(reader, _copy(tmp, path, out))
        assert reference["outcome"] == "ok", reference
        out[reader] = dict(data=data, entries=entries, reference=reference)
    yield out
    worker.stop()


def _copy(tmp, path, files):
    """A fresh copy of ``path`` (resuming a checkpoint rewrites it)."""
    files["count"][0] += 1
    target = os.path.join(tmp, f"case{files['count'][0]}.npz")
    with open(path, "rb") as src, open(target, "wb") as dst:
        dst.write(src.read())
    return target


def _write(files, data):
    files["count"][0] += 1
    path = os.path.join(files["tmp"], f"case{files['count'][0]}.npz")
    with open(path, "wb") as f:
        f.write(data)
    return path


def _check(files, reader, path, named=(), accepted=None):
    """A ValueError naming the file (and an entry), or a result identical to the pristine file's.

    ``accepted(info)`` replaces the identity check where a mutation may leave a valid, different file.
    """
    got = files["worker"].read(reader, path)
    if got["outcome"] == "ok":
        if accepted is None:
            assert got["digest"] == files[reader]["reference"]["digest"], f"{path} accepted with another result"
        else:
            accepted(got)
        return
    assert got["outcome"] in ("ValueError", "FileFormatError"), got
    assert path in got["message"], got["message"]
    if named:
        assert any(repr(n) in got["message"] or n in got["message"] for n in named), (named, got["message"])


# ----------------------------------------------------------------------------- byte-level mutations
def _byte_mutation():
    return st.one_of(st.tuples(st.just("truncate"), st.floats(0.0, 1.0), st.just(0)),
                     st.tuples(st.just("flip"), st.floats(0.0, 1.0), st.integers(1, 255)))


def _mutate_bytes(data, mutation):
    kind, where, xor = mutation
    k = min(int(where * len(data)), len(data) - 1)
    if kind == "truncate":
        return data[:k]
    return data[:k] + bytes([data[k] ^ xor]) + data[k + 1:]


# ---------------------------------------------------------------------------- entry-level mutations
ENTRY_OPS = ("drop", "transpose", "shorten", "lengthen", "flatten", "add_axis", "float32", "int64", "complex",
             "bool", "text", "nan", "inf", "empty")


def _mutate_entry(a, op):
    a = np.asarray(a)
    if op == "transpose":
        return a.T.copy() if a.ndim == 2 else a.reshape(1, -1)
    if op == "shorten":
        return a[..., :-1] if a.ndim and a.shape[-1] > 0 else a.reshape(1)
    if op == "lengthen":
        return np.concatenate([a, a[..., :1]], axis=-1) if a.ndim and a.shape[-1] > 0 else np.zeros(2)
    if op == "flatten":
        return a.ravel()
    if op == "add_axis":
        return a[None]
    if op in ("float32", "int64", "complex", "bool"):
        if a.dtype.kind == "U":
            return np.zeros(a.shape, dtype={"float32": np.float32, "int64": np.int64, "complex": np.complex128,
                                            "bool": bool}[op])
        return a.astype({"float32": np.float32, "int64": np.int64, "complex": np.complex128, "bool": bool}[op])
    if op == "text":
        return np.array("1.0")
    if op in ("nan", "inf"):
        b = np.array(a, dtype=np.float64) if a.dtype.kind == "f" else np.zeros(a.shape)
        b.flat[0] = np.nan if op == "nan" else np.inf
        return b
    if op == "empty":
        return np.zeros((0,) * max(a.ndim, 1))
    raise AssertionError(op)


def _savez_bytes(entries):
    buf = io.BytesIO()
    np.savez(buf, **entries)
    return buf.getvalue()


def _resign(entries):
    """Recompute a checkpoint's digest over (possibly mutated) entries; False when it cannot be computed."""
    arrays = {k: v for k, v in entries.items() if k not in ("meta", "digest")}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            entries["digest"] = np.array(content_digest(arrays, str(entries["meta"])))
    except (ValueError, TypeError, KeyError):
        return False
    return True


# ---------------------------------------------------------------------------- metadata mutations
def _json_paths(value, prefix=()):
    """Every field path of a JSON value (lists: their first two items)."""
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            paths += _json_paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:2]):
            paths += _json_paths(v, prefix + (i,))
    return paths


JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                        st.text(max_size=4), st.lists(st.integers(-3, 3), max_size=3), st.just({}),
                        st.just("__delete__"))


def _set_json(meta, path, value):
    meta = json.loads(json.dumps(meta))
    node = meta
    for key in path[:-1]:
        node = node[key]
    if value == "__delete__":
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return meta


# ----------------------------------------------------------------------------------------- tests
READERS = tuple(fuzz_worker.READERS)


@pytest.mark.parametrize("reader", READERS)
def test_pristine_file_reads_identically(files, reader):
    path = _copy(files["tmp"], os.path.join(files["tmp"], f"pristine-{reader}.npz"), files)
    _check(files, reader, path)
    assert files[reader]["reference"]["outcome"] == "ok"


@pytest.mark.parametrize("reader", READERS)
@FUZZ
@given(mutation=_byte_mutation())
def test_truncated_or_flipped_bytes(files, reader, mutation):
    data = _mutate_bytes(files[reader]["data"], mutation)
    _check(files, reader, _write(files, data))


@pytest.mark.parametrize("reader", READERS)
@FUZZ
@given(data=st.data())
def test_changed_entries(files, reader, data):
    entries = dict(files[reader]["entries"])
    name = data.draw(st.sampled_from(sorted(entries) + ["__extra__"]), label="entry")
    op = data.draw(st.sampled_from(ENTRY_OPS), label="op")
    if name == "__extra__":
        entries["W9" if op == "drop" else "extra"] = np.zeros(2)
    elif op == "drop":
        del entries[name]
    else:
        entries[name] = _mutate_entry(entries[name], op)
    resigned = reader == "checkpoint" and data.draw(st.booleans(), label="re-sign digest") and _resign(entries)
    path = _write(files, _savez_bytes(entries))
    # The recorded curves are optional and of any length: dropped, shortened or lengthened they stay valid.
    free = reader == "experiment" and name.endswith("_curve") and op in ("drop", "shorten", "lengthen")
    accepted = _still_valid if free else _right_counters(files) if resigned else None
    _check(files, reader, path, named=set(files[reader]["entries"]) | {"W9", "extra"}, accepted=accepted)


def _still_valid(got):
    assert got["outcome"] == "ok"


@pytest.mark.parametrize("reader", ["checkpoint", "experiment"])
@FUZZ
@given(data=st.data())
def test_changed_metadata(files, reader, data):
    entries = dict(files[reader]["entries"])
    meta = json.loads(str(entries["meta"]))
    field = data.draw(st.sampled_from(_json_paths(meta)), label="field")
    value = data.draw(JSON_VALUES, label="value")
    changed = _set_json(meta, field, value)
    entries["meta"] = np.array(json.dumps(changed))
    resigned = reader == "checkpoint" and data.draw(st.booleans(), label="re-sign digest") and _resign(entries)
    if reader == "experiment":
        accepted = _faithful_protocol(files, changed)
    elif resigned:
        accepted = _right_counters(files)
    else:
        accepted = None
    _check(files, reader, _write(files, _savez_bytes(entries)), named={"meta", "digest"}, accepted=accepted)


@FUZZ
@given(data=st.data())
def test_changed_graph_description(files, data):
    """A graph file's JSON description changed field by field, re-signed or not: refused naming the file, or
    (re-signed, when the change leaves a graph the constructor accepts) read as that graph."""
    entries = dict(files["graph"]["entries"])
    description = json.loads(str(entries["graph"]))
    field = data.draw(st.sampled_from(_json_paths(description)), label="field")
    value = data.draw(JSON_VALUES, label="value")
    entries["graph"] = np.array(json.dumps(_set_json(description, field, value)))
    resigned = data.draw(st.booleans(), label="re-sign digest")
    if resigned:
        arrays = {k: v for k, v in entries.items() if k not in ("format", "graph", "digest")}
        entries["digest"] = np.array(content_digest(arrays, str(entries["format"]) + str(entries["graph"])))
    _check(files, "graph", _write(files, _savez_bytes(entries)), named={"graph", "digest"},
           accepted=_still_valid if resigned else None)


def _right_counters(files):
    """A re-signed checkpoint whose values (not shapes) were changed cannot be told from a genuine one;
    accepted, the finished run must still report the run's own records and steps."""
    def accepted(got):
        assert got["info"] == files["checkpoint"]["reference"]["info"], got["info"]
    return accepted


def _is_number(v):
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and np.isfinite(v))


PROTOCOL = {"n_steps": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
            "epoch_steps": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
            "dt": lambda v: _is_number(v) and v > 0, "beta": lambda v: _is_number(v) and v > 0,
            "sgd_lr": lambda v: _is_number(v) and v > 0, "alpha": lambda v: _is_number(v) and v > 0,
            "warm_start": lambda v: isinstance(v, bool),
            "output_activation": lambda v: v in ("identity", "sigmoid", "tanh", "softmax")}


def _faithful_protocol(files, meta):
    """An experiment whose metadata changed may be accepted only with the arrays unchanged, the metadata
    as written, and every protocol field valid (docs/errors.md); a missing optional field takes its default."""
    def accepted(got):
        assert got["digest"] == files["experiment"]["reference"]["digest"], "arrays changed"
        assert got["info"]["meta"] == meta
        for key, valid in PROTOCOL.items():
            if key in meta:
                assert valid(meta[key]), f"accepted {key}={meta[key]!r}"
        for key in ("n_steps", "dt", "beta", "sgd_lr"):
            assert key in meta, f"accepted without {key}"
        assert got["info"]["output"] == meta.get("output_activation", "identity")
    return accepted


def test_the_issue_cases_on_checkpoints(files):
    """Shortened and transposed state, tampered epoch count (re-signed): each one clear error."""
    base = files["checkpoint"]["entries"]
    meta = json.loads(str(base["meta"]))
    assert base["S"].shape == (8, 8)  # square: the transposed state has the right shape
    # (change, entry named when the digest is stale, entry named when it was re-signed)
    cases = [(dict(S=base["S"][:, :3]), "'S'", "'S'"),
             (dict(S=base["S"].T.copy()), "'digest'", "'S' does not hold the run's targets"),
             (dict(meta=np.array(json.dumps(dict(meta, epoch=4)))), "'digest'", "field 'step'"),
             (dict(meta=np.array(json.dumps(dict(meta, epoch=4, step=200)))), "'digest'", "field 'history'"),
             (dict(meta=np.array(json.dumps(dict(meta, epoch=5, step=200)))), "'digest'", "field 'epoch'")]
    for change, stale, resigned in cases:
        for resign in (False, True):
            entries = dict(base, **change)
            assert not resign or _resign(entries)
            path = _write(files, _savez_bytes(entries))
            got = files["worker"].read("checkpoint", path)
            assert got["outcome"] in ("ValueError", "FileFormatError") and path in got["message"], got
            assert (resigned if resign else stale) in got["message"], got["message"]


def test_zip_with_a_foreign_member_is_refused(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("W1.npy", files["network"]["data"][:10])
        z.writestr("../evil.txt", b"x")
    _check(files, "network", _write(files, buf.getvalue()))


@pytest.mark.parametrize("damage, named", [("truncate", "corrupt"), ("no dt", "field 'dt'"),
                                           ("no z0_2", "missing entries ['z0_2']"),
                                           ("short X_test", "entry 'Y_test' must have shape (2, 3)")])
def test_train_command_refuses_a_damaged_experiment_in_one_line(files, damage, named):
    entries = dict(files["experiment"]["entries"])
    data = files["experiment"]["data"][:len(files["experiment"]["data"]) // 2]
    if damage != "truncate":
        if damage == "no dt":
            entries["meta"] = np.array(json.dumps({k: v for k, v in json.loads(str(entries["meta"])).items()
                                                   if k != "dt"}))
        elif damage == "no z0_2":
            del entries["z0_2"]
        else:
            entries["X_test"] = entries["X_test"][:, :3]
        data = _savez_bytes(entries)
    path = _write(files, data)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-m", "sheaflinalg.cli", "train", "--experiment", path, "--steps", "2",
                           "--no-progress"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=TIMEOUT)
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and path in done.stderr and named in done.stderr, done.stderr

"""Checkpoints of long training runs: written atomically, read without pickle, tied to their run, checked in full.

A checkpoint holds everything the compiled loop needs to continue exactly
where it stopped (weights, stalks, anchors, the random generator, the
history), plus a fingerprint of the run's inputs and settings so that a
file is never resumed into a different run, and a SHA-256 digest of its
content so that a modified file is refused.  Before anything from the file
is used, every entry is checked against the run (:class:`RunShape`): the
arrays' dtype, shape and finiteness, the epoch and step counters, the random
generator's state and the history's series; one ``ValueError`` names the
file and the entry.  The compiled loops do not check bounds, so nothing
read from the file reaches them unchecked.
"""

import hashlib
import json
import os
from dataclasses import dataclass

import numpy as np

from .._common.atomic import prepare_target, save_npz
from .._common.npzfile import content_digest, read_npz
from .history import History
from ..network.graph.nodes import stated_attrs
from ..network.paths import GRAPH, engine

_FORMAT = "sheaflinalg.train-checkpoint/2"
_META_KEYS = {"format", "run_id", "epoch", "step", "rng", "history"}


def _plain(value):
    """JSON fallback for NumPy values (random-generator states hold them); anything else is an error."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to a checkpoint")


def to_json(value):
    """Canonical JSON of ``value`` (sorted keys, NumPy values as plain numbers and lists)."""
    return json.dumps(value, sort_keys=True, default=_plain)


def fingerprint(arrays, settings):
    """SHA-256 of the given arrays' bytes and of the JSON of ``settings`` (plain values only)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(to_json(settings).encode())
    return h.hexdigest()


def network_identity(net):
    """The network's structure in a checkpoint's fingerprint (its parameters are fingerprinted as arrays):
    a chain's widths and output, a graph network's nodes, input shape and output."""
    if engine(net) == GRAPH:
        graph = net.graph
        structure = [[n.name, n.op, list(n.inputs), stated_attrs(n)] for n in graph.nodes]
        return dict(graph=structure, input_shape=list(graph.input_shape), output=graph.output)
    return dict(dims=net.dims, output=net.output)


def check_checkpoint_path(path):
    """The checkpoint file name as a string, checked before any work (``.npz``, writable directory)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"checkpoint must be a file name (str or path-like), got {type(path).__name__}")
    path = os.fspath(path)
    if not path.endswith(".npz"):
        raise ValueError(f"checkpoint file must end in .npz, got {path!r}")
    return prepare_target(path, "checkpoint")


@dataclass
class RunShape:
    """What a checkpoint of one run must hold.

    Attributes
    ----------
    arrays : dict
        Entry name -> required shape (float64, finite).
    pinned : tuple or None
        ``(entry, rows, values)``: rows of that array fixed by the run (the targets); None: no such rows.
    steps, epoch_steps, record_every : int
        The run's settings.
    rng : numpy.random.Generator
        The run's generator (the checkpoint's state must be of its bit generator).
    history : History
        The run's empty history (method, loss, edge names).
    n_layers : int
    alpha, beta : float or None
        The joint dynamics' rates (None for equilibrium training).
    """

    arrays: dict
    pinned: tuple
    steps: int
    epoch_steps: int
    record_every: int
    rng: object
    history: History
    n_layers: int
    alpha: float
    beta: float

    @property
    def n_epochs(self):
        return -(-self.steps // self.epoch_steps)

    def records(self, epoch):
        """``(epochs, steps)`` of the history records after ``epoch`` epochs."""
        epochs = [0] + [e for e in range(1, epoch + 1) if e % self.record_every == 0 or e == self.n_epochs]
        return epochs, [min(e * self.epoch_steps, self.steps) for e in epochs]


class TrainingCheckpoint:
    """A checkpoint file of one training run.

    Parameters
    ----------
    path : str or path-like
        ``.npz`` file (created on the first :meth:`save`); its directory must
        exist and be writable.
    run_id : str
        Fingerprint of the run (see :func:`fingerprint`).

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> ck = TrainingCheckpoint(os.path.join(tempfile.mkdtemp(), "run.npz"), "abc")
    >>> ck.load() is None
    True
    >>> ck.save({"theta": np.ones(3)}, {"epoch": 2})
    >>> arrays, meta = ck.load()
    >>> meta["epoch"], arrays["theta"].tolist()
    (2, [1.0, 1.0, 1.0])
    """

    def __init__(self, path, run_id):
        self.path = check_checkpoint_path(path)
        self.run_id = run_id

    def save(self, arrays, meta):
        """Write ``arrays`` (dict of float64 ndarrays) and ``meta`` (JSON-serialisable dict) atomically."""
        text = to_json(dict(meta, format=_FORMAT, run_id=self.run_id))
        entries = dict(arrays, meta=np.array(text), digest=np.array(content_digest(arrays, text)))
        save_npz(self.path, entries, name="checkpoint")

    def load(self, expect=None):
        """``(arrays, meta)`` of an existing checkpoint of this run, or None when there is no file.

        Parameters
        ----------
        expect : RunShape, optional
            The run; every entry is checked against it.  Without it only the
            file's integrity (format, run, digest, float64 finite arrays) is checked.

        Raises
        ------
        ValueError
            Naming the file and the entry: the file is corrupt or truncated,
            not a checkpoint, belongs to another run, was modified after it was
            written, or holds an entry inconsistent with the run.
        """
        if not os.path.exists(self.path):
            return None
        f = read_npz(self.path, "training checkpoint")
        if "meta" not in f:
            raise f.error("is not a sheaflinalg training checkpoint (no entry 'meta')")
        meta = f.json("meta")
        if meta.get("format") != _FORMAT:
            raise f.error(f"is not a sheaflinalg training checkpoint of this version (format "
                          f"{meta.get('format')!r}, expected {_FORMAT!r})", "meta")
        if meta.get("run_id") != self.run_id:
            raise f.error("field 'run_id': this checkpoint belongs to another run (different data, initial "
                          "weights, seed or settings); delete it or choose another checkpoint file", "meta")
        names = sorted(f.names - {"meta", "digest"}) if expect is None else sorted(expect.arrays)
        f.ignore_others(names + ["meta", "digest"])
        arrays = {name: f.float_array(name, None if expect is None else expect.arrays[name]) for name in names}
        if f.text("digest") != content_digest(arrays, f.text("meta")):
            raise f.error("does not match the checkpoint's content: the file was modified or corrupted after "
                          "it was written", "digest")
        if expect is not None:
            _check_pinned(f, arrays, expect)
            _check_meta(f, meta, expect)
        return arrays, meta


def _check_pinned(f, arrays, expect):
    if expect.pinned is None:
        return
    name, rows, values = expect.pinned
    if not np.array_equal(arrays[name][rows], values):
        raise f.error("does not hold the run's targets in its pinned rows: it is not a state of this run", name)


def _check_meta(f, meta, expect):
    """Counters, random state and history of ``meta`` against the run."""
    def bad(field, message):
        return f.error(f"field {field!r} {message}", "meta")

    if set(meta) != _META_KEYS:
        raise f.error(f"must have exactly the fields {sorted(_META_KEYS)}, got {sorted(meta)}", "meta")
    epoch, step = meta["epoch"], meta["step"]
    if type(epoch) is not int or not 1 <= epoch <= expect.n_epochs:
        raise bad("epoch", f"must be an integer in [1, {expect.n_epochs}] (the run's epochs), got {epoch!r}")
    want = min(epoch * expect.epoch_steps, expect.steps)
    if type(step) is not int or step != want:
        raise bad("step", f"must be {want} after epoch {epoch} of {expect.epoch_steps} steps, got {step!r}")
    _check_rng(meta["rng"], expect.rng, bad)
    epochs, steps = expect.records(epoch)
    try:
        meta["history"] = History.restore(meta["history"], expect.history, epochs, steps, expect.n_layers,
                                          expect.alpha, expect.beta)
    except ValueError as exc:
        raise bad("history", str(exc)) from None


def _check_rng(state, rng, bad):
    """The saved state must load into a bit generator of the run's type and read back unchanged."""
    kind = type(rng.bit_generator)
    if not isinstance(state, dict) or state.get("bit_generator") != kind.__name__:
        got = state.get("bit_generator") if isinstance(state, dict) else type(state).__name__
        raise bad("rng", f"must be the state of a {kind.__name__} bit generator (the run's), got {got!r}")
    if state.get("has_uint32", 0) not in (0, 1):
        raise bad("rng", f"has an invalid has_uint32 {state.get('has_uint32')!r}")
    probe = kind()
    try:
        probe.state = state
    except (TypeError, ValueError, KeyError, OverflowError, IndexError) as exc:
        raise bad("rng", f"is not a valid {kind.__name__} state ({type(exc).__name__}: {exc})") from None
    if to_json(probe.state) != to_json(state):
        raise bad("rng", f"is not a valid {kind.__name__} state (it does not read back unchanged)")

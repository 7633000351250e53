"""Checkpoints of long training runs: written atomically, read without pickle, tied to their run.

A checkpoint holds everything the compiled loop needs to continue exactly
where it stopped (weights, stalks, anchors, the random generator, the
history), plus a fingerprint of the run's inputs and settings so that a
file is never resumed into a different run.
"""

import hashlib
import json
import os
import zipfile

import numpy as np

from .._common.atomic import save_npz

_FORMAT = "sheaflinalg.train-checkpoint/1"


def fingerprint(arrays, settings):
    """SHA-256 of the given arrays' bytes and of the JSON of ``settings``."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()


class TrainingCheckpoint:
    """A checkpoint file of one training run.

    Parameters
    ----------
    path : str or path-like
        ``.npz`` file (created on the first :meth:`save`).
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
        self.path = os.fspath(path)
        self.run_id = run_id
        if not self.path.endswith(".npz"):
            raise ValueError(f"checkpoint file must end in .npz, got {self.path!r}")

    def save(self, arrays, meta):
        """Write ``arrays`` (dict of ndarrays) and ``meta`` (JSON-serialisable dict) atomically."""
        meta = dict(meta, format=_FORMAT, run_id=self.run_id)
        save_npz(self.path, meta=np.array(json.dumps(meta)), **arrays)

    def load(self):
        """``(arrays, meta)`` of an existing checkpoint of this run, or None when there is no file.

        Raises
        ------
        ValueError
            If the file is corrupt, not a checkpoint, or belongs to another run.
        """
        if not os.path.exists(self.path):
            return None
        if not zipfile.is_zipfile(self.path):
            raise ValueError(f"{self.path}: corrupt or truncated checkpoint (not an .npz archive)")
        try:
            with np.load(self.path, allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
            raise ValueError(f"{self.path}: corrupt or truncated checkpoint ({exc})") from exc
        try:
            meta = json.loads(str(arrays.pop("meta")))
        except (KeyError, json.JSONDecodeError) as exc:
            raise ValueError(f"{self.path}: not a sheaflinalg training checkpoint") from exc
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{self.path}: not a sheaflinalg training checkpoint")
        if meta.get("run_id") != self.run_id:
            raise ValueError(f"{self.path}: this checkpoint belongs to another run (different data, initial "
                             "weights or settings); delete it or choose another checkpoint file")
        return arrays, meta

"""The paper's tasks (section 6.2): data generators and replay of recorded experiments.

Generators (seeded with ``numpy.random.default_rng``; samples are rows):

* :func:`paraboloid` -- ``f = x1^2 + x2^2 - 2/3`` on ``[-2, 2]^2``, noise std 0.02;
* :func:`saddle` -- ``f = x1^2 - x2^2 + 0.5 sin(2 x1)`` on ``[0, 2]^2``, noise std 0.02;
* :func:`circular` -- unit disk (label 0) against the annulus ``1.5 < r < 2.5`` (label 1),
  radial noise std 0.1, one sigmoid output;
* :func:`blobs` -- four Gaussian blobs, one-hot targets for a softmax output;
* :func:`mnist1d` -- the MNIST-1D digits (Greydanus), generated offline by the ``mnist1d``
  package (the ``data`` extra), one-hot targets for a softmax output.

:func:`make` splits one draw into train and test sets.  The exact inputs of
the paper's Table E.1 ship as package data (``sheaflinalg/data/table_e1/``) and replay with
:func:`load_experiment` / :func:`table_e1`.
"""

import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._common.npzfile import read_npz
from ._common.resources import data_path
from .network.activations import OUTPUTS as OUTPUT_ACTIVATIONS
from .network.io import layer_arrays
from ._common.memory import FLOAT, check_memory
from ._common.validation import check_choice, check_int, check_path, check_seed, check_tol
from .network.model import Network
from .training import sgd, train

TASKS = ("paraboloid", "saddle", "circular", "blobs")
OUTPUTS = {"paraboloid": "identity", "saddle": "identity", "circular": "sigmoid", "blobs": "softmax",
           "mnist1d": "softmax"}
BLOB_CENTERS = np.array([[-1.5, -1.5], [1.8, -1.0], [1.0, 2.0], [-2.0, 1.5]])
BLOB_COVARIANCES = np.array([[[0.80, 0.30], [0.30, 0.40]], [[0.30, -0.20], [-0.20, 1.00]],
                             [[1.20, 0.50], [0.50, 0.50]], [[0.50, 0.00], [0.00, 0.80]]])
TABLE_E1 = tuple(f"{t}_{d}" for d in ("1H", "2H") for t in TASKS)
DATA_DIR = data_path("table_e1")


def _check_n(n, minimum=1, name="n"):
    n = check_int(n, f"{name} (the number of samples)", minimum)
    check_memory(16 * FLOAT * n, f"{n} samples", f"ask for fewer samples ({name})")
    return n


def _generator(seed, noise=0.0):
    """The random generator of ``seed`` after checking ``seed`` and ``noise`` (a finite number >= 0)."""
    check_seed(seed)
    if noise is not None:
        check_tol(noise, "noise")
    return np.random.default_rng(seed)


def target_function(task, X):
    """Noise-free target of a regression task at inputs ``X`` (rows), shape (n,).

    Examples
    --------
    >>> target_function("paraboloid", np.zeros((1, 2))).round(4).tolist()
    [-0.6667]
    """
    X = np.asarray(X, dtype=np.float64)
    if task == "paraboloid":
        return X[:, 0] ** 2 + X[:, 1] ** 2 - 2.0 / 3.0
    if task == "saddle":
        return X[:, 0] ** 2 - X[:, 1] ** 2 + 0.5 * np.sin(2.0 * X[:, 0])
    raise ValueError(f"{task!r} is not a regression task; expected 'paraboloid' or 'saddle'")


def paraboloid(n=300, seed=None, noise=0.02):
    """``n`` inputs uniform on ``[-2, 2]^2`` and targets ``x1^2 + x2^2 - 2/3`` plus N(0, noise^2).

    Returns
    -------
    X : ndarray, shape (n, 2)
    Y : ndarray, shape (n, 1)

    Examples
    --------
    >>> X, Y = paraboloid(5, seed=0)
    >>> X.shape, Y.shape
    ((5, 2), (5, 1))
    """
    n = _check_n(n)
    rng = _generator(seed, noise)
    X = rng.uniform(-2.0, 2.0, size=(n, 2))
    f = target_function("paraboloid", X)
    return X, (f + noise * rng.standard_normal(n))[:, None]


def saddle(n=300, seed=None, noise=0.02):
    """``n`` inputs uniform on ``[0, 2]^2``, targets ``x1^2 - x2^2 + 0.5 sin(2 x1)`` plus N(0, noise^2).

    Examples
    --------
    >>> bool(saddle(3, seed=1)[0].min() >= 0)
    True
    """
    n = _check_n(n)
    rng = _generator(seed, noise)
    X = rng.uniform(0.0, 2.0, size=(n, 2))
    f = target_function("saddle", X)
    return X, (f + noise * rng.standard_normal(n))[:, None]


def circular(n=300, seed=None, noise=0.1):
    """Binary task: unit disk (label 0) vs annulus ``1.5 < r < 2.5`` (label 1), equal halves, shuffled.

    Radii: ``sqrt(U)`` and ``sqrt(1.5^2 + U (2.5^2 - 1.5^2))`` plus N(0, noise^2);
    angles uniform.  ``Y`` has shape (n, 1) with values in {0, 1}.

    Examples
    --------
    >>> X, Y = circular(10, seed=0)
    >>> int(Y.sum())
    5
    """
    n = _check_n(n, 2)
    rng = _generator(seed, noise)
    n0 = n // 2
    n1 = n - n0
    r0 = np.sqrt(rng.uniform(size=n0)) + noise * rng.standard_normal(n0)
    r1 = np.sqrt(1.5 ** 2 + rng.uniform(size=n1) * (2.5 ** 2 - 1.5 ** 2)) + noise * rng.standard_normal(n1)
    r = np.concatenate([r0, r1])
    theta = rng.uniform(0.0, 2.0 * np.pi, size=n)
    X = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
    Y = np.concatenate([np.zeros(n0), np.ones(n1)])[:, None]
    perm = rng.permutation(n)
    return X[perm], Y[perm]


def blobs(n=400, seed=None):
    """Four Gaussian blobs (the paper's centres and covariances), ``n // 4`` points each, shuffled.

    Returns ``X`` (4 (n // 4), 2) and one-hot ``Y`` (4 (n // 4), 4).

    Examples
    --------
    >>> X, Y = blobs(8, seed=0)
    >>> Y.sum(axis=0).tolist()
    [2.0, 2.0, 2.0, 2.0]
    """
    per = _check_n(n, 4) // 4
    rng = _generator(seed)
    X = np.concatenate([rng.multivariate_normal(c, S, size=per) for c, S in zip(BLOB_CENTERS, BLOB_COVARIANCES)])
    Y = np.repeat(np.eye(4), per, axis=0)
    perm = rng.permutation(X.shape[0])
    return X[perm], Y[perm]


@dataclass
class Dataset:
    """Train/test split of one task."""

    task: str
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray

    @property
    def output(self):
        """Output activation the task calls for."""
        return OUTPUTS[self.task]


def make(task, n_train=300, n_test=100, seed=0, noise=None):
    """One draw of ``n_train + n_test`` samples of ``task``, split in order into train and test.

    Exactly ``n_train`` and ``n_test`` samples: ``blobs`` (which draws equal
    blobs) draws the next multiple of 4 and drops the surplus from the
    shuffled end.  ``noise`` (regression tasks and ``circular``) defaults to
    the generator's.

    Examples
    --------
    >>> d = make("blobs", 300, 100, seed=0)
    >>> d.X_train.shape, d.Y_test.shape, d.output
    ((300, 2), (100, 4), 'softmax')
    >>> make("blobs", 10, 3).X_test.shape
    (3, 2)
    """
    check_choice(task, TASKS, "task")
    n_train = _check_n(n_train, 1, "n_train")
    n_test = _check_n(n_test, 1, "n_test")
    n = n_train + n_test
    if task == "blobs":
        if noise is not None:
            raise ValueError("noise does not apply to task 'blobs' (its spread is the blob covariances)")
        X, Y = blobs(max(4, -(-n // 4) * 4), seed=seed)
    else:
        X, Y = globals()[task](n, seed=seed, **({} if noise is None else {"noise": noise}))
    return Dataset(task, X[:n_train], Y[:n_train], X[n_train:n], Y[n_train:n])


def _mnist1d_package():
    """``(make_dataset, get_dataset_args)`` of the ``mnist1d`` package, or ImportError naming the extra."""
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError as exc:
        raise ImportError("the MNIST-1D data need the mnist1d package (pip install mnist1d, or the 'data' "
                          "extra: pip install sheaflinalg[data])") from exc
    return make_dataset, get_dataset_args


def mnist1d(seed=42, n_samples=5000):
    """The MNIST-1D digits: ``n_samples`` signals of length 40, 10 classes, split 80/20 into train and test.

    Generated offline by the ``mnist1d`` package with its default arguments (``seed=42`` and
    ``n_samples=5000`` give the published data set: 4000 training and 1000 test signals, a few
    seconds); nothing is downloaded and no pickle is read.  The package seeds numpy's and
    Python's global generators: their states are restored afterwards.

    Parameters
    ----------
    seed : int
        The generator's seed (an integer in ``[0, 2**32)``).
    n_samples : int
        Signals in all, at least 20; ``n_samples // 10`` per class are drawn.

    Returns
    -------
    Dataset
        Task ``"mnist1d"``; ``X_train`` (n_train, 40), ``Y_train`` one-hot (n_train, 10),
        likewise for the test set.

    Examples
    --------
    >>> d = mnist1d(n_samples=50)
    >>> d.X_train.shape, d.Y_test.shape, d.output
    ((40, 40), (10, 10), 'softmax')
    """
    seed = check_int(seed, "seed", 0, 2 ** 32 - 1)        # numpy's legacy generator seeds the package
    n_samples = _check_n(n_samples, 20, "n_samples")
    make_dataset, get_dataset_args = _mnist1d_package()
    args = get_dataset_args()
    args.seed, args.num_samples = seed, n_samples
    saved = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(saved[0])
        random.setstate(saved[1])
    onehot = np.eye(10)
    return Dataset("mnist1d", np.ascontiguousarray(data["x"], dtype=np.float64), onehot[data["y"]],
                   np.ascontiguousarray(data["x_test"], dtype=np.float64), onehot[data["y_test"]])


@dataclass
class Experiment:
    """A recorded experiment (Table E.1 file format): initial network, data, initial stalks, protocol.

    Attributes
    ----------
    name : str
    network : Network
        The initial weights shared by the sheaf and SGD runs.
    X_train, Y_train, X_test, Y_test : ndarray
        Rows are samples.
    init : ndarray
        Initial free stalks ``(n_train, n_moving)`` in the order ``z1, a1, ..., z(k+1)``.
    meta : dict
        The protocol (``arch``, ``dt``, ``alpha``, ``beta``, ``n_steps``, ...).
    reference : dict
        The recorded curves (``sheaf_train_curve``, ``sheaf_test_curve``,
        ``sgd_train_curve``, ``sgd_test_curve``) when the file has them.
    """

    name: str
    network: Network
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    init: np.ndarray
    meta: dict
    reference: dict

    @property
    def sgd_record_every(self):
        """SGD epochs between the recorded points of the baseline curves."""
        return max(1, int(self.meta["n_steps"]) // 100)

    def fit(self, steps=None, method="sheaf", progress=False, **kwargs):
        """Run the experiment's protocol; returns the :class:`~sheaflinalg.training.TrainResult`.

        See :meth:`run` (which returns only the history).
        """
        m = self.meta
        steps = int(m["n_steps"]) if steps is None else steps
        if method == "sheaf":
            opts = dict(alpha=float(m.get("alpha", 1.0)), beta=float(m["beta"]), dt=float(m["dt"]),
                        init=self.init, warm_start=bool(m.get("warm_start", True)),
                        epoch_steps=int(m.get("epoch_steps", 1000)), progress=progress)
            opts.update(kwargs)
            fit = train(self.network, self.X_train, self.Y_train, self.X_test, self.Y_test, steps=steps, **opts)
        elif method == "sgd":
            opts = dict(lr=float(m["sgd_lr"]), record_every=self.sgd_record_every, progress=progress)
            opts.update(kwargs)
            fit = sgd(self.network, self.X_train, self.Y_train, self.X_test, self.Y_test, epochs=steps, **opts)
        else:
            raise ValueError(f"unknown method {method!r}; expected 'sheaf' or 'sgd'")
        return fit

    def run(self, steps=None, method="sheaf", progress=False, **kwargs):
        """Run the experiment's protocol for ``steps`` Euler steps / SGD epochs (default: all).

        Returns the :class:`~sheaflinalg.training.history.History`; its ``train_loss``
        and ``test_loss`` line up with the file's curves (a prefix of them
        when ``steps`` is smaller).  Extra keyword arguments go to
        :func:`~sheaflinalg.train` / :func:`~sheaflinalg.sgd`.
        """
        return self.fit(steps, method, progress, **kwargs).history

    def max_relative_error(self, history, method="sheaf"):
        """Largest relative difference between ``history`` and the recorded curves (over its records)."""
        errs = []
        for part in ("train", "test"):
            ref = np.asarray(self.reference[f"{method}_{part}_curve"])
            got = history[f"{part}_loss"]
            n = min(len(ref), len(got))
            errs.append(np.max(np.abs(got[:n] - ref[:n]) / np.abs(ref[:n])))
        return float(max(errs))


_CURVES = ("sheaf_train_curve", "sheaf_test_curve", "sgd_train_curve", "sgd_test_curve")
_META_RULES = {  # field: (required, check, what it must be)
    "n_steps": (True, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "dt": (True, lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "beta": (True, lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "sgd_lr": (True, lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "alpha": (False, lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "epoch_steps": (False, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "warm_start": (False, lambda v: isinstance(v, bool), "true or false"),
    "output_activation": (False, lambda v: v in OUTPUT_ACTIVATIONS, f"one of {', '.join(OUTPUT_ACTIVATIONS)}"),
}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return _is_int(v) or (isinstance(v, float) and math.isfinite(v))


def load_experiment(path):
    """Read a recorded experiment (the Table E.1 ``.npz`` format; columns are samples in the file).

    Arrays ``X_train, Y_train, X_test, Y_test`` (dim, n), ``W1..``/``b1..``,
    ``z0_1..``/``a0_1..``, optional recorded curves and a JSON ``meta``
    (``n_steps``, ``dt``, ``beta``, ``sgd_lr``; optional ``alpha``,
    ``epoch_steps``, ``warm_start``, ``output_activation``, ``arch``); read
    without pickle, every entry checked before use; entries an experiment file does not hold are
    ignored with one warning naming them.  A shipped experiment may be named alone
    (``"paraboloid_1H"``, one of :data:`TABLE_E1`) when no file of that name exists.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Naming the file and the entry: the file is corrupt or truncated, an
        entry is missing, not finite float64, of the wrong shape,
        or a ``meta`` field is missing or invalid.

    Examples
    --------
    >>> exp = load_experiment(DATA_DIR / "paraboloid_1H.npz")
    >>> exp.network.dims, exp.meta["dt"]
    ([2, 30, 1], 0.005)
    >>> load_experiment("blobs_2H").network.dims
    [2, 10, 8, 4]
    """
    path = check_path(path, "path")
    if path in TABLE_E1 and not os.path.exists(path):
        path = DATA_DIR / f"{path}.npz"
    path = Path(os.fspath(path))
    f = read_npz(path, "experiment file")
    f.require(["X_train", "Y_train", "X_test", "Y_test", "W1", "b1", "meta"])
    meta = f.json("meta")
    for name, (required, ok, what) in _META_RULES.items():
        if (required or name in meta) and not (name in meta and ok(meta[name])):
            raise f.error(f"field {name!r} must be {what}, got {meta.get(name, 'nothing')!r}", "meta")
    weights, biases = layer_arrays(f)
    try:
        net = Network(weights, biases, meta.get("output_activation", "identity"))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    dims = net.dims
    if "arch" in meta and meta["arch"] != dims:
        raise f.error(f"field 'arch' is {meta['arch']!r} but the weights have widths {dims}", "meta")
    hidden = range(1, len(dims) - 1)
    stalks = [f"z0_{l}" for l in range(1, len(dims))] + [f"a0_{l}" for l in hidden]
    f.require(stalks)
    f.ignore_others(["X_train", "Y_train", "X_test", "Y_test", "meta", *_CURVES, *stalks]
                    + [f"{p}{l}" for l in range(1, len(dims)) for p in "Wb"])
    X_train = f.float_array("X_train", (dims[0], None))
    n = X_train.shape[1]
    Y_train = f.float_array("Y_train", (dims[-1], n))
    X_test = f.float_array("X_test", (dims[0], None))
    Y_test = f.float_array("Y_test", (dims[-1], X_test.shape[1]))
    for name, a in (("X_train", X_train), ("X_test", X_test)):
        if a.shape[1] == 0:
            raise f.error("holds no samples", name)
    init = _initial_stalks(f, dims, n)
    reference = {k: f.float_array(k, ndim=1) for k in _CURVES if k in f}
    empty = [k for k, v in reference.items() if v.size == 0]
    if empty:
        raise f.error("is an empty curve", empty[0])
    return Experiment(path.stem, net, X_train.T.copy(), Y_train.T.copy(), X_test.T.copy(), Y_test.T.copy(),
                      init, meta, reference)


def _initial_stalks(f, dims, n, suffix=""):
    """Initial free stalks ``(n, n_moving)`` in the order ``z1, a1, ..., z(k+1)`` from the checked entries
    ``z0_l{suffix}`` (every layer) and ``a0_l{suffix}`` (hidden layers), each ``(n_l, n)`` in the file."""
    blocks = []
    for l in range(1, len(dims)):
        blocks.append(f.float_array(f"z0_{l}{suffix}", (dims[l], n)).T)
        if l < len(dims) - 1:
            blocks.append(f.float_array(f"a0_{l}{suffix}", (dims[l], n)).T)
    return np.ascontiguousarray(np.concatenate(blocks, axis=1))


def table_e1(name):
    """The shipped Table E.1 experiment ``name`` (e.g. ``"paraboloid_1H"``); see :data:`TABLE_E1`.

    Examples
    --------
    >>> exp = table_e1("blobs_2H")
    >>> exp.network.dims, exp.network.output
    ([2, 10, 8, 4], 'softmax')
    >>> exp.max_relative_error(exp.run(steps=1000), "sheaf") < 1e-12
    True
    """
    if name not in TABLE_E1:
        raise ValueError(f"unknown Table E.1 experiment {name!r}; expected one of {', '.join(TABLE_E1)}")
    return load_experiment(DATA_DIR / f"{name}.npz")


PAPER_SWEEPS = ("beta_scaling", "depth_T")


@dataclass
class SweepRecord:
    """One group of a recorded paper sweep (package data ``paper_sweeps/NAME.npz``): its initial network,
    data and initial stalks, and the recorded runs of the group.

    Attributes
    ----------
    name, group : str
    network : Network
    X_train, Y_train, X_test, Y_test : ndarray
        Rows are samples.
    init : ndarray
        Initial free stalks ``(n_train, n_moving)`` in the order ``z1, a1, ..., z(k+1)``.
    runs : dict
        ``{key: run}``: the recorded protocol and final losses of each run of the group, with its
        curves as ``run["train_curve"]``, ``run["test_curve"]`` (loss before training, then after
        every epoch).
    """

    name: str
    group: str
    network: Network
    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    init: np.ndarray
    runs: dict


def paper_sweep(name, group):
    """Group ``group`` of the recorded paper sweep ``name`` (:data:`PAPER_SWEEPS`), every entry checked.

    Examples
    --------
    >>> rec = paper_sweep("depth_T", "2H")
    >>> rec.network.dims, len(rec.runs), rec.init.shape
    ([2, 10, 8, 1], 7, (300, 37))
    """
    if name not in PAPER_SWEEPS:
        raise ValueError(f"unknown paper sweep {name!r}; expected one of {', '.join(PAPER_SWEEPS)}")
    path = data_path("paper_sweeps", f"{name}.npz")
    f = read_npz(path, "paper sweep record")
    meta = f.json("meta")
    runs = meta.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("key"), str) for r in runs):
        raise f.error("field 'runs' must be a list of runs with a 'key'", "meta")
    groups = sorted({r.get("group") for r in runs})
    if group not in groups:
        raise ValueError(f"{path}: no group {group!r}; the record has {', '.join(map(str, groups))}")
    n = 0
    while f"W{n + 1}_{group}" in f:
        n += 1
    weights = [f.float_array(f"W{l}_{group}", ndim=2) for l in range(1, n + 1)]
    biases = [f.float_array(f"b{l}_{group}", ndim=1) for l in range(1, n + 1)]
    try:
        net = Network(weights, biases, "identity")
    except ValueError as exc:
        raise ValueError(f"{path}: group {group!r}: {exc}") from None
    dims = net.dims
    X_train = f.float_array("X_train", (dims[0], None))
    m = X_train.shape[1]
    data = (X_train.T.copy(), f.float_array("Y_train", (dims[-1], m)).T.copy())
    X_test = f.float_array("X_test", (dims[0], None))
    data += (X_test.T.copy(), f.float_array("Y_test", (dims[-1], X_test.shape[1])).T.copy())
    init = _initial_stalks(f, dims, m, f"_{group}")
    mine = {}
    for r in (r for r in runs if r.get("group") == group):
        curves = {c: f.float_array(f"{c}_{r['key']}", ndim=1) for c in ("train_curve", "test_curve")}
        mine[r["key"]] = dict(r, **curves)
    return SweepRecord(name, group, net, *data, init, mine)

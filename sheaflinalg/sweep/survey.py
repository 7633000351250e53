"""A survey: the spectrum and the pinned discord of every input of a data set under one network.

A survey is a sweep whose runs are the inputs: run ``i`` computes input ``i``'s row (its prediction,
``lambda_min``, ``lambda_max`` and condition number of its ``L[Omega, Omega]``, the energy of the
``lambda_min`` eigenvector on every node, the pinned discord of every node's edge) and the sweep's
store keeps it (:mod:`sheaflinalg.sweep.store`: one row per finished input, kill-safe, resumable, a
process pool here or a Dask cluster).  A run's identity is a hash of the network, of the input's
values, its index, its label and the options, so a rerun computes only the inputs not yet stored.

The pinned discord pins the logits of a classifier to the true label at the network's own
confidence (the logits with the true and the predicted class exchanged,
:func:`sheaflinalg.discord.pinning.targets.relabelled`): a correctly classified input keeps its
forward pass (discord 0), a misclassified one shows where the network would have to disagree with
itself to give the right answer.
"""

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from .._common.validation import as_samples, check_int
from ..discord.pinning.analysis import pinned
from ..discord.pinning.targets import relabelled
from ..network.model import check_network
from ..spectral.drivers import spectrum as spectrum_of
from ..training.checkpoint import fingerprint, network_identity
from .drive import drive
from .spec import Spec
from .survey_result import SurveyResult

#: The metrics of a survey's row (``seconds``: the run's time).
METRICS = ("predicted", "correct", "lambda_min", "lambda_max", "condition", "energy", "discord", "discord_total",
           "settled", "sliding", "seconds")


@dataclass
class SurveyTask:
    """What every run of a survey needs, sent to the workers: the network and the inputs (rows).

    ``run(params)`` computes the row of input ``params["input"]`` (:func:`survey_row`).
    """

    network: object
    X: np.ndarray

    def run(self, params):
        return survey_row(self.network, self.X[params["input"]], params["label"], params["spectrum"], params["discord"],
                          params["max_iter"]), {}


def survey_row(net, x, label, spectrum=True, discord=True, max_iter=100):
    """The metrics of one input ``x`` (its ``n_0`` values, any shape) of label ``label`` (an int or None).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 6, 3], seed=0)
    >>> row = survey_row(net, np.ones((1, 2)), 1)
    >>> sorted(row["energy"]), row["discord"]["W1"] >= 0.0, row["correct"] == (row["predicted"] == 1)
    (['a1', 'z1', 'z2'], True, True)
    """
    x = np.reshape(x, (1, *(getattr(net, "input_shape", None) or (net.n_inputs,))))    # one sample, unambiguous
    logits = net.forward(x)
    predicted = int(np.argmax(logits[0]))
    m = {"predicted": predicted, "correct": None if label is None else predicted == label}
    if spectrum:
        sp = spectrum_of(net, x, vectors=True, progress=False)
        m.update(lambda_min=float(sp.lambda_min[0]), lambda_max=float(sp.lambda_max[0]),
                 condition=float(sp.condition[0]),
                 energy={n: float(e) for n, e in zip(sp.block_names, sp.block_energy()[0])})
    if discord:
        pd = pinned(net, x, relabelled(logits, [label]), max_iter=max_iter)
        m.update(discord={n: float(d) for n, d in zip(pd.edge_names, pd.by_edge[0])},
                 discord_total=float(pd.by_edge[0].sum()), settled=bool(pd.settled[0]), sliding=len(pd.sliding[0]))
    return m


def survey(net, X, labels=None, store="survey.db", spectrum=True, discord=True, jobs=1, scheduler=None, client=None,
           name="survey", max_iter=100, retry_failed=False, progress=True):
    """The spectrum and the pinned discord of every input of ``X`` under ``net``, one stored row per input.

    The rows go to the sweep store ``store`` as they finish: a run killed at any moment (``kill -9``
    included) loses only the inputs in flight, and the same call again computes only the others.

    Parameters
    ----------
    net : Network
        A classifier whose outputs are the logits (identity output) when ``discord`` is True.
    X : array_like, shape (n, n_0) or (n, *input_shape)
    labels : array_like of int, shape (n,), optional
        True classes (needed by ``discord``; without them ``correct`` is None).
    store : str or path-like
        The SQLite sweep store (:func:`sheaflinalg.sweep.run`'s ``db``).
    spectrum, discord : bool
        Compute ``lambda_min``, ``lambda_max``, the condition number and the energy of the ``lambda_min``
        eigenvector per node (:func:`sheaflinalg.spectrum`); the pinned discord per edge
        (:func:`sheaflinalg.discord.pinned`, at most ``max_iter`` pattern updates).
    jobs, scheduler, client, retry_failed, progress
        As :func:`sheaflinalg.sweep.run`: worker processes here, or a Dask cluster.
    name : str
        The survey's name in the store (one store may hold several surveys).

    Returns
    -------
    SurveyResult

    Examples
    --------
    >>> import os, tempfile, numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 6, 3], seed=0)
    >>> X = np.random.default_rng(0).normal(size=(4, 2))
    >>> db = os.path.join(tempfile.mkdtemp(), "survey.db")
    >>> s = sl.survey(net, X, [0, 1, 2, 0], store=db, progress=False)
    >>> s.index.tolist(), s.counts["done"], bool(np.all(s.lambda_min > 0))
    ([0, 1, 2, 3], 4, True)
    >>> sl.survey(net, X, [0, 1, 2, 0], store=db, progress=False).counts["skipped"]
    4
    """
    check_network(net, graphs=True)
    X, _ = as_samples(X, net.n_inputs, input_shape=getattr(net, "input_shape", None))
    labels = _labels(labels, X.shape[0], net.n_outputs, discord)
    for flag, what in ((spectrum, "spectrum"), (discord, "discord"), (retry_failed, "retry_failed")):
        if not isinstance(flag, bool):
            raise TypeError(f"{what} must be True or False, got {type(flag).__name__}")
    if discord and net.output != "identity":
        raise ValueError(f"discord pins the logits: it needs a network with an identity output, got {net.output!r}")
    max_iter = check_int(max_iter, "max_iter", 1)
    spec = survey_spec(net, X, labels, name, spectrum=spectrum, discord=discord, max_iter=max_iter)
    counts = drive(spec, store, jobs, client, scheduler, retry_failed, progress, context=SurveyTask(net, X))
    result = SurveyResult.load(store, spec.name)
    result.counts = counts
    return result


def _labels(labels, n, classes, discord):
    """The labels as a list of ints in ``[0, classes)`` (or of None), checked."""
    if labels is None:
        if discord:
            raise ValueError("discord pins the output to the true labels: give labels (or discord=False)")
        return [None] * n
    y = np.asarray(labels)
    if y.shape != (n,) or not (np.issubdtype(y.dtype, np.integer) or y.dtype == bool):
        raise ValueError(f"labels must be {n} integer classes (one per input), got an array of shape {y.shape} "
                         f"and dtype {y.dtype}")
    if n and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"labels must be classes 0..{classes - 1} (the network has {classes} outputs), "
                         f"got {int(y.min())}..{int(y.max())}")
    return [int(v) for v in y]


def survey_spec(net, X, labels, name="survey", **options):
    """The :class:`~sheaflinalg.sweep.spec.Spec` of a survey: one run per input, identified by the network's
    fingerprint, the input's values and index, its label and ``options``."""
    if not isinstance(name, str) or not name.strip() or len(name) > 100 or not name.isprintable():
        raise ValueError(f"name must be a short printable text, got {name!r}")
    network = fingerprint([net.parameters()], network_identity(net))[:32]
    runs = [dict(input=i, label=labels[i], x=hashlib.sha256(X[i].tobytes()).hexdigest()[:32], network=network,
                 **options) for i in range(X.shape[0])]
    text = json.dumps({"survey": dict(network=network, n_inputs=X.shape[0], **options)}, sort_keys=True)
    return Spec(name, "survey", list(METRICS), ["input", "label"], runs, text)

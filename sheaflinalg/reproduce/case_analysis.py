"""The sheaf diagnostics of a trained classifier on chosen test inputs, grouped by class and by outcome.

For each input: the spectral gap ``lambda_1`` of the reduced ``L[Omega, Omega]`` under its own
activation pattern (:func:`sheaflinalg.spectrum`), and where the eigenvector of ``lambda_1`` (the
Fiedler vector) puts its energy node by node and channel by channel.  For each misclassified
input (the first ``n_pinned`` of them: each takes seconds): the pinned discord
(:func:`sheaflinalg.discord.pinned`) per node and per channel, with the
output (the logits) pinned to the true label at the network's own confidence: the logits with the
entries of the true and the predicted class exchanged (:func:`relabelled`).  A correctly
classified input pinned that way keeps its forward pass (discord 0), so only misclassified inputs
are pinned.

Why not the one-hot label itself: pinned on the logits, a one-hot vector is far from any output
of a cross-entropy-trained network (its logits are in the tens), so the discord measures the
logits' scale, equally for correct and misclassified inputs, and the pattern iteration does not
settle; pinned on a softmax output, the Gauss-Newton iteration of :func:`sheaflinalg.complete`
oscillates for misclassified inputs (the target is unreachable and the softmax saturated).

The inputs are chosen so that both outcomes are represented: the first ``per_class`` correctly
classified test inputs of every class and the first ``n_wrong`` misclassified ones
(misclassified inputs are rare in a good classifier).
"""

from dataclasses import dataclass

import numpy as np

from .._common.validation import check_int
from ..discord.pinning.analysis import pinned
from ..spectral.drivers import spectrum


def choose_inputs(labels, predicted, per_class, n_wrong):
    """Indices of the first ``per_class`` correct inputs of every class, then the first ``n_wrong`` wrong ones.

    Examples
    --------
    >>> choose_inputs(np.array([0, 1, 0, 1, 1]), np.array([0, 1, 1, 1, 0]), 1, 5).tolist()
    [0, 1, 2, 4]
    """
    per_class = check_int(per_class, "per_class", 0)
    n_wrong = check_int(n_wrong, "n_wrong", 0)
    correct = labels == predicted
    chosen = [np.flatnonzero(correct & (labels == c))[:per_class] for c in np.unique(labels)]
    return np.concatenate(chosen + [np.flatnonzero(~correct)[:n_wrong]]).astype(np.int64)


def relabelled(logits, labels):
    """The logits with, in each row, the entries of the true class and of the predicted (largest) one exchanged.

    The true class then wins with the margin the network gave its own answer; a correctly
    classified row is unchanged.

    Examples
    --------
    >>> relabelled(np.array([[1.0, 3.0, 2.0], [5.0, 0.0, 1.0]]), np.array([2, 0])).tolist()
    [[1.0, 2.0, 3.0], [5.0, 0.0, 1.0]]
    """
    out = np.array(logits, dtype=np.float64)
    rows = np.arange(out.shape[0])
    predicted = out.argmax(axis=1)
    out[rows, labels], out[rows, predicted] = out[rows, predicted], out[rows, labels]
    return out


@dataclass
class CaseAnalysis:
    """Diagnostics per input (rows) of :func:`analyse`.

    Attributes
    ----------
    index : ndarray of int, shape (n,)
        The inputs' rows in the test set.
    labels, predicted : ndarray of int, shape (n,)
    lambda_min, lambda_max : ndarray, shape (n,)
    nodes : list of str
        The free blocks of the reduced system (the network's nodes), columns of ``energy``.
    energy : ndarray, shape (n, n_nodes)
        Energy of the Fiedler vector on every node (rows sum to 1).
    channel_energy : dict
        ``{node: (n, C)}`` for the feature-map nodes (shape ``(C, L)``): energy per channel.
    edges : list of str
        Edges of the pinned discord (each node's defining edge), columns of ``discord``.
    pinned : ndarray of int, shape (n_pinned,)
        The rows of the pinned misclassified inputs (the first ``n_pinned`` misclassified rows).
    discord : ndarray, shape (n_pinned, n_edges)
        Pinned discord ``1/2 ||r||^2`` per edge of the pinned inputs.
    channel_discord : dict
        ``{node: (n_pinned, C)}`` for the feature-map nodes: pinned discord per channel.
    settled : ndarray of bool, shape (n_pinned,)
        The pinned equilibrium was found (possibly on a switching surface).
    sliding : ndarray of int, shape (n_pinned,)
        Coordinates held on a switching surface ``z = 0`` (a Filippov equilibrium) per input.
    """

    index: np.ndarray
    labels: np.ndarray
    predicted: np.ndarray
    lambda_min: np.ndarray
    lambda_max: np.ndarray
    nodes: list
    energy: np.ndarray
    channel_energy: dict
    pinned: np.ndarray
    edges: list
    discord: np.ndarray
    channel_discord: dict
    settled: np.ndarray
    sliding: np.ndarray

    @property
    def correct(self):
        return self.labels == self.predicted

    def outcome_groups(self, values):
        """``{"correct": values[correct], "misclassified": values[~correct]}`` (rows of ``values``)."""
        return {"correct": values[self.correct], "misclassified": values[~self.correct]}

    def class_groups(self, values, classes):
        """``{"c": values of the inputs of true class c}`` for each class in ``classes`` (rows of ``values``)."""
        return {str(c): values[self.labels == c] for c in classes}


def feature_maps(graph):
    """The nodes of ``graph`` whose value is a feature map (channels first, at least one spatial axis)."""
    return [node.name for node in graph.nodes if len(graph.shapes[node.name]) >= 2]


def analyse(net, X, Y, index, n_pinned):
    """The :class:`CaseAnalysis` of the test inputs ``X[index]`` with one-hot labels ``Y[index]``.

    ``net`` is a classifier with an identity output (its outputs are logits); the first ``n_pinned``
    misclassified inputs are pinned.
    """
    X, Y = X[index], Y[index]
    labels = Y.argmax(axis=1)
    logits = net.forward(X)
    predicted = logits.argmax(axis=1)
    sp = spectrum(net, X, vectors=True, progress=False)
    maps = feature_maps(net.graph)
    channel_energy = sp.channel_energy()
    wrong = np.flatnonzero(labels != predicted)[:check_int(n_pinned, "n_pinned", 0)]
    return CaseAnalysis(index=np.asarray(index), labels=labels, predicted=predicted, lambda_min=sp.lambda_min,
                        lambda_max=sp.lambda_max, nodes=sp.block_names, energy=sp.block_energy(),
                        channel_energy={name: channel_energy[name] for name in maps}, pinned=wrong,
                        **_pinned_discord(net, X[wrong], relabelled(logits[wrong], labels[wrong]), maps))


def _pinned_discord(net, X, target, maps):
    """The pinned-discord fields of :class:`CaseAnalysis` (empty when no input is misclassified)."""
    if not X.shape[0]:
        names = [node.name for node in net.graph.nodes]
        return dict(edges=names, discord=np.zeros((0, len(names))), settled=np.zeros(0, dtype=bool),
                    channel_discord={n: np.zeros((0, net.graph.shapes[n][0])) for n in maps},
                    sliding=np.zeros(0, dtype=np.int64))
    pd = pinned(net, X, target)
    return dict(edges=list(pd.edge_names), discord=pd.by_edge, settled=pd.settled,
                channel_discord={name: pd.residuals.by_channel(name) for name in maps},
                sliding=np.array([len(s) for s in pd.sliding], dtype=np.int64))

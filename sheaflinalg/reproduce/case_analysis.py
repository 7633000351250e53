"""The sheaf diagnostics of a trained classifier on chosen test inputs, grouped by class and by outcome.

For each input: the spectral gap ``lambda_1`` of the reduced ``L[Omega, Omega]`` under its own
activation pattern (:func:`sheaflinalg.spectrum`), where the eigenvector of ``lambda_1`` (the
Fiedler vector) puts its energy node by node and channel by channel, and the pinned discord with
the output pinned to the true label, one-hot (:func:`sheaflinalg.discord.pinned`), per node and
per channel.  The inputs are chosen so that both outcomes are represented: the first
``per_class`` correctly classified test inputs of every class and the first ``n_wrong``
misclassified ones (misclassified inputs are rare in a good classifier).
"""

from dataclasses import dataclass

import numpy as np

from .._common.validation import check_int
from ..discord.pinned_analysis import pinned
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
        Edges of the pinned discord (the nodes' defining edges and the output edge), columns of ``discord``.
    discord : ndarray, shape (n, n_edges)
        Pinned discord ``1/2 ||r||^2`` per edge.
    channel_discord : dict
        ``{node: (n, C)}`` for the feature-map nodes: pinned discord per channel.
    settled : ndarray of bool, shape (n,)
        The pinned equilibrium was found (possibly on a switching surface).
    """

    index: np.ndarray
    labels: np.ndarray
    predicted: np.ndarray
    lambda_min: np.ndarray
    lambda_max: np.ndarray
    nodes: list
    energy: np.ndarray
    channel_energy: dict
    edges: list
    discord: np.ndarray
    channel_discord: dict
    settled: np.ndarray

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


def analyse(net, X, Y, index):
    """The :class:`CaseAnalysis` of the test inputs ``X[index]`` with one-hot labels ``Y[index]``."""
    X, Y = X[index], Y[index]
    labels = Y.argmax(axis=1)
    predicted = net.forward(X).argmax(axis=1)
    sp = spectrum(net, X, vectors=True, progress=False)
    maps = feature_maps(net.graph)
    channel_energy = sp.channel_energy()
    pd = pinned(net, X, Y)
    return CaseAnalysis(index=np.asarray(index), labels=labels, predicted=predicted, lambda_min=sp.lambda_min,
                        lambda_max=sp.lambda_max, nodes=sp.block_names, energy=sp.block_energy(),
                        channel_energy={name: channel_energy[name] for name in maps}, edges=list(pd.edge_names),
                        discord=pd.by_edge, channel_discord={name: pd.residuals.by_channel(name) for name in maps},
                        settled=pd.settled)

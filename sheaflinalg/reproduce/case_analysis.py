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
from ..discord.pinning.targets import relabelled
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
        ``{node: (n, G)}``: energy per index of the node's grouping axis (a feature map's channel, an
        attention node's head; :func:`analyse`'s ``groups``).
    edges : list of str
        Edges of the pinned discord (each node's defining edge), columns of ``discord``.
    pinned : ndarray of int, shape (n_pinned,)
        The rows of the pinned misclassified inputs (the first ``n_pinned`` misclassified rows).
    discord : ndarray, shape (n_pinned, n_edges)
        Pinned discord ``1/2 ||r||^2`` per edge of the pinned inputs.
    channel_discord : dict
        ``{node: (n_pinned, G)}``: pinned discord per index of the node's grouping axis.
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
    """``{node: 0}`` for the nodes of ``graph`` whose value is a feature map (channels first, at least one
    spatial axis): the grouping of :func:`analyse` by channel."""
    return {node.name: 0 for node in graph.nodes if len(graph.shapes[node.name]) >= 2}


def along(values, shape, axis):
    """Sum of squares of per-sample node values ``(n, size)`` over everything but ``axis`` of ``shape``: ``(n, shape[axis])``.

    Examples
    --------
    >>> along(np.arange(6.0)[None, :], (3, 2), 1).tolist()
    [[20.0, 35.0]]
    """
    v = np.moveaxis(np.asarray(values).reshape(-1, *shape), axis + 1, 1)
    return (v * v).reshape(v.shape[0], v.shape[1], -1).sum(axis=2)


def auc(positive, negative):
    """The probability that a value of ``positive`` exceeds one of ``negative`` (ties count half): the area under
    the ROC curve of a threshold on the value, ``U / (n_pos n_neg)`` of the Mann-Whitney test (NaN if one is empty).

    Examples
    --------
    >>> auc([3.0, 4.0], [1.0, 3.0])
    0.875
    """
    p, q = np.asarray(positive, dtype=float), np.asarray(negative, dtype=float)
    if not p.size or not q.size:
        return np.nan
    return float(np.mean((p[:, None] > q[None, :]) + 0.5 * (p[:, None] == q[None, :])))


def analyse(net, X, Y, index, n_pinned, groups=feature_maps, max_iter=100):
    """The :class:`CaseAnalysis` of the test inputs ``X[index]`` with one-hot labels ``Y[index]``.

    ``net`` is a classifier with an identity output (its outputs are logits); the first ``n_pinned``
    misclassified inputs are pinned.  ``groups(graph) -> {node: axis}`` names the nodes whose energy and
    discord are also summed per index of one axis of their value (:func:`along`): per channel
    (:func:`feature_maps`, the default), per attention head (the nodes the heads split, from
    :func:`sheaflinalg.discord.attention_blocks`: the ViT's case study).  ``max_iter`` bounds
    the pattern updates of a pinned equilibrium (:func:`sheaflinalg.discord.pinned`).
    """
    X, Y = X[index], Y[index]
    labels = Y.argmax(axis=1)
    logits = net.forward(X)
    predicted = logits.argmax(axis=1)
    sp = spectrum(net, X, vectors=True, progress=False)
    axes = groups(net.graph)
    V = sp.vectors_smallest[:, 0, :]
    blocks = dict(sp.blocks)
    channel_energy = {n: along(V[:, blocks[n]], net.graph.shapes[n], axis) for n, axis in axes.items()}
    wrong = np.flatnonzero(labels != predicted)[:check_int(n_pinned, "n_pinned", 0)]
    return CaseAnalysis(index=np.asarray(index), labels=labels, predicted=predicted, lambda_min=sp.lambda_min,
                        lambda_max=sp.lambda_max, nodes=sp.block_names, energy=sp.block_energy(),
                        channel_energy=channel_energy, pinned=wrong,
                        **_pinned_discord(net, X[wrong], relabelled(logits[wrong], labels[wrong]), axes, max_iter))


def _pinned_discord(net, X, target, axes, max_iter):
    """The pinned-discord fields of :class:`CaseAnalysis` (empty when no input is misclassified)."""
    shapes = net.graph.shapes
    if not X.shape[0]:
        names = [node.name for node in net.graph.nodes]
        return dict(edges=names, discord=np.zeros((0, len(names))), settled=np.zeros(0, dtype=bool),
                    channel_discord={n: np.zeros((0, shapes[n][axis])) for n, axis in axes.items()},
                    sliding=np.zeros(0, dtype=np.int64))
    pd = pinned(net, X, target, max_iter=max_iter)
    return dict(edges=list(pd.edge_names), discord=pd.by_edge, settled=pd.settled,
                channel_discord={n: pd.residuals.by_axis(n, axis) for n, axis in axes.items()},
                sliding=np.array([len(s) for s in pd.sliding], dtype=np.int64))

"""Network files (``.npz``, no pickle): the arrays of a network, written atomically and read with every entry checked.

A chain network's file holds ``format`` (the text ``sheaflinalg.network/1``),
``output`` (the output activation) and ``W1, b1, ..., W{k+1}, b{k+1}``
(float64, finite, shapes ``(n_l, n_{l-1})`` and ``(n_l,)`` that chain).
and ``digest``, the SHA-256 of the rest (:func:`~sheaflinalg._common.npzfile.content_digest`),
so that a file edited after :meth:`~sheaflinalg.Network.save` wrote it is refused.
``format``, ``output`` and ``digest`` may be absent (files written by hand
with ``numpy.savez``; the output is then the identity); other entries are ignored with one
:class:`~sheaflinalg._common.npzfile.UnreadEntriesWarning` naming them.

A graph network's file (``format`` ``sheaflinalg.graph/1``) holds its structure as JSON data
and one array per parameter: :mod:`sheaflinalg.network.graph.files`.  :func:`read_file` reads
either kind.
"""

import re

import numpy as np

from .._common.atomic import save_npz
from .._common.npzfile import content_digest, read_npz
from . import activations
from .graph import files as graph_files

FORMAT = "sheaflinalg.network/1"
_LAYER_ENTRY = re.compile(r"[Wb][1-9][0-9]*")


def write_network(path, weights, biases, output):
    """Write a network's arrays to exactly ``path`` (atomically; no extension is added)."""
    layers = {}
    for l, (W, b) in enumerate(zip(weights, biases), start=1):
        layers[f"W{l}"] = W
        layers[f"b{l}"] = b
    digest = content_digest(layers, FORMAT + output)
    save_npz(path, dict(layers, format=np.array(FORMAT), output=np.array(output), digest=np.array(digest)))


def write_graph(path, graph):
    """Write a graph network's file to exactly ``path`` (atomically; no extension is added)."""
    save_npz(path, graph_files.graph_entries(graph))


def read_file(path):
    """``("chain", (weights, biases, output))`` or ``("graph", Graph)``: the network file ``path``, every entry checked.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Naming the file and the entry: corrupt or truncated file, an entry
        that needs pickle, is not float64, has the wrong number of dimensions,
        holds NaN/Inf, a missing entry, a layer numbered beyond a gap, an unknown ``format`` or
        ``output``, a digest that does not match; for a graph file, JSON that is not of
        the schema or a graph the :class:`~sheaflinalg.network.graph.Graph` constructor refuses.
        (Chain shapes that do not chain are refused by the
        :class:`~sheaflinalg.network.model.Network` constructor, also named.)
    """
    f = read_npz(path, "network file")
    if "graph" in f or ("format" in f and f.text("format") == graph_files.FORMAT):
        return "graph", graph_files.read_graph(f)
    return "chain", chain_file(f)


def chain_file(f):
    """``(weights, biases, output)`` of the chain network file ``f`` (an :class:`~sheaflinalg._common.npzfile.NpzEntries`)."""
    if "meta" in f:     # the output activation of those files is in their meta, which this reader would ignore
        raise f.error("holds 'meta': it is a recorded experiment or a training checkpoint, not a network file "
                      "(a recorded experiment's network: sl.tasks.load_experiment(path).network)")
    if "W1" not in f:
        raise f.error("is not a sheaflinalg network file (no array 'W1')")
    weights, biases = layer_arrays(f)
    names = [f"{p}{l}" for l in range(1, len(weights) + 1) for p in "Wb"]
    f.ignore_others(["format", "output", "digest"] + names)
    if "format" in f and f.text("format") != FORMAT:
        raise f.error(f"must be {FORMAT!r}, got {f.text('format')!r}", "format")
    output = f.text("output") if "output" in f else "identity"
    if "digest" in f:
        layers = dict(zip(names, [a for pair in zip(weights, biases) for a in pair]))
        if f.text("digest") != content_digest(layers, FORMAT + output):
            raise f.error("does not match the file's weights, biases and output: the file was edited after it "
                          "was saved (remove the entry 'digest' to load an edited file on purpose)", "digest")
    if output not in activations.OUTPUTS:
        raise f.error(f"names an unknown output activation {output!r}; expected one of "
                      f"{', '.join(activations.OUTPUTS)}", "output")
    return weights, biases, output


def layer_arrays(f):
    """``W1, b1, W2, ...`` of the :class:`~sheaflinalg._common.npzfile.NpzEntries` ``f`` (2-D and 1-D float64, finite).

    The layers are ``W1 .. Wn`` for the largest ``n`` with no gap; a weight
    or bias numbered beyond it is refused, as is a missing bias.
    """
    n = 0
    while f"W{n + 1}" in f:
        n += 1
    beyond = sorted(name for name in f.names if _LAYER_ENTRY.fullmatch(name) and int(name[1:]) > n)
    if beyond:
        raise f.error(f"holds layer entries {beyond} but no 'W{n + 1}': the layers must be numbered 1..{n} "
                      "without gaps")
    missing = [f"b{l}" for l in range(1, n + 1) if f"b{l}" not in f]
    if missing:
        raise f.error(f"missing bias arrays {missing}")
    weights = [f.float_array(f"W{l}", ndim=2) for l in range(1, n + 1)]
    biases = [f.float_array(f"b{l}", ndim=1) for l in range(1, n + 1)]
    return weights, biases

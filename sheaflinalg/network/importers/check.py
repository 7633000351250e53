"""An imported graph checked against the model it was read from, node by node, on one random input.

The importer runs the model itself once in float64 (PyTorch: a copy of the
module, hooks included; ONNX: ``onnx.reference.ReferenceEvaluator``) and keeps
the values it can map to graph nodes (torch.fx node names, ONNX value names);
the graph's own forward pass must give the same values, up to rounding, at
every mapped node and at the output.  The first node that differs is named
with the largest difference, so a model that computes something the importer
did not read (a forward hook, a weight set by a pre-hook, a value modified in
place through an alias) is refused instead of imported wrongly.
"""

import numpy as np

from .. import activations
from ..errors import ImportMismatchError
from ..graph.forward import evaluate
from ..graph.nodes import INPUT

#: Largest difference accepted, relative to the largest value seen up to the node: two float64 passes of
#: the same network differ by rounding (about 1e-15 relative), a wrongly imported one by far more.
RTOL = 1e-7
#: Seed of the random input of the check (the import is deterministic).
SEED = 0


def random_input(batch, input_shape):
    """The check's input: ``(batch, *input_shape)`` standard normal float64 values, always the same.

    Examples
    --------
    >>> random_input(2, (1, 3)).shape
    (2, 1, 3)
    """
    return np.random.default_rng(SEED).standard_normal((batch,) + tuple(input_shape))


def _difference(ours, expected):
    """``(max |ours - expected|, max |expected|)``; ``(inf, ...)`` if shapes or finiteness differ."""
    expected = np.asarray(expected, dtype=np.float64)
    if expected.size != ours.size:      # (inf, inf) would pass the check's ``difference <= RTOL * scale``
        return np.inf, float(np.abs(ours).max(initial=0.0))
    expected = expected.reshape(ours.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        difference = np.abs(ours - expected)
    if not np.all(np.isfinite(difference)):
        return np.inf, float(np.max(np.abs(ours)))
    return float(difference.max(initial=0.0)), float(np.abs(expected).max(initial=0.0))


def _mismatch(source, causes, where, difference, scale):
    shown = "values of another shape or not finite" if not np.isfinite(difference) else \
        f"max |difference| {difference:.3g} where values reach {scale:.3g}"
    return ImportMismatchError(f"{source}: the imported network differs from the model at {where}: {shown} on a "
                               f"random input; the model computes something the importer did not read ({causes})")


def check_import(graph, X, reference, output, source, causes):
    """Raise :class:`ImportMismatchError` unless ``graph`` computes the model's values on ``X``.

    Parameters
    ----------
    graph : Graph
    X : ndarray, shape (batch, *graph.input_shape)
        The input the model ran on.
    reference : dict
        ``{graph node name: the model's value (batch, ...)}`` for the nodes that could be mapped.
    output : array_like
        The model's own output on ``X`` (after its output activation).
    source : str
        What was imported, for the message (``"the PyTorch model"``, the file name).
    causes : str
        What such a model may hold that the importer does not read, for the message.

    Examples
    --------
    >>> from sheaflinalg.network.graph import Graph, Node
    >>> g = Graph((2,), [Node("fc", "linear", ["x"], params={"weight": np.eye(2), "bias": np.zeros(2)})])
    >>> X = random_input(2, (2,))
    >>> check_import(g, X, {"fc": X}, X, "m", "a hook")
    >>> check_import(g, X, {"fc": 2 * X}, 2 * X, "m", "a hook")
    Traceback (most recent call last):
    ...
    sheaflinalg.network.errors.ImportMismatchError: m: the imported network differs from the model at node 'fc' ...
    """
    values = evaluate(graph, np.ascontiguousarray(X.reshape(X.shape[0], -1), dtype=np.float64), threads=1).values
    seen = {INPUT: float(np.abs(values[INPUT]).max(initial=0.0))}
    for node in graph.nodes:
        seen[node.name] = max([float(np.abs(values[node.name]).max(initial=0.0))] + [seen[p] for p in node.inputs])
        if node.name in reference:
            difference, scale = _difference(values[node.name], reference[node.name])
            if not difference <= RTOL * max(seen[node.name], scale):
                raise _mismatch(source, causes, f"node {node.name!r} ({node.op})", difference, scale)
    ours = activations.apply(graph.output, values[graph.output_node])
    difference, scale = _difference(ours, output)
    if not difference <= RTOL * max(seen[graph.output_node], scale, 1.0 if graph.output != "identity" else 0.0):
        raise _mismatch(source, causes, f"its output (after node {graph.output_node!r} and the output activation "
                                        f"{graph.output!r})", difference, scale)

"""A graph network as file entries, and back: the structure is JSON data, the parameters float64 arrays.

A graph network file (``.npz``, no pickle) holds

- ``format``: the text ``sheaflinalg.graph/1``;
- ``graph``: a JSON object ``{"input_shape": [...], "output": "...", "nodes": [...]}``, every node
  ``{"name": ..., "op": ..., "inputs": [...], "attrs": {...}}`` with the attributes of its
  operation only (integers, finite numbers, booleans, lists of integers);
- ``n{i}.{param}``: one float64 array per parameter of node ``i`` (0-based, in node order), e.g.
  ``n0.weight``, ``n0.bias`` (array names never depend on node names);
- ``digest``: :func:`~sheaflinalg._common.npzfile.content_digest` of the arrays and the JSON text,
  so that a file edited after it was written is refused.

:func:`read_graph` checks the JSON against this schema (types of every field, no unknown or
missing key, operations of :data:`~sheaflinalg.network.graph.nodes.OPS`, attribute types) and
every array before the :class:`~sheaflinalg.network.graph.Graph` constructor checks names,
parents and shapes; any defect is one ValueError naming the file and the entry.
"""

import json
import math
import numbers

import numpy as np

from ..._common.memory import InsufficientMemoryError
from ..._common.npzfile import content_digest
from .graph import Graph
from .nodes import OPS, Node, stated_attrs

FORMAT = "sheaflinalg.graph/1"
#: Longest JSON text read (characters): thousands of nodes; a larger entry is crafted.
MAX_TEXT = 1 << 22
#: Integers in the JSON are bounded (sizes, strides, axes): larger ones are crafted, and would overflow int64.
MAX_INT = 1 << 40
#: How each attribute of :data:`OPS` is written: an int, a bool, a finite number, a string, or an int or list of ints.
ATTR_KINDS = {"stride": "ints", "padding": "ints", "dilation": "ints", "kernel_size": "ints", "output_size": "ints",
              "shape": "ints", "groups": "int", "axis": "int", "count_include_pad": "bool",
              "negative_slope": "number", "axes": "ints", "keepdim": "bool", "pads": "ints",
              "start": "int", "stop": "int", "step": "int",
              "scale": "ints", "approximate": "text", "beta": "number", "threshold": "number", "alpha": "number",
              "output_padding": "ints", "ceil_mode": "bool", "mode": "text", "align_corners": "bool", "n_axes": "int",
              "eps": "number", "shifts": "ints", "min": "number", "max": "number", "slope": "number",
              "offset": "number", "causal": "bool"}
_NODE_KEYS = ("name", "op", "inputs", "attrs")
_TOP_KEYS = ("input_shape", "output", "nodes")


def param_entry(index, key):
    """The file entry of parameter ``key`` of node number ``index``: ``"n{index}.{key}"``."""
    return f"n{index}.{key}"


def _plain(value):
    """An attribute value as JSON data (tuples become lists, numpy scalars Python ones)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        return value
    return [int(v) for v in value]


def graph_entries(graph):
    """``{entry: array}`` of a graph network file (``format``, ``graph``, parameters, ``digest``).

    Examples
    --------
    >>> from sheaflinalg.network.graph.chain import chain_graph
    >>> g = chain_graph([np.ones((3, 2)), np.ones((1, 3))], [np.zeros(3), np.zeros(1)], "identity")
    >>> sorted(graph_entries(g))
    ['digest', 'format', 'graph', 'n0.bias', 'n0.weight', 'n2.bias', 'n2.weight']
    """
    description = {"input_shape": list(graph.input_shape), "output": graph.output,
                   "nodes": [{"name": node.name, "op": node.op, "inputs": list(node.inputs),
                              "attrs": {key: _plain(value) for key, value in stated_attrs(node).items()}}
                             for node in graph.nodes]}
    text = json.dumps(description, allow_nan=False, separators=(",", ":"))
    arrays = {param_entry(i, key): np.asarray(value) for i, node in enumerate(graph.nodes)
              for key, value in node.params.items()}
    digest = content_digest(arrays, FORMAT + text)
    return dict(arrays, format=np.array(FORMAT), graph=np.array(text), digest=np.array(digest))


# ----------------------------------------------------------------------------------- reading
class _Schema:
    """Checks of the JSON description; every error is the file's, naming the entry ``graph`` and the field."""

    def __init__(self, f):
        self.f = f

    def fail(self, where, message):
        return self.f.error(f"{where}: {message}", "graph")

    def keys(self, value, wanted, where, optional=()):
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a JSON object, got {_kind(value)}")
        missing, unknown = sorted(set(wanted) - set(value) - set(optional)), sorted(set(value) - set(wanted))
        if missing or unknown:
            raise self.fail(where, f"must have exactly the keys {list(wanted)}" + (f"; missing {missing}" if missing
                                                                                   else "")
                            + (f"; unknown {unknown}" if unknown else ""))
        return value

    def integer(self, value, where, minimum=-MAX_INT):
        if type(value) is not int or not minimum <= value <= MAX_INT:
            raise self.fail(where, f"must be an integer in {minimum}..{MAX_INT}, got {_kind(value)} {value!r:.40}")
        return value

    def list_of(self, value, where, check):
        if not isinstance(value, list):
            raise self.fail(where, f"must be a JSON list, got {_kind(value)}")
        return [check(item, f"{where}[{i}]") for i, item in enumerate(value)]

    def text(self, value, where):
        if not isinstance(value, str):
            raise self.fail(where, f"must be a string, got {_kind(value)}")
        return value

    def attr(self, value, kind, where):
        if kind == "ints":
            if isinstance(value, list):
                return tuple(self.list_of(value, where, self.integer))
            return self.integer(value, where)
        if kind == "int":
            return self.integer(value, where)
        if kind == "text":
            return self.text(value, where)
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.fail(where, f"must be true or false, got {_kind(value)}")
            return value
        if type(value) is int:                                              # "number"
            return self.integer(value, where)
        if type(value) is not float or not math.isfinite(value):
            raise self.fail(where, f"must be a finite number, got {_kind(value)} {value!r:.40}")
        return value


def _kind(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _reject_constant(name):
    raise ValueError(f"{name} is not a finite number")


def _description(f):
    """The JSON object of entry ``graph``: well-formed, bounded, no NaN/Infinity literals."""
    text = f.text("graph")
    if len(text) > MAX_TEXT:
        raise f.error(f"holds {len(text)} characters of JSON, more than a graph file holds ({MAX_TEXT}): the file is "
                      "crafted", "graph")
    try:
        return json.loads(text, parse_constant=_reject_constant), text
    except (ValueError, RecursionError) as exc:
        raise f.error(f"is not valid JSON ({type(exc).__name__}: {exc})", "graph") from None


def _node(schema, f, index, value):
    """Node number ``index`` from its JSON object and its parameter arrays (types checked here, the rest by Node)."""
    where = f"nodes[{index}]"
    value = schema.keys(value, _NODE_KEYS, where)
    name = schema.text(value["name"], f"{where}.name")
    op = schema.text(value["op"], f"{where}.op")
    where = f"{where} ({name!r})"
    if op not in OPS:
        raise schema.fail(f"{where}.op", f"unsupported operation {op!r}; supported: {', '.join(OPS)}")
    inputs = schema.list_of(value["inputs"], f"{where}.inputs", schema.text)
    attrs = schema.keys(value["attrs"], OPS[op].attrs, f"{where}.attrs", OPS[op].optional)
    attrs = {key: schema.attr(v, ATTR_KINDS[key], f"{where}.attrs.{key}") for key, v in attrs.items()}
    params = {key: f.float_array(param_entry(index, key)) for key in OPS[op].params}
    try:
        return Node(name, op, inputs, attrs, params)
    except ValueError as exc:
        raise schema.fail(where, str(exc)) from None


def read_graph(f):
    """The :class:`Graph` of the graph network file ``f`` (:class:`~sheaflinalg._common.npzfile.NpzEntries`).

    Raises
    ------
    FileFormatError
        (a ValueError) naming the file and the entry: ``format`` not :data:`FORMAT`, ``graph`` not valid
        JSON or not of the schema, a missing or non-finite parameter array, a digest that does not match,
        or a graph that the :class:`Graph` constructor refuses (names, parents, shapes).
    InsufficientMemoryError
        Naming the file: a window table of the graph would not fit in memory (a crafted ``kernel_size``).
    """
    f.require(["format", "graph"])
    if f.text("format") != FORMAT:
        raise f.error(f"must be {FORMAT!r}, got {f.text('format')!r}", "format")
    description, text = _description(f)
    schema = _Schema(f)
    description = schema.keys(description, _TOP_KEYS, "the description")
    input_shape = schema.list_of(description["input_shape"], "input_shape", lambda v, w: schema.integer(v, w, 1))
    output = schema.text(description["output"], "output")
    nodes = schema.list_of(description["nodes"], "nodes", lambda v, w: v)
    nodes = [_node(schema, f, i, value) for i, value in enumerate(nodes)]
    try:
        graph = Graph(tuple(input_shape), nodes, output)
    except ValueError as exc:
        raise f.error(str(exc), "graph") from None
    except InsufficientMemoryError as exc:      # a window table the file's geometry asks for
        raise InsufficientMemoryError(f"{f.path}: entry 'graph': {exc}") from None
    arrays = {param_entry(i, key): value for i, node in enumerate(nodes) for key, value in node.params.items()}
    f.ignore_others(["format", "graph", "digest"] + list(arrays))
    if "digest" in f and f.text("digest") != content_digest(arrays, FORMAT + text):
        raise f.error("does not match the file's graph and parameters: the file was edited after it was saved "
                      "(remove the entry 'digest' to load an edited file on purpose)", "digest")
    return graph

"""Graph network files: bitwise round trips of random graphs; crafted files refused naming the file and the entry.

A crafted description is re-signed (its digest recomputed) so that the checks behind the digest
are reached; the same edit left unsigned is refused by the digest.
"""

import json
import os
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.graph_examples import every_op_network
from helpers.random_graphs import EVERY_STEP, graph_networks, random_graph
import sheaflinalg as sl
from sheaflinalg._common.npzfile import content_digest
from sheaflinalg.network.graph import OPS
from sheaflinalg.network.graph.files import ATTR_KINDS, FORMAT, MAX_TEXT


def _same_network(a, b):
    assert a.is_graph == b.is_graph and a.output == b.output and a.input_shape == b.input_shape
    if not a.is_graph:
        return all(np.array_equal(u, v) for u, v in zip(a.weights + a.biases, b.weights + b.biases))
    for u, v in zip(a.graph.nodes, b.graph.nodes, strict=True):
        attrs = {k: tuple(a) if isinstance(a, list) else a for k, a in u.attrs.items()}
        assert (u.name, u.op, u.inputs, attrs) == (v.name, v.op, v.inputs, dict(v.attrs))
        assert u.params.keys() == v.params.keys()
        for key in u.params:
            assert u.params[key].dtype == v.params[key].dtype == np.float64
            assert u.params[key].tobytes() == v.params[key].tobytes() and u.params[key].shape == v.params[key].shape
    return True


#: Graphs of every step on flat, 1-D and 2-D inputs, chains or branching: closed by a head, or ending anywhere.
EVERY_GRAPH = st.one_of(graph_networks(outputs=("identity", "sigmoid", "tanh", "softmax"), max_layers=8),
                        graph_networks(outputs=("identity", "sigmoid", "tanh"), max_layers=8, head=False))


def test_the_random_graphs_reach_every_operation():
    """The round trip below sees every operation: a new one fails here until random_graphs.py builds it."""
    built = {node.op for seed in range(200) for options in ({}, {"head": False, "branching": True})
             for node in random_graph(seed, steps=EVERY_STEP, axes=(0, 1, 2), max_layers=8, **options).graph.nodes}
    assert built == set(OPS)


@settings(max_examples=25)
@given(EVERY_GRAPH)
def test_random_graphs_round_trip_bitwise(tmp_path_factory, case):
    net = case.net
    path = str(tmp_path_factory.mktemp("io") / "net.npz")
    net.save(path)
    back = sl.Network.load(path)
    assert _same_network(net, back)
    X = np.random.default_rng(0).normal(size=(3,) + net.input_shape)
    assert net.forward(X).tobytes() == back.forward(X).tobytes()


def test_every_op_round_trips_and_its_file_holds_data_only(tmp_path):
    net = every_op_network(output="tanh")
    path = str(tmp_path / "g")
    net.save(path)
    assert os.listdir(tmp_path) == ["g"]
    with np.load(path, allow_pickle=False) as f:
        entries = {k: f[k] for k in f.files}
    assert str(entries["format"]) == FORMAT
    assert {k for k in entries if re.fullmatch(r"n\d+\.\w+", k)} == {
        f"n{i}.{key}" for i, node in enumerate(net.graph.nodes) for key in node.params}
    assert json.loads(str(entries["graph"]))["nodes"][3]["attrs"] == {"stride": 1, "padding": [1, 2],
                                                                      "dilation": [1, 2], "groups": 2}
    assert _same_network(net, sl.Network.load(path))


def test_chain_files_are_unchanged(tmp_path):
    """An MLP (also one built from linear/relu nodes) is saved as the chain file of today."""
    net = sl.Network.random([3, 4, 2], seed=1)
    nodes = sl.Network.from_nodes((3,), net.graph.nodes)
    for i, candidate in enumerate((net, nodes)):
        candidate.save(tmp_path / f"{i}.npz")
        with np.load(tmp_path / f"{i}.npz") as f:
            assert sorted(f.files) == ["W1", "W2", "b1", "b2", "digest", "format", "output"]
            assert str(f["format"]) == "sheaflinalg.network/1"
    assert (tmp_path / "0.npz").read_bytes() == (tmp_path / "1.npz").read_bytes()


def test_every_attribute_has_a_file_type():
    assert {a for spec in OPS.values() for a in spec.attrs} == set(ATTR_KINDS)


# ------------------------------------------------------------------------------------ crafted files
@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    path = tmp_path_factory.mktemp("pristine") / "g.npz"
    every_op_network().save(path)
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _write(tmp_path, entries, edit=None, resign=True):
    """Write ``entries`` with the JSON description changed by ``edit(description)`` (re-signed unless told)."""
    entries = dict(entries)
    if edit is not None:
        description = json.loads(str(entries["graph"]))
        text = edit(description)
        entries["graph"] = np.array(text if isinstance(text, str) else json.dumps(description))
    if resign:
        arrays = {k: v for k, v in entries.items() if re.fullmatch(r"n\d+\..*", k)}
        try:
            entries["digest"] = np.array(content_digest(arrays, FORMAT + str(entries["graph"])))
        except KeyError:        # no entry 'graph' to sign
            pass
    path = str(tmp_path / "crafted.npz")
    np.savez(path, **entries)
    return path


def _refused(path, entry, words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError) as info:
            sl.Network.load(path)
    message = str(info.value)
    assert message.startswith(path) and f"entry {entry!r}" in message, message
    assert re.search(words, message), message
    return message


def _set(path, value):
    """An edit setting the field at ``path`` (a tuple of keys and indices) of the description."""
    def edit(description):
        target = description
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return edit


_DELETE = object()

CRAFTED = {
    "not json": (lambda d: '{"input_shape": [2, 6', "not valid JSON"),
    "deep nesting": (lambda d: "[" * 200000 + "]" * 200000, "not valid JSON|RecursionError"),
    "nested list": (lambda d: "[" * 500 + "]" * 500, "must be a JSON object, got a list"),
    "huge": (lambda d: " " * (MAX_TEXT + 1) + "{}", "more than a graph file holds"),
    "NaN literal": (lambda d: json.dumps(d).replace('"negative_slope":0.01', '"negative_slope":NaN')
                    .replace('"negative_slope": 0.01', '"negative_slope": NaN'), "NaN|not valid JSON"),
    "Infinity literal": (lambda d: json.dumps(d).replace('"stride": 1', '"stride": Infinity', 1), "Infinity"),
    "top unknown key": (_set(("code",), "import os"), r"unknown \['code'\]"),
    "top missing key": (_set(("output",), _DELETE), r"missing \['output'\]"),
    "nodes not a list": (_set(("nodes",), {"a": 1}), "nodes: must be a JSON list, got an object"),
    "no nodes": (_set(("nodes",), []), "at least one node"),
    "node not an object": (_set(("nodes", 2), "relu"), r"nodes\[2\]: must be a JSON object, got a string"),
    "node unknown key": (_set(("nodes", 2, "params"), {}), r"nodes\[2\].*unknown \['params'\]"),
    "node missing key": (_set(("nodes", 2, "inputs"), _DELETE), r"missing \['inputs'\]"),
    "op not supported": (_set(("nodes", 2, "op"), "fft"), "unsupported operation 'fft'"),
    "op not a string": (_set(("nodes", 2, "op"), 7), "op: must be a string, got an integer"),
    "name not a string": (_set(("nodes", 2, "name"), ["relu1"]), "name: must be a string, got a list"),
    "name reserved": (_set(("nodes", 2, "name"), "x"), "'x' is not allowed"),
    "name of spaces": (_set(("nodes", 2, "name"), "a b"), "'a b' is not allowed"),
    "name twice": (_set(("nodes", 2, "name"), "bn1"), "used twice"),
    "parent unknown": (_set(("nodes", 2, "inputs"), ["ghost"]), "ghost"),
    "parent later": (_set(("nodes", 2, "inputs"), ["fc"]), "topological order"),
    "parent not a string": (_set(("nodes", 2, "inputs"), [1]), r"inputs\[0\]: must be a string"),
    "inputs not a list": (_set(("nodes", 2, "inputs"), "bn1"), "inputs: must be a JSON list"),
    "two parents for relu": (_set(("nodes", 2, "inputs"), ["bn1", "conv1"]), "takes 1 parent"),
    "attrs not an object": (_set(("nodes", 0, "attrs"), [1, 1, 1, 1]), "attrs: must be a JSON object"),
    "attr missing": (_set(("nodes", 0, "attrs", "groups"), _DELETE), r"missing \['groups'\]"),
    "attr unknown": (_set(("nodes", 2, "attrs", "inplace"), True), r"unknown \['inplace'\]"),
    "stride text": (_set(("nodes", 0, "attrs", "stride"), "2"), "stride: must be an integer"),
    "stride bool": (_set(("nodes", 0, "attrs", "stride"), True), "stride: must be an integer"),
    "stride float": (_set(("nodes", 0, "attrs", "stride"), 1.0), "stride: must be an integer"),
    "stride huge": (_set(("nodes", 0, "attrs", "stride"), 10 ** 30), "stride: must be an integer in"),
    "stride zero": (_set(("nodes", 0, "attrs", "stride"), 0), "stride must be 2 integer"),
    "stride list of text": (_set(("nodes", 0, "attrs", "stride"), ["1", 1]), r"stride\[0\]: must be an integer"),
    "stride nested": (_set(("nodes", 0, "attrs", "stride"), [[1], 1]), r"stride\[0\]: must be an integer"),
    "count_include_pad int": (_set(("nodes", 6, "attrs", "count_include_pad"), 1), "must be true or false"),
    "slope text": (_set(("nodes", 8, "attrs", "negative_slope"), "0.1"), "must be a finite number"),
    "slope bool": (_set(("nodes", 8, "attrs", "negative_slope"), False), "must be a finite number"),
    "slope huge integer": (_set(("nodes", 8, "attrs", "negative_slope"), 10 ** 400), "must be an integer in"),
    "slope overflows": (lambda d: json.dumps(d).replace('"negative_slope": 0.01', '"negative_slope": 1e999'),
                        "must be a finite number"),
    "axis out of range": (_set(("nodes", 7, "attrs", "axis"), 5), "axis must be"),
    "reshape wrong size": (_set(("nodes", 10, "attrs", "shape"), [15]), "cannot reshape"),
    "input_shape text": (_set(("input_shape",), "2,6,6"), "input_shape: must be a JSON list"),
    "input_shape zero": (_set(("input_shape",), [2, 0, 6]), r"input_shape\[1\]: must be an integer in 1"),
    "input_shape bool": (_set(("input_shape",), [True, 6, 6]), r"input_shape\[0\]: must be an integer"),
    "input_shape wrong": (_set(("input_shape",), [3, 6, 6]), "input channels"),
    "input_shape empty": (_set(("input_shape",), []), "input_shape must be a tuple"),
    "output unknown": (_set(("output",), "relu"), "relu"),
    "output not text": (_set(("output",), None), "output: must be a string, got null"),
    "conv on a 1-D sample": (_set(("input_shape",), [72]), "takes a"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_descriptions_are_refused_naming_the_entry(tmp_path, pristine, case):
    edit, words = CRAFTED[case]
    _refused(_write(tmp_path, pristine, edit), "graph", words)


def test_a_valid_edit_is_refused_by_the_digest_unless_re_signed(tmp_path, pristine):
    edit = _set(("nodes", 8, "attrs", "negative_slope"), 0.5)
    _refused(_write(tmp_path, pristine, edit, resign=False), "digest", "edited after it was saved")
    assert sl.Network.load(_write(tmp_path, pristine, edit)).graph.node("leak").attrs["negative_slope"] == 0.5


@pytest.mark.parametrize("entry, value, words", [
    ("n0.weight", None, "missing entries"),
    ("n0.weight", np.full((4, 2, 3, 3), np.nan), "NaN"),
    ("n1.shift", np.array([0.0, np.inf, 0, 0]), "NaN or infinite"),
    ("n0.weight", np.zeros((4, 2, 3, 3), dtype=np.float32), "float64"),
    ("n11.bias", np.zeros(3, dtype=np.int64), "float64"),
    ("n11.bias", np.array("1.0"), "float64"),
    ("n11.weight", np.zeros((3, 15)), "16"),
    ("n0.weight", np.zeros((4, 3, 3, 3)), "input channels"),
    ("format", np.array("sheaflinalg.graph/2"), "sheaflinalg.graph/1"),
    ("format", np.array(1.0), "text scalar"),
    ("graph", np.zeros(3), "text scalar"),
    ("graph", None, "missing entries"),
    ("digest", np.array(0.0), "text scalar"),
])
def test_crafted_arrays_are_refused_naming_the_entry(tmp_path, pristine, entry, value, words):
    entries = dict(pristine)
    if value is None:
        del entries[entry]
    else:
        entries[entry] = value
    named = "graph" if words in ("16", "input channels") else entry
    if words == "missing entries":
        named = None
    path = _write(tmp_path, entries, resign=entry not in ("digest", "format"))
    if named is None:
        with pytest.raises(ValueError, match=re.escape(path) + ".*" + words):
            sl.Network.load(path)
    else:
        _refused(path, named, words)


def test_an_edited_parameter_is_refused_by_the_digest(tmp_path, pristine):
    entries = dict(pristine, **{"n11.bias": pristine["n11.bias"] + 1e-12})
    _refused(_write(tmp_path, entries, resign=False), "digest", "edited after it was saved")


def test_without_digest_an_edited_file_loads_and_unknown_entries_are_named(tmp_path, pristine):
    entries = {k: v for k, v in pristine.items() if k != "digest"}
    entries["n11.bias"] = entries["n11.bias"] + 1.0
    entries["extra"] = np.zeros(2)
    path = _write(tmp_path, entries, resign=False)
    with pytest.warns(UserWarning, match=r"ignoring entries \['extra'\]"):
        net = sl.Network.load(path)
    assert np.array_equal(net.graph.node("fc").params["bias"], pristine["n11.bias"] + 1.0)

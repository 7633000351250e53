"""Graph networks for the tests of files, figures and refusals: one with every operation, and random ones."""

import numpy as np
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.network.graph import Graph, Node
from sheaflinalg.network.graph.nodes import output_shape

CONV = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}


def every_op_network(seed=0, output="identity"):
    """A small residual CNN with one node of every operation (input (2, 6, 6), 3 outputs)."""
    rng = np.random.default_rng(seed)
    nodes = [
        Node("conv1", "conv", ["x"], CONV, {"weight": rng.normal(size=(4, 2, 3, 3)), "bias": rng.normal(size=4)}),
        Node("bn1", "batchnorm", ["conv1"], params={"scale": rng.uniform(0.5, 2, 4), "shift": rng.normal(size=4)}),
        Node("relu1", "relu", ["bn1"]),
        Node("conv2", "conv", ["relu1"], dict(CONV, groups=2, dilation=(1, 2), padding=(1, 2)),
             {"weight": rng.normal(size=(4, 2, 3, 3)), "bias": rng.normal(size=4)}),
        Node("res", "add", ["conv2", "relu1"]),
        Node("pool", "maxpool", ["res"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}),
        Node("avg", "avgpool", ["res"], {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1),
                                         "count_include_pad": False}),
        Node("cat", "concat", ["pool", "avg"], {"axis": 0}),
        Node("leak", "leaky_relu", ["cat"], {"negative_slope": 0.01}),
        Node("gap", "adaptive_avgpool", ["leak"], {"output_size": (2, 1)}),
        Node("flat", "reshape", ["gap"], {"shape": (16,)}),
        Node("fc", "linear", ["flat"], params={"weight": rng.normal(size=(3, 16)), "bias": rng.normal(size=3)}),
    ]
    return sl.Network.from_nodes((2, 6, 6), nodes, output)


def _window_attrs(draw, op, n_axes):
    k = draw(st.integers(1, 3))
    attrs = {"kernel_size": k if n_axes == 1 or draw(st.booleans()) else (k, draw(st.integers(1, 3))),
             "stride": draw(st.integers(1, 2)), "padding": draw(st.integers(0, k // 2))}
    if op == "avgpool":
        attrs["count_include_pad"] = draw(st.booleans())
    else:
        attrs["dilation"] = 1
    return attrs


def _candidate(draw, rng, i, available):
    """A random node reading nodes of ``available`` ({name: shape}); may not fit (the caller skips it)."""
    name = f"node{i}"
    parent = draw(st.sampled_from(sorted(available)))
    shape = available[parent]
    op = draw(st.sampled_from(sorted(sl.network.graph.OPS)))
    if op == "linear":
        out = draw(st.integers(1, 4))
        return Node(name, op, [parent], params={"weight": rng.normal(size=(out, int(np.prod(shape)))),
                                                "bias": rng.normal(size=out)})
    if op == "conv":
        groups = draw(st.sampled_from([1, shape[0]]))
        out = groups * draw(st.integers(1, 2))
        kernel = tuple(draw(st.integers(1, 3)) for _ in shape[1:])
        return Node(name, op, [parent], {"stride": draw(st.integers(1, 2)), "padding": draw(st.integers(0, 1)),
                                         "dilation": draw(st.integers(1, 2)), "groups": groups},
                    {"weight": rng.normal(size=(out, shape[0] // groups) + kernel), "bias": rng.normal(size=out)})
    if op in ("avgpool", "maxpool"):
        return Node(name, op, [parent], _window_attrs(draw, op, len(shape) - 1))
    if op == "adaptive_avgpool":
        return Node(name, op, [parent], {"output_size": [draw(st.integers(1, 3)) for _ in shape[1:]]})
    if op == "batchnorm":
        return Node(name, op, [parent], params={"scale": rng.normal(size=shape[0]), "shift": rng.normal(size=shape[0])})
    if op == "leaky_relu":
        return Node(name, op, [parent], {"negative_slope": draw(st.floats(-2, 2, allow_nan=False))})
    if op in ("add", "concat"):
        same = sorted(n for n, s in available.items() if s == shape)
        other = draw(st.sampled_from(same))
        return Node(name, op, [parent, other], {"axis": draw(st.integers(0, len(shape) - 1))} if op == "concat" else {})
    if op == "reshape":
        return Node(name, op, [parent], {"shape": (int(np.prod(shape)),)})
    return Node(name, op, [parent])


@st.composite
def graph_networks(draw, max_nodes=8):
    """A random graph network of every operation (nodes that do not fit their parents are skipped)."""
    input_shape = draw(st.sampled_from([(3,), (2, 7), (2, 5, 4)]))
    output = draw(st.sampled_from(["identity", "sigmoid", "tanh"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    available, nodes = {"x": input_shape}, []
    for i in range(draw(st.integers(1, max_nodes))):
        try:
            node = _candidate(draw, rng, i, available)
            available[node.name] = output_shape(node, [available[p] for p in node.inputs])
        except ValueError:
            continue
        nodes.append(node)
    if not nodes:
        nodes.append(Node("only", "relu", ["x"]))
    return sl.Network.from_graph(Graph(input_shape, nodes, output))

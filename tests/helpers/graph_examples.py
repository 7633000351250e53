"""A fixed graph network with one node of every operation, for the tests of files, figures and refusals
(random graph networks: random_graphs.py)."""

import numpy as np

import sheaflinalg as sl
from sheaflinalg.network.graph import Node

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


def attention_block(T, heads, d_head, seed=0):
    """A transformer-like block on ``(T, D)`` tokens, ``D = heads * d_head``: multi-head self-attention
    (``softmax(Q K^T / sqrt(d)) V`` per head: a scores ``matmul``, a ``softmax``, a ``matmul``) with a
    residual ``add`` and a ``layernorm``, then a linear map; the attention values are ``(heads, T, .)``."""
    rng = np.random.default_rng(seed)
    D = heads * d_head

    def linear(name, src):
        return Node(name, "linear", [src], params={"weight": rng.normal(size=(D, D)) / np.sqrt(D),
                                                   "bias": 0.1 * rng.normal(size=D)})

    def heads_first(name, src, axes):
        return [Node(f"{name}.split", "reshape", [src], {"shape": (T, heads, d_head)}),
                Node(name, "permute", [f"{name}.split"], {"axes": axes})]
    nodes = [linear("q", "x"), linear("k", "x"), linear("v", "x"), *heads_first("qh", "q", (1, 0, 2)),
             *heads_first("kt", "k", (1, 2, 0)), *heads_first("vh", "v", (1, 0, 2)),
             Node("scores", "matmul", ["qh", "kt"], {"alpha": 1.0 / np.sqrt(d_head)}),
             Node("weights", "softmax", ["scores"], {"axis": 2, "causal": False}),
             Node("mixed", "matmul", ["weights", "vh"], {"alpha": 1.0}),
             Node("tokens", "permute", ["mixed"], {"axes": (1, 0, 2)}),
             Node("merged", "reshape", ["tokens"], {"shape": (T, D)}), Node("res", "add", ["merged", "x"]),
             Node("ln", "layernorm", ["res"], {"n_axes": 1, "eps": 1e-5}), linear("out", "ln")]
    return sl.Network.from_nodes((T, D), nodes)

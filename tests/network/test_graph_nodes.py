"""Nodes and graphs that do not fit are refused by the shape rules, naming the node and its operation."""

import numpy as np
import pytest

import sheaflinalg as sl

CONV = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1}


def conv(name, parent, c_in, c_out, k=3, **attrs):
    return sl.Node(name, "conv", [parent], dict(CONV, **attrs),
                   {"weight": np.ones((c_out, c_in // attrs.get("groups", 1), k)), "bias": np.zeros(c_out)})


CASES = [
    ((1, 2), [sl.Node("p", "maxpool", ["x"], {"kernel_size": 2, "stride": 1, "padding": 1, "dilation": 3})],
     "'p' \\(maxpool\\): a window .* reads only padding"),
    ((1, 2), [sl.Node("p", "avgpool", ["x"], {"kernel_size": 2, "stride": 1, "padding": 2,
                                              "count_include_pad": False})], "at most half the kernel"),
    ((2, 5), [conv("c", "x", 3, 4)], "'c' \\(conv\\) takes 3 input channels"),
    ((2, 2), [conv("c", "x", 2, 4)], "'c' \\(conv\\): its window .* does not fit"),
    ((2, 6), [conv("c", "x", 2, 3, groups=2)], "groups must be a positive divisor"),
    ((2, 6), [sl.Node("fc", "linear", ["x"], params={"weight": np.ones((1, 12)), "bias": np.zeros(1)})],
     r"'fc' \(linear\) maps the last axis of 12 features, got shape \(2, 6\)"),
    ((4,), [sl.Node("a", "relu", ["x"]), sl.Node("s", "add", ["a", "y"])], "reads \\['y'\\]"),
    ((4,), [sl.Node("r", "reshape", ["x"], {"shape": (3,)})], "cannot reshape"),
    ((2, 3), [sl.Node("a", "relu", ["x"]), sl.Node("c", "concat", ["x", "a"], {"axis": 2})], "axis must be"),
    ((4,), [sl.Node("a", "relu", ["x"]), sl.Node("a", "relu", ["x"])], "used twice"),
]


@pytest.mark.parametrize("input_shape, nodes, message", CASES)
def test_shapes_that_do_not_fit_are_refused_naming_the_node(input_shape, nodes, message):
    with pytest.raises(ValueError, match=message):
        sl.Network.from_nodes(input_shape, nodes)


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="x", op="relu", inputs=["x"]), "not allowed"),
    (dict(name="a b", op="relu", inputs=["x"]), "not allowed"),
    (dict(name="g", op="fft", inputs=["x"]), "unsupported operation 'fft'"),
    (dict(name="s", op="add", inputs=["x"]), "at least 2"),
    (dict(name="r", op="relu", inputs=["x"], attrs={"slope": 1}), "takes the attributes"),
    (dict(name="fc", op="linear", inputs=["x"], params={"weight": np.full((1, 2), np.nan), "bias": np.zeros(1)}),
     "NaN or Inf"),
])
def test_bad_nodes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sl.Node(**kwargs)

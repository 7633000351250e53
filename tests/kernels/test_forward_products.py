"""The forward pass's products: convolutions (pointwise ones without im2col) against their dense matrices, reused value
buffers."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from helpers import naive_graph
from sheaflinalg._common.spare import spare_empty
from sheaflinalg.kernels.convolution import conv_forward, conv_geometry, is_pointwise
from sheaflinalg.network.graph import Graph, Node
from sheaflinalg.network.graph import forward

@st.composite
def convolutions(draw):
    """A random convolution and batch; a third of them pointwise (1x1, stride 1, no padding), some zeros."""
    n_axes, groups = draw(st.sampled_from([1, 2])), draw(st.integers(1, 3))
    pointwise = draw(st.integers(0, 2)) == 0
    kernel = (1,) * n_axes if pointwise else tuple(draw(st.integers(1, 4)) for _ in range(n_axes))
    stride = (1,) * n_axes if pointwise else tuple(draw(st.integers(1, 3)) for _ in range(n_axes))
    padding = (0,) * n_axes if pointwise else tuple(draw(st.integers(0, 2)) for _ in range(n_axes))
    spatial = tuple(draw(st.integers(k + 1, k + 9)) for k in kernel)
    cin, cout, M = draw(st.integers(1, 3)) * groups, draw(st.integers(1, 3)) * groups, draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31 - 1)))
    x = rng.standard_normal((M, cin * int(np.prod(spatial))))
    x[:, ::3] = 0.0                                         # exact zeros
    W = rng.standard_normal((cout, cin // groups) + kernel)
    bias = rng.standard_normal(cout) if draw(st.booleans()) else np.zeros(cout)
    node = Node("c", "conv", ["x"], {"stride": stride, "padding": padding, "dilation": (1,) * n_axes,
                                     "groups": groups}, {"weight": W, "bias": bias})
    geom = conv_geometry(cin, spatial, cout, groups, kernel, stride, padding, (1,) * n_axes)
    out_shape = (cout,) + tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(spatial, kernel, stride, padding))
    F = naive_graph.conv_dense(node, (cin,) + spatial, out_shape)       # from the definition
    return x, W, bias, geom, set(kernel + stride) == {1} and set(padding) == {0}, F


@given(convolutions())
def test_convolution_products_equal_the_dense_matrix(case):
    x, W, bias, geom, pointwise, F = case
    assert is_pointwise(geom) == pointwise
    got = conv_forward(x, W, bias, geom)
    np.testing.assert_allclose(got, x @ F.T + np.repeat(bias, geom.n_out_positions), rtol=1e-12, atol=1e-12)


def test_a_pointwise_convolution_with_groups_equals_its_definition():
    rng = np.random.default_rng(0)
    W, bias = rng.standard_normal((6, 2, 1, 1)), rng.standard_normal(6)
    geom = conv_geometry(4, (3, 5), 6, 2, (1, 1), (1, 1), (0, 0), (1, 1))
    x = rng.standard_normal((3, 4 * 15))
    maps = x.reshape(3, 2, 2, 15)
    want = np.einsum("goc,sgcp->sgop", W.reshape(2, 3, 2), maps).reshape(3, 6, 15) + bias[:, None]
    np.testing.assert_allclose(conv_forward(x, W, bias, geom), want.reshape(3, -1), rtol=1e-13, atol=1e-13)


def small_cnn():
    """conv 3x3, batch norm, relu, a pointwise conv with a bias and groups, max pool (ties), linear."""
    rng = np.random.default_rng(0)
    conv = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}
    nodes = [Node("c0", "conv", ["x"], conv, {"weight": rng.standard_normal((4, 2, 3, 3)) / 3, "bias": np.zeros(4)}),
             Node("bn", "batchnorm", ["c0"], params={"scale": rng.uniform(0.5, 1.5, 4), "shift": rng.uniform(-.2, .2, 4)}),
             Node("r0", "relu", ["bn"]),
             Node("c1", "conv", ["r0"], dict(conv, padding=0, groups=2),
                  {"weight": rng.standard_normal((6, 2, 1, 1)), "bias": rng.standard_normal(6)}),
             Node("mp", "maxpool", ["c1"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}),
             Node("flat", "reshape", ["mp"], {"shape": (6 * 16,)}),
             Node("fc", "linear", ["flat"], params={"weight": rng.standard_normal((3, 96)), "bias": np.zeros(3)})]
    return Graph((2, 8, 8), nodes)


def test_the_forward_pass_is_the_same_for_any_thread_count_and_equals_the_naive_one(monkeypatch):
    g = small_cnn()
    monkeypatch.setattr(forward, "BLOCK_WORK", 1 << 16)      # a small batch in several blocks
    X = np.random.default_rng(1).standard_normal((200, g.n_inputs))
    X[:5] = 0.0                                     # zero pre-activations, tied maxima
    assert len(forward.sample_blocks(g, 200)) - 1 > 2
    states = [forward.evaluate(g, X, threads=t) for t in (1, 2)]
    for name, value in states[0].values.items():
        assert np.array_equal(value, states[1].values[name]), name
    for s in (0, 7, 199):
        values, pattern = naive_graph.forward(g, X[s])
        for name, value in values.items():
            np.testing.assert_allclose(states[0].values[name][s], value, rtol=1e-12, atol=1e-12)
        for name, p in pattern.items():
            assert np.array_equal(states[0].pattern[name][s], p), name


def test_a_spare_buffer_is_reused_only_once_nothing_holds_it():
    a = spare_empty(4096)
    address = a.__array_interface__["data"][0]
    view = a[10:20].reshape(2, 5)
    del a
    b = spare_empty(4096)                           # a's memory is still seen through ``view``
    assert b.__array_interface__["data"][0] != address
    del view
    assert spare_empty(4096).__array_interface__["data"][0] == address


def test_one_buffer_above_the_spare_size_is_kept_while_the_memory_allows(monkeypatch):
    from sheaflinalg._common import spare

    monkeypatch.setattr(spare, "SPARE_BYTES", 8 * 1000)
    address = spare_empty(5000).__array_interface__["data"][0]
    assert spare_empty(5000).__array_interface__["data"][0] == address     # kept, and nothing holds it
    other = spare_empty(6000).__array_interface__["data"][0]               # the one large buffer kept now
    assert spare_empty(6000).__array_interface__["data"][0] == other
    assert sum(b.size > 1000 for b in spare._spares) == 1
    monkeypatch.setattr(spare, "LARGE_SHARE", 0.0)                          # no memory to spare: none kept
    held = spare_empty(7000)
    assert all(b is not held for b in spare._spares)


def test_a_forward_pass_held_by_the_caller_is_never_overwritten_by_the_next():
    g = small_cnn()
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((3, g.n_inputs)), rng.standard_normal((3, g.n_inputs))
    first = forward.evaluate(g, X).values["fc"]
    kept = first.copy()
    for _ in range(3):
        forward.evaluate(g, Y)
    assert np.array_equal(first, kept)

"""Convolution and pooling kernels against dense matrices written from the definitions, and against torch;
the graph forward pass's sample blocks: the same bits for any thread count (issue 21)."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sheaflinalg.kernels.convolution import conv_forward, conv_geometry, conv_transpose
from sheaflinalg.kernels.pooling import (average_pool, average_pool_transpose, max_pool,
                                         max_pool_transpose)
from sheaflinalg.kernels import windows
from sheaflinalg.kernels.windows import adaptive_windows, window_indices
from sheaflinalg.network.errors import NetworkOverflowError
from sheaflinalg.network.graph import Graph, Node
from sheaflinalg.network.graph import forward


# ------------------------------------------------------- naive dense matrices
def _positions(shape):
    return list(itertools.product(*[range(n) for n in shape]))


def _flat(pos, shape):
    return int(np.ravel_multi_index(pos, shape))


def _out_len(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def dense_conv(W, in_spatial, groups, stride, padding, dilation):
    """The matrix of a convolution, one entry per (output channel, output position, input channel, tap)."""
    cout, cpg = W.shape[:2]
    kernel = W.shape[2:]
    out_spatial = tuple(_out_len(*a) for a in zip(in_spatial, kernel, stride, padding, dilation))
    n_in, n_out = int(np.prod(in_spatial)), int(np.prod(out_spatial))
    F = np.zeros((cout * n_out, cpg * groups * n_in))
    for o in range(cout):
        g = o // (cout // groups)
        for out_pos in _positions(out_spatial):
            row = o * n_out + _flat(out_pos, out_spatial)
            for c, tap in itertools.product(range(cpg), _positions(kernel)):
                pos = [q * s - p + t * d for q, s, p, t, d in zip(out_pos, stride, padding, tap, dilation)]
                if all(0 <= a < n for a, n in zip(pos, in_spatial)):
                    F[row, (g * cpg + c) * n_in + _flat(pos, in_spatial)] += W[(o, c) + tap]
    return F, out_spatial


def dense_windows(channels, in_spatial, kernel, stride, padding, dilation=None):
    """For every (channel, output position) the list of flat stalk positions of its window (window order)."""
    dilation = dilation or (1,) * len(kernel)
    out_spatial = tuple(_out_len(*a) for a in zip(in_spatial, kernel, stride, padding, dilation))
    n_in = int(np.prod(in_spatial))
    windows = []
    for c in range(channels):
        for out_pos in _positions(out_spatial):
            taps = [[q * s - p + t * d for q, s, p, t, d in zip(out_pos, stride, padding, tap, dilation)]
                    for tap in _positions(kernel)]
            windows.append(([c * n_in + _flat(pos, in_spatial) for pos in taps
                             if all(0 <= a < n for a, n in zip(pos, in_spatial))], len(taps)))
    return windows, out_spatial


# ------------------------------------------------------------- strategies
@st.composite
def convolutions(draw):
    n_axes = draw(st.sampled_from([1, 2]))
    groups = draw(st.integers(1, 3))
    cpg, opg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(n_axes))
    dilation = tuple(draw(st.integers(1, 3)) for _ in range(n_axes))
    padding = tuple(draw(st.integers(0, 3)) for _ in range(n_axes))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(n_axes))
    reach = [d * (k - 1) + 1 - 2 * p for k, d, p in zip(kernel, dilation, padding)]
    spatial = tuple(draw(st.integers(max(1, r), max(1, r) + (8 if n_axes == 1 else 4))) for r in reach)
    M = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((opg * groups, cpg) + kernel)
    return W, spatial, groups, stride, padding, dilation, rng.standard_normal(W.shape[0]), M, rng


@st.composite
def poolings(draw):
    n_axes = draw(st.sampled_from([1, 2]))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(n_axes))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    stride = tuple(draw(st.integers(1, 3)) for _ in range(n_axes))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(n_axes))
    spatial = tuple(draw(st.integers(d * (k - 1) + 1, d * (k - 1) + 7)) for k, d in zip(kernel, dilation))
    channels, M = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    values = draw(st.sampled_from(["normal", "ties", "constant"]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31 - 1)))
    shape = (M, channels * int(np.prod(spatial)))
    x = {"normal": rng.standard_normal(shape), "ties": rng.integers(-1, 2, shape).astype(float),
         "constant": np.full(shape, 0.5)}[values]
    return x, channels, spatial, kernel, stride, padding, dilation, rng


# ------------------------------------------------------------ convolution
@given(convolutions())
def test_convolution_and_its_transpose_equal_the_dense_matrix_from_the_definition(case):
    W, spatial, groups, stride, padding, dilation, b, M, rng = case
    F, out_spatial = dense_conv(W, spatial, groups, stride, padding, dilation)
    geom = conv_geometry(W.shape[1] * groups, spatial, W.shape[0], groups, W.shape[2:], stride, padding, dilation)
    x = rng.standard_normal((M, F.shape[1]))
    y = rng.standard_normal((M, F.shape[0]))
    np.testing.assert_allclose(conv_forward(x, W, b, geom), x @ F.T + np.repeat(b, np.prod(out_spatial)),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(conv_transpose(y, W, geom), y @ F, rtol=1e-12, atol=1e-12)
    # the adjoint identity <F x, y> = <x, F^T y>, sample by sample
    Fx = conv_forward(x, W, np.zeros_like(b), geom)
    np.testing.assert_allclose(np.sum(Fx * y, axis=1), np.sum(x * conv_transpose(y, W, geom), axis=1),
                               rtol=1e-11, atol=1e-11)


def test_convolution_chunks_cover_big_batches():
    # more samples than one chunk holds: every chunk, the last short one included, lands in its rows
    W = np.random.default_rng(0).standard_normal((3, 2, 3))
    geom = conv_geometry(2, (50,), 3, 1, (3,), (1,), (1,), (1,))
    F, _ = dense_conv(W, (50,), 1, (1,), (1,), (1,))
    x = np.random.default_rng(1).standard_normal((1001, 100))
    y = np.random.default_rng(2).standard_normal((1001, 150))
    np.testing.assert_allclose(conv_forward(x, W, np.ones(3), geom), x @ F.T + 1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(conv_transpose(y, W, geom), y @ F, rtol=1e-12, atol=1e-12)


@given(convolutions())
def test_convolution_equals_torch(case):
    torch = pytest.importorskip("torch")
    W, spatial, groups, stride, padding, dilation, b, M, rng = case
    x = rng.standard_normal((M, W.shape[1] * groups) + spatial)
    fn = torch.nn.functional.conv1d if len(spatial) == 1 else torch.nn.functional.conv2d
    want = fn(torch.from_numpy(x), torch.from_numpy(W), torch.from_numpy(b), stride, padding, dilation, groups)
    geom = conv_geometry(x.shape[1], spatial, W.shape[0], groups, W.shape[2:], stride, padding, dilation)
    got = conv_forward(x.reshape(M, -1), W, b, geom)
    np.testing.assert_allclose(got, want.numpy().reshape(M, -1), rtol=1e-12, atol=1e-12)
    # F^T y is the gradient of <F x, y> in x: torch's autograd computes it on its own
    y = rng.standard_normal(want.shape)
    tx = torch.from_numpy(x).requires_grad_()
    (fn(tx, torch.from_numpy(W), None, stride, padding, dilation, groups) * torch.from_numpy(y)).sum().backward()
    np.testing.assert_allclose(conv_transpose(y.reshape(M, -1), W, geom), tx.grad.numpy().reshape(M, -1),
                               rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- pooling
@given(poolings(), st.booleans())
def test_average_pool_and_its_transpose_equal_the_dense_matrix(case, include_pad):
    x, channels, spatial, kernel, stride, padding, _, rng = case
    windows, out_spatial = dense_windows(channels, spatial, kernel, stride, padding)
    A = np.zeros((len(windows), x.shape[1]))
    for row, (positions, size) in enumerate(windows):
        A[row, positions] = 1.0 / (size if include_pad else len(positions))
    index, _ = window_indices(spatial, kernel, stride, padding, (1,) * len(kernel))
    divisor = np.full(index.shape[0], float(index.shape[1])) if include_pad else (index >= 0).sum(axis=1) * 1.0
    n_in = int(np.prod(spatial))
    np.testing.assert_allclose(average_pool(x, channels, n_in, index, divisor), x @ A.T, rtol=1e-13, atol=1e-14)
    y = rng.standard_normal((x.shape[0], A.shape[0]))
    np.testing.assert_allclose(average_pool_transpose(y, channels, n_in, index, divisor), y @ A, rtol=1e-13,
                               atol=1e-14)


@given(poolings())
def test_max_pool_selects_the_first_maximum_of_each_window_and_its_transpose_scatters_it(case):
    x, channels, spatial, kernel, stride, padding, dilation, rng = case
    windows, _ = dense_windows(channels, spatial, kernel, stride, padding, dilation)
    index, _ = window_indices(spatial, kernel, stride, padding, dilation)
    values, argmax = max_pool(x, channels, int(np.prod(spatial)), index)
    for s in range(x.shape[0]):
        for j, (positions, _) in enumerate(windows):
            first = positions[int(np.argmax(x[s, positions]))]      # np.argmax: the first maximum
            assert argmax[s, j] == first and values[s, j] == x[s, first]
    y = rng.standard_normal(values.shape)
    S = np.zeros((x.shape[0], values.shape[1], x.shape[1]))
    S[np.arange(x.shape[0])[:, None], np.arange(values.shape[1])[None, :], argmax] = 1.0
    np.testing.assert_allclose(max_pool_transpose(y, argmax, x.shape[1]), np.einsum("sj,sji->si", y, S),
                               rtol=1e-14, atol=1e-15)


def test_max_pool_of_a_constant_map_selects_the_first_position_of_every_window():
    index, _ = window_indices((3, 4), (2, 2), (1, 2), (1, 0), (1, 1))
    _, argmax = max_pool(np.full((1, 12), 7.0), 1, 12, index)
    assert argmax.tolist() == [[0, 2, 0, 2, 4, 6, 8, 10]]     # row -1 is padding: the first valid tap


def test_max_pool_transpose_refuses_positions_outside_the_parent():
    with pytest.raises(ValueError, match="entries in 0..3"):
        max_pool_transpose(np.ones((1, 2)), np.array([[0, 4]]), 4)


@given(poolings())
def test_pooling_equals_torch_ties_included(case):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, channels, spatial, kernel, stride, padding, dilation, _ = case
    M, n_in = x.shape[0], int(np.prod(spatial))
    t = torch.from_numpy(x.reshape((M, channels) + spatial))
    fn = F.max_pool1d if len(spatial) == 1 else F.max_pool2d
    want, where = fn(t, kernel, stride, padding, dilation, return_indices=True)
    index, _ = window_indices(spatial, kernel, stride, padding, dilation)
    values, argmax = max_pool(x, channels, n_in, index)
    np.testing.assert_array_equal(values, want.numpy().reshape(M, -1))
    offsets = np.repeat(np.arange(channels) * n_in, index.shape[0])
    np.testing.assert_array_equal(argmax, where.numpy().reshape(M, -1) + offsets)
    # the transposes are the gradients of <pool(x), y>: torch's autograd scatters the same way
    y = np.random.default_rng(0).standard_normal(values.shape)
    tx = t.clone().requires_grad_()
    (fn(tx, kernel, stride, padding, dilation) * torch.from_numpy(y.reshape(want.shape))).sum().backward()
    np.testing.assert_allclose(max_pool_transpose(y, argmax, x.shape[1]), tx.grad.numpy().reshape(M, -1),
                               rtol=1e-14, atol=1e-15)
    avg = F.avg_pool1d if len(spatial) == 1 else F.avg_pool2d
    tx = t.clone().requires_grad_()
    pooled = avg(tx, kernel, stride, padding, count_include_pad=False)
    y = np.random.default_rng(1).standard_normal(pooled.shape)
    (pooled * torch.from_numpy(y)).sum().backward()
    index, _ = window_indices(spatial, kernel, stride, padding, (1,) * len(spatial))
    divisor = (index >= 0).sum(axis=1) * 1.0
    np.testing.assert_allclose(average_pool(x, channels, n_in, index, divisor), pooled.detach().numpy().reshape(M, -1),
                               rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(average_pool_transpose(y.reshape(M, -1), channels, n_in, index, divisor),
                               tx.grad.numpy().reshape(M, -1), rtol=1e-13, atol=1e-14)
    if len(spatial) == 2:
        out = (1 + spatial[0] // 2, 2)
        index, count = adaptive_windows(spatial, out)
        want = F.adaptive_avg_pool2d(t, out).numpy().reshape(M, -1)
        np.testing.assert_allclose(average_pool(x, channels, n_in, index, count * 1.0), want, rtol=1e-13, atol=1e-14)


# ------------------------------------------------ sample blocks and threads
def _conv(name, parent, cin, cout, stride, rng):
    return Node(name, "conv", [parent], {"stride": stride, "padding": 1, "dilation": 1, "groups": 1},
                {"weight": rng.standard_normal((cout, cin, 3, 3)) / 4, "bias": rng.standard_normal(cout) / 4})


def small_resnet():
    """conv, bn, relu, a residual block, max pool, concat, leaky relu, average pool, linear."""
    rng = np.random.default_rng(0)
    bn = {"scale": rng.uniform(0.5, 1.5, 4), "shift": rng.uniform(-0.2, 0.2, 4)}
    nodes = [_conv("c0", "x", 2, 4, 1, rng), Node("bn", "batchnorm", ["c0"], params=bn), Node("r0", "relu", ["bn"]),
             _conv("c1", "r0", 4, 4, 1, rng), Node("add", "add", ["c1", "r0"]), Node("r1", "relu", ["add"]),
             Node("mp", "maxpool", ["r1"], {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}),
             _conv("c2", "mp", 4, 3, 1, rng), Node("cat", "concat", ["mp", "c2"], {"axis": 0}),
             Node("lr", "leaky_relu", ["cat"], {"negative_slope": 0.1}),
             Node("ap", "avgpool", ["lr"], {"kernel_size": 2, "stride": 2, "padding": 1, "count_include_pad": False}),
             Node("flat", "reshape", ["ap"], {"shape": (7 * 25,)}),
             Node("fc", "linear", ["flat"], params={"weight": rng.standard_normal((3, 175)), "bias": np.zeros(3)})]
    return Graph((2, 16, 16), nodes)


def test_sample_blocks_depend_on_the_batch_and_the_graph_only():
    g = small_resnet()
    bounds = forward.sample_blocks(g, 500)
    assert bounds[0] == 0 and bounds[-1] == 500 and 2 <= len(bounds) - 1 <= forward.MAX_BLOCKS
    assert forward.sample_blocks(g, 1) == [0, 1]
    assert np.all(np.diff(bounds) > 0)


def test_evaluate_is_the_same_bit_for_bit_for_any_thread_count():
    g = small_resnet()
    X = np.random.default_rng(3).standard_normal((600, g.n_inputs))
    X[:5] = 0.0                                   # zero pre-activations, tied maxima
    assert len(forward.sample_blocks(g, 600)) > 2
    states = [forward.evaluate(g, X, threads=t) for t in (1, 2, 3)]
    frozen = [forward.evaluate(g, X, pattern=states[0].pattern, threads=t) for t in (1, 3)]
    for state in states[1:] + frozen:
        for name, value in states[0].values.items():
            assert np.array_equal(value, state.values[name]), name
        for name, p in states[0].pattern.items():
            assert np.array_equal(p, state.pattern[name]), name
    assert all(f.self_consistent.all() for f in frozen)


def test_evaluate_blocks_equal_a_sample_by_sample_reference():
    g = small_resnet()
    X = np.random.default_rng(4).standard_normal((600, g.n_inputs))
    state = forward.evaluate(g, X, threads=2)
    for s in (0, 149, 599):
        one = forward.evaluate(g, X[s:s + 1], threads=1)
        for name, value in one.values.items():
            np.testing.assert_allclose(state.values[name][s], value[0], rtol=1e-12, atol=1e-12)
        for name, p in one.pattern.items():
            assert np.array_equal(state.pattern[name][s], p[0]), name


def test_a_frozen_pattern_that_disagrees_is_reported_sample_by_sample():
    g = small_resnet()
    X = np.random.default_rng(5).standard_normal((600, g.n_inputs))
    pattern = {k: v.copy() for k, v in forward.evaluate(g, X).pattern.items()}
    pattern["r0"][7] = ~pattern["r0"][7]
    pattern["mp"][250] = pattern["mp"][250, 0]     # every window of sample 250 picks one position
    consistent = forward.evaluate(g, X, pattern=pattern, threads=2).self_consistent
    assert not consistent[7] and not consistent[250] and consistent.sum() == 598


def test_overflow_names_the_first_node_and_sample_whatever_the_threads():
    g = small_resnet()
    X = np.random.default_rng(6).standard_normal((600, g.n_inputs))
    X[260, 0] = np.inf
    X[200, 5] = np.nan
    for t in (1, 2):
        with pytest.raises(NetworkOverflowError, match=r"node 'c0' \(conv\).*sample 200"):
            forward.evaluate(g, X, threads=t)


def naive_forward(graph, X, pattern=None):
    """Every node's value, one sample at a time, from dense matrices and the definitions of the ops."""
    values = {"x": X}
    for node in graph.nodes:
        parents = [values[p] for p in node.inputs]
        parent_shape = graph.shapes[node.inputs[0]]
        C, spatial = parent_shape[0], parent_shape[1:]
        a = node.attrs
        if node.op == "conv":
            W = node.params["weight"]
            F, out_spatial = dense_conv(W, spatial, a["groups"], (a["stride"],) * 2, (a["padding"],) * 2, (1, 1))
            value = parents[0] @ F.T + np.repeat(node.params["bias"], np.prod(out_spatial))
        elif node.op == "batchnorm":
            per = np.prod(spatial)
            value = parents[0] * np.repeat(node.params["scale"], per) + np.repeat(node.params["shift"], per)
        elif node.op in ("relu", "leaky_relu"):
            mask = parents[0] >= 0 if pattern is None else pattern[node.name]
            value = np.where(mask, parents[0], a.get("negative_slope", 0.0) * parents[0])
        elif node.op in ("maxpool", "avgpool"):
            k, s, p = (a["kernel_size"],) * 2, (a["stride"],) * 2, (a["padding"],) * 2
            windows, _ = dense_windows(C, spatial, k, s, p)
            if node.op == "maxpool":
                chosen = [[w[int(np.argmax(x[w]))] for w, _ in windows] for x in parents[0]] if pattern is None \
                    else pattern[node.name]
                value = np.take_along_axis(parents[0], np.array(chosen), axis=1)
            else:
                value = np.array([[x[w].sum() / len(w) for w, _ in windows] for x in parents[0]])
        elif node.op == "concat":
            M = X.shape[0]
            value = np.concatenate([v.reshape((M,) + graph.shapes[p]) for v, p in zip(parents, node.inputs)],
                                   axis=a["axis"] + 1).reshape(M, -1)
        elif node.op == "linear":
            value = parents[0] @ node.params["weight"].T + node.params["bias"]
        else:
            value = sum(parents) if node.op == "add" else parents[0]
        values[node.name] = value
    return values


@pytest.mark.parametrize("kind", ["forward", "all_active", "all_dead", "zeros"])
def test_evaluate_equals_the_naive_forward_pass_for_every_pattern_kind(kind):
    g = small_resnet()
    X = np.random.default_rng(7).standard_normal((40, g.n_inputs))
    if kind == "zeros":
        X[::2] = 0.0                 # zero pre-activations and constant windows (ties)
    own = forward.evaluate(g, X).pattern
    pattern = None if kind in ("forward", "zeros") else {
        name: (np.full_like(p, kind == "all_active") if p.dtype == bool else p) for name, p in own.items()}
    state = forward.evaluate(g, X, pattern=pattern, threads=2)
    want = naive_forward(g, X, pattern)
    for name, value in want.items():
        np.testing.assert_allclose(state.values[name], value, rtol=1e-12, atol=1e-12, err_msg=name)
    if pattern is None:
        assert state.self_consistent.all()
    else:      # a pattern that forces every unit on or off disagrees with the signs of most samples
        signs = [state.values[g.node(n).inputs[0]] for n in ("r0", "r1", "lr")]
        agree = np.all([np.all(((z >= 0) == (kind == "all_active")) | (z == 0), axis=1) for z in signs], axis=0)
        np.testing.assert_array_equal(state.self_consistent, agree)


def test_a_frozen_pattern_of_the_wrong_shape_is_refused_before_the_compiled_loops_read_it():
    g = small_resnet()
    X = np.zeros((3, g.n_inputs))
    pattern = {k: v[:2] for k, v in forward.evaluate(g, X).pattern.items()}
    with pytest.raises(ValueError, match=r"frozen pattern of node 'r0' must have shape \(3, 1024\), got \(2, 1024\)"):
        forward.evaluate(g, X, pattern=pattern)


# ------------------------------------------------------- the smooth equilibrium's entry-by-entry kernels
_ENTRIES = st.floats(-800.0, 800.0) | st.sampled_from([0.0, -0.0, 1e-300, -40.0, 40.0, 710.0, -710.0])


@given(st.lists(_ENTRIES, min_size=6, max_size=6), st.booleans())
def test_silu_both_is_the_definitions_expressions_to_rounding(entries, strided):
    from scipy.special import expit

    from sheaflinalg.kernels.elementwise import silu_both
    z = np.array(entries).reshape(2, 3)
    z = np.asfortranarray(z) if strided else z
    value, slope = np.empty(z.shape), np.empty(z.shape)
    silu_both(z, value, slope)
    s = expit(z)                    # sigmoid(z), then z s and s (1 + z (1 - s)): the rule's numpy expressions
    eps = np.finfo(float).eps       # the kernel's exp is within a rounding of libm's: a few roundings in all
    assert np.all(np.abs(value - z * s) <= 4 * eps * np.abs(z * s) + 1e-300)      # (scipy's underflows sooner)
    scale = s * (1.0 + np.abs(z) * (1.0 - s))           # the terms of the slope (it cancels near z = -1.28)
    assert np.all(np.abs(slope - s * (1.0 + z * (1.0 - s))) <= 8 * eps * scale + 1e-300)


@given(st.lists(st.floats(-1e3, 1e3) | st.just(np.nan), min_size=12, max_size=12), st.booleans())
def test_row_maxima_raise_sizes_and_steps_row_by_row_and_a_nan_makes_them_infinite(entries, strided):
    from sheaflinalg.kernels.equilibrium import row_maxima
    a, b = np.array(entries[:6]).reshape(2, 3), np.array(entries[6:]).reshape(2, 3)
    if strided:
        a, b = np.hstack([a, a])[:, ::2], np.hstack([b, b])[:, ::2]
    size, move = np.array([0.5, 0.0]), np.array([0.0, 7.0])
    want = [np.maximum(start, np.where(np.isnan(x), np.inf, np.abs(x)).max(axis=1))
            for start, x in ((size.copy(), a), (move.copy(), a - b))]
    row_maxima(a, b, size, move)
    np.testing.assert_array_equal(size, want[0])
    np.testing.assert_array_equal(move, want[1])


@given(case=convolutions(), ceil_mode=st.booleans())
def test_a_window_table_kept_for_the_next_call_is_the_built_one_and_cannot_be_written_through(case, ceil_mode):
    W, spatial, _, stride, padding, dilation = case[:6]
    kernel = W.shape[2:]
    built = windows._window_indices(spatial, kernel, stride, padding, dilation, ceil_mode)
    first = window_indices(spatial, kernel, stride, padding, dilation, ceil_mode)
    first[0][...] = -7                      # a caller writing into its table
    again = window_indices(list(spatial), kernel, stride, padding, dilation, ceil_mode)
    np.testing.assert_array_equal(again[0], built[0])
    assert again[1] == built[1] and again[0].dtype == np.int64

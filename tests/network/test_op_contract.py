"""The op contract: every registered operation's rule agrees with the definitions, checked op by op.

For every rule of :data:`sheaflinalg.network.ops.RULES`, on random shapes, attributes, parameters and
states (continuous values, and values on a coarse grid that put pre-activations exactly at 0 and tie
max-pool windows):

- the forward pass equals the naive dense twin (``naive_graph.node_dense``, written from the definitions);
- the sparse block of every parent equals the Jacobian of the frozen forward pass (its columns), and
  away from kinks the Jacobian of the forward pass itself (central differences);
- the frozen linearisation reproduces the forward pass at its state (``sum_u F_u x_u + b``);
- the matrix-free apply and transpose equal the block and its transpose;
- the norm bound is at least the block's 2-norm, for the state's pattern and random ones;
- the velocity equals ``-dE/dtheta`` by central differences;
- the nonzero estimates bound the blocks' stored entries and their Gram blocks';
- a pattern read off a state is accepted by the rule's own check and reproduces the forward pass.

A new op is done when it passes this contract (docs/design.md, "Adding an op").
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from helpers.naive_graph import clamp_pieces, maxpool_argmax, node_dense
from sheaflinalg.network.graph import Node
from sheaflinalg.network.ops import RULES, OpRule, rule_of
from sheaflinalg.network.ops.tangent import Tangent

METHODS = ("shape", "forward", "blocks", "maps", "prepare", "bias", "norm_bound", "velocity", "work", "nnz")
PATTERN_METHODS = ("read_pattern", "check_pattern", "selected", "split_edge")
N_SAMPLES = 3


def _window_attrs(draw, op, n_axes):
    k = draw(st.integers(1, 3))
    attrs = {"kernel_size": k if n_axes == 1 or draw(st.booleans()) else (k, draw(st.integers(1, 3))),
             "stride": draw(st.integers(1, 3)), "padding": draw(st.integers(0, k // 2)),
             "ceil_mode": draw(st.booleans())}
    if op == "avgpool":
        attrs["count_include_pad"] = draw(st.booleans())
    else:
        attrs["dilation"] = draw(st.integers(1, 2))
    return attrs


def _spatial_shape(draw):
    channels = draw(st.integers(1, 3))
    return (channels,) + tuple(draw(st.integers(2, 5)) for _ in range(draw(st.integers(1, 2))))


def _any_shape(draw):
    return draw(st.sampled_from([(draw(st.integers(1, 6)),), _spatial_shape(draw)]))


#: Attribute strategies of the smooth elementwise ops (the others take none).
SMOOTH_ATTRS = {"gelu": {"approximate": st.sampled_from(["none", "tanh"])},
                "softplus": {"beta": st.sampled_from([0.5, 1.0, 3.0]), "threshold": st.sampled_from([1.0, 20.0])},
                "elu": {"alpha": st.sampled_from([0.5, 1.0, 2.0])}}

#: The eps of the normalisations: torch's default, and larger ones.
NORM_EPS = st.sampled_from([1e-5, 0.1, 1.0])


def _product_case(draw, op):
    """A product of two values (shapes broadcasting, or matrices over the last two axes), or a softmax."""
    if op == "softmax":
        shape = _any_shape(draw)
        axis = draw(st.integers(0, len(shape) - 1))
        causal = len(shape) > 1 and axis == len(shape) - 1 and draw(st.booleans())
        return Node("v", op, ["p0"], {"axis": axis, "causal": causal}), [shape]
    if op == "matmul":
        lead = tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 1))))
        n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
        alpha = draw(st.sampled_from([1.0, 0.5, -2.0]))
        return Node("v", op, ["p0", "p1"], {"alpha": alpha}), [lead + (n, k), lead + (k, m)]
    shape = _any_shape(draw)
    shapes = [tuple(n if draw(st.booleans()) else 1 for n in shape) for _ in range(2)]
    shapes[1] = shapes[1][draw(st.integers(0, len(shape) - 1)):]      # fewer axes: aligned on the right
    return Node("v", op, ["p0", "p1"]), shapes[::draw(st.sampled_from([1, -1]))]


def _draw_case(draw, op, rng):
    """``(node, parent shapes)`` of a random node of operation ``op`` (may not fit: the caller assumes)."""
    inputs = ["p0"]
    if op == "linear":
        n_in, n_out = draw(st.integers(1, 6)), draw(st.integers(1, 5))
        lead = draw(st.sampled_from([(), (draw(st.integers(1, 3)),), (2, draw(st.integers(1, 3)))]))
        return Node("v", op, inputs, params={"weight": rng.normal(size=(n_out, n_in)),
                                             "bias": rng.normal(size=n_out)}), [lead + (n_in,)]
    if op == "affine":
        shape = _any_shape(draw)
        params = {}
        for key in ("scale", "shift"):       # broadcast: some axes kept, some 1, leading ones dropped
            kept = shape[draw(st.integers(0, len(shape) - 1)):]
            params[key] = rng.normal(size=tuple(n if draw(st.booleans()) else 1 for n in kept))
        return Node("v", op, inputs, params=params), [shape]
    if op == "constant":
        return Node("v", op, [], params={"value": rng.normal(size=_any_shape(draw))}), []
    if op == "roll":
        shape = _any_shape(draw)
        axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
        return Node("v", op, inputs, {"shifts": tuple(draw(st.integers(-5, 5)) for _ in axes),
                                      "axes": tuple(axes)}), [shape]
    if op == "conv":
        shape = _spatial_shape(draw)
        groups = draw(st.sampled_from([1, shape[0]]))
        out = groups * draw(st.integers(1, 2))
        kernel = tuple(draw(st.integers(1, 3)) for _ in shape[1:])
        attrs = {"stride": draw(st.integers(1, 2)), "padding": draw(st.integers(0, 1)),
                 "dilation": draw(st.integers(1, 2)), "groups": groups}
        return Node("v", op, inputs, attrs, {"weight": rng.normal(size=(out, shape[0] // groups) + kernel),
                                             "bias": rng.normal(size=out)}), [shape]
    if op == "conv_transpose":
        shape = _spatial_shape(draw)
        groups = draw(st.sampled_from([1, shape[0]]))
        kernel = tuple(draw(st.integers(1, 3)) for _ in shape[1:])
        attrs = {"stride": draw(st.integers(1, 3)), "padding": draw(st.integers(0, 2)),
                 "output_padding": draw(st.integers(0, 2)), "dilation": draw(st.integers(1, 3)), "groups": groups}
        out = draw(st.integers(1, 2))
        return Node("v", op, inputs, attrs, {"weight": rng.normal(size=(shape[0], out) + kernel),
                                             "bias": rng.normal(size=out * groups)}), [shape]
    if op in ("avgpool", "maxpool"):
        shape = _spatial_shape(draw)
        return Node("v", op, inputs, _window_attrs(draw, op, len(shape) - 1)), [shape]
    if op == "adaptive_avgpool":
        shape = _spatial_shape(draw)
        return Node("v", op, inputs, {"output_size": [draw(st.integers(1, 4)) for _ in shape[1:]]}), [shape]
    if op == "batchnorm":
        shape = _spatial_shape(draw)
        return Node("v", op, inputs, params={"scale": rng.normal(size=shape[0]),
                                             "shift": rng.normal(size=shape[0])}), [shape]
    if op in ("layernorm", "rmsnorm"):
        shape = _any_shape(draw)
        return Node("v", op, inputs, {"n_axes": draw(st.integers(1, len(shape))), "eps": draw(NORM_EPS)}), [shape]
    if op == "normalize":      # eps large enough that some vectors of a state are clamped
        return Node("v", op, inputs, {"eps": draw(st.sampled_from([1e-12, 0.5, 2.0]))}), [_any_shape(draw)]
    if op == "groupnorm":
        shape = _spatial_shape(draw)
        return Node("v", op, inputs, {"groups": draw(st.sampled_from([1, shape[0]])), "eps": draw(NORM_EPS)}), [shape]
    if op in SMOOTH_ATTRS:
        return Node("v", op, inputs, {k: draw(v) for k, v in SMOOTH_ATTRS[op].items()}), [_any_shape(draw)]
    if op == "clamp":       # bounds and affine maps that put grid states exactly at min or max
        attrs = {"min": draw(st.sampled_from([-1.0, -0.5, 0.0])), "max": draw(st.sampled_from([0.5, 1.0, 6.0])),
                 "slope": draw(st.sampled_from([1.0, 0.5, -2.0, 1 / 6])), "offset": draw(st.sampled_from([0.0, 0.5]))}
        return Node("v", op, inputs, attrs), [_any_shape(draw)]
    if op in ("mul", "softmax", "matmul"):
        return _product_case(draw, op)
    if op == "leaky_relu":
        return Node("v", op, inputs, {"negative_slope": draw(st.floats(-2, 2, allow_nan=False))}), [_any_shape(draw)]
    if op in ("add", "concat"):
        shape, k = _any_shape(draw), draw(st.integers(2, 3))
        inputs = [f"p{i}" for i in range(k)]
        if op == "add":
            return Node("v", op, inputs), [shape] * k
        axis = draw(st.integers(0, len(shape) - 1))
        shapes = [shape[:axis] + (draw(st.integers(1, 3)),) + shape[axis + 1:] for _ in range(k)]
        return Node("v", op, inputs, {"axis": axis}), shapes
    if op == "reshape":
        shape = _any_shape(draw)
        return Node("v", op, inputs, {"shape": (int(np.prod(shape)),) if len(shape) > 1 else (1, shape[0])}), [shape]
    if op in ("permute", "mean", "sum"):
        shape = _any_shape(draw)
        if op == "permute":
            return Node("v", op, inputs, {"axes": tuple(draw(st.permutations(range(len(shape)))))}), [shape]
        axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
        return Node("v", op, inputs, {"axes": tuple(axes), "keepdim": draw(st.booleans())}), [shape]
    if op == "pad":
        shape = _spatial_shape(draw)
        pads = tuple(draw(st.integers(0, 2)) for _ in range(2 * len(shape) - 2))
        return Node("v", op, inputs, {"pads": pads}), [shape]
    if op == "upsample":
        shape = _spatial_shape(draw)
        mode = draw(st.sampled_from(["nearest", "linear"]))
        return Node("v", op, inputs, {"scale": tuple(draw(st.integers(1, 3)) for _ in shape[1:]), "mode": mode,
                                      "align_corners": mode == "linear" and draw(st.booleans())}), [shape]
    if op == "slice":
        shape = _any_shape(draw)
        axis = draw(st.integers(0, len(shape) - 1))
        start = draw(st.integers(0, shape[axis] - 1))
        attrs = {"axis": axis, "start": start, "stop": draw(st.integers(start + 1, shape[axis])),
                 "step": draw(st.integers(1, 3))}
        return Node("v", op, inputs, attrs), [shape]
    return Node("v", op, inputs), [_any_shape(draw)]


class _Shapes:
    """The shapes a rule reads off a graph (``shapes``, ``sizes``), for one node and its parents."""

    def __init__(self, node, parent_shapes):
        self.shapes = dict(zip(node.inputs, parent_shapes))
        self.shapes[node.name] = node.rule.shape(node, parent_shapes)
        self.sizes = {k: int(np.prod(v)) for k, v in self.shapes.items()}


def _state(draw, rng, size):
    """Parent values: continuous, nearly constant (a normalisation's groups of variance near 0), or on a coarse
    grid (exact zeros, ties in every window, constant groups)."""
    kind = draw(st.sampled_from(["normal", "nearly constant", "grid"]))
    if kind == "normal":
        return rng.normal(size=(N_SAMPLES, size))
    if kind == "nearly constant":
        return rng.normal() + draw(st.sampled_from([1e-3, 1e-6])) * rng.normal(size=(N_SAMPLES, size))
    return rng.integers(-1, 2, size=(N_SAMPLES, size)).astype(np.float64) * draw(st.sampled_from([0.5, 1.0]))


@st.composite
def op_cases(draw, op):
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    node, parent_shapes = _draw_case(draw, op, rng)
    try:
        graph = _Shapes(node, parent_shapes)
    except ValueError:
        assume(False)
    xs = [_state(draw, rng, graph.sizes[p]) for p in node.inputs]
    return node, graph, xs


def _dense(F, n):
    if sp.issparse(F):
        return F.toarray()
    F = np.asarray(F)
    return np.diag(F) if F.ndim == 1 else F


def _run(node, graph, xs, pattern=None):
    """The rule's forward pass for the samples ``xs``: ``(values, pattern rows, agrees)``."""
    out = np.empty((N_SAMPLES, graph.sizes[node.name]))
    kind = node.rule.pattern
    frozen = pattern is not None
    rows = (np.array(pattern) if frozen else np.empty((N_SAMPLES, node.rule.pattern_size(node, graph)),
                                                      dtype=kind.dtype)) if kind else None
    agrees = node.rule.forward(node, graph)([np.ascontiguousarray(x) for x in xs], out, rows, frozen)
    return out, rows, agrees


def _naive_pattern(node, graph, z):
    if node.rule.pattern is None:
        return None
    if node.rule.smooth:
        return z
    if node.rule.pattern.name == "argmax":
        return maxpool_argmax(node, graph.shapes[node.inputs[0]], graph.shapes[node.name], z)
    if node.rule.pattern.name == "piece":
        return clamp_pieces(node.attrs, z)
    return z >= 0


OPS = sorted(RULES)


@pytest.mark.parametrize("op", OPS)
def test_every_rule_writes_every_method(op):
    rule = rule_of(op)
    methods = METHODS + (PATTERN_METHODS if rule.pattern is not None else ())
    missing = [m for m in methods if getattr(type(rule), m) is getattr(OpRule, m, None)]
    assert not missing, f"{op} inherits {missing} from OpRule"
    assert rule.name == op and (1 <= rule.min_inputs <= rule.max_inputs or rule.max_inputs == 0 == rule.min_inputs)


def test_an_unknown_op_is_refused_at_construction_naming_it():
    with pytest.raises(ValueError, match="node 'g'.*unsupported operation 'fft'"):
        Node("g", "fft", ["x"])
    with pytest.raises(ValueError, match="unsupported operation 'fft'"):
        rule_of("fft")


def check_linearisation(node, graph, xs):
    """The forward pass equals the naive twin, and ``sum_u F_u x_u + b`` with the rule's blocks at its pattern."""
    values, rows, _ = _run(node, graph, xs)
    for s in range(N_SAMPLES):
        bias = node.rule.constant(node, graph, None if rows is None else rows[s])
        pattern = _naive_pattern(node, graph, np.concatenate([x[s] for x in xs]) if xs else None)
        if pattern is not None:
            assert np.array_equal(rows[s], pattern)
        maps, naive_bias = node_dense(node, graph, pattern)
        naive = sum(F @ x[s] for (_, F), x in zip(maps, xs)) + (0.0 if naive_bias is None else naive_bias)
        np.testing.assert_allclose(values[s], naive, rtol=1e-12, atol=1e-12)
        blocks = node.rule.blocks(node, graph, None if rows is None else rows[s])
        linearised = sum(_dense(F, x.shape[1]) @ x[s] for F, x in zip(blocks, xs)) + (0.0 if bias is None else bias)
        np.testing.assert_allclose(values[s], linearised, rtol=1e-12, atol=1e-12)
        # a normalisation's tangent at a nearly constant group loses digits centring it (either way)
        tol = 1e-12 if node.rule.smooth else 1e-14
        for (_, F_naive), F in zip(maps, blocks):
            np.testing.assert_allclose(_dense(F, F_naive.shape[1]), F_naive, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_forward_equals_the_naive_twin_and_its_own_linearisation(op, data):
    check_linearisation(*data.draw(op_cases(op)))


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_blocks_are_the_jacobian_of_the_frozen_forward_pass(op, data):
    node, graph, xs = data.draw(op_cases(op))
    _, rows, _ = _run(node, graph, xs)
    blocks = node.rule.blocks(node, graph, None if rows is None else rows[0])
    frozen = None if rows is None else np.repeat(rows[:1], N_SAMPLES, axis=0)
    for i, (F, x) in enumerate(zip(blocks, xs)):
        n = x.shape[1]
        J = np.empty((graph.sizes[node.name], n))
        for lo in range(0, n, N_SAMPLES):        # the columns, N_SAMPLES unit vectors at a time
            cols = np.zeros((N_SAMPLES, n))
            for k, j in enumerate(range(lo, min(lo + N_SAMPLES, n))):
                cols[k, j] = 1.0
            zero = [np.zeros_like(other) for other in xs]
            base, _, _ = _run(node, graph, zero, frozen)
            moved, _, _ = _run(node, graph, [cols if k == i else z for k, z in enumerate(zero)], frozen)
            J[:, lo:min(lo + N_SAMPLES, n)] = (moved - base)[: min(N_SAMPLES, n - lo)].T
        np.testing.assert_allclose(_dense(F, n), J, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_blocks_are_the_jacobian_away_from_kinks(op, data):
    node, graph, xs = data.draw(op_cases(op))
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=x.shape) for x in xs]          # continuous: no kink within reach of h
    _, rows, _ = _run(node, graph, xs)
    blocks = node.rule.blocks(node, graph, None if rows is None else rows[0])
    h = 1e-6
    for i, (F, x) in enumerate(zip(blocks, xs)):
        j = int(rng.integers(x.shape[1]))
        plus, minus = [a.copy() for a in xs], [a.copy() for a in xs]
        plus[i][:, j] += h
        minus[i][:, j] -= h
        column = (_run(node, graph, plus)[0] - _run(node, graph, minus)[0])[0] / (2 * h)
        np.testing.assert_allclose(_dense(F, x.shape[1])[:, j], column, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_matrix_free_maps_equal_the_blocks_and_their_transposes(op, data):
    node, graph, xs = data.draw(op_cases(op))
    _, rows, _ = _run(node, graph, xs)
    apply, transpose = node.rule.maps(node, graph)
    prepared = node.rule.prepare(node, rows)
    rng = np.random.default_rng(1)
    y = rng.normal(size=(N_SAMPLES, graph.sizes[node.name]))
    for i, x in enumerate(xs):
        for p in (rows, prepared):
            Fx, FTy = apply(i, x, p), transpose(i, y, p)
            for s in range(N_SAMPLES):
                F = _dense(node.rule.blocks(node, graph, None if rows is None else rows[s])[i], x.shape[1])
                np.testing.assert_allclose(Fx[s], F @ x[s], rtol=1e-12, atol=1e-12)
                np.testing.assert_allclose(FTy[s], F.T @ y[s], rtol=1e-12, atol=1e-12)


def _random_pattern(node, graph, rng):
    """A random valid pattern of one sample: random signs, the first maximum of random values, or random
    linearisation points (some far out: a smooth op's slope bound holds on the whole line)."""
    z = rng.normal(size=(1, sum(graph.sizes[p] for p in node.inputs))) * rng.choice([1.0, 10.0])
    return node.rule.read_pattern(node, graph, z)[0]


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_norm_bound_and_nonzero_estimates_hold_for_every_pattern(op, data):
    node, graph, xs = data.draw(op_cases(op))
    rng = np.random.default_rng(2)
    bound = node.rule.norm_bound(node, graph)
    nnz, gram = node.rule.nnz(node, graph)
    patterns = [None] if node.rule.pattern is None else [_random_pattern(node, graph, rng) for _ in range(4)]
    if node.rule.pattern is not None and node.rule.pattern.name == "mask":
        patterns += [np.ones(graph.sizes[node.name], bool), np.zeros(graph.sizes[node.name], bool)]
    if node.rule.pattern is not None and node.rule.pattern.name == "piece":
        patterns += [np.full(graph.sizes[node.name], piece, np.int8) for piece in (-1, 0, 1)]
    for pattern in patterns:
        blocks = [_dense(F, x.shape[1]) for F, x in zip(node.rule.blocks(node, graph, pattern), xs)]
        for F in blocks:
            assert np.linalg.norm(F, 2) <= bound * (1 + 1e-12) + 1e-12
        if blocks:
            G = np.hstack(blocks)           # every parent: the whole Gram block, pairs of parents included
            assert np.count_nonzero(np.abs(G).T @ np.abs(G)) <= gram
        bias = node.rule.constant(node, graph, pattern)
        assert sum(np.count_nonzero(F) for F in blocks) + (0 if bias is None else bias.size) <= nnz
    assert node.rule.work(node, graph) >= 1


@pytest.mark.parametrize("op", [op for op in OPS if RULES[op].params])
@given(data=st.data())
def test_velocity_is_minus_the_energy_gradient(op, data):
    node, graph, xs = data.draw(op_cases(op))
    rng = np.random.default_rng(3)
    w = rng.normal(size=(N_SAMPLES, graph.sizes[node.name]))

    def energy(params):
        moved = Node(node.name, node.op, node.inputs, dict(node.attrs), params)
        return 0.5 * np.sum((w - _run(moved, graph, xs)[0]) ** 2)

    velocity = node.rule.velocity(node, graph)(xs[0] if xs else None, w - _run(node, graph, xs)[0])
    assert set(velocity) == set(node.params)
    h = 1e-6
    for key, value in node.params.items():
        j = int(rng.integers(value.size))
        plus, minus = dict(node.params), dict(node.params)
        plus[key], minus[key] = value.copy().ravel(), value.copy().ravel()
        plus[key][j] += h
        minus[key][j] -= h
        plus[key], minus[key] = plus[key].reshape(value.shape), minus[key].reshape(value.shape)
        derivative = (energy(plus) - energy(minus)) / (2 * h)
        np.testing.assert_allclose(-velocity[key].ravel()[j], derivative, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", [op for op in OPS if RULES[op].pattern is not None])
@given(data=st.data())
def test_a_pattern_read_off_a_state_is_checked_and_reproduces_the_forward_pass(op, data):
    node, graph, xs = data.draw(op_cases(op))
    values, rows, _ = _run(node, graph, xs)
    read = node.rule.read_pattern(node, graph, np.concatenate(xs, axis=1))
    assert np.array_equal(read, rows)
    checked = node.rule.check_pattern(node, graph, rows.copy(), "pattern")
    assert checked.dtype == node.rule.pattern.dtype and np.array_equal(checked, rows)
    again, _, agrees = _run(node, graph, xs, checked)
    assert agrees.all() and np.array_equal(again, values)
    if node.rule.smooth:
        assert node.rule.split_edge(node) is None
        with pytest.raises(ValueError, match="smooth"):
            node.rule.selected(node, graph, rows)
        return
    selected = node.rule.selected(node, graph, rows)
    edge = node.rule.split_edge(node)
    assert edge in (node.name, node.inputs[0]) and selected.shape == (N_SAMPLES, graph.sizes[edge])


def test_the_contract_catches_a_wrong_block(monkeypatch):
    """The contract can fail: a convolution whose block loses one weight is caught by the linearisation check."""
    node = Node("v", "conv", ["p0"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
                {"weight": np.arange(1.0, 4.0).reshape(1, 1, 3), "bias": np.zeros(1)})
    graph = _Shapes(node, [(1, 5)])
    xs = [np.random.default_rng(0).normal(size=(N_SAMPLES, 5))]
    check_linearisation(node, graph, xs)
    right = type(node.rule).blocks
    monkeypatch.setattr(type(node.rule), "blocks",
                        lambda self, node, graph, pattern=None: [right(self, node, graph)[0] * 0.999])
    with pytest.raises(AssertionError):
        check_linearisation(node, graph, xs)


@given(data=st.data())
@pytest.mark.parametrize("op", ["mean", "sum", "upsample"])
def test_the_mean_and_upsample_norm_bounds_are_their_exact_norms(data, op):
    """A mean over disjoint groups of ``count`` entries: ``F F^T = I / count``; a nearest upsampling copies every
    entry ``prod(scale)`` times: ``F^T F = prod(scale) I``.  Either bound is ``||F||_2`` itself."""
    node, graph, _ = data.draw(op_cases(op))
    assume(node.attrs.get("mode", "nearest") == "nearest")
    F = _dense(node.rule.blocks(node, graph)[0], graph.sizes["p0"])
    np.testing.assert_allclose(node.rule.norm_bound(node, graph), np.linalg.norm(F, 2), rtol=1e-12)


@given(data=st.data())
def test_the_linear_upsampling_norm_bound_is_nearly_its_norm(data):
    """``sqrt(||F||_1 ||F||_inf)`` of a (bi)linear upsampling is within 11% per spatial axis of ``||F||_2``."""
    node, graph, _ = data.draw(op_cases("upsample"))
    assume(node.attrs["mode"] == "linear")
    norm = np.linalg.norm(_dense(node.rule.blocks(node, graph)[0], graph.sizes["p0"]), 2)
    assert norm * (1 - 1e-12) <= node.rule.norm_bound(node, graph) <= norm * 1.11 ** (len(graph.shapes["p0"]) - 1)


@pytest.mark.parametrize("op", [op for op in OPS if RULES[op].smooth])
@given(data=st.data())
def test_the_norm_at_a_state_bounds_the_tangent_there(op, data):
    """``norm_at`` bounds every sample's ``||J||_2`` at its point and lies within the bound of every state; a
    normalisation's is exact where every group has three entries or more (``1 / min sigma``); a softmax's is
    its bound 1/2 at every state."""
    node, graph, xs = data.draw(op_cases(op))
    _, rows, _ = _run(node, graph, xs)
    at = node.rule.norm_at(node, graph, rows)
    assert at.shape == (N_SAMPLES,)
    for s in range(N_SAMPLES):
        norm = max(np.linalg.norm(_dense(F, x.shape[1]), 2) for F, x in zip(node.rule.blocks(node, graph, rows[s]), xs))
        assert norm <= at[s] * (1 + 1e-12) + 1e-12 and at[s] <= node.rule.norm_bound(node, graph) * (1 + 1e-12)
        grouped = hasattr(node.rule, "group_size")      # else elementwise: max |f'|, the diagonal's norm
        if op != "softmax" and (not grouped or node.rule.group_size(node, graph.shapes["p0"]) >= 3):
            np.testing.assert_allclose(norm, at[s], rtol=1e-9)


@given(data=st.data())
@pytest.mark.parametrize("op", ["mul", "matmul"])
def test_a_products_norm_at_far_points_is_the_other_factors_norm(data, op):
    """A product's ``norm_at`` is exact at points far out too (the other factor's norm); it has no bound over
    every state (``math.inf``)."""
    node, graph, xs = data.draw(op_cases(op))
    rng = np.random.default_rng(4)
    rows = np.concatenate(xs, axis=1) * rng.choice([1.0, 10.0])
    at = node.rule.norm_at(node, graph, rows)
    assert at.shape == (N_SAMPLES,)
    for s in range(N_SAMPLES):
        norms = [np.linalg.norm(_dense(F, x.shape[1]), 2) for F, x in zip(node.rule.blocks(node, graph, rows[s]), xs)]
        np.testing.assert_allclose(at[s], max(norms), rtol=1e-12, atol=1e-12)
    assert node.rule.norm_bound(node, graph) == np.inf


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=5)
@given(data=st.data())
def test_a_rule_without_a_bound_over_every_state_reads_it_at_the_state(op, data):
    """Heat adapts its step to the nodes of ``state_bound`` rules (dynamics/euler/adaptive.py): every rule whose
    ``norm_bound`` is infinite is one, and each writes its own ``norm_at`` (not the every-state default)."""
    node, graph, _ = data.draw(op_cases(op))
    rule = node.rule
    if math.isinf(rule.norm_bound(node, graph)):
        assert rule.state_bound
    if rule.state_bound:
        assert rule.smooth and type(rule).norm_at is not Tangent.norm_at


def test_the_softmax_tangent_has_norm_at_most_one_half():
    """``||diag(y) - y y^T||_2 <= 1/2``, reached as two entries share the mass: checked on random and extreme
    slices (a near one-hot, two equal entries, many equal entries)."""
    node = Node("v", "softmax", ["p0"], {"axis": 0, "causal": False})
    rng = np.random.default_rng(5)
    worst = 0.0
    for n in (2, 3, 7):
        graph = _Shapes(node, [(n,)])
        points = [rng.normal(size=n) * scale for scale in (0.1, 1.0, 5.0, 50.0) for _ in range(20)]
        points += [np.r_[0.0, 0.0, np.full(n - 2, -1e3)], np.zeros(n), np.r_[40.0, np.zeros(n - 1)]]
        for z in points:
            norm = np.linalg.norm(_dense(node.rule.blocks(node, graph, z)[0], n), 2)
            assert norm <= 0.5 + 1e-15
            worst = max(worst, norm)
    assert worst == pytest.approx(0.5, abs=1e-12)

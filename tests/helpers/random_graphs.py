"""Random graph networks for every test that wants one: one builder and one hypothesis strategy.

:func:`random_graph` builds a network from a seed, so that a test can name a fixed example (by
default a convolutional chain); :func:`graph_networks` draws one (its seed, mode, output activation
and branching) for hypothesis, by default of every step on every kind of input.  Options choose the
steps (the operations), the input's axes, the depth, the head and the branching:

- the default steps grow a convolutional chain of 1-D or 2-D feature maps (convolutions with
  groups, strides, padding and dilation; ReLU, leaky ReLU, max and average pools, adaptive pools,
  batch norms, residual blocks and concatenations) closed by a head ``flatten -> linear``;
- :data:`EVERY_STEP` adds linear layers and flattens anywhere, pools with a window per axis (and ``ceil_mode``), and
  skips from any earlier node (additions, projected by a linear layer when only the sizes differ;
  concatenations on any axis where the shapes agree);
- ``axes=(0,)`` gives flat inputs (dense networks with skips), ``head=False`` ends on the last node
  whatever its shape, ``branching=True`` lets every step read any earlier node (dead branches).

The modes set the values: "mixed": random weights; "active"/"dead": large positive/negative biases;
"ties": zero weights in some convolutions and zero biases (exact zero pre-activations, max-pool
windows of equal values, with the constant inputs of :func:`random_inputs`).
"""

from collections import namedtuple

import numpy as np
from hypothesis import strategies as st

import sheaflinalg as sl
from sheaflinalg.kernels.windows import window_indices
from sheaflinalg.network.graph import Graph, Node
from sheaflinalg.network.graph.forward import pool_windows
from sheaflinalg.network.graph.nodes import output_shape, window_geometry

MODES = ("mixed", "active", "dead", "ties")
#: The steps of a convolutional chain (residual blocks and concatenations drawn twice as often).
CNN_STEPS = ("conv", "relu", "leaky_relu", "maxpool", "avgpool", "adaptive", "batchnorm", "residual", "concat",
             "residual", "concat")
#: Every step: the chain's, and linear layers (on the last axis), flattens, pools with a window per axis, skips
#: from any node, the plumbing (a permutation of the axes, a mean over some axes, a zero padding, a slice of an
#: axis, a nearest or linear upsampling, a sum over some axes, a roll; drawn twice), smooth elementwise nodes
#: (their tangent at the state; drawn twice as often, there are nine), transposed convolutions, normalisations,
#: a broadcast affine map, a constant token concatenated along the first axis (a class token), clamps (three
#: pieces: ReLU6, Hardtanh, Hardsigmoid), and products (a gate ``x * s(g)`` with a sigmoid or tanh ``s``,
#: broadcast from a mean when spatial; a softmax over an axis, causal or not; attention's scores
#: ``x @ x^T / sqrt(d)`` over the last two axes).
EVERY_STEP = CNN_STEPS + ("linear", "flatten", "window", "skip", "skip", "plumbing", "plumbing", "smooth",
                          "conv_transpose", "norm", "smooth", "affine", "token", "clamp", "product")
#: The smooth elementwise ops and their attributes, as the ``"smooth"`` step draws them.
SMOOTH_OPS = (("sigmoid", {}), ("tanh", {}), ("gelu", {"approximate": "none"}), ("gelu", {"approximate": "tanh"}),
              ("silu", {}), ("softplus", {"beta": 2.0, "threshold": 1.0}), ("elu", {"alpha": 0.5}), ("mish", {}),
              ("hardswish", {}))
#: The normalisations as the ``"norm"`` step draws them: over the last axis or every entry (an eps near 1 keeps
#: their norm bound, 1/sqrt(eps), near 1).
NORM_OPS = (("layernorm", {"n_axes": 1, "eps": 1.0}), ("rmsnorm", {"n_axes": 1, "eps": 0.5}),
            ("groupnorm", {"groups": 1, "eps": 1.0}), ("normalize", {"eps": 1.0}))
#: The clamps the ``"clamp"`` step draws: ReLU6, Hardtanh and Hardsigmoid (bounds the "ties" inputs reach).
CLAMPS = ({"min": 0.0, "max": 6.0, "slope": 1.0, "offset": 0.0}, {"min": -1.0, "max": 1.0, "slope": 1.0, "offset": 0.0},
          {"min": 0.0, "max": 1.0, "slope": 1 / 6, "offset": 0.5})
#: The steps of dense networks with skips (flat inputs, ``axes=(0,)``): skips drawn four times as often.
DENSE_STEPS = ("linear", "relu", "leaky_relu", "skip", "skip", "skip", "skip")
#: Steps that need spatial axes (skipped on flat feature maps).
SPATIAL = {"conv", "conv_transpose", "maxpool", "avgpool", "adaptive", "window", "residual", "concat"}

#: What :func:`graph_networks` draws: the network, the seed it was built from, and its mode.
RandomGraph = namedtuple("RandomGraph", "net seed mode")


def _empty_window(node, parent_shape):
    index, _ = window_indices(*window_geometry(node, parent_shape))
    return bool(np.any((index < 0).all(axis=1)))


def _agree_but(a, b, axis):
    """Whether shapes ``a`` and ``b`` agree on every axis but ``axis`` (they concatenate along it)."""
    return len(a) == len(b) and all(m == n for i, (m, n) in enumerate(zip(a, b)) if i != axis)


class _Builder:
    """Grows a graph one step at a time from ``rng``: a step whose node does not fit is skipped."""

    def __init__(self, rng, input_shape, mode, steps, branching):
        self.rng, self.mode, self.steps, self.branching = rng, mode, steps, branching
        self.shapes = {"x": input_shape}
        self.nodes = []
        self.cur = "x"

    def bias(self, n):
        shift = {"active": 4.0, "dead": -4.0, "ties": 0.0}.get(self.mode, 0.0)
        scale = 0.0 if self.mode == "ties" else 0.3
        return shift + scale * self.rng.normal(size=n)

    def add(self, name, op, inputs, attrs=None, params=None):
        node = Node(name, op, inputs, attrs, params)
        try:
            shape = output_shape(node, [self.shapes[p] for p in node.inputs])
        except ValueError:
            return None                      # the window does not fit: skip this layer
        if op == "maxpool" and _empty_window(node, self.shapes[inputs[0]]):
            return None                      # a window wholly in the padding has no maximum
        self.nodes.append(node)
        self.shapes[name] = shape
        self.cur = name
        return name

    def conv(self, name, parent, out_channels=None, same=False):
        rng, shape = self.rng, self.shapes[parent]
        n_axes = len(shape) - 1
        cin = shape[0]
        groups = int(rng.choice([g for g in (1, 2, 3) if cin % g == 0]))
        cout = out_channels or groups * int(rng.integers(1, 3))
        kernel = tuple(int(k) for k in rng.choice([1, 3] if same else [1, 2, 3], size=n_axes))
        scale = 0.2 if self.mode in ("active", "dead") else 1.0
        W = rng.normal(0, scale, size=(cout, cin // groups) + kernel)
        if self.mode == "ties" and rng.random() < 0.5:
            W[:] = 0.0
        dilation = int(rng.integers(1, 3))
        attrs = {"stride": int(rng.integers(1, 3)), "padding": int(rng.integers(0, 2)), "dilation": dilation,
                 "groups": groups}
        if same:        # the branch of a residual block or a concatenation keeps the spatial shape
            attrs.update(stride=1, padding=tuple(dilation * (k - 1) // 2 for k in kernel))
        return self.add(name, "conv", [parent], attrs, {"weight": W, "bias": self.bias(cout)})

    def conv_transpose(self, name, parent):
        """A transposed convolution (stride, padding, output padding, dilation, groups drawn)."""
        rng, cin = self.rng, self.shapes[parent][0]
        groups = int(rng.choice([g for g in (1, 2) if cin % g == 0]))
        kernel = tuple(int(k) for k in rng.integers(1, 4, size=len(self.shapes[parent]) - 1))
        scale = 0.2 if self.mode in ("active", "dead") else 1.0
        W = rng.normal(0, scale, size=(cin, int(rng.integers(1, 3))) + kernel)
        stride, dilation = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        attrs = {"stride": stride, "padding": int(rng.integers(0, 2)), "dilation": dilation, "groups": groups,
                 "output_padding": int(rng.integers(0, max(stride, dilation)))}
        return self.add(name, "conv_transpose", [parent], attrs, {"weight": W, "bias": self.bias(W.shape[1] * groups)})

    def linear(self, name, parent, n_out):
        n = self.shapes[parent][-1]
        W = self.rng.normal(0, 1 / np.sqrt(n), size=(n_out, n))
        return self.add(name, "linear", [parent], params={"weight": W, "bias": self.bias(n_out)})

    def step(self, i):
        kind = str(self.rng.choice(self.steps))
        if self.branching:
            self.cur = str(self.rng.choice(sorted(self.shapes)))
        cur, shape, name = self.cur, self.shapes[self.cur], f"b{i}.{kind}"
        if len(shape) == 1 and kind in SPATIAL:
            return None
        if kind in ("maxpool", "avgpool", "window"):
            return self.pool(name, kind, cur, shape)
        if kind in ("residual", "concat"):
            return self.block(i, name, kind, cur, shape)
        if kind == "skip":
            return self.skip(name, cur, shape)
        return self.layer(name, kind, cur, shape)

    def layer(self, name, kind, cur, shape):
        rng = self.rng
        if kind == "conv":
            return self.conv(name, cur)
        if kind == "conv_transpose":
            return self.conv_transpose(name, cur)
        if kind == "relu":
            return self.add(name, "relu", [cur])
        if kind == "leaky_relu":
            return self.add(name, "leaky_relu", [cur], {"negative_slope": float(rng.choice([0.1, -0.5, 2.0]))})
        if kind == "adaptive":
            size = tuple(int(rng.integers(1, n + 1)) for n in shape[1:])
            return self.add(name, "adaptive_avgpool", [cur], {"output_size": size if len(size) > 1 else size[0]})
        if kind == "batchnorm":
            return self.add(name, "batchnorm", [cur], params={"scale": rng.normal(size=shape[0]),
                                                             "shift": self.bias(shape[0])})
        if kind == "linear":
            return self.linear(name, cur, int(rng.integers(1, 5)))
        if kind == "plumbing":
            return self.plumbing(name, cur, shape)
        if kind in ("smooth", "norm"):
            table = SMOOTH_OPS if kind == "smooth" else NORM_OPS
            op, attrs = table[int(rng.integers(len(table)))]
            return self.add(name, op, [cur], attrs)
        if kind == "affine":          # scale and shift broadcast from trailing axes, some of length 1
            params = {key: rng.normal(size=tuple(n if rng.random() < 0.5 else 1 for n in shape[int(rng.integers(
                len(shape))):])) for key in ("scale", "shift")}
            return self.add(name, "affine", [cur], params=params)
        if kind == "token":           # a constant (a class token) joined before the first axis' entries
            token = self.add(f"{name}.value", "constant", [], params={"value": rng.normal(size=(1,) + shape[1:])})
            return self.add(name, "concat", [token, cur], {"axis": 0})
        if kind == "clamp":
            return self.add(name, "clamp", [cur], dict(CLAMPS[int(rng.integers(len(CLAMPS)))]))
        if kind == "product":
            return self.product(name, cur, shape)
        return self.add(name, "reshape", [cur], {"shape": (int(np.prod(shape)),)})       # flatten

    def plumbing(self, name, cur, shape):
        """A permutation of the axes, a mean or sum over some of them, a slice of one, or (spatial maps) a zero
        padding or a nearest or linear upsampling."""
        rng = self.rng
        op = str(rng.choice(["permute", "mean", "sum", "slice", "roll", "pad", "upsample"] if len(shape) > 1 else
                            ["permute", "mean", "sum", "slice", "roll"]))
        if op == "roll":
            return self.add(name, op, [cur], {"shifts": (int(rng.integers(-3, 4)),), "axes": (int(rng.integers(
                len(shape))),)})
        if op == "upsample":     # linear when the first factor is 2, aligned corners on 2-D maps (no draw: the seeds
            scale = tuple(int(s) for s in rng.integers(1, 3, size=len(shape) - 1))      # keep their graphs)
            linear = scale[0] == 2
            return self.add(name, op, [cur], {"scale": scale, "mode": "linear" if linear else "nearest",
                                              "align_corners": linear and len(scale) == 2})
        if op == "slice":
            axis = int(rng.integers(len(shape)))
            start = int(rng.integers(shape[axis]))
            return self.add(name, op, [cur], {"axis": axis, "start": start, "step": int(rng.integers(1, 3)),
                                              "stop": int(rng.integers(start + 1, shape[axis] + 1))})
        if op == "permute":
            return self.add(name, op, [cur], {"axes": tuple(int(a) for a in rng.permutation(len(shape)))})
        if op == "pad":
            pads = tuple(int(p) for p in rng.integers(0, 3, size=2 * len(shape) - 2))
            return self.add(name, op, [cur], {"pads": pads})
        axes = tuple(sorted(int(a) for a in rng.choice(len(shape), size=int(rng.integers(1, len(shape) + 1)),
                                                       replace=False)))
        return self.add(name, op, [cur], {"axes": axes, "keepdim": len(axes) == len(shape) or bool(rng.random() < 0.5)})

    def product(self, name, cur, shape):
        """A gate ``cur * s(g)`` (``s`` a sigmoid or tanh, ``g`` the node or its mean over the spatial axes), a
        softmax over an axis (causal on the last of two or more), or the scores ``cur @ cur^T / sqrt(d)`` of the
        last two axes."""
        rng = self.rng
        op = str(rng.choice(["mul", "softmax", "matmul"] if len(shape) > 1 else ["mul", "softmax"]))
        if op == "softmax":
            axis = int(rng.integers(len(shape)))
            causal = axis == len(shape) - 1 and len(shape) > 1 and bool(rng.random() < 0.5)
            return self.add(name, op, [cur], {"axis": axis, "causal": causal})
        if op == "matmul":
            axes = tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2)
            other = self.add(f"{name}.t", "permute", [cur], {"axes": axes})
            return self.add(name, op, [cur, other], {"alpha": float(1 / np.sqrt(shape[-1]))})
        gate = cur
        if len(shape) > 1 and rng.random() < 0.5:
            gate = self.add(f"{name}.pool", "mean", [cur], {"axes": tuple(range(1, len(shape))), "keepdim": True})
        gate = self.add(f"{name}.gate", str(rng.choice(["sigmoid", "tanh"])), [gate])
        return self.add(name, op, [cur, gate][::int(rng.choice([1, -1]))])

    def pool(self, name, kind, cur, shape):
        rng = self.rng
        if kind == "window":        # kernel, stride and padding of their own on every axis
            n, op = len(shape) - 1, str(rng.choice(["maxpool", "avgpool"]))
            kernel = tuple(int(k) for k in rng.integers(1, 4, size=n))
            attrs = {"kernel_size": kernel, "stride": tuple(int(s) for s in rng.integers(1, 3, size=n)),
                     "padding": tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel),
                     "ceil_mode": bool(sum(kernel) % 2)}      # no draw: the seeds keep their graphs
        else:
            op, k = kind, int(rng.integers(1, 4))
            attrs = {"kernel_size": k, "stride": int(rng.integers(1, 3)), "padding": int(rng.integers(0, k // 2 + 1))}
        if op == "maxpool":
            attrs["dilation"] = int(rng.integers(1, 3))
        else:
            attrs["count_include_pad"] = bool(rng.random() < 0.5)
        return self.add(name, op, [cur], attrs)

    def block(self, i, name, kind, cur, shape):
        """A residual block or a concatenation: a convolution branch that keeps the spatial shape."""
        branch = self.conv(f"b{i}.branch", cur, out_channels=shape[0] if kind == "residual" else None, same=True)
        if branch is None or self.shapes[branch][1:] != shape[1:]:
            return branch
        if kind == "residual" and self.shapes[branch] == shape:
            return self.add(name, "add", [cur, branch])
        return self.add(name, "concat", [branch, cur], {"axis": 0})

    def skip(self, name, cur, shape):
        """The current node added to or concatenated with any node before it (itself and ``x`` included)."""
        rng = self.rng
        other = str(rng.choice(sorted(self.shapes)))
        if rng.random() < 0.5:
            axes = [a for a in range(len(shape)) if _agree_but(self.shapes[other], shape, a)]
            return self.add(name, "concat", [other, cur], {"axis": int(rng.choice(axes))}) if axes else None
        if self.shapes[other] != shape and len(shape) == 1:      # project a flat skip to the node's size
            other = self.linear(f"{name}.proj", other, shape[0])        # (None: a linear layer reads flat nodes)
            self.cur = cur
        return self.add(name, "add", [cur, other]) if self.shapes.get(other) == shape else None

    def finish(self, n_out):
        n = int(np.prod(self.shapes[self.cur]))
        self.add("flatten", "reshape", [self.cur], {"shape": (n,)})
        return self.linear("head", "flatten", n_out)


def _input_shape(rng, axes):
    n_axes = axes[int(rng.random() * len(axes))]       # axes=(1, 2): one draw, below or above 1/2
    if n_axes == 0:
        return (int(rng.integers(1, 6)),)
    if n_axes == 1:
        return (int(rng.integers(1, 4)), int(rng.integers(4, 10)))
    return (int(rng.integers(1, 3)), int(rng.integers(3, 6)), int(rng.integers(3, 6)))


def random_graph(seed, mode="mixed", output="identity", max_layers=5, steps=CNN_STEPS, axes=(1, 2), head=True,
                 branching=False):
    """A random graph network built from ``seed``: the same seed and options give the same network.

    Parameters
    ----------
    seed : int
    mode : {"mixed", "active", "dead", "ties"}
        How the weights and biases are drawn (see the module's docstring).
    output : {"identity", "sigmoid", "tanh", "softmax"}
        The output activation (softmax needs ``head=True`` or a last node of two or more features).
    max_layers : int
        At most this many steps (at least one); a step whose node does not fit is skipped.
    steps : sequence of str
        The steps drawn from (repeat one to draw it more often): :data:`CNN_STEPS`, :data:`EVERY_STEP`,
        :data:`DENSE_STEPS` or any selection of their names.
    axes : sequence of int
        The input's spatial axes drawn from: 0 (a flat input), 1 (channels, length), 2 (channels, height, width).
    head : bool
        End with ``flatten -> linear`` (2 or 3 outputs); otherwise the last node is the output.
    branching : bool
        Every step reads a node drawn among all before it (``x`` included) instead of the last one.

    Returns
    -------
    sheaflinalg.Network
    """
    rng = np.random.default_rng(seed)
    b = _Builder(rng, _input_shape(rng, axes), mode, tuple(steps), branching)
    for i in range(int(rng.integers(1, max_layers + 1))):
        b.step(i)
    if head:
        b.finish(int(rng.integers(2, 4)))
    elif not b.nodes:
        b.add("only", "relu", ["x"])
    return sl.Network.from_graph(Graph(b.shapes["x"], b.nodes, output))


@st.composite
def graph_networks(draw, modes=MODES, outputs=("identity",), steps=EVERY_STEP, axes=(0, 1, 2), branchings=(False, True),
                   **options):
    """The hypothesis strategy of random graph networks: :func:`random_graph` of a drawn seed, mode and output.

    By default every step, flat, 1-D and 2-D inputs, chains and branching graphs.

    Parameters
    ----------
    modes, outputs : sequence of str
        The modes and output activations drawn from.
    steps, axes
        As in :func:`random_graph`.
    branchings : sequence of bool
        The ``branching`` values drawn from.
    **options
        :func:`random_graph`'s ``max_layers`` and ``head``.

    Returns
    -------
    RandomGraph
        ``(net, seed, mode)``: the seed and mode also draw inputs (:func:`random_inputs`).
    """
    seed = draw(st.integers(0, 2**31 - 1))
    mode, output = draw(st.sampled_from(modes)), draw(st.sampled_from(outputs))
    branching = draw(st.sampled_from(branchings))
    return RandomGraph(random_graph(seed, mode, output, steps=steps, axes=axes, branching=branching, **options), seed,
                       mode)


def random_inputs(net, seed, n_samples, mode="mixed"):
    """``n_samples`` inputs of ``net`` drawn from ``seed`` (constant ones in the "ties" mode)."""
    rng = np.random.default_rng(seed + 7)
    if mode == "ties":        # constant inputs: every window of the first pool ties
        level = rng.integers(0, 2, size=(n_samples,) + (1,) * len(net.input_shape))
        return np.zeros((n_samples,) + net.input_shape) + level
    return rng.uniform(-2, 2, size=(n_samples,) + net.input_shape)


def random_pattern(net, rng, n_samples):
    """A frozen pattern of every kind at random: masks, clamp pieces, any position of every max-pool window, and random
    linearisation points of the smooth nodes."""
    pattern = {}
    for name in net.graph.pattern_nodes:
        node = net.graph.node(name)
        n = net.graph.sizes[name]
        if node.rule.smooth:
            pattern[name] = rng.normal(size=(n_samples, net.graph.pattern_size(name)))
            continue
        if node.op == "clamp":
            pattern[name] = rng.integers(-1, 2, size=(n_samples, n)).astype(np.int8)
            continue
        if node.op != "maxpool":
            pattern[name] = rng.random((n_samples, n)) < 0.5
            continue
        channels, n_in, index, _ = pool_windows(node, net.graph)
        choice = np.empty((n_samples, n), dtype=np.int64)
        for o in range(n):
            window = index[o % index.shape[0]]
            window = window[window >= 0] + (o // index.shape[0]) * n_in
            choice[:, o] = rng.choice(window, size=n_samples)
        pattern[name] = choice
    return pattern


def random_pins(net, layout, rng, n_samples):
    """``(pins, soft_pins, reluctance)`` of ``sl.heat`` at random: a hard pin, a soft pin and a reluctance strength
    on random free coordinates, each or none of them."""
    names = [node.name for node in net.graph.nodes]
    a, b = rng.choice(names, size=2)
    pins = {f"{a}[0]": rng.normal(size=(n_samples, 1))} if rng.random() < 0.7 else None
    soft = ({f"{b}[{layout.free_block(b).size - 1}]": rng.normal()}, float(rng.uniform(0.5, 2))) \
        if rng.random() < 0.7 and (a != b or layout.free_block(b).size > 1) else None
    lam = float(rng.uniform(0.1, 1)) if rng.random() < 0.5 else None
    return pins, soft, lam

"""Random small graph networks for the graph-sheaf tests (every op, every pattern kind)."""

import numpy as np

import sheaflinalg as sl
from sheaflinalg.network.graph import Graph, Node
from sheaflinalg.kernels.windows import window_indices
from sheaflinalg.network.graph.forward import pool_windows
from sheaflinalg.network.graph.nodes import output_shape, window_geometry

#: "mixed": random weights; "active"/"dead": large positive/negative biases; "ties": zero weights in
#: some convolutions and zero biases (exact zero pre-activations, max-pool windows of equal values).
MODES = ("mixed", "active", "dead", "ties")


def _empty_window(node, parent_shape):
    index, _ = window_indices(*window_geometry(node, parent_shape))
    return bool(np.any((index < 0).all(axis=1)))


class _Builder:
    def __init__(self, rng, input_shape, mode):
        self.rng, self.mode = rng, mode
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

    def step(self, i):
        rng, cur = self.rng, self.cur
        shape = self.shapes[cur]
        kind = str(rng.choice(["conv", "relu", "leaky_relu", "maxpool", "avgpool", "adaptive", "batchnorm",
                               "residual", "concat", "residual", "concat"]))
        name = f"b{i}.{kind}"
        n_axes = len(shape) - 1
        if kind == "conv":
            return self.conv(name, cur)
        if kind == "relu":
            return self.add(name, "relu", [cur])
        if kind == "leaky_relu":
            return self.add(name, "leaky_relu", [cur], {"negative_slope": float(rng.choice([0.1, -0.5, 2.0]))})
        if kind in ("maxpool", "avgpool"):
            k = int(rng.integers(1, 4))
            attrs = {"kernel_size": k, "stride": int(rng.integers(1, 3)), "padding": int(rng.integers(0, k // 2 + 1))}
            if kind == "maxpool":
                attrs["dilation"] = int(rng.integers(1, 3))
            else:
                attrs["count_include_pad"] = bool(rng.random() < 0.5)
            return self.add(name, kind, [cur], attrs)
        if kind == "adaptive":
            size = tuple(int(rng.integers(1, n + 1)) for n in shape[1:])
            return self.add(name, "adaptive_avgpool", [cur], {"output_size": size if n_axes > 1 else size[0]})
        if kind == "batchnorm":
            return self.add(name, "batchnorm", [cur], params={"scale": rng.normal(size=shape[0]),
                                                             "shift": self.bias(shape[0])})
        branch = self.conv(f"b{i}.branch", cur, out_channels=shape[0] if kind == "residual" else None, same=True)
        if branch is None or self.shapes[branch][1:] != shape[1:]:
            return branch
        if kind == "residual" and self.shapes[branch] == shape:
            return self.add(name, "add", [cur, branch])
        return self.add(name, "concat", [branch, cur], {"axis": 0})

    def finish(self, n_out):
        n = int(np.prod(self.shapes[self.cur]))
        self.add("flatten", "reshape", [self.cur], {"shape": (n,)})
        W = self.rng.normal(0, 1 / np.sqrt(n), size=(n_out, n))
        return self.add("head", "linear", ["flatten"], params={"weight": W, "bias": self.bias(n_out)})


def random_graph(seed, mode="mixed", output="identity", max_layers=5):
    """A random graph network with 1-D or 2-D feature maps ending in flatten -> linear."""
    rng = np.random.default_rng(seed)
    if rng.random() < 0.5:
        input_shape = (int(rng.integers(1, 4)), int(rng.integers(4, 10)))
    else:
        input_shape = (int(rng.integers(1, 3)), int(rng.integers(3, 6)), int(rng.integers(3, 6)))
    b = _Builder(rng, input_shape, mode)
    for i in range(int(rng.integers(1, max_layers + 1))):
        b.step(i)
    b.finish(int(rng.integers(2, 4)))
    return sl.Network.from_graph(Graph(input_shape, b.nodes, output))


def random_inputs(net, seed, n_samples, mode="mixed"):
    rng = np.random.default_rng(seed + 7)
    if mode == "ties":        # constant inputs: every window of the first pool ties
        level = rng.integers(0, 2, size=(n_samples,) + (1,) * len(net.input_shape))
        return np.zeros((n_samples,) + net.input_shape) + level
    return rng.uniform(-2, 2, size=(n_samples,) + net.input_shape)


def random_pattern(net, rng, n_samples):
    """A frozen pattern of every kind at random: masks, and any position of every max-pool window."""
    pattern = {}
    for name in net.graph.pattern_nodes:
        node = net.graph.node(name)
        n = net.graph.sizes[name]
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

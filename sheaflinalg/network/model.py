"""Feedforward ReLU networks: weights, biases, output activation, forward pass, I/O."""

import os
from typing import NamedTuple

import numpy as np

from .._common.memory import FLOAT, check_batch, check_memory
from .._common.validation import as_float64, as_samples, check_dims, check_seed, check_type
from . import activations
from .errors import NetworkOverflowError
from .graph import Graph
from .graph.chain import as_chain, chain_graph, chain_names, renamed
from .graph.nodes import Node
from .graph.forward import evaluate, output_values
from .model_io import NetworkFiles
from .paths import GRAPH, engine, require_chain


class ChainView(NamedTuple):
    """A chain network's layers (:attr:`Network.chain`): read-only weights, biases and its node names."""

    weights: tuple
    biases: tuple
    names: tuple


def _read_only(array):
    array.flags.writeable = False
    return array


def parameter_offsets(dims):
    """Offsets of ``W_l`` and ``b_l`` in the flat parameter vector of :meth:`Network.parameters`.

    Returns
    -------
    woff, boff : ndarray of int64, shape (len(dims) + 1,)
        Index ``l = 1 .. k+1``; entry 0 and the last entry are ``-1``.
    n_parameters : int

    Examples
    --------
    >>> woff, boff, n = parameter_offsets([2, 3, 1])
    >>> woff[1:3].tolist(), boff[1:3].tolist(), n
    ([0, 9], [6, 12], 13)
    """
    n_layers = len(dims) - 1
    woff = np.full(n_layers + 2, -1, dtype=np.int64)
    boff = np.full(n_layers + 2, -1, dtype=np.int64)
    off = 0
    for l in range(1, n_layers + 1):
        woff[l] = off
        off += dims[l] * dims[l - 1]
        boff[l] = off
        off += dims[l]
    return woff, boff, off


def check_network(net, name="net", graphs=False, feature="this function"):
    """Return ``net`` if it is a :class:`Network`, else a TypeError saying what was expected and what was got.

    Applied first by every public function taking a network (it lives beside
    the class, as ``_common`` cannot import it); a file name gets the hint to
    load it.  A graph network (:func:`~sheaflinalg.network.paths.engine`) is refused
    by the one refusal of chain-only features
    (:func:`~sheaflinalg.network.paths.require_chain`, naming ``feature``) unless
    ``graphs`` is true (the functions that take graph networks say so).

    Examples
    --------
    >>> check_network("net.npz")
    Traceback (most recent call last):
    ...
    TypeError: net must be a sheaflinalg.Network, got str 'net.npz' (load a network file with sl.Network.load(path))
    """
    hint = " (load a network file with sl.Network.load(path))" if isinstance(net, (str, os.PathLike)) else ""
    check_type(net, Network, name, "a sheaflinalg.Network", hint)
    return net if graphs else require_chain(net, feature, name=name)


class Network(NetworkFiles):
    """A feedforward ReLU network ``x -> phi(W_{k+1} relu(... relu(W_1 x + b_1)) + b_{k+1})``.

    Parameters
    ----------
    weights : sequence of array_like
        ``W[l]`` of shape ``(n_l, n_{l-1})`` (out, in), for ``l = 1..k+1``.
    biases : sequence of array_like
        ``b[l]`` of shape ``(n_l,)``.
    output : {"identity", "sigmoid", "tanh", "softmax"}
        Output activation phi.

    Notes
    -----
    Arrays are copied to C-contiguous float64 (integers and float32 are
    converted); NaN/Inf, empty layers and shape mismatches raise ValueError.
    A network is immutable: ``weights`` and ``biases`` are tuples of
    read-only arrays (``net.weights[1]`` reads as an ndarray), so it cannot
    drift out of shape after it was checked; :meth:`replace` returns a new,
    re-validated network with some of them changed.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network([np.eye(2), np.ones((1, 2))], [np.zeros(2), np.zeros(1)])
    >>> net.dims
    [2, 2, 1]
    >>> net.forward(np.array([1.0, -3.0]))
    array([1.])
    """

    def __init__(self, weights, biases, output="identity"):
        activations.check_output(output)
        for name, seq in (("weights", weights), ("biases", biases)):
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__len__"):
                raise TypeError(f"{name} must be a sequence of arrays (one per layer), got {type(seq).__name__}")
        if len(weights) == 0:
            raise ValueError("a network needs at least one layer (one weight matrix)")
        if len(weights) != len(biases):
            raise ValueError(f"got {len(weights)} weight matrices but {len(biases)} bias vectors")
        Ws, bs = [], []
        for l, (W, b) in enumerate(zip(weights, biases), start=1):
            W = as_float64(W, f"W{l}")
            b = as_float64(b, f"b{l}")
            if W.ndim != 2:
                raise ValueError(f"W{l} must be 2-D (n_out, n_in), got shape {W.shape}")
            if W.shape[0] == 0 or W.shape[1] == 0:
                raise ValueError(f"W{l} has an empty layer: shape {W.shape}")
            if b.shape != (W.shape[0],):
                raise ValueError(f"b{l} must have shape ({W.shape[0]},), got {b.shape}")
            if Ws and W.shape[1] != Ws[-1].shape[0]:
                raise ValueError(
                    f"W{l} takes {W.shape[1]} inputs but layer {l - 1} has {Ws[-1].shape[0]} neurons"
                )
            Ws.append(W.copy())
            bs.append(b.copy())
        if output == "softmax" and Ws[-1].shape[0] < 2:
            raise ValueError("softmax output needs at least 2 output neurons")
        # Private writable storage (the compiled kernels' array type; nothing writes it), public read-only views.
        self._weights = tuple(Ws)
        self._biases = tuple(bs)
        self._views = (tuple(_read_only(W.view()) for W in Ws), tuple(_read_only(b.view()) for b in bs))
        self._output = output
        self._graph = None
        self._chain = None
        self._names = None          # a chain's node names when they are not the paper's (z1, a1, ...)

    def __reduce__(self):
        # copy, deepcopy and pickle rebuild through the constructor, keeping the views tied to the storage.
        if self.is_graph or self._names is not None:
            return (Network.from_graph, (self.graph,))
        return (Network, (self._weights, self._biases, self._output))

    def _named(self, names):
        """This chain with the node names ``names`` (None or the paper's: ``z1, a1, ...``)."""
        if names is not None and tuple(names) != chain_names(len(self._weights)):
            self._names, self._chain = tuple(names), None
        return self

    # ------------------------------------------------------------ graph networks
    @classmethod
    def from_graph(cls, graph):
        """A network from a :class:`~sheaflinalg.network.graph.Graph` (convolution, pooling, residual, ...).

        A graph that is a chain of linear and relu nodes on a flat input
        is a chain network (:attr:`chain`: the MLP's fused kernels run on it) that
        keeps the graph's node names in every label.

        Examples
        --------
        >>> import numpy as np
        >>> from sheaflinalg.network.graph import Graph, Node
        >>> conv = Node("conv", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
        ...             {"weight": np.ones((2, 1, 3)), "bias": np.zeros(2)})
        >>> net = Network.from_graph(Graph((1, 5), [conv, Node("act", "relu", ["conv"])]))
        >>> net.is_graph, net.input_shape, net.forward(np.arange(5.0)).tolist()
        (True, (1, 5), [3.0, 6.0, 9.0, 3.0, 6.0, 9.0])
        """
        check_type(graph, Graph, "graph", "a sheaflinalg Graph (sheaflinalg.network.graph.Graph)")
        chain = as_chain(graph)
        if chain is not None:
            net = cls(*chain, graph.output)._named([node.name for node in graph.nodes])
            net._chain = graph
            return net
        net = cls.__new__(cls)
        net._weights = net._biases = net._views = net._chain = net._names = None
        net._output = graph.output
        net._graph = graph
        return net

    @classmethod
    def from_nodes(cls, input_shape, nodes, output="identity"):
        """:meth:`from_graph` of ``Graph(input_shape, nodes, output)`` (nodes in topological order)."""
        return cls.from_graph(Graph(input_shape, nodes, output))

    @property
    def chain(self):
        """The chain view ``(weights, biases, names)``, or None for a graph network (read by the one chain/graph
        switch, :func:`~sheaflinalg.network.paths.engine`).

        A network is a chain when its graph is a chain of linear and relu nodes
        on a flat input (:func:`~sheaflinalg.network.graph.chain.as_chain`); the fused
        chain kernels run on it, every other network on its :attr:`graph`.

        Examples
        --------
        >>> Network.random([2, 3, 1]).chain.names
        ('z1', 'a1', 'z2')
        """
        if self._graph is not None:
            return None
        view = self.__dict__.get("_chain_view")
        if view is None:        # built once: the switch and the chain-only members read it often
            view = self._chain_view = ChainView(self._views[0], self._views[1], self.node_names)
        return view

    @property
    def is_graph(self):
        """Whether the graph path runs this network (:func:`~sheaflinalg.network.paths.engine` is ``"graph"``)."""
        return engine(self) == GRAPH

    @property
    def node_names(self):
        """The nodes' names in topological order (a chain made by the constructor: ``z1, a1, ..., z(k+1)``)."""
        if self._graph is None:
            return self._names or chain_names(len(self._weights))
        return tuple(node.name for node in self._graph.nodes)

    @property
    def graph(self):
        """The network's :class:`~sheaflinalg.network.graph.Graph` (for a chain: nodes :attr:`node_names`)."""
        if self._graph is not None:
            return self._graph
        if self._chain is None:
            graph = chain_graph(self._weights, self._biases, self._output)
            self._chain = graph if self._names is None else renamed(graph, self._names)
        return self._chain

    @property
    def graph_ops(self):
        """The set of operations of the network's nodes."""
        return {node.op for node in self.graph.nodes}

    @property
    def input_shape(self):
        """Per-sample input shape (``(n_0,)`` for a chain)."""
        return self.graph.input_shape if self.is_graph else (self.dims[0],)

    @property
    def n_inputs(self):
        """Input features per sample."""
        return self.graph.n_inputs if self.is_graph else self.dims[0]

    @property
    def n_outputs(self):
        """Output features per sample."""
        return self.graph.n_outputs if self.is_graph else self.dims[-1]

    def _chain_only(self, what, instead):
        if self._views is None:         # a graph network's storage: the switch's one refusal
            require_chain(self, what, instead)

    def evaluate(self, X):
        """Every node's value and the activation pattern (:class:`~sheaflinalg.network.graph.forward.GraphState`).

        ``X`` has shape ``(n_samples, n_inputs)`` or ``(n_samples, *input_shape)``.  Under a frozen
        pattern of your own, use :func:`sheaflinalg.harmonic_extension` (``pattern=``), which checks it.
        """
        X, _ = as_samples(X, self.n_inputs, input_shape=self.input_shape)
        check_batch(X.shape[0], 2 * FLOAT * sum(self.graph.sizes.values()), "the forward pass")
        return evaluate(self.graph, X)

    @property
    def weights(self):
        """Weight matrices ``(W_1, ..., W_{k+1})``: a tuple of read-only arrays (see :meth:`replace`)."""
        self._chain_only("net.weights", "read net.graph.node(name).params or net.parameters()")
        return self._views[0]

    @property
    def biases(self):
        """Bias vectors ``(b_1, ..., b_{k+1})``: a tuple of read-only arrays (see :meth:`replace`)."""
        self._chain_only("net.biases", "read net.graph.node(name).params or net.parameters()")
        return self._views[1]

    @property
    def output(self):
        """Output activation phi."""
        return self._output

    def replace(self, weights=None, biases=None, output=None, params=None, **layers):
        """A new network with some parameters or the output changed (re-validated; the node names kept).

        Parameters
        ----------
        weights, biases : sequence of array_like, optional
            All the weight matrices / bias vectors (a chain).
        output : str, optional
            Any network: a graph network becomes the same nodes with this output.
        params : dict, optional
            Any network: ``{node name: {parameter: array}}``, e.g. ``{"conv1": {"weight": W}}``
            (a chain's linear nodes have ``weight`` and ``bias``).
        **layers
            Single layers by name: ``W2=...``, ``b1=...`` (1-based, as in the paper; a chain).

        Examples
        --------
        >>> import numpy as np
        >>> net = Network([np.eye(2), np.ones((1, 2))], [np.zeros(2), np.zeros(1)])
        >>> net.replace(W2=2 * np.ones((1, 2))).forward(np.array([1.0, 1.0]))
        array([4.])
        >>> net.replace(params={"z2": {"bias": np.ones(1)}}).forward(np.array([1.0, 1.0]))
        array([3.])
        >>> net.replace(W2=np.ones((1, 7)))
        Traceback (most recent call last):
        ...
        ValueError: W2 takes 7 inputs but layer 1 has 2 neurons
        """
        output = self._output if output is None else output
        if params is not None:
            if weights is not None or biases is not None or layers:
                raise TypeError("replace() takes params= or weights=/biases=/W1=/b1=..., not both")
            return self._replace_params(params, output)
        if self.is_graph:
            if weights is not None or biases is not None or layers:
                self._chain_only("replace(weights=, biases=, W1=, b1=...)", "give replace(params={node name: "
                                 "{parameter: array}})")
            return Network.from_graph(Graph(self._graph.input_shape, self._graph.nodes, output))
        Ws = list(self._weights if weights is None else weights)
        bs = list(self._biases if biases is None else biases)
        for key, value in layers.items():
            kind, index = key[:1], key[1:]
            target = {"W": Ws, "b": bs}.get(kind)
            if target is None or not index.isdigit() or not 1 <= int(index) <= len(target):
                raise TypeError(f"replace() got an unexpected layer {key!r}; expected W1..W{len(Ws)} "
                                f"or b1..b{len(bs)}")
            target[int(index) - 1] = value
        return Network(Ws, bs, output)._named(self._names)

    def _replace_params(self, params, output):
        check_type(params, dict, "params", "a dict {node name: {parameter: array}}")
        graph = self.graph
        unknown = [name for name in params if name not in self.node_names]
        if unknown:
            raise ValueError(f"params names no node {unknown[0]!r}; the nodes are {', '.join(self.node_names)}")
        for name, given in params.items():
            check_type(given, dict, f"params[{name!r}]", "a dict {parameter: array}")
        nodes = [Node(n.name, n.op, n.inputs, dict(n.attrs), {**n.params, **params[n.name]}) if n.name in params
                 else n for n in graph.nodes]
        return Network.from_graph(Graph(graph.input_shape, nodes, output))

    def with_parameters(self, theta):
        """This network with the flat parameters ``theta`` (the order of :meth:`parameters`); node names kept.

        Examples
        --------
        >>> net = Network.random([2, 3, 1])
        >>> bool(np.array_equal(net.with_parameters(2 * net.parameters()).weights[0], 2 * net.weights[0]))
        True
        """
        if not self.is_graph:
            return Network.from_parameters(theta, self.dims, self._output)._named(self._names)
        theta = as_float64(theta, "theta")
        if theta.shape != (self.n_parameters,):
            raise ValueError(f"expected {self.n_parameters} parameters (net.parameters()), got shape {theta.shape}")
        nodes, off = [], 0
        for node in self._graph.nodes:
            params = {}
            for key, value in node.params.items():
                params[key], off = theta[off:off + value.size].reshape(value.shape), off + value.size
            nodes.append(Node(node.name, node.op, node.inputs, dict(node.attrs), params) if params else node)
        return Network.from_graph(Graph(self._graph.input_shape, nodes, self._output))

    def with_weights(self, weights):
        """:meth:`replace` with all the weight matrices changed."""
        return self.replace(weights=weights)

    # ------------------------------------------------------------------ shape
    @property
    def dims(self):
        """Layer widths ``[n_0, n_1, ..., n_{k+1}]``."""
        self._chain_only("net.dims", "read net.input_shape, net.n_outputs or net.graph.shapes")
        return [self.weights[0].shape[1]] + [W.shape[0] for W in self.weights]

    @property
    def n_hidden(self):
        """Number ``k`` of hidden ReLU layers."""
        self._chain_only("net.n_hidden", "read net.graph.pattern_nodes")
        return len(self.weights) - 1

    @property
    def n_parameters(self):
        """Number of weights and biases (for a graph: every node's parameters)."""
        if self.is_graph:
            return self._graph.n_parameters
        return sum(W.size + b.size for W, b in zip(self.weights, self.biases))

    def __repr__(self):
        if self.is_graph:
            return (f"Network(graph of {len(self._graph.nodes)} nodes, input_shape={self.input_shape}, "
                    f"output={self.output!r})")
        names = "" if self._names is None else f", nodes={list(self._names)}"
        return f"Network(dims={self.dims}, output={self.output!r}{names})"

    def copy(self):
        """Deep copy."""
        if self.is_graph or self._names is not None:
            return Network.from_graph(self.graph)
        return Network(self.weights, self.biases, self.output)

    # ------------------------------------------------------------ constructors
    @classmethod
    def random(cls, dims, seed=0, output="identity"):
        """He-initialised network: ``W[l] ~ N(0, 2 / n_{l-1})``, zero biases.

        Examples
        --------
        >>> Network.random([2, 30, 1], seed=0).dims
        [2, 30, 1]
        """
        dims = check_dims(dims)
        check_seed(seed)
        activations.check_output(output)
        n_parameters = parameter_offsets(dims)[2]
        check_memory(3 * FLOAT * n_parameters, f"a network of {n_parameters} parameters", "choose smaller widths")
        rng = np.random.default_rng(seed)
        weights = [rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_out, n_in))
                   for n_in, n_out in zip(dims[:-1], dims[1:])]
        biases = [np.zeros(n) for n in dims[1:]]
        return cls(weights, biases, output)

    # ------------------------------------------------------------ forward pass
    def forward_states(self, X):
        """Pre-activations and activations of every layer.

        Returns
        -------
        zs : list of ndarray
            ``zs[l-1]`` has shape (n_samples, n_l), for ``l = 1..k+1``.
        hidden : list of ndarray
            ``hidden[l-1] = relu(zs[l-1])`` for the hidden layers ``l = 1..k``.

        Raises
        ------
        NetworkOverflowError
            A pre-activation overflows float64 (the message names the layer).
        """
        self._chain_only("forward_states()", "use net.evaluate(X)")
        X, _ = as_samples(X, self.dims[0])
        check_batch(X.shape[0], 2 * FLOAT * sum(self.dims[1:]), "the forward pass")
        zs, hidden = [], []
        a = X
        for l, (W, b) in enumerate(zip(self._weights, self._biases)):
            with np.errstate(over="ignore", invalid="ignore"):
                z = a @ W.T + b
            if not np.all(np.isfinite(z)):
                s = int(np.argwhere(~np.isfinite(z))[0, 0])
                raise NetworkOverflowError(
                    f"the forward pass overflows at layer {l + 1} (z{l + 1} = W{l + 1} a{l} + b{l + 1} is not "
                    f"finite for sample {s}; largest |W{l + 1}| = {np.abs(W).max():.3g}, largest input "
                    f"|a{l}| = {np.abs(a).max():.3g}): rescale the weights or the inputs")
            zs.append(z)
            if l < self.n_hidden:
                a = np.where(z >= 0, z, 0.0)
                hidden.append(a)
        return zs, hidden

    def forward(self, X):
        """Network output ``phi(z_{k+1})``, shape (n_samples, n_out) (1-D for a 1-D sample).

        A graph network takes ``(n_samples, *input_shape)`` or ``(n_samples, n_inputs)``
        (or one sample) and returns its output node's value flattened, after phi.
        """
        if self.is_graph:
            X, was_1d = as_samples(X, self.n_inputs, input_shape=self.input_shape)
            y = activations.apply(self.output, output_values(self.graph, X))
            return y[0] if was_1d else y
        _, was_1d = as_samples(X, self.dims[0])
        zs, _ = self.forward_states(X)
        y = activations.apply(self.output, zs[-1])
        return y[0] if was_1d else y

    def activation_pattern(self, X):
        """Forward-pass activation pattern (``z >= 0`` active) of every hidden layer.

        Returns a list of boolean arrays of shape (n_samples, n_l), or (n_l,) for a 1-D sample;
        for a graph network a dict ``{node name: array}`` (masks, max-pool argmax positions).
        """
        if self.is_graph:
            _, was_1d = as_samples(X, self.n_inputs, input_shape=self.input_shape)
            pattern = self.evaluate(X).pattern
            return {k: v[0] for k, v in pattern.items()} if was_1d else pattern
        _, was_1d = as_samples(X, self.dims[0])
        zs, _ = self.forward_states(X)
        pattern = [z >= 0 for z in zs[:-1]]
        return [p[0] for p in pattern] if was_1d else pattern

    def parameters(self):
        """Flat float64 vector of all parameters: ``W_1`` (row-major), ``b_1``, ``W_2``, ... .

        Every network's are its nodes' parameters in node order (a chain's linear nodes: weight, then
        bias), so a chain's offsets are :func:`parameter_offsets`.

        Examples
        --------
        >>> net = Network.random([2, 3, 1])
        >>> bool(np.array_equal(net.parameters()[:6], net.weights[0].ravel())), net.parameters().size
        (True, 13)
        """
        return np.concatenate([p.ravel() for node in self.graph.nodes for p in node.params.values()])

    @classmethod
    def from_parameters(cls, theta, dims, output="identity"):
        """Inverse of :meth:`parameters`."""
        dims = check_dims(dims)
        woff, boff, n_parameters = parameter_offsets(dims)
        theta = as_float64(theta, "theta")
        if theta.shape != (n_parameters,):
            raise ValueError(f"expected {n_parameters} parameters for dims {list(dims)}, got shape {theta.shape}")
        weights = [theta[woff[l]:woff[l] + dims[l] * dims[l - 1]].reshape(dims[l], dims[l - 1])
                   for l in range(1, len(dims))]
        biases = [theta[boff[l]:boff[l] + dims[l]] for l in range(1, len(dims))]
        return cls(weights, biases, output)

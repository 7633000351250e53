"""A network's files, JSON and importers: the part of :class:`~sheaflinalg.network.model.Network` that reads and writes.

:class:`NetworkFiles` is a base of ``Network``; its methods build networks
through ``cls`` (the constructor for a chain's arrays, ``from_graph`` for a
graph) and read them through the public members.
"""

import json
import os

from .graph.chain import chain_names
from .importers import graph_from_onnx, graph_from_torch_by, network_arrays_from_sklearn
from .io import read_file, write_graph, write_network


class NetworkFiles:
    """Saving, loading, JSON and the importers of :class:`~sheaflinalg.network.model.Network`."""

    # --------------------------------------------------------------------- I/O
    def save(self, path):
        """Write the network to exactly ``path`` (no extension is added) as an ``.npz`` file readable without pickle.

        A chain named as in the paper (``z1, a1, ...``) is saved as its layers' arrays; any other network
        as its graph (JSON data, never code) and one array per parameter (:mod:`sheaflinalg.network.graph.files`).

        The directory is checked first; the file is written to a temporary
        name beside it and renamed, so an interrupted save never leaves a
        half-written file (see ``docs/errors.md``, *Files and writes*).

        Examples
        --------
        >>> import os, tempfile
        >>> from sheaflinalg import Network
        >>> path = os.path.join(tempfile.mkdtemp(), "mynet")
        >>> Network.random([2, 3, 1]).save(path)
        >>> os.listdir(os.path.dirname(path)), Network.load(path).dims
        (['mynet'], [2, 3, 1])
        """
        if self.is_graph or self._names is not None:
            write_graph(path, self.graph)
        else:
            write_network(path, self.weights, self.biases, self.output)

    @classmethod
    def load(cls, path):
        """Read a network written by :meth:`save` (never unpickles; every entry checked before use).

        Raises
        ------
        FileNotFoundError
            If there is no such file.
        ValueError
            Naming the file and the entry: corrupt or truncated file, arrays
            that need pickle, missing entries, entries that are not finite
            float64 arrays or whose shapes do not chain; for a graph file, a
            description that is not of the schema or a graph refused by the
            :class:`~sheaflinalg.network.graph.Graph` constructor.  Entries a network
            file does not hold are ignored with one warning naming them.
        """
        kind, content = read_file(path)
        if kind == "graph":
            return cls.from_graph(content)
        try:
            return cls(*content)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from None

    def to_dict(self):
        """Plain-JSON description (dims, output and nested weight lists; ``names``, the node names, when they
        are not the paper's ``z1, a1, ...``)."""
        self._chain_only("to_dict()", "save it with net.save(path)")
        names = {} if self.chain.names == chain_names(len(self.weights)) else {"names": list(self.chain.names)}
        return {"dims": self.dims, "output": self.output,
                "weights": [W.tolist() for W in self.weights],
                "biases": [b.tolist() for b in self.biases], **names}

    def to_json(self):
        """JSON string of :meth:`to_dict`."""
        return json.dumps(self.to_dict())

    # --------------------------------------------------------------- importers
    @classmethod
    def from_sklearn(cls, model):
        """Import a fitted scikit-learn ``MLPRegressor`` or ``MLPClassifier`` with relu hidden layers.

        Output activations map as identity -> identity, logistic -> sigmoid,
        softmax -> softmax.  For a binary classifier the network's single output
        is ``predict_proba(X)[:, 1]``.
        """
        return cls(*network_arrays_from_sklearn(model))

    @classmethod
    def from_torch(cls, module, input_shape=None, method="auto"):
        """Import a PyTorch model: an ``nn.Sequential``, a module torch.fx can trace (CNNs, ResNets), or,
        through ``torch.export``, one it cannot (GPT-2, vision transformers).

        The nodes are named after the modules' qualified names (e.g.
        ``"layer1.0.conv1"``, ``"0"`` in an ``nn.Sequential``); a chain of
        ``Linear``/``ReLU`` layers is a chain network (:attr:`Network.chain`)
        keeping those names.
        Supported: Linear, Conv1d/2d (zero padding), AvgPool1d/2d, MaxPool1d/2d,
        AdaptiveAvgPool1d/2d, BatchNorm1d/2d in eval mode (folded into a
        per-channel affine node), ReLU, LeakyReLU, residual ``+``,
        ``torch.cat``, Flatten/``view``/``reshape``, Identity and Dropout (eval:
        elided), their functional forms, and a final Sigmoid, Tanh or Softmax
        (over the features) as the output activation.  Anything else is
        refused, naming the node and its operation, before anything runs.

        Parameters
        ----------
        module : torch.nn.Module
        input_shape : tuple of int, optional
            Per-sample input shape without the batch axis, e.g. ``(1, 40)`` or
            ``(3, 32, 32)``; required unless the first layer is ``Linear``
            (then ``(in_features,)``) and the model is read through torch.fx.
        method : {"auto", "fx", "export"}
            ``"fx"`` traces the model with ``torch.fx.symbolic_trace``;
            ``"export"`` exports it with ``torch.export`` (on a batch of two
            random inputs, float64, eval mode) and reads its core ATen graph
            (docs/graph-networks.md, *Importing through torch.export*): data-dependent
            control flow, random operations, buffers mutated in forward and
            values mixing the samples of a batch are refused there;
            ``"auto"`` (default) uses torch.fx and, where torch.fx cannot trace
            the model or keeps a part of it whole that it cannot read (a
            layer such as ``nn.MultiheadAttention``, a wrapped function), reads
            it through ``torch.export`` instead (logged at debug level).

        Raises
        ------
        UnsupportedModelError
            An operation or setting with no graph-network counterpart (GELU, a
            hidden sigmoid, ``ceil_mode=True``, a training-mode batch norm, ...),
            or a model torch.fx cannot trace; the message names the node.
            Its subclass ``ImportMismatchError``: the imported network does not
            compute what the model computes (a forward hook, in-place aliasing
            torch.fx lost), checked on one random input; it names the first
            node that differs.
        ValueError, TypeError
            An unknown ``method``; ``input_shape`` missing or not fitting the model; parameters on the
            meta device (ValueError), or complex, integer, boolean or quantized
            (TypeError).  Real floating-point parameters on any device are
            copied to the CPU as float64.

        Examples
        --------
        >>> import numpy as np, torch
        >>> from torch import nn
        >>> from sheaflinalg import Network
        >>> _ = torch.manual_seed(0)
        >>> cnn = nn.Sequential(nn.Conv1d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
        ...                     nn.Flatten(), nn.Linear(4 * 5, 2)).double().eval()
        >>> net = Network.from_torch(cnn, input_shape=(1, 10))
        >>> [node.name for node in net.graph.nodes]
        ['0', '1', '2', '3', '4']
        >>> X = torch.randn(3, 1, 10, dtype=torch.float64)
        >>> bool(np.allclose(net.forward(X.numpy()), cnn(X).detach().numpy(), rtol=1e-12))
        True
        >>> exported = Network.from_torch(cnn, input_shape=(1, 10), method="export")
        >>> [node.op for node in exported.graph.nodes] == [node.op for node in net.graph.nodes]
        True
        """
        return cls.from_graph(graph_from_torch_by(module, input_shape, method))

    @classmethod
    def from_onnx(cls, path):
        """Import an ONNX file (read with the ``onnx`` package: protobuf, no pickle) as a network.

        The op set is :meth:`from_torch`'s: Gemm, MatMul (+ Add), Conv,
        MaxPool, AveragePool, GlobalAveragePool, BatchNormalization, Relu,
        LeakyRelu, Add, Concat, Flatten, Reshape (a constant shape), Identity,
        Dropout, and a final Sigmoid, Tanh or Softmax.  Node names are the
        file's (characters other than letters, digits, ``_`` and ``.`` become
        ``_``).  The batch axis may be symbolic; the others must be fixed.

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            Naming the file: not an ONNX model, fails ``onnx.checker``, an opset
            outside 7 .. the installed onnx's, several inputs or outputs,
            shapes that are not fixed, external data outside the file's own
            directory (an absolute location, ``..``, a symbolic link leading out).
        UnsupportedModelError
            Naming the node and its op_type; its subclass ``ImportMismatchError``
            if the network does not compute what ``onnx.reference`` computes
            from the file on one random input (it names the first node that differs).
        """
        return cls.from_graph(graph_from_onnx(path))


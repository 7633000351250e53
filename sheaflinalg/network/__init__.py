"""The network: weights, biases, output activation, forward pass, He initialisation, ``.npz``
I/O without pickle, importers from scikit-learn, PyTorch and ONNX; graph networks (:mod:`.graph`).

Bottom layer: imports only ``_common``.
"""

from .errors import GraphNetworkError, UnsupportedModelError
from .graph import Graph, Node
from .model import Network, NetworkOverflowError, check_network, parameter_offsets

__all__ = ["Network", "NetworkOverflowError", "GraphNetworkError", "UnsupportedModelError", "Graph", "Node",
           "parameter_offsets"]

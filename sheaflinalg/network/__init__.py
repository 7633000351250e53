"""The network: weights, biases, output activation, forward pass, He initialisation, ``.npz``
I/O without pickle, importers from scikit-learn, PyTorch and ONNX; graph networks (:mod:`.graph`) and
their operations, one rule per op (:mod:`.ops`).

Imports only ``_common`` and ``kernels``.
"""

from .errors import GraphNetworkError, ImportMismatchError, UnsupportedModelError
from .graph import Graph, Node
from .model import Network, NetworkOverflowError, check_network, parameter_offsets

__all__ = ["Network", "NetworkOverflowError", "GraphNetworkError", "UnsupportedModelError", "ImportMismatchError", "Graph",
           "Node",
           "parameter_offsets"]

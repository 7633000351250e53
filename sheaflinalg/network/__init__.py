"""The network: weights, biases, output activation, forward pass, He initialisation, ``.npz``
I/O without pickle, importers from scikit-learn, PyTorch and ONNX.

Bottom layer: imports only ``_common``.
"""

from .errors import UnsupportedModelError
from .model import Network, NetworkOverflowError, check_network, parameter_offsets

__all__ = ["Network", "NetworkOverflowError", "UnsupportedModelError", "parameter_offsets"]

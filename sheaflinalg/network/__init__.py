"""The network: weights, biases, output activation, forward pass, He initialisation, ``.npz``
I/O without pickle, importers from scikit-learn and PyTorch.

Bottom layer: imports only ``_common``.
"""

from .model import Network, NetworkOverflowError, check_network, parameter_offsets

__all__ = ["Network", "NetworkOverflowError", "parameter_offsets"]

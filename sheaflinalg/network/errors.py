"""Errors of the network layer."""


class NetworkOverflowError(FloatingPointError, ValueError):
    """The forward pass overflows (a pre-activation is not a finite float64); the message names the layer."""


class GraphNetworkError(TypeError):
    """A graph network (convolution, pooling, residual, ...) was given where only a chain of Linear/ReLU is taken."""


class UnsupportedModelError(ValueError):
    """An imported model (PyTorch, ONNX) holds an operation or a setting the graph network cannot express;
    the message names the node (its qualified name or ONNX node name) and its operation."""

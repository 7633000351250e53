"""Errors of the network layer."""


class NetworkOverflowError(FloatingPointError, ValueError):
    """The forward pass overflows (a pre-activation is not a finite float64); the message names the layer."""


class GraphNetworkError(TypeError):
    """A graph network (convolution, pooling, residual, ...) was given where only a chain of Linear/ReLU is taken."""


class UnsupportedModelError(ValueError):
    """An imported model (PyTorch, ONNX) holds an operation or a setting the graph network cannot express;
    the message names the node (its qualified name or ONNX node name) and its operation."""


class ImportMismatchError(UnsupportedModelError):
    """An imported network does not compute what the model it was read from computes (checked on a random
    input after the import: a hook, a parametrization, in-place aliasing the trace lost, a file whose
    attributes contradict its weights); the message names the first node that differs and by how much."""

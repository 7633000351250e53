"""Conversion of trained scikit-learn and PyTorch models (imported lazily)."""

import numpy as np

_SKLEARN_OUTPUTS = {"identity": "identity", "logistic": "sigmoid", "softmax": "softmax"}


def network_arrays_from_sklearn(model):
    """Return ``(weights, biases, output)`` of a fitted MLPRegressor/MLPClassifier."""
    try:
        from sklearn.neural_network import MLPClassifier, MLPRegressor
    except ImportError as exc:  # pragma: no cover - exercised only without sklearn
        raise ImportError("Network.from_sklearn needs scikit-learn (pip install scikit-learn)") from exc
    if not isinstance(model, (MLPRegressor, MLPClassifier)):
        raise TypeError(f"expected a fitted MLPRegressor or MLPClassifier, got {type(model).__name__}")
    if not hasattr(model, "coefs_"):
        raise ValueError("the scikit-learn model is not fitted (no coefs_)")
    if model.activation != "relu":
        raise ValueError(f"only relu hidden layers are supported, the model uses activation={model.activation!r}")
    out = getattr(model, "out_activation_", None)
    if out not in _SKLEARN_OUTPUTS:
        raise ValueError(f"unsupported scikit-learn output activation {out!r}")
    weights = [np.asarray(C, dtype=np.float64).T for C in model.coefs_]
    biases = [np.asarray(b, dtype=np.float64) for b in model.intercepts_]
    return weights, biases, _SKLEARN_OUTPUTS[out]


def _torch_values(torch, tensor, name):
    """A parameter as a float64 ndarray: real floating dtypes on any device are converted (copied to the
    CPU); the meta device (shapes without values), complex, integer, boolean and quantized tensors are
    refused, as they hold no real numbers to convert."""
    if tensor.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it has a shape but no values. Materialise the "
                         "model first (e.g. model.to_empty(device='cpu') and load its state_dict)")
    if tensor.is_quantized or tensor.is_complex() or not tensor.is_floating_point():
        raise TypeError(f"{name} has dtype {tensor.dtype}; expected real floating-point parameters "
                        "(float16, bfloat16, float32 or float64, converted to float64)")
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    with torch.no_grad():
        return tensor.detach().to(device="cpu", dtype=torch.float64).numpy().copy()


def network_arrays_from_torch(module):
    """Return ``(weights, biases, output)`` of an ``nn.Sequential`` of Linear/ReLU layers."""
    try:
        import torch
        from torch import nn
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("Network.from_torch needs PyTorch (pip install torch)") from exc
    if not isinstance(module, nn.Sequential):
        raise TypeError(f"expected torch.nn.Sequential, got {type(module).__name__}")
    layers = list(module)
    output = "identity"
    finals = {nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.Softmax: "softmax"}
    if layers and type(layers[-1]) in finals:
        last = layers.pop()
        output = finals[type(last)]
        if output == "softmax" and last.dim not in (-1, 1):
            raise ValueError(f"Softmax must act on the feature dimension (dim=-1 or 1), got dim={last.dim}")
    weights, biases = [], []
    expect_linear = True
    for i, layer in enumerate(layers):
        if expect_linear:
            if not isinstance(layer, nn.Linear):
                raise ValueError(f"layer {i} is {type(layer).__name__}; expected Linear "
                                 "(supported: Linear/ReLU alternating, optional final Sigmoid/Tanh/Softmax)")
            W = _torch_values(torch, layer.weight, f"layer {i} ({type(layer).__name__}) weight")
            b = (_torch_values(torch, layer.bias, f"layer {i} ({type(layer).__name__}) bias")
                 if layer.bias is not None else np.zeros(W.shape[0]))
            weights.append(W)
            biases.append(b)
        elif not isinstance(layer, nn.ReLU):
            raise ValueError(f"layer {i} is {type(layer).__name__}; only ReLU is supported between Linear layers")
        expect_linear = not expect_linear
    if not weights:
        raise ValueError("the Sequential has no Linear layer")
    if expect_linear:
        raise ValueError("the Sequential ends with ReLU; the last layer must be Linear "
                         "(optionally followed by Sigmoid/Tanh/Softmax)")
    return weights, biases, output

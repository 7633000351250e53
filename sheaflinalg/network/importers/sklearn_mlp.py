"""Conversion of fitted scikit-learn multilayer perceptrons (scikit-learn imported lazily)."""

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

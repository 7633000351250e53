"""Output activations phi, their Jacobians and the supported names."""

import numpy as np

OUTPUTS = ("identity", "sigmoid", "tanh", "softmax")


def check_output(name):
    """Return ``name`` if it is a supported output activation, else raise ValueError."""
    if name not in OUTPUTS:
        raise ValueError(
            f"unknown output activation {name!r}; expected one of {', '.join(OUTPUTS)}"
        )
    return name


def apply(name, z):
    """Apply the output activation to pre-activations ``z`` (samples are rows).

    Examples
    --------
    >>> apply("sigmoid", np.zeros((1, 2)))
    array([[0.5, 0.5]])
    """
    if name == "identity":
        return np.array(z, dtype=np.float64, copy=True)
    if name == "sigmoid":
        # Split by sign so that exp never overflows.
        out = np.empty_like(z, dtype=np.float64)
        pos = z >= 0
        out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
        ez = np.exp(z[~pos])
        out[~pos] = ez / (1.0 + ez)
        return out
    if name == "tanh":
        return np.tanh(z)
    if name == "softmax":
        shifted = z - z.max(axis=-1, keepdims=True)
        e = np.exp(shifted)
        return e / e.sum(axis=-1, keepdims=True)
    raise ValueError(check_output(name))


def jacobian_diagonal(name, z):
    """Diagonal of ``J_phi(z)`` of an elementwise output activation (identity, sigmoid, tanh).

    Parameters
    ----------
    name : str
        Output activation; ``"softmax"`` couples its outputs and has no diagonal Jacobian (ValueError).
    z : ndarray
        Pre-activations, one sample or a batch (samples are rows).

    Returns
    -------
    ndarray, the shape of ``z``

    Examples
    --------
    >>> jacobian_diagonal("sigmoid", np.zeros((1, 2)))
    array([[0.25, 0.25]])
    """
    z = np.asarray(z, dtype=np.float64)
    if name == "softmax":
        raise ValueError("softmax has no diagonal Jacobian (it couples its outputs): use jacobian()")
    if name == "identity":
        return np.ones(z.shape)
    y = apply(name, z)
    if name == "sigmoid":
        return y * (1.0 - y)
    if name == "tanh":
        return 1.0 - y * y
    raise ValueError(check_output(name))


def jacobian(name, z):
    """Jacobian ``J_phi(z)`` of the output activation at one pre-activation vector, or at every row.

    Parameters
    ----------
    name : str
        Output activation.
    z : ndarray, shape (n,) or (M, n)
        One sample's output pre-activation, or one per row.

    Returns
    -------
    ndarray, shape (n, n) or (M, n, n)
        Dense; an elementwise activation's is diagonal (:func:`jacobian_diagonal` stores only that).

    Examples
    --------
    >>> jacobian("softmax", np.zeros((3, 2))).shape, jacobian("softmax", np.zeros(2)).tolist()
    ((3, 2, 2), [[0.25, -0.25], [-0.25, 0.25]])
    """
    z = np.asarray(z, dtype=np.float64)
    if name == "softmax":
        y = apply(name, z)
        return y[..., :, None] * np.eye(z.shape[-1]) - y[..., :, None] * y[..., None, :]
    return jacobian_diagonal(check_output(name), z)[..., :, None] * np.eye(z.shape[-1])


def curvature(name, z, r):
    """``sum_i r_i nabla^2 phi_i(z)`` per row: the second-order term of ``1/2 ||phi(z) - y||^2``'s Hessian beyond
    ``J^T J`` (``r = phi(z) - y``).

    Parameters
    ----------
    name : str
        Output activation other than ``"identity"`` (whose term is 0).
    z, r : ndarray, shape (M, n)

    Returns
    -------
    ndarray, shape (M, n, n)

    Examples
    --------
    >>> curvature("sigmoid", np.zeros((1, 2)), np.ones((1, 2))).tolist()     # sigmoid'' (0) = 0
    [[[0.0, 0.0], [0.0, 0.0]]]
    """
    p = apply(name, z)
    if name == "softmax":        # nabla^2 p_i = p_i (e_i - p)(e_i - p)^T - p_i J, J = diag(p) - p p^T
        u = r * p
        J = jacobian(name, z)
        outer = (u[:, :, None] * np.eye(z.shape[1]) - u[:, :, None] * p[:, None, :] - p[:, :, None] * u[:, None, :]
                 + u.sum(axis=1)[:, None, None] * p[:, :, None] * p[:, None, :])
        return outer - np.einsum("m,mij->mij", np.einsum("mi,mi->m", r, p), J)
    second = {"sigmoid": lambda: p * (1.0 - p) * (1.0 - 2.0 * p), "tanh": lambda: -2.0 * p * (1.0 - p * p)}
    if name not in second:
        raise ValueError(check_output(name) if name != "identity" else "the identity output has no curvature term")
    return (r * second[name]())[:, :, None] * np.eye(z.shape[1])

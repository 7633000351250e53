"""Free cochains in the kernels' internal layout (samples as columns) and their initialisation.

Public arrays are samples-as-rows, ``(n_samples, n_free)`` in the layout's
free order; kernels use the transpose ``(n_free, n_samples)``, C-contiguous.
"""

import numpy as np

from .._common.validation import as_float64
from .harmonic import harmonic_extension

INITS = ("random", "zeros", "forward")


def to_columns(rows):
    """``(n_samples, n)`` samples-as-rows -> a new C-contiguous ``(n, n_samples)`` array.

    Always a copy: kernels write into the state, never into the caller's array.
    """
    return np.array(np.asarray(rows, dtype=np.float64).T, order="C", copy=True)


def to_rows(columns):
    """Inverse of :func:`to_columns`."""
    return np.ascontiguousarray(columns.T)


def initial_state(net, X, layout, init="random", seed=None):
    """Initial free cochain, shape ``(layout.n_free, n_samples)`` (columns layout).

    Parameters
    ----------
    net : Network
    X : ndarray, shape (n_samples, n_0)
        Validated float64 inputs.
    layout : Layout
        Reduced or full layout (decides whether ``yhat`` rows exist).
    init : {"random", "zeros", "forward"} or array_like
        ``"random"``: every free stalk ~ N(0, 1) (``numpy.random.default_rng(seed)``);
        ``"zeros"``; ``"forward"``: the forward pass of the current weights;
        or an explicit array of shape (n_samples, n_free) in the layout's free order.
    seed : int or None

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> lay = sl.Layout(net.dims, reduced=True)
    >>> initial_state(net, np.zeros((4, 2)), lay, "zeros").shape
    (7, 4)
    """
    M = X.shape[0]
    if isinstance(init, str):
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; expected one of {INITS} or an array of shape ({M}, {layout.n_free})")
        if init == "zeros":
            return np.zeros((layout.n_free, M))
        if init == "random":
            return np.random.default_rng(seed).standard_normal((layout.n_free, M))
        free = harmonic_extension(net, X).free
        return to_columns(free[:, :layout.n_free])
    arr = as_float64(init, "init")
    if arr.shape != (M, layout.n_free):
        raise ValueError(f"init array must have shape (n_samples, n_free) = ({M}, {layout.n_free}) "
                         f"in the order {', '.join(b.name for b in layout.free_blocks)}; got {arr.shape}")
    return to_columns(arr)

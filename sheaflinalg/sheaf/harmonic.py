"""Exact harmonic extensions by block forward substitution in ``delta_Omega``.

Because ``delta_Omega`` is block unit lower triangular (identity blocks on the
diagonal, ``-R``, ``-W``, ``-J`` below), ``delta_Omega omega = -delta_U u`` is
solved one block row at a time: each row is a matrix product (weight edge) or
a mask (activation edge).  For the forward-pass pattern this *is* the forward
pass (the paper's Proposition "Forward pass as harmonic extension").
"""

from dataclasses import dataclass

import numpy as np

from .._common.validation import as_samples
from ..network import activations
from ..network.model import NetworkOverflowError
from .layout import Layout
from .patterns import normalise_pattern


@dataclass
class HarmonicExtension:
    """Result of :func:`harmonic_extension`.

    Attributes
    ----------
    free : ndarray, shape (n_samples, n_free)
        Free cochain in the layout's order ``z1, a1, ..., z(k+1), yhat``.
    output : ndarray, shape (n_samples, n_out)
        ``yhat`` (equal to ``phi(z(k+1))``).
    pattern : list of ndarray
        The activation pattern used, (n_samples, n_l) per hidden layer.
    self_consistent : ndarray of bool, shape (n_samples,)
        Whether the pattern agrees with the signs of the computed
        pre-activations (a pre-activation exactly 0 agrees with either label).
    layout : Layout
    """

    free: np.ndarray
    output: np.ndarray
    pattern: list
    self_consistent: np.ndarray
    layout: Layout

    @property
    def preactivations(self):
        """``[z1, ..., z(k+1)]``, each (n_samples, n_l)."""
        return [self.free[:, self.layout.free(f"z{l}")] for l in range(1, self.layout.n_hidden + 2)]

    @property
    def hidden_activations(self):
        """``[a1, ..., ak]``, each (n_samples, n_l)."""
        return [self.free[:, self.layout.free(f"a{l}")] for l in range(1, self.layout.n_hidden + 1)]


def harmonic_extension(net, X, pattern=None):
    """Harmonic extension of the boundary data ``(x, 1, ..., 1)`` by forward substitution.

    Parameters
    ----------
    net : Network
    X : array_like, shape (n_samples, n_0) or (n_0,)
    pattern : sequence of array_like, optional
        Frozen activation pattern (see :func:`sheaflinalg.assemble`).  By
        default the self-consistent pattern is found layer by layer, and the
        result is the forward pass.

    Returns
    -------
    HarmonicExtension

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 30, 1], seed=0)
    >>> X = np.random.default_rng(1).uniform(-2, 2, size=(5, 2))
    >>> h = sl.harmonic_extension(net, X)
    >>> bool(np.allclose(h.output, net.forward(X), rtol=1e-12, atol=0))
    True
    """
    X, _ = as_samples(X, net.dims[0])
    M = X.shape[0]
    if pattern is not None:
        pattern = normalise_pattern(net, pattern, M)
    lay = Layout(net.dims)
    free = np.empty((M, lay.n_free))
    used, consistent = [], np.ones(M, dtype=bool)
    a = X
    k = net.n_hidden
    for l in range(1, k + 2):
        W, b = net.weights[l - 1], net.biases[l - 1]
        z = free[:, lay.free(f"z{l}")]
        with np.errstate(over="ignore", invalid="ignore"):
            np.matmul(a, W.T, out=z)  # weight edge: z_l = W_l a_{l-1} + b_l
            z += b
        if not np.all(np.isfinite(z)):
            raise NetworkOverflowError(f"the harmonic extension overflows at layer {l} (z{l} = W{l} a{l - 1} + "
                                       f"b{l} is not finite): rescale the weights or the inputs")
        if l == k + 1:
            break
        mask = z >= 0 if pattern is None else pattern[l - 1]
        if pattern is not None:
            consistent &= np.all((mask == (z >= 0)) | (z == 0), axis=1)
        used.append(mask)
        a = free[:, lay.free(f"a{l}")]
        np.multiply(z, mask, out=a)  # activation edge: a_l = R_l z_l
    out = free[:, lay.free("yhat")]
    out[...] = activations.apply(net.output, z)
    return HarmonicExtension(free=free, output=out, pattern=used,
                             self_consistent=consistent, layout=lay)

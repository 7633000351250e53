"""The equilibrium of a chain under a frozen activation pattern: a rank-``n_out`` correction of its forward pass.

Minimising ``1/2 ||e||^2 + b loss(f + J e)`` over the interior edge residuals
``e`` gives ``e = J^T u``: the residuals are the backpropagation adjoints of
``n_out`` coefficients per sample (plus one per coordinate held on its
switching surface ``z = 0``, a linear constraint whose row joins ``J``).  With
``G = J J^T`` (``(n_out + s)`` square per sample, ``>= I``) the output's
displacement ``w`` solves a small problem and ``[u; lambda] = G^-1 [w; c]``
(``c`` the values the held rows must move by; both per sample in
:func:`~.loss_edge.solve_coefficients`), and one forward substitution with
``e = J^T [u; lambda]`` gives the state.  No Laplacian is assembled and nothing
is iterated except the loss's Newton steps on ``w``.

At a small nudging (:func:`~.loss_edge.takes_fixed_point`: ``|b| <= 1e-3``,
samples without held coordinates) the same minimiser is found without the Gram
matrix by :func:`~.loss_edge.fixed_point`: ``u = -b grad loss(f + J J^T u)``
contracts by about ``|b| ||H M||`` per step, each step one backward
substitution (:func:`~.chain_linear.backward`) and one forward substitution of
the residuals (:func:`~.chain_linear.state_shift`, which moves every layer, so
the converged step's shifts give the state without another forward pass); it
stops within :func:`~.loss_edge.fixed_point_tolerance` (a fraction of the nudging's own bias), 2-3 steps at
``b = 1e-6`` on MNIST-1D, 2.5 to 3
times faster than the ``n_out`` backward substitutions of ``G``.  A batch
whose iteration cannot converge within 8 steps, at the rate its last two steps
show, takes the Gram path as soon as that shows.
"""

from dataclasses import dataclass

import numpy as np

from .chain_linear import RowAdjoints, backward, forward, state_shift
from .loss_edge import fixed_point, potential, solve_coefficients, takes_fixed_point


@dataclass
class Frozen:
    """The frozen-pattern equilibrium of a set of samples.

    Attributes
    ----------
    Zs, As : list of ndarray
        ``z_l`` (``l = 1..k+1``) and ``a_l`` (``l = 1..k``), ``(S, n_l)`` each.
    ez, ea : list of ndarray
        The interior edge residuals ``e_z_l`` and ``e_a_l``.
    masks : list of ndarray
        The masks used (held coordinates: 0).
    held : list of list of (int, int) or None
        The held coordinates of every sample (None: none).
    energy : ndarray, shape (S,)
        ``1/2 ||e||^2 + b loss(z_(k+1), y)`` per sample.
    newton : int
        Newton steps of the loss solve (0: one linear solve).
    """

    Zs: list
    As: list
    ez: list
    ea: list
    masks: list
    held: object
    energy: np.ndarray
    newton: int


def frozen_equilibrium(Ws, bs, X, Y, masks, b, output, loss, held=None, base=None, order=1):
    """The minimiser of the energy with the pattern ``masks`` frozen (and ``held`` coordinates at ``z = 0``).

    Parameters
    ----------
    Ws, bs : list of ndarray
        Weights and biases.
    X, Y : ndarray
        ``(S, n_0)`` inputs and ``(S, n_out)`` targets.
    masks : list of ndarray
        ``(S, n_l)`` 0/1 float masks of the hidden layers.
    b : float
        Nudging (nonzero).
    output, loss : str
    held : list of list of (int, int), optional
        Per sample, the ``(layer, neuron)`` coordinates held on their switching surface (their masks are
        ignored: ``m z = 0`` there).
    base : list of ndarray, optional
        ``z_l`` at zero residuals under ``masks`` when the caller has them (the forward pass, for the forward
        pattern); computed otherwise.
    order : {1, 2}
        The nudging's bias order (1: one-sided, 2: symmetric), the accuracy of :func:`~.loss_edge.fixed_point`.

    Returns
    -------
    Frozen
    """
    S, n_out = Y.shape
    n_held = max(map(len, held)) if held else 0
    if n_held:
        masks = [m.copy() for m in masks]
        for s, coords in enumerate(held):
            for l, j in coords:
                masks[l - 1][s, j] = 0.0
    Zs0 = forward(Ws, bs, X, masks)[0] if base is None or n_held else base
    solved = None
    if takes_fixed_point(b, n_held):
        solved = fixed_point(_respond(Ws, masks), Zs0[-1], Y, b, output, loss, order)
    newton = 0
    if solved is None:
        (ez, ea), newton = _gram_solve(Ws, masks, Zs0, Y, b, output, loss, held, n_held)
        Zs, As = forward(Ws, bs, X, masks, ez, ea)
    else:   # the state is the forward pass moved by the residuals' shifts: no second forward pass
        ez, ea, shifts = solved
        Zs = [z + dz for z, dz in zip(Zs0, shifts)]
        As = [m * z + e for m, z, e in zip(masks, Zs, ea)]
    energy = 0.5 * sum(np.einsum("ij,ij->i", e, e) for e in ez + ea) + b * potential(output, loss, Zs[-1], Y)
    return Frozen(Zs, As, ez, ea, masks, held if n_held else None, energy, newton)


def _respond(Ws, masks):
    """The chain's response to output coefficients ``u`` for :func:`~.loss_edge.fixed_point`:
    ``((ez, ea, shifts), output shift)``."""
    def respond(u):
        ez, ea = backward(Ws, masks, u)
        shifts = state_shift(Ws, masks, ez, ea)
        return (ez, ea, shifts), shifts[-1]
    return respond


def _gram_solve(Ws, masks, Zs0, Y, b, output, loss, held, n_held):
    """``((ez, ea), newton)``: the residuals from the rows' Gram matrix (outputs and held coordinates)."""
    S, n_out = Y.shape
    c = np.zeros((S, n_held))
    adj = RowAdjoints(Ws, masks, S, *_held_rows(Ws, S, n_out, held, n_held))
    G = adj.gram()
    for s, coords in enumerate(held if n_held else ()):
        c[s, :len(coords)] = [-Zs0[l - 1][s, j] for l, j in coords]
        pad = np.arange(n_out + len(coords), n_out + n_held)
        G[s, pad, pad] = 1.0            # rows of no coordinate: independent, coefficient 0
    coefficients, _, newton = solve_coefficients(G, c, Zs0[-1], Y, b, output, loss)
    return adj.residuals(coefficients), newton


def _held_rows(Ws, S, n_out, held, n_held):
    """``(top, seeds)`` of :class:`RowAdjoints`: the outputs, then ``n_held`` rows per sample for its held
    coordinates (unused rows are all zero)."""
    if not n_held:
        return None, None
    r = n_out + n_held
    top = np.zeros((S, r, n_out))
    top[:, np.arange(n_out), np.arange(n_out)] = 1.0
    seeds = {}
    for s, coords in enumerate(held):
        for i, (l, j) in enumerate(coords):
            seeds.setdefault(l, np.zeros((S, r, Ws[l - 1].shape[0])))[s, n_out + i, j] = 1.0
    return top, seeds

"""One or more steps of the compiled training kernels on a batch, called directly (no driver): the
whole-batch kernel and the tiled kernels, on the state layout of ``naive_training.naive_step``."""

import numpy as np

import sheaflinalg as sl
from sheaflinalg.kernels.potentials import OUTPUT_EDGE_ADJOINT, OUTPUT_EDGE_DISCREPANCY, PHI_CODES
from sheaflinalg.kernels.structs import OutputEdge, Rates, Regularisation, Scratch, Tiles
from sheaflinalg.kernels.training import pack_tiles, train_steps, unpack_tiles
from sheaflinalg.training.euler.chain import KERNEL_LOSS


def output_edge(net, loss, p):
    """The kernels' description of the output edge for ``loss``."""
    out_mode = OUTPUT_EDGE_DISCREPANCY if loss == "cross_entropy" else OUTPUT_EDGE_ADJOINT
    return OutputEdge(out_mode, PHI_CODES[net.output], KERNEL_LOSS[loss], p)


def kernel_step(net, X, Y, state, loss, p, alpha, beta, dt, reg=None, state0=None, theta0=None, n_steps=1,
                tile=0):
    """``n_steps`` steps of the whole-batch kernel (tiles of ``tile`` samples, 0: none): (network, state)."""
    lay = sl.Layout(net.dims)
    off = lay.kernel_offsets()
    n_move = off.yhat_off
    S = np.ascontiguousarray(np.concatenate([state[:, :n_move], Y], axis=1).T)
    theta = net.parameters()
    reg = reg or sl.Regularization()
    initial = reg.anchor == "initial"       # the anchors as the driver passes them (0 for anchor="zero")
    S0 = np.ascontiguousarray(np.concatenate([state0[:, :n_move] * initial, Y], axis=1).T) \
        if state0 is not None else S * 0
    th0 = theta0 * initial if theta0 is not None else theta * 0
    M = X.shape[0]
    scratch = Scratch(np.zeros_like(S), np.zeros_like(S), np.zeros((net.dims[-1], M)), np.zeros((max(net.dims), M)))
    done = train_steps(np.ascontiguousarray(X.T), S, theta, off, output_edge(net, loss, p), Rates(alpha, beta, dt),
                       n_steps, n_move, Regularisation(reg.code("lam"), reg.lam, reg.l1_ratio, S0),
                       Regularisation(reg.code("mu"), reg.mu, reg.l1_ratio, th0), scratch, np.zeros_like(theta), tile)
    assert done == n_steps
    return sl.Network.from_parameters(theta, net.dims, net.output), S.T[:, :n_move].copy()


def tiled_kernel_step(net, X, Y, state, loss, p, alpha, beta, dt, reg, state0, theta0, bounds, widths, kernel,
                      n_steps=1):
    """:func:`kernel_step` on the tiles ``bounds`` (cache tiles ``widths``) by ``kernel`` (serial or
    parallel), every batch array in tile-major order."""
    off = sl.Layout(net.dims).kernel_offsets()
    n_move = off.yhat_off
    S = np.ascontiguousarray(np.concatenate([state[:, :n_move], Y], axis=1).T)
    theta = net.parameters()
    reg = reg or sl.Regularization()
    initial = reg.anchor == "initial"       # the anchors as the driver passes them
    S0 = np.ascontiguousarray(np.concatenate([state0[:, :n_move] * initial, Y], axis=1).T)
    theta0 = theta0 * initial
    M = X.shape[0]
    bounds, widths = np.asarray(bounds, dtype=np.int64), np.asarray(widths, dtype=np.int64)

    def tiles(A):
        flat = np.full(A.size, np.nan)
        pack_tiles(np.ascontiguousarray(A), bounds, flat)
        return flat

    scratch = Scratch(*(np.zeros(n * M) for n in (S.shape[0], S.shape[0], net.dims[-1], max(net.dims))))
    partials = np.full((len(bounds) - 1, theta.size), np.nan)     # every entry written before it is read
    St = tiles(S)
    done = kernel(tiles(X.T), St, theta, off, output_edge(net, loss, p), Rates(alpha, beta, dt), n_steps, n_move,
                  Regularisation(reg.code("lam"), reg.lam, reg.l1_ratio, tiles(S0)),
                  Regularisation(reg.code("mu"), reg.mu, reg.l1_ratio, theta0), scratch, np.zeros_like(theta),
                  Tiles(bounds, widths, partials))
    assert done == n_steps
    unpack_tiles(St, bounds, S)
    return theta, S.T[:, :n_move].copy()

"""Compiled epoch loops: joint state/weight dynamics (sheaf training) and full-batch gradient descent.

Same internal layout as :mod:`sheaflinalg.kernels.force` (samples are
columns, ``S`` rows in the layout's free order, the targets sit in the
``yhat`` rows and are never updated).  One Euler step of the joint dynamics
takes every force from the old state and the old weights:

1. stalks: ``S_new[:n_move] = S[:n_move] + alpha dt (F + regularisation force)``
   and weight velocity ``E[z_l] a_(l-1)^T``, ``sum_s E[z_l]``
   (``E[z_l] = -r_l``; sums over the batch), both from
   :func:`~sheaflinalg.kernels.force.force_sweep` in one pass (with a state
   regularisation: stored forces, then the step);
2. weights: ``W_l += beta dt (velocity + weight regularisation force)``.

The stalks alternate between ``S`` and a second buffer, as in the heat kernel.
The kernels take the named structures of :mod:`sheaflinalg.kernels.structs`.

Regularisation kinds (``REG_CODES``): 0 none, 1 L2 ``lam (s - s0)``,
2 L1 ``lam sign(s - s0)``, 3 elastic net ``lam (l1_ratio sign(d) + (1 - l1_ratio) d)``.
"""

import numpy as np
from numba import njit, prange

from . import renamed
from .force import (BLAS_THRESHOLD, compute_forces_range, force_sweep, force_sweep_blas, layer_velocity_range,
                    tile_width, uses_blas)
from .potentials import apply_phi
from .products import outer_product, outer_sums_range, row_sums
from .structs import GDBuffers, Rates, Regularisation, Scratch, Tiles, layer_offsets, train_step  # noqa: F401

REG_CODES = {"none": 0, "l2": 1, "l1": 2, "elastic": 3}


@njit(cache=True)
def _reg_force(kind, strength, l1_ratio, d):
    """``-grad`` of the regularisation potential at displacement ``d``."""
    if kind == 1:
        return -strength * d
    sgn = 1.0 if d > 0 else (-1.0 if d < 0 else 0.0)
    if kind == 2:
        return -strength * sgn
    return -strength * (l1_ratio * sgn + (1.0 - l1_ratio) * d)


@njit(cache=True)
def weight_velocity(X, S, E, lay, out):
    """``out = Pi_W(delta omega omega^T)`` with the sign of a velocity: ``E[z_l] abar_(l-1)^T`` per layer.

    ``out`` is a flat parameter vector; this is the structure-diffusion term
    of the weight dynamics (``dtheta/dt = beta * out``).

    Parameters
    ----------
    X : ndarray, shape (n_0, M)
        Inputs.
    S, E : ndarray, shape (n_rows, M)
        State and its edge discrepancies.
    lay : KernelLayout
    out : ndarray
        Flat, like ``theta``.
    """
    weight_velocity_range(X, S, E, lay, out, 0, S.shape[1], False)


@njit(cache=True)
def weight_velocity_range(X, S, E, lay, out, s0, s1, accumulate):
    """:func:`weight_velocity` of the samples ``s0 <= s < s1``, added to ``out`` when ``accumulate``."""
    whole = s0 == 0 and s1 == S.shape[1]
    for l in range(1, lay.dims.shape[0]):
        layer_velocity_range(X, S, E, layer_offsets(lay, l), out, accumulate, whole, s0, s1, True)


@njit(cache=True)
def _batch_step(X, Sa, Sb, theta, lay, edge, n_move, a_dt, scale, state_reg, scratch, velocity, T):
    """One step of a whole (sub-)batch ``Sa`` -> ``Sb`` in cache tiles of ``T`` samples; its weight velocity
    goes to ``velocity`` (the cache tiles' sums added in order; BLAS for big layers when ``T`` is the batch).
    ``state_reg`` is the :class:`Regularisation` of the stalks, its anchor ``(n_rows, M)`` like ``Sa``."""
    n_rows, M = Sa.shape
    blas = uses_blas(lay.dims, M, T)
    for t0 in range(0, M, T):
        t1 = min(t0 + T, M)
        if state_reg.kind == 0:
            if blas:
                force_sweep_blas(X, Sa, Sb, theta, lay, edge, scratch, t0, t1, train_step(scale, velocity, t0 > 0),
                                 True)
            else:
                force_sweep(X, Sa, Sb, theta, lay, edge, scratch, t0, t1, train_step(scale, velocity, t0 > 0), None)
        else:
            compute_forces_range(X, Sa, theta, lay, edge, scratch, t0, t1)
            weight_velocity_range(X, Sa, scratch.E, lay, velocity, t0, t1, t0 > 0)
            _regularised_step(Sa, Sb, scratch.F, n_move, a_dt, state_reg, t0, t1)


@njit(cache=True)
def _regularised_step(Sa, Sb, F, n_move, a_dt, reg, t0, t1):
    """``Sb = Sa + a_dt (F + regularisation force)`` on the first ``n_move`` rows (the rest copied), samples
    ``t0 <= s < t1``."""
    u0 = np.uint64(t0)
    u1 = np.uint64(t1)
    kind, lam, l1_ratio, anchor = reg.kind, reg.strength, reg.l1_ratio, reg.anchor
    for r in range(Sa.shape[0]):
        for s in range(u0, u1):
            v = Sa[r, s]
            if r < n_move:
                v += a_dt * (F[r, s] + _reg_force(kind, lam, l1_ratio, v - anchor[r, s]))
            Sb[r, s] = v


@njit(cache=True)
def tile_block(flat, rows, b0, b1):
    """The ``(rows, b1 - b0)`` C-contiguous block of the tile of samples ``b0 <= s < b1`` in a tile-major
    buffer (tile ``k`` of an array of ``rows`` rows sits at ``rows * bounds[k]``)."""
    return flat[rows * b0:rows * b1].reshape(rows, b1 - b0)


@njit(cache=True)
def pack_tiles(A, bounds, flat):
    """``flat`` = the ``(rows, M)`` array ``A`` in tile-major order (:func:`tile_block`)."""
    rows = A.shape[0]
    for k in range(bounds.shape[0] - 1):
        tile_block(flat, rows, bounds[k], bounds[k + 1])[:, :] = A[:, bounds[k]:bounds[k + 1]]


@njit(cache=True)
def unpack_tiles(flat, bounds, A):
    """``A`` = the tile-major ``flat`` as a ``(rows, M)`` array (inverse of :func:`pack_tiles`)."""
    rows = A.shape[0]
    for k in range(bounds.shape[0] - 1):
        A[:, bounds[k]:bounds[k + 1]] = tile_block(flat, rows, bounds[k], bounds[k + 1])


@njit(cache=True)
def _move_weights(theta, grad, partials, weight_reg, b_dt):
    """``grad`` = the tiles' weight velocities added in tile order, then ``theta += b_dt (grad + weight
    regularisation force)``; returns the sum of the new weights (NaN/Inf in any of them propagate into it)."""
    P = theta.shape[0]
    n_tiles = partials.shape[0]
    for p in range(P):
        g = partials[0, p]
        for k in range(1, n_tiles):
            g += partials[k, p]
        grad[p] = g
    total = 0.0
    if weight_reg.kind != 0:
        for p in range(P):
            v = grad[p] + _reg_force(weight_reg.kind, weight_reg.strength, weight_reg.l1_ratio,
                                     theta[p] - weight_reg.anchor[p])
            theta[p] += b_dt * v
            total += theta[p]
    else:
        for p in range(P):
            theta[p] += b_dt * grad[p]
            total += theta[p]
    return total


def _tiled_steps(X, S, theta, lay, edge, rates, n_steps, n_move, state_reg, weight_reg, scratch, grad, tiles):
    """:func:`train_steps` on the tiles ``bounds[k] <= s < bounds[k + 1]`` of the batch, one parallel
    region per step in the ``parallel`` compilation.

    Every batch array is flat and tile-major (:func:`pack_tiles`; one tile:
    the array itself): ``X``, ``S`` (updated in place), ``state_reg.anchor``
    (with a state regularisation; else any one-element array), and the
    arrays of ``scratch``.  Each tile is stepped as a batch of its own
    (cache tiles of ``tiles.widths[k]``, BLAS for its big layer products)
    and writes its weight velocity to ``tiles.partials[k]``; ``grad`` is
    their sum in tile order, so the result does not depend on which thread
    ran which tile.  Parameters and return value as :func:`train_steps`,
    and ``tiles`` (:class:`Tiles`).
    """
    bounds = tiles.bounds
    M = bounds[bounds.shape[0] - 1]
    n_rows = S.shape[0] // M
    n_in, n_out, width = X.shape[0] // M, scratch.phi_buf.shape[0] // M, scratch.work.shape[0] // M
    n_tiles = bounds.shape[0] - 1
    a_dt = rates.alpha * rates.dt
    b_dt = rates.beta * rates.dt
    scale = np.zeros(n_rows)
    scale[:n_move] = a_dt
    # Each step writes the new stalks into the other buffer (see force_sweep); they swap.
    S_next = np.empty_like(S)
    Sa = S
    Sb = S_next
    # The parallel loop reads plain local arrays (fields of the structures taken out before it).
    F, E, phi_buf, work = scratch.F, scratch.E, scratch.phi_buf, scratch.work
    reg_kind, reg_strength, reg_l1_ratio, S_anchor = state_reg.kind, state_reg.strength, state_reg.l1_ratio, \
        state_reg.anchor
    partials, widths = tiles.partials, tiles.widths
    done = n_steps
    for step in range(n_steps):
        # Samples are independent given the weights: forces, weight velocity
        # and new stalks from the old state and weights, tile by tile.
        for k in prange(n_tiles):
            b0, b1 = bounds[k], bounds[k + 1]
            anchor = tile_block(S_anchor, n_rows, b0, b1) if reg_kind != 0 else S_anchor[:1].reshape(1, 1)
            tile_scratch = Scratch(tile_block(F, n_rows, b0, b1), tile_block(E, n_rows, b0, b1),
                                   tile_block(phi_buf, n_out, b0, b1), tile_block(work, width, b0, b1))
            _batch_step(tile_block(X, n_in, b0, b1), tile_block(Sa, n_rows, b0, b1),
                        tile_block(Sb, n_rows, b0, b1), theta, lay, edge, n_move, a_dt, scale,
                        Regularisation(reg_kind, reg_strength, reg_l1_ratio, anchor), tile_scratch, partials[k],
                        widths[k])
        Sa, Sb = Sb, Sa
        total = _move_weights(theta, grad, partials, weight_reg, b_dt)
        # NaN/Inf in the weights propagate into every later force; one sum catches them.
        if not np.isfinite(total):
            done = step + 1
            break
    if done % 2 == 1:
        S[:] = S_next
    return done


# The batch is cut into tiles for threads by its size and the network alone
# (never by the thread count): at least MIN_SAMPLES_PER_TILE samples and
# TILE_WORK multiply-adds per step each, at most MAX_TILES.  Each tile costs
# about a microsecond per step whatever its size (its row loops start over),
# and one parallel region per step a few: smaller batches stay one tile (the
# paper's runs of 300 samples keep their results).
MIN_SAMPLES_PER_TILE = 256
TILE_WORK = 1 << 18
MAX_TILES = 16


def train_tiles(dims, n_rows, M):
    """Tiles of a batch of ``M`` samples for :func:`tiled_steps`: ``(bounds, widths, blas)``.

    ``bounds`` (int64, one more than the tiles) cuts the batch at multiples
    of 8 samples (the last tile takes the rest); ``widths`` are the cache
    tiles of each (:func:`~sheaflinalg.kernels.force.tile_width`); ``blas``
    whether some tile sends layer products to BLAS.  The work of a sample is
    counted as its weight products and its rows.  Depends on the network and
    ``M`` only.

    Examples
    --------
    >>> bounds, widths, blas = train_tiles(np.array([2, 30, 1]), 62, 5000)
    >>> bounds.tolist(), widths.tolist(), blas
    ([0, 2504, 5000], [704, 704], False)
    >>> train_tiles(np.array([2, 30, 1]), 62, 300)[0].tolist()
    [0, 300]
    """
    work = n_rows + sum(int(a) * int(b) for a, b in zip(dims[:-1], dims[1:]))
    n = max(1, min(MAX_TILES, M // MIN_SAMPLES_PER_TILE, M * work // TILE_WORK))
    per = 8 * -(-M // (8 * n))
    bounds = np.array([min(M, k * per) for k in range(n)] + [M], dtype=np.int64)
    widths = np.array([tile_width(dims, n_rows, int(b - a)) for a, b in zip(bounds[:-1], bounds[1:])],
                      dtype=np.int64)
    blas = any(uses_blas(dims, int(b - a), int(w)) for a, b, w in zip(bounds[:-1], bounds[1:], widths))
    return bounds, widths, bool(blas)


# Compiled twice from one source: serially (prange runs as range) and with the
# tiles on numba's threads (only the prange is parallel).  Same tiles, same results.
_ONLY_PRANGE = {"comprehension": False, "reduction": False, "inplace_binop": False, "setitem": False,
                "numpy": False, "stencil": False, "fusion": False}
tiled_steps = njit(cache=True, nogil=True)(renamed(_tiled_steps, "tiled_steps"))
tiled_steps_parallel = njit(cache=True, nogil=True, parallel=_ONLY_PRANGE)(
    renamed(_tiled_steps, "tiled_steps_parallel"))


@njit(cache=True, nogil=True)
def train_steps(X, S, theta, lay, edge, rates, n_steps, n_move, state_reg, weight_reg, scratch, grad, tile=0):
    """Run ``n_steps`` Euler steps of the joint dynamics in place on ``S`` and ``theta``, the batch as one tile.

    Returns the number of steps completed; it is smaller than ``n_steps``
    when the state or the weights stop being finite (checked once per step
    on the cheap running sums).  Several tiles for threads:
    :func:`tiled_steps` with :func:`train_tiles`.

    Parameters
    ----------
    X : ndarray, shape (n_0, M)
        Inputs.
    S : ndarray, shape (n_rows, M)
        Stalks (the ``yhat`` rows hold the targets), advanced in place.
    theta : ndarray
        Flat parameters, advanced in place.
    lay : KernelLayout
    edge : OutputEdge
    rates : Rates
    n_steps : int
    n_move : int
        Number of leading rows of ``S`` that evolve (``lay.yhat_off``).
    state_reg, weight_reg : Regularisation
        Of the stalks (anchor ``(n_rows, M)``, or one element when ``kind``
        is 0) and of the weights (anchor like ``theta``).
    scratch : Scratch
    grad : ndarray
        Like ``theta``: receives the weight velocity of the last step.
    tile : int
        Samples per cache tile (0: :func:`~sheaflinalg.kernels.force.tile_width`);
        the result depends on it only through the order of the batch sums.
    """
    M = S.shape[1]
    T = tile if tile > 0 else tile_width(lay.dims, S.shape[0], M)
    tiles = Tiles(np.array([0, M], dtype=np.int64), np.array([T], dtype=np.int64), np.empty((1, theta.shape[0])))
    anchor = state_reg.anchor
    flat_reg = Regularisation(state_reg.kind, state_reg.strength, state_reg.l1_ratio, anchor.reshape(anchor.size))
    flat = Scratch(scratch.F.reshape(scratch.F.size), scratch.E.reshape(scratch.E.size),
                   scratch.phi_buf.reshape(scratch.phi_buf.size), scratch.work.reshape(scratch.work.size))
    return tiled_steps(X.reshape(X.size), S.reshape(S.size), theta, lay, edge, rates, n_steps, n_move, flat_reg,
                       weight_reg, flat, grad, tiles)


# ---------------------------------------------------------------- gradient descent

@njit(cache=True)
def _add_combination(out, r, c, src, start):
    """``out[r] += c[j] src[j]`` for ``j = start, start + 1, ...`` in that order.

    Four source rows per pass over the samples (the sum is still taken in
    order ``((out + c0 s0) + c1 s1) + ...``), so the output row is loaded
    and stored a quarter as often as with one pass per source row.
    """
    m = c.shape[0]
    M = out.shape[1]
    j = start
    while j + 4 <= m:
        c0, c1, c2, c3 = c[j], c[j + 1], c[j + 2], c[j + 3]
        for s in range(M):
            out[r, s] = (((out[r, s] + c0 * src[j, s]) + c1 * src[j + 1, s]) + c2 * src[j + 2, s]) + c3 * src[j + 3, s]
        j += 4
    while j < m:
        cj = c[j]
        for s in range(M):
            out[r, s] += cj * src[j, s]
        j += 1


@njit(cache=True)
def _forward(X, theta, lay, Z, A):
    """Forward pass into the stacked buffers ``Z``/``A`` (layer ``l``'s rows after those of the layers before it)."""
    dims, woff, boff = lay.dims, lay.woff, lay.boff
    n_layers = dims.shape[0] - 1
    M = X.shape[1]
    row = 0
    for l in range(1, n_layers + 1):
        n = dims[l]
        m = dims[l - 1]
        W = theta[woff[l]:woff[l] + n * m].reshape(n, m)
        b = theta[boff[l]:boff[l] + n]
        Ain = X if l == 1 else A[row - m:row]
        Zl = Z[row:row + n]
        if n * m * M >= BLAS_THRESHOLD:
            np.dot(W, Ain, Zl)
            for i in range(n):
                for s in range(M):
                    Zl[i, s] += b[i]
        elif m == 1:
            for i in range(n):
                bi, w0 = b[i], W[i, 0]
                for s in range(M):
                    Zl[i, s] = bi + w0 * Ain[0, s]
        elif m == 2:
            for i in range(n):
                bi, w0, w1 = b[i], W[i, 0], W[i, 1]
                for s in range(M):
                    Zl[i, s] = (bi + w0 * Ain[0, s]) + w1 * Ain[1, s]
        else:
            for i in range(n):
                bi = b[i]
                for s in range(M):
                    Zl[i, s] = bi
                _add_combination(Zl, i, W[i], Ain, 0)
        if l < n_layers:
            for i in range(n):
                for s in range(M):
                    v = Zl[i, s]
                    A[row + i, s] = v if v >= 0 else 0.0
        row += n


@njit(cache=True)
def _output_delta(Zo, Y, Do, phi_buf, phi_code, loss_code, loss_param):
    """``Do`` = the loss gradient with respect to the output pre-activations ``Zo`` (see :func:`gd_steps`)."""
    n_out, M = Zo.shape
    apply_phi(phi_code, Zo, phi_buf)
    if loss_code == 1:
        for i in range(n_out):
            for s in range(M):
                Do[i, s] = (phi_buf[i, s] - Y[i, s]) / M
        return
    scale = 1.0 / (n_out * M)
    for s in range(M):
        for i in range(n_out):
            d = phi_buf[i, s] - Y[i, s]
            if loss_code == 0:
                g = 2.0 * d
            elif loss_code == 2:
                g = 1.0 if d > 0 else (-1.0 if d < 0 else 0.0)
            elif loss_code == 3:
                g = np.abs(d) ** (loss_param - 1.0) * (1.0 if d > 0 else -1.0) if d != 0 else 0.0
            else:
                g = d if np.abs(d) <= loss_param else (loss_param if d > 0 else -loss_param)
            Do[i, s] = g * scale
        # Back through the Jacobian of phi (identity: nothing to do).
        if phi_code == 1:
            for i in range(n_out):
                y = phi_buf[i, s]
                Do[i, s] *= y * (1.0 - y)
        elif phi_code == 2:
            for i in range(n_out):
                y = phi_buf[i, s]
                Do[i, s] *= 1.0 - y * y
        elif phi_code == 3:
            dot = 0.0
            for i in range(n_out):
                dot += phi_buf[i, s] * Do[i, s]
            for i in range(n_out):
                Do[i, s] = phi_buf[i, s] * (Do[i, s] - dot)


@njit(cache=True)
def _backward(X, theta, lay, top, Z, A, D, grad):
    """Backward pass from the output deltas ``D[top:]``: ``grad W_l = D_l a_(l-1)^T``, ``D_(l-1) = R (W_l^T D_l)``."""
    dims, woff, boff = lay.dims, lay.woff, lay.boff
    M = X.shape[1]
    row = top
    for l in range(dims.shape[0] - 1, 0, -1):
        n = dims[l]
        m = dims[l - 1]
        Dl = D[row:row + n]
        Ain = X if l == 1 else A[row - m:row]
        if n * m * M >= BLAS_THRESHOLD:
            outer_product(Dl, Ain, grad[woff[l]:woff[l] + n * m].reshape(n, m))
            row_sums(Dl, grad[boff[l]:boff[l] + n])
        elif l == 1:
            outer_sums_range(D, row, n, X, 0, m, grad[woff[l]:woff[l] + n * m], grad[boff[l]:boff[l] + n],
                             0, M, False)
        else:
            outer_sums_range(D, row, n, A, row - m, m, grad[woff[l]:woff[l] + n * m],
                             grad[boff[l]:boff[l] + n], 0, M, False)
        if l > 1:
            W = theta[woff[l]:woff[l] + n * m].reshape(n, m)
            Dp = D[row - m:row]
            Zp = Z[row - m:row]
            WT = W.T
            if n * m * M >= BLAS_THRESHOLD:
                np.dot(W.T, Dl, Dp)
                for j in range(m):
                    for s in range(M):
                        Dp[j, s] *= np.float64(Zp[j, s] >= 0)
            else:
                # Row j: sum_i W[i, j] D_l[i] then the ReLU mask, each loop storing one row.
                for j in range(m):
                    w = W[0, j]
                    if n == 1:
                        for s in range(M):
                            Dp[j, s] = (w * Dl[0, s]) * np.float64(Zp[j, s] >= 0)
                        continue
                    for s in range(M):
                        Dp[j, s] = w * Dl[0, s]
                    _add_combination(Dp, j, WT[j], Dl, 1)
                    for s in range(M):
                        Dp[j, s] *= np.float64(Zp[j, s] >= 0)
        row -= m


@njit(cache=True, nogil=True)
def gd_steps(X, Y, theta, lay, phi_code, loss_code, loss_param, lr, n_steps, weight_reg, bufs):
    """``n_steps`` full-batch gradient-descent steps ``theta -= lr grad`` in place.

    Returns the number of steps completed (smaller when the weights stop
    being finite).

    Parameters
    ----------
    X : ndarray, shape (n_0, M)
        Inputs.
    Y : ndarray, shape (n_out, M)
        Targets.
    theta : ndarray
        Flat parameters, moved in place.
    lay : KernelLayout
        Only ``dims``, ``woff`` and ``boff`` are read.
    phi_code : int
        Output activation (``PHI_CODES``).
    loss_code : int
        0 mean squared error over all entries (``2 (phi(z) - y) / (n_out M)``
        back through ``J_phi``), 1 cross-entropy / binary cross-entropy
        averaged over samples (``(phi(z) - y) / M``), 2 L1, 3 p-norm, 4
        Huber (means of the componentwise potential over all entries, back
        through ``J_phi``).
    loss_param : float
        ``p`` of the p-norm or ``tau`` of the Huber loss.
    lr : float
        Learning rate.
    n_steps : int
    weight_reg : Regularisation
        Of the weights (anchor like ``theta``).
    bufs : GDBuffers
    """
    dims = lay.dims
    n_layers = dims.shape[0] - 1
    P = theta.shape[0]
    n_out = dims[n_layers]
    Z, A, D, grad = bufs.Z, bufs.A, bufs.D, bufs.grad
    top = 0
    for l in range(1, n_layers):
        top += dims[l]
    for step in range(n_steps):
        _forward(X, theta, lay, Z, A)
        _output_delta(Z[top:top + n_out], Y, D[top:top + n_out], bufs.phi_buf, phi_code, loss_code, loss_param)
        _backward(X, theta, lay, top, Z, A, D, grad)
        total = 0.0
        for p in range(P):
            g = grad[p]
            if weight_reg.kind != 0:
                g -= _reg_force(weight_reg.kind, weight_reg.strength, weight_reg.l1_ratio,
                                theta[p] - weight_reg.anchor[p])
            theta[p] -= lr * g
            total += theta[p]
        if not np.isfinite(total):
            return step + 1
    return n_steps

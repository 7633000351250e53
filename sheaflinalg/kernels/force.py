"""The one force routine of the neural sheaf, shared by the heat and training kernels.

Internal layout (samples are columns, so inner loops over samples vectorise):

* ``X``: (n_0, M) inputs.
* ``S``: (n_rows, M) free cochain, rows in the layout's free order
  ``z1, a1, ..., ak, z(k+1)[, yhat]`` (offsets from :class:`~sheaflinalg.sheaf.layout.Layout`).
* ``theta``: flat parameters, ``W_l`` row-major at ``woff[l]``, ``b_l`` at ``boff[l]``.
* ``E``: (n_rows, M) edge discrepancies ``(delta omega_bar)_e``.  Edge ``e_i``
  pairs with free block ``i`` (the unit-triangular structure), so ``E`` uses
  the same row offsets: ``E[z_l] = z_l - W_l a_(l-1) - b_l``,
  ``E[a_l] = a_l - R_l z_l``, ``E[yhat] = yhat - phi(z(k+1))``.
* ``F``: (n_rows, M) force ``-grad`` of the discord energy (the velocity / alpha).

Layer ``l`` (1-based) has ``lay.dims[l]`` neurons; ``lay.zoff[l]``, ``lay.aoff[l]`` are
row offsets (``aoff[0] = -1``: ``a_0`` is ``X``).  The kernels take their
offsets, output edge, buffers and step as the named structures of
:mod:`sheaflinalg.kernels.structs` (``lay``: :class:`KernelLayout`, ``edge``:
:class:`OutputEdge`, ``scratch``: :class:`Scratch`, ``step``: :class:`Step`).  The output edge's
terms (``phi``, the potential ``f`` and its gradient) are in :mod:`sheaflinalg.kernels.potentials`.

:func:`force_sweep` is the routine: it either stores ``E`` and ``F``
(:func:`compute_forces`, :func:`compute_forces_range`) or applies one Euler
step layer by layer without storing the hidden forces, optionally with the
weight velocity of the joint dynamics (heat and training kernels).  It works
on a range of samples (kernels sweep big batches in cache-sized tiles); its
sample loops use unsigned indices, which spares numba's negative-index
wraparound test and lets LLVM vectorise them.
"""

import numpy as np
from numba import njit

from .fastmath import FMA, FMA_SUMS
from .potentials import OUTPUT_EDGE_NONE, output_edge_forces
from .products import BLAS_THRESHOLD, outer_product, outer_sums_range, row_sums
from .structs import KernelLayout, LayerOffsets, OutputEdge, Scratch, Step, layer_offsets  # noqa: F401

# Data budget of one tile of samples (its rows of S, E and F): half of a
# 2 MB L2 cache.  Measured on that machine: smaller (L1-sized) tiles lose
# more to loop overheads than they gain, and bigger ones spill to L3.
TILE_BYTES = 1 << 20


@njit(cache=True, fastmath=FMA)
def _affine_residual(W, b, A, Z, out):
    """``out = Z - W A - b``: the weight-edge discrepancy."""
    n, m = W.shape
    M = A.shape[1]
    if n * m * M >= BLAS_THRESHOLD:
        np.dot(W, A, out)
        for i in range(n):
            bi = b[i]
            for s in range(M):
                out[i, s] = Z[i, s] - out[i, s] - bi
    else:
        for i in range(n):
            bi = b[i]
            for s in range(M):
                out[i, s] = Z[i, s] - bi
            for j in range(m):
                w = W[i, j]
                for s in range(M):
                    out[i, s] -= w * A[j, s]


@njit(cache=True, fastmath=FMA)
def _pullback_rows(E, zo, theta, wo, n, m, G, s0, s1):
    """``G[j] = sum_i W[i, j] E[zo + i]`` for ``j < m`` (``W`` is (n, m) at ``theta[wo]``), samples ``s0 <= s < s1``.

    The pull-back ``W_(l+1)^T E[z_(l+1)]`` of the weight-edge discrepancies onto
    the activations ``a_l``.  Row ``j`` accumulates ``i = 0, 1, ...`` in order,
    four rows of ``E`` per pass over the samples.
    """
    for j in range(m):
        w = theta[wo + j]
        for s in range(np.uint64(s0), np.uint64(s1)):
            G[j, s] = w * E[zo, s]
        i = 1
        while i + 4 <= n:
            w1 = theta[wo + i * m + j]
            w2 = theta[wo + (i + 1) * m + j]
            w3 = theta[wo + (i + 2) * m + j]
            w4 = theta[wo + (i + 3) * m + j]
            for s in range(np.uint64(s0), np.uint64(s1)):
                G[j, s] = ((((G[j, s] + w1 * E[zo + i, s]) + w2 * E[zo + i + 1, s])
                            + w3 * E[zo + i + 2, s]) + w4 * E[zo + i + 3, s])
            i += 4
        while i < n:
            w = theta[wo + i * m + j]
            for s in range(np.uint64(s0), np.uint64(s1)):
                G[j, s] += w * E[zo + i, s]
            i += 1


@njit(cache=True, fastmath=FMA)
def _residual_rows(A, ao, S, zo, theta, wo, bo, n, m, E, F, write_force, s0, s1):
    """``E[z] = z - W A - b`` (and ``F[z] = -E[z]`` if ``write_force``) row by row (``A`` rows from ``ao``).

    The arithmetic is ``((z - b) - w_0 a_0) - w_1 a_1 - ...`` in this order on
    every path.  Each loop over the samples stores into one row only: loops
    that store into several rows of possibly aliasing arrays are not
    vectorised by LLVM.  Only the samples ``s0 <= s < s1`` are touched.
    """
    for i in range(n):
        bi = theta[bo + i]
        z = zo + i
        w0 = theta[wo + i * m]
        if m == 1:
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = (S[z, s] - bi) - w0 * A[ao, s]
        elif m == 2:
            w1 = theta[wo + i * m + 1]
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = ((S[z, s] - bi) - w0 * A[ao, s]) - w1 * A[ao + 1, s]
        elif m == 3:
            w1 = theta[wo + i * m + 1]
            w2 = theta[wo + i * m + 2]
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = (((S[z, s] - bi) - w0 * A[ao, s]) - w1 * A[ao + 1, s]) - w2 * A[ao + 2, s]
        else:
            for s in range(np.uint64(s0), np.uint64(s1)):
                E[z, s] = (S[z, s] - bi) - w0 * A[ao, s]
            # Four source rows per pass (same order of operations): the
            # output row is loaded and stored a quarter as often.
            j = 1
            while j + 4 <= m:
                w1 = theta[wo + i * m + j]
                w2 = theta[wo + i * m + j + 1]
                w3 = theta[wo + i * m + j + 2]
                w4 = theta[wo + i * m + j + 3]
                for s in range(np.uint64(s0), np.uint64(s1)):
                    E[z, s] = ((((E[z, s] - w1 * A[ao + j, s]) - w2 * A[ao + j + 1, s])
                                - w3 * A[ao + j + 2, s]) - w4 * A[ao + j + 3, s])
                j += 4
            while j < m:
                w = theta[wo + i * m + j]
                for s in range(np.uint64(s0), np.uint64(s1)):
                    E[z, s] -= w * A[ao + j, s]
                j += 1
        if write_force:
            for s in range(np.uint64(s0), np.uint64(s1)):
                F[z, s] = -E[z, s]


@njit(cache=True)
def compute_forces(X, S, theta, lay, edge, scratch):
    """Edge discrepancies ``scratch.E`` and forces ``scratch.F = -grad (discord energy)`` of the state ``S``.

    The hidden masks are ``R_l = (z_l >= 0)`` of ``S``.  All samples; see
    :func:`compute_forces_range`.

    Parameters
    ----------
    X : ndarray, shape (n_0, M)
        Inputs.
    S : ndarray, shape (n_rows, M)
        Free cochain.
    theta : ndarray
        Flat parameters.
    lay : KernelLayout
    edge : OutputEdge
    scratch : Scratch
        Receives ``E`` and ``F`` (``phi_buf`` and ``work`` are scratch).
    """
    compute_forces_range(X, S, theta, lay, edge, scratch, 0, S.shape[1])


@njit(cache=True)
def tile_width(dims, n_rows, M):
    """Samples per tile for kernels that sweep the batch tile by tile (``M``: one tile).

    A tile's rows of ``S``, ``E`` and ``F`` should stay in the L2 cache
    (``TILE_BYTES``).  One tile when the batch fits, or when some layer
    product of a tile would still go to BLAS (the BLAS path of
    :func:`force_sweep` needs the whole batch).  Thin products
    (e.g. two inputs) of big batches thus run as tiles of hand-written
    loops, which measured faster than BLAS on the whole batch.
    """
    t = (TILE_BYTES // (24 * n_rows)) // 8 * 8
    if t < 64:
        t = 64
    if t >= M:
        return M
    for l in range(1, dims.shape[0]):
        if dims[l] * dims[l - 1] * t >= BLAS_THRESHOLD:
            return M
    return t


@njit(cache=True)
def compute_forces_range(X, S, theta, lay, edge, scratch, s0, s1):
    """:func:`compute_forces` restricted to the samples (columns) ``s0 <= s < s1``.

    Samples are independent, so sweeping the batch in tiles gives exactly
    the same ``E`` and ``F`` as one call on all samples.  Layer products
    above ``BLAS_THRESHOLD`` go to BLAS only when the range is the whole
    batch (hand-written loops otherwise: same results up to the order of
    the floating-point sums).  This is :func:`force_sweep` without a step.
    """
    stored_forces(X, S, theta, lay, edge, scratch, s0, s1, True)


@njit(cache=True, inline="always")
def _hidden_forces(z, a, e, g):
    """Forces on one hidden neuron: ``(e_a, f_z, f_a)``.

    ``e`` is its weight-edge discrepancy ``z - W a_prev - b``, ``g`` the
    pull-back ``(W_next^T E[z_next])_j``; with ``R = (z >= 0)``:
    ``e_a = a - R z``, ``f_z = -e + R e_a``, ``f_a = -e_a + g``.
    """
    if z >= 0:
        ea = a - z
        return ea, ea - e, g - ea
    return a, -e, g - a


# The optional arguments of the step functions below (tol, flips, velocity)
# are either arrays/floats or None; numba compiles one version per
# combination and prunes the branches of the absent ones, so a heat step
# does not pay for the weight velocity nor a training step for the counts.

@njit(cache=True, fastmath=FMA_SUMS)
def step_rows(S, S_out, F, r0, n, scale, tol, flips, s0, s1):
    """``S_out[r] = S[r] + scale[r] F[r]`` for the rows ``r0 <= r < r0 + n``.

    Returns (count of changes ``>= tol`` (0 when ``tol`` is None), sum of
    changes).  ``flips[r]`` (if given) is set to 1 (or, for ``s0 > 0``,
    incremented) when some sample's sign ``>= 0`` changed in row ``r``, else
    to 0 (left as is): nonzero exactly when row ``r`` has a sign change.
    """
    big = 0.0
    total = 0.0
    for r in range(r0, r0 + n):
        c = scale[r]
        fl = False
        for s in range(np.uint64(s0), np.uint64(s1)):
            d = c * F[r, s]
            v = S[r, s] + d
            S_out[r, s] = v
            total += d
            if tol is not None:
                big += 1.0 if abs(d) >= tol else 0.0
            if flips is not None:
                fl |= (v >= 0) ^ (S[r, s] >= 0)    # an OR: cheaper than a count
        if flips is not None:
            flips[r] = np.int64(fl) if s0 == 0 else flips[r] + np.int64(fl)
    return big, total


@njit(cache=True, inline="always")
def _neuron_step(S_out, zr, ar, s, z, a, e, g, cz, ca, tol, flips):
    """One hidden neuron's step into ``S_out[zr, s]``, ``S_out[ar, s]``; returns the sum of the two
    changes, how many are ``>= tol`` (0 when ``tol`` is None) and whether ``z`` changed sign (0 when
    ``flips`` is None)."""
    ea, fz, fa = _hidden_forces(z, a, e, g)
    dz = cz * fz
    da = ca * fa
    nz = z + dz
    S_out[zr, s] = nz
    S_out[ar, s] = a + da
    count = 0.0
    if tol is not None:
        count = (1.0 if abs(dz) >= tol else 0.0) + (1.0 if abs(da) >= tol else 0.0)
    flip = False
    if flips is not None:
        flip = (nz >= 0) ^ (z >= 0)
    return dz + da, count, flip


@njit(cache=True)
def _first_layer_velocity(velocity, accumulate, lo, j, c0, c1, c2, cb):
    """Neuron ``j`` of the first layer (at most three inputs): its weight velocity ``(c0, c1, c2)`` and
    bias velocity ``cb`` into ``velocity`` (added when ``accumulate``; nothing when it is None)."""
    if velocity is None:
        return
    m, wo, bo = lo.m, lo.wo, lo.bo
    if not accumulate:
        for q in range(m):
            velocity[wo + j * m + q] = 0.0
        velocity[bo + j] = 0.0
    velocity[wo + j * m] += c0
    if m >= 2:
        velocity[wo + j * m + 1] += c1
    if m >= 3:
        velocity[wo + j * m + 2] += c2
    velocity[bo + j] += cb


@njit(cache=True, fastmath=FMA_SUMS)
def _step_hidden_layer(X, S, S_out, theta, E, G, lo, inline_residual, scale, tol, velocity, accumulate, flips, s0,
                       s1):
    """Euler step of the hidden layer ``lo`` (:class:`LayerOffsets`), neuron by neuron, without storing
    its forces.

    The weight-edge discrepancy ``e`` of neuron ``j`` is ``E[lo.zo + j]``,
    or, when ``inline_residual`` (first layer, at most three inputs),
    computed here from ``X`` with the arithmetic of :func:`_residual_rows`,
    its weight velocity (``e x^T`` and ``sum e``) accumulated on the way
    into ``velocity`` (if given).  The pull-back ``g`` is
    ``theta[lo.wo_next + j] E[lo.gsrc_row]`` (next layer of width one) or
    ``G[j]``; in the first case the next layer's weight velocity
    ``E[gsrc_row] a_j`` is accumulated here too (its bias velocity is left
    to :func:`force_sweep`).  ``scale`` .. ``flips`` are the fields of the
    :class:`Step` (see there).  Returns and counts as :func:`step_rows`
    (``flips[lo.zo + j]``).  "reassoc" only reorders these sums (and the
    batch sums of the velocity).
    """
    big = 0.0
    total = 0.0
    m, wo, bo, gsrc_row, g_wo = lo.m, lo.wo, lo.bo, lo.gsrc_row, lo.wo_next
    for j in range(lo.n):
        zr = lo.zo + j
        ar = lo.ao + j
        cz = scale[zr]
        ca = scale[ar]
        fl = False
        gv, grow, Gs = (theta[g_wo + j], gsrc_row, E) if gsrc_row >= 0 else (1.0, j, G)
        cn = 0.0
        if inline_residual:
            bi = theta[bo + j]
            w0 = theta[wo + j * m]
            # Absent inputs are padded with a zero weight on row 0: x - 0 * x0 = x exactly.
            w1 = theta[wo + j * m + 1] if m >= 2 else 0.0
            w2 = theta[wo + j * m + 2] if m >= 3 else 0.0
            r1 = 1 if m >= 2 else 0
            r2 = 2 if m >= 3 else 0
            c0 = 0.0
            c1 = 0.0
            c2 = 0.0
            cb = 0.0
            for s in range(np.uint64(s0), np.uint64(s1)):
                z = S[zr, s]
                a = S[ar, s]
                x0 = X[0, s]
                x1 = X[r1, s]
                x2 = X[r2, s]
                e = (((z - bi) - w0 * x0) - w1 * x1) - w2 * x2
                g = Gs[grow, s]
                d, c, f = _neuron_step(S_out, zr, ar, s, z, a, e, gv * g, cz, ca, tol, flips)
                total += d
                big += c
                fl |= f
                if velocity is not None:
                    cn += g * a
                    c0 += e * x0
                    c1 += e * x1
                    c2 += e * x2
                    cb += e
            _first_layer_velocity(velocity, accumulate, lo, j, c0, c1, c2, cb)
        else:
            for s in range(np.uint64(s0), np.uint64(s1)):
                z = S[zr, s]
                a = S[ar, s]
                g = Gs[grow, s]
                d, c, f = _neuron_step(S_out, zr, ar, s, z, a, E[zr, s], gv * g, cz, ca, tol, flips)
                total += d
                big += c
                fl |= f
                if velocity is not None:
                    cn += g * a
        if velocity is not None:
            if gsrc_row >= 0:
                velocity[g_wo + j] = cn if not accumulate else velocity[g_wo + j] + cn
        if flips is not None:
            flips[zr] = np.int64(fl) if s0 == 0 else flips[zr] + np.int64(fl)
    return big, total


@njit(cache=True, fastmath=FMA)
def _weight_edge(X, S, theta, lo, E, F, write_force, whole, s0, s1, blas):
    """``E[z_l] = z_l - W_l a_(l-1) - b_l`` (and ``F[z_l] = -E[z_l]`` if ``write_force``) of the layer
    ``lo`` on the samples ``s0 <= s < s1``: by BLAS for a whole batch of a big layer when ``blas`` is not None."""
    n, m, zo, wo, bo = lo.n, lo.m, lo.zo, lo.wo, lo.bo
    if blas is not None:
        if whole and n * m * S.shape[1] >= BLAS_THRESHOLD:
            A = X if lo.ao_prev < 0 else S[lo.ao_prev:lo.ao_prev + m]
            _affine_residual(theta[wo:wo + n * m].reshape(n, m), theta[bo:bo + n], A, S[zo:zo + n], E[zo:zo + n])
            if write_force:
                for i in range(n):
                    for s in range(np.uint64(s0), np.uint64(s1)):
                        F[zo + i, s] = -E[zo + i, s]
            return
    if lo.ao_prev < 0:
        _residual_rows(X, 0, S, zo, theta, wo, bo, n, m, E, F, write_force, s0, s1)
    else:
        _residual_rows(S, lo.ao_prev, S, zo, theta, wo, bo, n, m, E, F, write_force, s0, s1)


@njit(cache=True)
def _pull_back(E, theta, lo, zo_next, G, whole, s0, s1, blas):
    """``G[:n_l] = W_(l+1)^T E[z_(l+1)]`` onto ``a_l`` of the hidden layer ``lo`` (nothing for a next
    layer of width one: that one is taken inline, see :func:`_step_hidden_layer`); by BLAS as
    :func:`_weight_edge`.  ``zo_next``: row of ``z_(l+1)``."""
    n = lo.n
    n_next = lo.n_next
    if n_next == 1:
        return
    wo_next = lo.wo_next
    if blas is not None:
        if whole and n_next * n * E.shape[1] >= BLAS_THRESHOLD:
            W = theta[wo_next:wo_next + n_next * n].reshape(n_next, n)
            np.dot(W.T, E[zo_next:zo_next + n_next], G[:n])
            return
    _pullback_rows(E, zo_next, theta, wo_next, n_next, n, G, s0, s1)


@njit(cache=True)
def _step_velocity(X, S, E, lo, velocity, accumulate, inline_residual, whole, s0, s1, blas):
    """Weight velocity of the layer ``lo`` after its step (none when ``velocity`` is None): a layer of
    width one after the first rides on the previous layer's step (see :func:`_step_hidden_layer`) but
    for its bias; the first layer's inline residual took its own."""
    if velocity is None:
        return
    if lo.l >= 2 and lo.n == 1:
        _bias_velocity(E, lo.zo, velocity, lo.bo, accumulate, s0, s1)
    elif not inline_residual:
        layer_velocity_range(X, S, E, lo, velocity, accumulate, whole, s0, s1, blas)


def _sweep(X, S, S_out, theta, lay, edge, scratch, s0, s1, step, blas):
    """The one force routine: forces of the state ``S`` on the samples ``s0 <= s < s1``, stored or applied.

    With ``step`` None: ``scratch.E`` receives every edge discrepancy and
    ``scratch.F`` every force (this is :func:`compute_forces_range`).
    Otherwise one forward-Euler step ``S_out[r] = S[r] + scale[r] F[r]`` is
    taken (``step.scale[r]`` is ``alpha dt`` for rows that move, ``0`` for
    pinned rows and targets, which are copied), layer by layer from the
    output back to the first layer, without storing the hidden layers'
    forces (``E`` and ``F`` are then scratch).  ``S_out`` is another array of
    the shape of ``S``: all forces are those of the old state, and separate
    arrays let LLVM vectorise the fused loops.  Returns (number of changes
    ``>= step.tol``, sum of changes).

    Parameters
    ----------
    X : ndarray, shape (n_0, M)
        Inputs.
    S, S_out : ndarray, shape (n_rows, M)
        Old state; the new one (with ``step``).
    theta : ndarray
        Flat parameters.
    lay : KernelLayout
    edge : OutputEdge
    scratch : Scratch
    s0, s1 : int
        The samples ``s0 <= s < s1``.
    step : Step or None
        The step to take (:func:`~sheaflinalg.kernels.structs.heat_step`,
        :func:`~sheaflinalg.kernels.structs.train_step`); None stores the forces.
    blas : None or True
        Whether layer products of the whole batch above ``BLAS_THRESHOLD`` go
        to BLAS.  Compiled twice (see :func:`uses_blas`): ``force_sweep``
        without BLAS and without numba's reference counting (which costs more
        than the arithmetic of a small network's step), and
        ``force_sweep_blas`` with both.
    """
    n_layers = lay.dims.shape[0] - 1
    k = n_layers - 1
    whole = s0 == 0 and s1 == S.shape[1]
    F, E, work = scratch.F, scratch.E, scratch.work
    big = 0.0
    total = 0.0
    for l in range(n_layers, 0, -1):
        lo = layer_offsets(lay, l)
        hidden = l <= k
        inline_residual = step is not None and hidden and l == 1 and lo.m <= 3
        if not inline_residual:
            _weight_edge(X, S, theta, lo, E, F, not hidden, whole, s0, s1, blas)
        if not hidden:
            output_edge_forces(S, F, E, lo, lay.yhat_off, edge, scratch.phi_buf, s0, s1)
            if step is not None:
                b, t = step_rows(S, S_out, F, lo.zo, lo.n, step.scale, step.tol, step.flips, s0, s1)
                big += b
                total += t
                if edge.mode != OUTPUT_EDGE_NONE:
                    b, t = step_rows(S, S_out, F, lay.yhat_off, lo.n, step.scale, step.tol, step.flips, s0, s1)
                    big += b
                    total += t
        else:
            _pull_back(E, theta, lo, lay.zoff[l + 1], work, whole, s0, s1, blas)
            if step is not None:
                b, t = _step_hidden_layer(X, S, S_out, theta, E, work, lo, inline_residual, step.scale, step.tol,
                                          step.velocity, step.accumulate, step.flips, s0, s1)
                big += b
                total += t
            else:
                _store_hidden_forces(S, F, E, work, theta, lo, s0, s1)
        if step is not None:
            _step_velocity(X, S, E, lo, step.velocity, step.accumulate, inline_residual, whole, s0, s1, blas)
    return big, total


force_sweep = njit(cache=True, fastmath=FMA, _nrt=False)(_sweep)
force_sweep_blas = njit(cache=True, fastmath=FMA)(_sweep)


@njit(cache=True)
def stored_forces(X, S, theta, lay, edge, scratch, s0, s1, blas):
    """``scratch.E`` and ``scratch.F`` of the samples ``s0 <= s < s1``: the force routine without a step,
    by the compilation ``blas`` asks for (None: :data:`force_sweep`, callable without reference counting).
    Arguments as :func:`_sweep`."""
    if blas is not None:
        force_sweep_blas(X, S, S, theta, lay, edge, scratch, s0, s1, None, True)
    else:
        force_sweep(X, S, S, theta, lay, edge, scratch, s0, s1, None, None)


@njit(cache=True)
def uses_blas(dims, M, T):
    """Whether a sweep of tiles of ``T`` of the ``M`` samples sends some layer product to BLAS
    (then :data:`force_sweep_blas` with ``blas=True``, else :data:`force_sweep` with ``blas=None``)."""
    if T < M:
        return False
    for l in range(1, dims.shape[0]):
        if dims[l] * dims[l - 1] * M >= BLAS_THRESHOLD:
            return True
    return False


@njit(cache=True, fastmath={"reassoc"})
def _bias_velocity(E, zo, velocity, bo, accumulate, s0, s1):
    """``velocity[bo] (+)= sum_s E[zo, s]`` over ``s0 <= s < s1`` (bias of a layer of width one)."""
    acc = 0.0
    for s in range(np.uint64(s0), np.uint64(s1)):
        acc += E[zo, s]
    velocity[bo] = acc if not accumulate else velocity[bo] + acc


@njit(cache=True, fastmath=FMA)
def _store_hidden_forces(S, F, E, G, theta, lo, s0, s1):
    """``E[a_l]``, ``F[z_l]`` and ``F[a_l]`` of the hidden layer ``lo`` (see :func:`_hidden_forces`).

    Two passes, each storing into at most two rows (LLVM vectorises those loops).
    """
    zo = lo.zo
    ao = lo.ao
    gsrc_row, g_wo = lo.gsrc_row, lo.wo_next
    for j in range(lo.n):
        zr = zo + j
        ar = ao + j
        for s in range(np.uint64(s0), np.uint64(s1)):
            ea, fz, fa = _hidden_forces(S[zr, s], S[ar, s], E[zr, s], 0.0)
            E[ar, s] = ea
            F[zr, s] = fz
        if gsrc_row >= 0:
            gv = theta[g_wo + j]
            for s in range(np.uint64(s0), np.uint64(s1)):
                F[ar, s] = gv * E[gsrc_row, s] - E[ar, s]
        else:
            for s in range(np.uint64(s0), np.uint64(s1)):
                F[ar, s] = G[j, s] - E[ar, s]


@njit(cache=True)
def layer_velocity_range(X, S, E, lo, velocity, accumulate, whole, s0, s1, blas):
    """Weight velocity of the layer ``lo`` (:class:`LayerOffsets`) on the samples ``s0 <= s < s1``:
    ``E[z_l] a_(l-1)^T`` and ``sum E[z_l]`` (whole batches of big layers by BLAS when ``blas`` is not None)."""
    n, m, zo, wo, bo = lo.n, lo.m, lo.zo, lo.wo, lo.bo
    M = S.shape[1]
    if blas is not None:
        if whole and not accumulate and n * m * M >= BLAS_THRESHOLD:
            A = X if lo.ao_prev < 0 else S[lo.ao_prev:lo.ao_prev + m]
            outer_product(E[zo:zo + n], A, velocity[wo:wo + n * m].reshape(n, m))
            row_sums(E[zo:zo + n], velocity[bo:bo + n])
            return
    if lo.ao_prev < 0:
        outer_sums_range(E, zo, n, X, 0, m, velocity[wo:wo + n * m], velocity[bo:bo + n], s0, s1, accumulate)
    else:
        outer_sums_range(E, zo, n, S, lo.ao_prev, m, velocity[wo:wo + n * m], velocity[bo:bo + n], s0, s1,
                         accumulate)

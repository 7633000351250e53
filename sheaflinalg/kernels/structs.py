"""The named structures the kernels take (numba namedtuples), each field documented once, here.

A kernel's Parameters section names the structures it takes; what their fields
mean is written below.  They are plain :func:`collections.namedtuple` classes
defined at module level (numba types them field by field, and its on-disk
cache finds the class again by its module and name).  Optional parts are
empty arrays or flags, never ``None``: a ``None`` field would have to be typed
in every function that reads it.  The few choices that select a compiled
variant (the ``blas`` flag, the ``step`` of the force routine) stay ordinary
arguments, because numba prunes a branch on ``x is None`` only for arguments.

Samples are columns of every batch array (see :mod:`sheaflinalg.kernels.force`).

Structures
----------
KernelLayout
    Row and parameter offsets of the neural sheaf, built by
    :meth:`sheaflinalg.sheaf.layout.Layout.kernel_offsets` and nowhere else.

    * ``dims`` : int64 array ``[n_0, ..., n_(k+1)]`` (layer ``l`` has ``dims[l]`` neurons).
    * ``zoff``, ``aoff`` : int64 arrays indexed by ``l``: row of ``z_l`` / ``a_l``
      in the free order (``aoff[0] = aoff[k+1] = -1``: ``a_0`` is the input).
    * ``woff``, ``boff`` : int64 arrays indexed by ``l``: offset of ``W_l``
      (row-major) / ``b_l`` in the flat parameter vector ``theta``.
    * ``yhat_off`` : int, row of ``yhat`` (``-1`` in the reduced system); also
      the number of leading rows that can move in training.
    * ``edge_offsets``, ``edge_sizes`` : int64 arrays, first row and size of
      every edge block (edge ``e_i`` shares the rows of free block ``i``).
    * ``out_off``, ``n_out`` : int, first row and size of the block that holds
      the network output (``yhat``, or ``z(k+1)`` when reduced).
    * ``n_parameters`` : int, length of ``theta``.

LayerOffsets
    The offsets of one layer ``l``, taken from a ``KernelLayout`` by
    :func:`layer_offsets` (integers: passed to the per-layer routines as
    cheaply as separate arguments).

    * ``l`` : the layer (1-based); ``n``, ``m`` : its width and its input's.
    * ``zo``, ``ao`` : rows of ``z_l`` and ``a_l`` (``-1``: output layer).
    * ``ao_prev`` : row of ``a_(l-1)`` (``-1``: the input ``X``).
    * ``wo``, ``bo`` : offsets of ``W_l`` and ``b_l`` in ``theta``.
    * ``n_next``, ``wo_next`` : width of layer ``l + 1`` (0: none) and
      offset of ``W_(l+1)``.
    * ``gsrc_row`` : row of ``z_(l+1)`` when that layer has width one (its
      pull-back onto ``a_l`` is then taken inline), else ``-1``.

OutputEdge
    How the output edge pulls on the state.

    * ``mode`` : int, ``OUTPUT_EDGE_NONE`` (reduced system),
      ``OUTPUT_EDGE_ADJOINT`` or ``OUTPUT_EDGE_DISCREPANCY``
      (:mod:`sheaflinalg.kernels.force`).
    * ``phi_code`` : int, output activation (``PHI_CODES``).
    * ``loss_kind`` : int, potential ``f`` of the output edge (``LOSS_CODES``).
    * ``loss_param`` : float, ``p`` of the p-norm or ``tau`` of the Huber potential.

Scratch
    Work buffers of the force routine, all ``(rows, M)`` float64.

    * ``F`` : forces (``n_rows`` rows).
    * ``E`` : edge discrepancies (``n_rows`` rows, the free rows' offsets).
    * ``phi_buf`` : ``phi(z(k+1))`` (``n_out`` rows).
    * ``work`` : pull-backs onto a layer (``max(dims)`` rows).

Step
    One forward-Euler step of the force routine (absent: forces are stored).

    * ``scale`` : float64 per row, ``alpha dt`` on rows that move, 0 on
      pinned rows and targets.
    * ``tol`` : float or None, count the changes ``>= tol``.
    * ``velocity`` : flat float64 like ``theta`` or None, receives the weight
      velocity ``E[z_l] a_(l-1)^T``, ``sum_s E[z_l]`` of the old state.
    * ``accumulate`` : bool, add to ``velocity`` instead of overwriting it.
    * ``flips`` : int64 per row or None, nonzero where some sample's sign
      ``>= 0`` changed.

    Built in compiled code by :func:`heat_step` and :func:`train_step` (the
    ``None`` fields select the compiled variant: the force routine hands
    them on as arguments).

Pins
    Pins of the heat equation.

    * ``update_rows`` : int64, rows that move (all but the hard-pinned ones).
    * ``soft_rows`` : int64 ``(n_soft,)``, rows with a soft pin.
    * ``soft_targets`` : float64 ``(n_soft, M)``, their pins.
    * ``soft_gamma`` : float64 ``(n_soft,)``, their strengths.
    * ``rel_lam`` : float, reluctance on every moving row (0: none).
    * ``rel_anchor`` : float64 ``(n_rows, M)``, the reluctance anchors.

Records
    The heat history and its buffers (records ``0, every, 2 every, ...``).

    * ``every`` : int, steps between records (0: none).
    * ``samples`` : int64, samples whose whole state is recorded.
    * ``steps`` : int64 ``(n_rec,)``, step of each record.
    * ``discord`` : float64 ``(n_rec, n_blocks + 2)``, discord by edge block
      summed over the batch, then soft pins, then reluctance.
    * ``sample_discord`` : float64 ``(n_rec, M)``, total discord per sample.
    * ``output`` : float64 ``(n_rec, n_out, M)``, the output rows.
    * ``states`` : float64 ``(n_rec, len(samples), n_rows)``.
    * ``blk_buf`` : float64 ``(n_blocks, M)`` scratch.

CrossingLog
    Sign changes of hidden pre-activations and sliding episodes.

    * ``track`` : bool, log them at all.
    * ``hid_rows``, ``hid_layer``, ``hid_neuron`` : int64, the hidden
      ``z`` rows with their layer and neuron.
    * ``window``, ``min_flips`` : int, an episode is ``>= min_flips`` flips of
      one coordinate, each within ``window`` steps of the previous one.
    * ``crossings`` : int64 ``(max_crossings, 5)``, ``(step, sample, layer,
      neuron, new_active)``.
    * ``episodes`` : int64 ``(max_episodes, 6)``, ``(sample, layer, neuron,
      first_step, last_step, n_flips)``.
    * ``last_cross``, ``ep_start``, ``ep_count`` : int64 ``(n_hidden, M)``,
      step of the last flip, first step and flips of the open episode.

HeatBuffers
    What the heat kernel keeps between calls (it allocates nothing).

    * ``S_prev`` : float64 like ``S``, the second state buffer.
    * ``flips`` : int64 per row, rows with a sign change in the last step.
    * ``scale`` : float64 per row (see ``Step``).
    * ``counters`` : int64 ``(N_COUNTERS,)``, the ``C_*`` slots of
      :mod:`sheaflinalg.kernels.heat`.

Rates
    Rates of the joint dynamics: ``alpha`` (stalks), ``beta`` (weights), ``dt``.

Regularisation
    One regularisation force ``-lam grad`` (kinds in ``REG_CODES`` of
    :mod:`sheaflinalg.kernels.training`).

    * ``kind`` : int (0: none).
    * ``strength`` : float.
    * ``l1_ratio`` : float, share of L1 in the elastic net.
    * ``anchor`` : float64, flat, the displacement is taken from it (the
      stalks' anchor is tile-major like the stalks; unused: one element).

Tiles
    A training batch cut into tiles (:func:`~sheaflinalg.kernels.training.train_tiles`).

    * ``bounds`` : int64, tile ``k`` is ``bounds[k] <= s < bounds[k + 1]``.
    * ``widths`` : int64, cache tile of each.
    * ``partials`` : float64 ``(n_tiles, n_parameters)``, each tile's weight velocity.

GDBuffers
    Gradient descent: ``Z``, ``A``, ``D`` (stacked ``(sum of widths, M)``
    pre-activations, activations, deltas), ``phi_buf`` (``(n_out, M)``) and
    ``grad`` (like ``theta``).

Memberships
    The memberships ``(window, entry)`` of the window levels' problem
    (:func:`sheaflinalg.kernels.levels.hildreth_sweeps`).

    * ``rows``, ``entries`` : int64 arrays, per membership its window and its entry.
    * ``order`` : int64 array, the memberships in sweep order (class by class).
    * ``inverse`` : float64 array, per membership ``1 / weight[entry] + 1 / stiffness``.
    * ``weight`` : float64 array, per entry; ``stiffness`` : float, of every window.
"""

from collections import namedtuple

from numba import njit

KernelLayout = namedtuple("KernelLayout", "dims zoff aoff woff boff yhat_off edge_offsets edge_sizes out_off n_out "
                                          "n_parameters")
LayerOffsets = namedtuple("LayerOffsets", "l n m zo ao ao_prev wo bo n_next wo_next gsrc_row")
OutputEdge = namedtuple("OutputEdge", "mode phi_code loss_kind loss_param")
Scratch = namedtuple("Scratch", "F E phi_buf work")
Step = namedtuple("Step", "scale tol velocity accumulate flips")
Pins = namedtuple("Pins", "update_rows soft_rows soft_targets soft_gamma rel_lam rel_anchor")
Records = namedtuple("Records", "every samples steps discord sample_discord output states blk_buf")
CrossingLog = namedtuple("CrossingLog", "track hid_rows hid_layer hid_neuron window min_flips crossings episodes "
                                        "last_cross ep_start ep_count")
HeatBuffers = namedtuple("HeatBuffers", "S_prev flips scale counters")
Rates = namedtuple("Rates", "alpha beta dt")
Regularisation = namedtuple("Regularisation", "kind strength l1_ratio anchor")
Tiles = namedtuple("Tiles", "bounds widths partials")
GDBuffers = namedtuple("GDBuffers", "Z A D phi_buf grad")
Memberships = namedtuple("Memberships", "rows entries order inverse weight stiffness")


@njit(cache=True, inline="always")
def layer_offsets(lay, l):
    """The :class:`LayerOffsets` of layer ``l`` of the :class:`KernelLayout` ``lay``."""
    last = l == lay.dims.shape[0] - 1
    n_next = 0 if last else lay.dims[l + 1]
    gsrc_row = lay.zoff[l + 1] if n_next == 1 else -1
    return LayerOffsets(l, lay.dims[l], lay.dims[l - 1], lay.zoff[l], lay.aoff[l], lay.aoff[l - 1], lay.woff[l],
                        lay.boff[l], n_next, lay.woff[l + 1], gsrc_row)


@njit(cache=True, inline="always")
def heat_step(scale, tol, flips):
    """The :class:`Step` of the heat equation: changes counted, no weight velocity."""
    return Step(scale, tol, None, False, flips)


@njit(cache=True, inline="always")
def train_step(scale, velocity, accumulate):
    """The :class:`Step` of the joint dynamics: weight velocity, nothing counted."""
    return Step(scale, None, velocity, accumulate, None)

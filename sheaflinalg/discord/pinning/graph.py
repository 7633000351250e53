"""The pinned equilibrium of a graph network: the output pinned to the labels, Filippov sliding on switching
surfaces.

The output is pinned (the output node of the reduced sheaf for an identity
output, ``yhat`` otherwise), the discord is minimised for a frozen activation
pattern, and the pattern is updated from the solution until it is
consistent (pattern iteration, :mod:`~sheaflinalg.sheaf.matrix_free.switching`, and Filippov sliding on ReLU and
max-pool switching surfaces, :mod:`~sheaflinalg.sheaf.matrix_free.filippov`).  The frozen-pattern solve is matrix-free: with ``k`` coordinates held (the
outputs, and the switching-surface coordinates), the minimiser is
``w = w0 + G lam`` where ``w0`` is the forward pass under the pattern (the
unpinned minimiser), the columns of ``G = L^{-1} E`` are one backward and one
forward substitution each (``L^{-1} = delta^{-1} delta^{-T}``,
:class:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary`) and ``lam`` solves the
``k x k`` system ``(E^T G) lam = y - E^T w0`` (the Lagrange conditions of the
held coordinates ``E^T w = y``; a held pair of max-pool entries is the column ``e_i - e_j``, and a group of
entries over inactive ReLUs is no column at all but one coordinate of the system:
:mod:`~sheaflinalg.sheaf.matrix_free.dead_levels`).  A nonlinear
output's node is free: its value minimises the discord as a function of the held values plus the output
edge (:func:`~sheaflinalg.discord.pinning.output_newton.held_outputs`, Newton in ``k`` dimensions), no
re-linearisation of the sheaf.  As for chains (:mod:`~sheaflinalg.discord.pinning.analysis`) a Filippov
equilibrium is found by frozen-pattern solves with the sliding coordinates held.

On a graph with smooth nodes (pattern :data:`~sheaflinalg.network.ops.TANGENT`) the pattern iteration is a
Gauss-Newton iteration (re-linearise at the state, solve the linear pinned problem); it is damped
(:class:`LineSearch`): the full step is tried first and halved until the pinned energy decreases (Armijo).
When every pattern node is smooth and the output is the identity, the steps after the first Gauss-Newton
solve are Newton's, with the nodes' curvature (:mod:`~sheaflinalg.discord.pinning.newton`, the same line
search), which come to rest where the Gauss-Newton iteration crawls (pins far from the forward pass).
"""

import numpy as np

from ...network.graph.forward import evaluate
from ...sheaf.matrix_free.residuals import GraphSheaf, output_adjoint, output_residual
from ...sheaf.matrix_free.switching import iterate_pattern, node_values, read_pattern, same_pattern
from ...sheaf.matrix_free import filippov
from ...sheaf.matrix_free.filippov import settle_surfaces
from ...sheaf.matrix_free.window_levels import LevelsHandoff
from ...sheaf.matrix_free.dead_levels import collapse
from ...sheaf.layout import Layout
from ...sheaf.matrix_free.coboundary import GraphCoboundary
from ..._common.memory import BATCH_FLOOR, FLOAT, check_memory
from .newton import PinnedNewton
from .output_newton import held_outputs
from .schur import TOL, held_values, recycled, schur_cg

#: Relative size of the force below which a state is an equilibrium.
REST = 1e-10
#: Newton steps (the curvature of the smooth nodes) on graphs whose pattern nodes are all smooth, with an
#: identity output; False: the damped Gauss-Newton iteration alone.
SECOND_ORDER = True


def pinned_equilibrium(net, X, Y, max_iter, backend, progress=False):
    """``(state, layout, settled, sliding, damped)`` of the output pinned to ``Y`` (validated, flat ``X`` and
    ``Y``).

    ``sliding[s]`` lists the ``(node, coordinate)`` pairs of sample ``s`` held at 0 (the parents of
    ``relu``/``leaky_relu`` nodes whose equilibrium is on the switching surface) and the ``(node, i, j)``
    entries of max-pool windows held equal; ``damped[s]`` counts the (Gauss-)Newton steps of sample ``s`` that
    were shortened (smooth nodes).  ``backend`` is unused (nothing is factored).  The solves are refused
    before any work when their memory estimate exceeds the memory available; ``progress`` shows the
    conjugate gradients of many outputs (:mod:`~sheaflinalg.discord.pinning.schur`).
    """
    graph = net.graph
    sheaf = GraphSheaf(graph)
    search = None
    solver = _MatrixFree(graph, sheaf.maps, net.output, progress)
    solver.check_memory(X.shape[0])
    layout = solver.layout
    if any(graph.node(n).rule.smooth for n in graph.pattern_nodes):
        search = LineSearch(sheaf, layout, X.shape[0])
    newton = second_order(graph, solver)
    state, pattern, settled, _ = iterate_pattern(solver, graph, X, Y, 1 if newton else max_iter, damp=search,
                                                 handoff=LevelsHandoff(graph) if filippov.LEVELS else None)
    if newton:                              # from the first Gauss-Newton solution
        state, settled = _newton(sheaf, solver, X, state, max_iter, search)
        pattern = sheaf.residuals(X, node_values(graph, layout, state)).pattern
    settled |= at_rest(sheaf, X, state, layout)
    sliding = settle_surfaces(solver, sheaf, X, Y, state, pattern, settled, _pinned_forces(sheaf, X, state, layout),
                              REST, max_iter)
    return state, layout, settled, sliding, np.zeros(X.shape[0], dtype=np.int64) if search is None else search.damped


def second_order(graph, solver):
    """Whether the pinned equilibrium is found by Newton steps (:mod:`~sheaflinalg.discord.pinning.newton`):
    :data:`SECOND_ORDER`, every pattern node smooth, an identity output (held in the reduced layout) with few
    enough outputs for ``G`` (:meth:`_MatrixFree.direct`: the preconditioner keeps it)."""
    nodes = [graph.node(n) for n in graph.pattern_nodes]
    return (SECOND_ORDER and solver.layout.reduced and solver.direct(solver.output.size) and bool(nodes)
            and all(node.rule.smooth for node in nodes))


def _newton(sheaf, solver, X, state, max_iter, search):
    """``(state, rested)`` of :class:`~sheaflinalg.discord.pinning.newton.PinnedNewton` from ``state``, in blocks
    of samples whose ``G`` (held coordinates x free coordinates) fits :attr:`_MatrixFree.BLOCK` rows."""
    layout = solver.layout

    def gradient(x, w):
        _, force = _pinned_forces(sheaf, x, w, layout)(node_values(sheaf.graph, layout, w))
        return -np.concatenate([force[node.name] for node in sheaf.graph.nodes], axis=1)
    block = max(1, solver.BLOCK // solver.output.size)
    rested = np.zeros(X.shape[0], dtype=bool)
    newton = PinnedNewton(sheaf, layout, solver.output, gradient, lambda x, w: at_rest(sheaf, x, w, layout), search)
    for lo in range(0, X.shape[0], block):
        rows = slice(lo, lo + block)
        state[rows], rested[rows] = newton.run(X[rows], state[rows], max_iter, first=lo)
    return state, rested


class LineSearch:
    """Backtracking on the pinned energy ``E = 1/2 sum_v ||e_v||^2`` (pinned coordinates fixed) along
    Gauss-Newton steps: ``old + t (new - old)`` with ``t = 1, 1/2, 1/4, ...`` until
    ``E <= E(old) + ARMIJO t grad E . (new - old)``; :attr:`damped` counts the shortened steps per sample.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.array([[2.0]]), "bias": np.zeros(1)})
    >>> net = sl.Network.from_nodes((1,), [fc, sl.Node("g", "silu", ["fc"])])
    >>> sheaf = GraphSheaf(net.graph)
    >>> search = LineSearch(sheaf, Layout.from_graph(net.graph, reduced=True), 1)
    >>> old = np.array([[2.0, 1.0]])                  # fc = 2, the output g pinned at 1
    >>> search(np.ones((1, 1)), old, old, np.array([0]))   # a zero step is taken whole
    (array([[2., 1.]]), array([False]))
    """

    #: The Armijo constant (the fraction of the linear decrease asked for).
    ARMIJO = 1e-4
    #: Halvings before the search gives up (and takes the full step, as the undamped iteration).
    HALVINGS = 40

    def __init__(self, sheaf, layout, n_samples):
        self.sheaf, self.layout = sheaf, layout
        self.damped = np.zeros(n_samples, dtype=np.int64)

    def energy(self, X, state):
        """Per-sample pinned energy of ``state`` (free cochains, the pinned output in place; a nonlinear output's
        edge included)."""
        graph = self.sheaf.graph
        energy = self.sheaf.energy(self.sheaf.residuals(X, node_values(graph, self.layout, state)))
        if not self.layout.reduced:
            e_y = output_residual(graph.output, state[:, self.layout.free(graph.output_node)],
                                  state[:, self.layout.free("yhat")])
            energy += 0.5 * np.einsum("ij,ij->i", e_y, e_y)
        return energy

    def __call__(self, X, old, new, samples):
        """``(state, shortened)``: the state taken from ``old`` towards ``new`` and whether its step was
        shortened, per sample (rows are the samples ``samples`` of the problem)."""
        step = new - old
        _, force = _pinned_forces(self.sheaf, X, old, self.layout)(node_values(self.sheaf.graph, self.layout, old))
        slope = -sum(np.einsum("ij,ij->i", force[node.name], step[:, self.layout.free(node.name)])
                     for node in self.sheaf.graph.nodes)
        e0, t = self.energy(X, old), np.ones(X.shape[0])
        out = new.copy()
        todo = np.flatnonzero(self.energy(X, new) > e0 + self.ARMIJO * slope)
        for _ in range(self.HALVINGS):
            if todo.size == 0:
                break
            t[todo] /= 2
            out[todo] = old[todo] + t[todo, None] * step[todo]
            worse = self.energy(X[todo], out[todo]) > e0[todo] + self.ARMIJO * t[todo] * slope[todo]
            todo = todo[worse]
        out[todo], t[todo] = new[todo], 1.0     # no decrease found (a kink, or rounding): the full step
        self.damped[samples] += t < 1
        return out, t < 1


class _MatrixFree:
    """Frozen-pattern pinned solves without a matrix (see the module docstring); ``phi`` the output activation:
    ``G`` by substitutions when it is small, else (an identity output; pairs held equal too) conjugate gradients
    on the ``k x k`` system (:func:`~sheaflinalg.discord.pinning.schur.schur_cg`, warm-started from the
    sample's previous solve)."""

    #: Rows (samples x held coordinates) per block of ``G``: one substitution pass solves them all.
    BLOCK = 4096
    #: Most held coordinates solved through ``G`` (more: conjugate gradients, a few dozen products).
    DIRECT_K = 32
    #: Most bytes of one sample's ``G`` and its substitutions (more: conjugate gradients).
    DIRECT_BYTES = 256 * 2**20
    #: Most search directions a sample keeps to precondition its next solve.
    RECYCLE = 512
    #: Relative residual of a first conjugate-gradient solve: tightened to :data:`~.schur.TOL` only for the
    #: samples whose solution reads the pattern it was solved under (inexact Newton: a pattern about to
    #: change needs no solve to rounding).  ``None`` solves every time to ``TOL``.
    LOOSE = 1e-6
    #: Pairs of max-pool entries held equal are columns ``e_i - e_j`` (the Filippov search may hold them).
    holds_pairs = True
    #: How far conjugate gradients go: ``"auto"`` (:meth:`_loose_then_tight`), ``"loose"`` (to :data:`LOOSE`
    #: only) or ``"tight"`` (to ``TOL``); the Filippov search tests a state loose first and asks again for the
    #: one it accepts (:func:`~sheaflinalg.sheaf.matrix_free.filippov.on_switching_surface`).
    precision = "auto"
    #: Whether the last solve stopped at :data:`LOOSE` (``precision`` ``"loose"``, conjugate gradients).
    loose = False

    def __init__(self, graph, maps, phi="identity", progress=False):
        self.graph, self.maps, self.phi, self.progress = graph, maps, phi, progress
        self.layout = Layout.from_graph(graph, reduced=phi == "identity")
        out = self.layout.free(graph.output_node)
        self.output = np.arange(out.start, out.stop)
        self.n_free = Layout.from_graph(graph, reduced=True).n_free
        self._last = {}                 # (sample's bytes, k) -> its last lam: the next solve's start
        self.steps = 0                  # products with the k x k system (conjugate gradients)

    def direct(self, k):
        """Whether ``k`` held coordinates (pairs held equal among them) are solved through ``G`` (few and ``G``
        small; always for a nonlinear output)."""
        small = k <= self.DIRECT_K and k * self.n_free * FLOAT * 3 <= self.DIRECT_BYTES
        return small or self.phi != "identity"

    def memory(self, M, k):
        """Estimated peak bytes of the solves of ``M`` samples with ``k`` held coordinates: the state and the
        forward values, and ``G``'s block with its substitutions (direct) or the iteration's vectors."""
        n = self.n_free * FLOAT
        if not self.direct(k):
            return 8 * M * n + 2 * M * self.RECYCLE * k * FLOAT
        return 2 * M * n + 3 * n * k * min(M, max(1, self.BLOCK // k))

    def check_memory(self, M, available=None):
        """Refuse (:class:`~sheaflinalg._common.memory.InsufficientMemoryError`) before any work when
        :meth:`memory` of the outputs exceeds the memory available."""
        k = self.output.size
        n_bytes = self.memory(M, k)
        if n_bytes >= BATCH_FLOOR:
            check_memory(n_bytes, f"the pinned discord of {M} sample(s) ({k} outputs, {self.n_free} "
                         f"coordinates each)", "pass fewer samples at a time (samples are independent)", available)

    def __call__(self, X, Y, pattern, surface=(), values=None):
        """Free cochains minimising the discord under ``pattern`` with the output at ``Y`` (a nonlinear output:
        ``yhat``) and every ``(node, j)`` of ``surface`` at 0, every ``(node, i, j)`` with ``i`` and ``j`` equal
        (one sample when ``surface`` is given); ``values``: the nodes' values under ``pattern`` when the caller
        has them."""
        system, self.loose = _System(pattern), False
        if any(len(held) == 3 for held in surface):     # dead levels as one coordinate each, not as pairs
            system = _System(pattern, collapse(self.graph, self.layout, pattern, surface))
            surface = system.collapsed.surface
        index, minus = self._columns(surface)
        targets = np.concatenate([Y, np.zeros((Y.shape[0], len(surface)))], axis=1)
        values = evaluate(self.graph, X, pattern).values if values is None else values
        w = np.concatenate([values[node.name] for node in self.graph.nodes], axis=1)
        if self.direct(index.size):
            self._direct(w, targets, Y, system, index, minus)
        else:
            self._loose_then_tight(X, w, targets, system, index, minus)
        system.hold(w, targets, index, minus)
        return w if self.phi == "identity" else np.concatenate([w, Y], axis=1)

    def _columns(self, surface):
        """``(index, minus)``: per held coordinate its position in the free cochain and, for a pair held equal,
        the other's (``-1`` otherwise); the output's first."""
        start = [self.layout.free(held[0]).start for held in surface]
        index = np.concatenate([self.output, [s + held[1] for s, held in zip(start, surface)]]).astype(np.int64)
        minus = np.concatenate([np.full(self.output.size, -1), [s + held[2] if len(held) == 3 else -1
                                                                for s, held in zip(start, surface)]])
        return index, minus.astype(np.int64)

    def _direct(self, w, targets, Y, system, index, minus):
        """``w += G lam`` with the columns of ``G`` substituted, blocks of samples at a time (``targets`` of a
        nonlinear output: replaced by the held outputs' minimiser)."""
        k = index.size
        step = max(1, self.BLOCK // k)
        check_memory(3 * self.n_free * k * min(step, w.shape[0]) * FLOAT, f"a pinned solve through G ({k} held "
                     f"coordinates, {self.n_free} each)", "pin fewer outputs, or a smaller image")
        for lo in range(0, w.shape[0], step):
            rows = slice(lo, lo + step)
            b = w[rows].shape[0]
            # column i of sample m is row m * k + i, under sample m's pattern
            op = GraphCoboundary(self.graph, {name: np.repeat(p[rows], k, axis=0)
                                              for name, p in system.solved.items()}, maps=self.maps, rows=system.rows)
            unit = np.zeros((b * k, self.n_free))
            unit[np.arange(b * k), np.tile(index, b)] = 1.0
            pair = np.tile(minus >= 0, b)
            unit[np.flatnonzero(pair), np.tile(minus, b)[pair]] = -1.0
            G = op.solve(op.solve_transpose(unit)).reshape(b, k, -1)
            A, t0 = held_values(G, index, minus).transpose(0, 2, 1), held_values(w[rows], index, minus)
            if self.phi != "identity":      # the output node is free: its value minimises with phi's edge
                targets[rows] = held_outputs(self.phi, A, t0, Y[rows])[0]
            lam = np.linalg.solve(A, (targets[rows] - t0)[..., None])
            w[rows] += np.einsum("mkn,mk->mn", G, lam[..., 0])

    def _loose_then_tight(self, X, w, targets, system, index, minus):
        """:meth:`_conjugate_gradients` to :data:`LOOSE`, then on to ``TOL`` for the samples whose loose solution
        reads back ``pattern`` (``w`` updated in place: the others' patterns change, their loose state is the
        next pattern's reading)."""
        if self.LOOSE is None or self.LOOSE <= TOL or self.precision != "auto":
            tol = self.LOOSE if self.precision == "loose" and self.LOOSE is not None else TOL
            self.loose = tol > TOL
            self._conjugate_gradients(X, w, targets, system, index, minus, tol)
            return
        loose = w.copy()
        self._conjugate_gradients(X, loose, targets, system, index, minus, self.LOOSE)
        state = loose.copy()
        system.hold(state, targets, index, minus)
        pattern = system.pattern
        read = read_pattern(self.graph, X, node_values(self.graph, self.layout, state), pattern)
        tighten = np.flatnonzero(same_pattern(self.graph, read, pattern, X.shape[0]))
        if tighten.size:            # from the loose lam (the sample's last), on the forward values again
            part = w[tighten]
            self._conjugate_gradients(X[tighten], part, targets[tighten], system.of_samples(tighten), index, minus, TOL)
            loose[tighten] = part
        w[...] = loose

    def _conjugate_gradients(self, X, w, targets, system, index, minus, tol=TOL):
        """``w += L^{-1} E lam`` with ``lam`` by conjugate gradients, all samples in one batch; a sample solved
        before starts from its last ``lam`` and is preconditioned by its last :data:`RECYCLE` search directions
        (:func:`~sheaflinalg.discord.pinning.schur.recycled`: a few flipped activations change ``S`` little),
        both carried onto the columns held both times when the Filippov search changed them (the outputs'
        columns, which hold the system's spread, are always among them)."""
        if index.size > self.output.size:       # the Filippov search's held pairs: more columns than at the start
            check_memory(self.memory(X.shape[0], index.size), f"a pinned solve holding {index.size} columns "
                         f"({self.n_free} coordinates each)", "pin fewer outputs, or a smaller image")
        columns = np.stack([index, minus], axis=1)
        keys = [hash(x.tobytes()) for x in X]
        last = [self._last.get(key) for key in keys]
        last = [None if entry is None else tuple(_carried(entry[0], part, columns) for part in entry[1:])
                for entry in last]
        start, precondition = None, None
        if any(entry is not None for entry in last):
            start = np.stack([np.zeros(index.size) if entry is None else entry[0] for entry in last])
        if all(entry is not None and entry[1].shape[0] for entry in last):
            m = max(entry[1].shape[0] for entry in last)
            Z, SZ = (np.stack([np.pad(entry[j], ((0, m - entry[j].shape[0]), (0, 0))) for entry in last])
                     for j in (1, 2))
            precondition = recycled(Z, SZ)
        op = GraphCoboundary(self.graph, system.solved, maps=self.maps, layout=self.layout, rows=system.rows)
        lam, shift, steps, directions = schur_cg(op, index, targets - held_values(w, index, minus), start=start,
                                                 tol=tol, progress=self.progress, precondition=precondition,
                                                 minus=minus)
        self.steps += steps
        for i, key in enumerate(keys):
            old = (np.empty((0, index.size)),) * 2 if last[i] is None else last[i][1:]
            new = (np.empty((0, index.size)),) * 2 if directions is None else (d[i] for d in directions)
            self._last[key] = (columns, lam[i], *(np.concatenate([n, o])[:self.RECYCLE] for n, o in zip(new, old)))
        w += shift


class _System:
    """The pattern a frozen solve reads (``pattern``) and the one its system is solved under (``solved``, with the
    ``rows`` of :class:`~sheaflinalg.sheaf.matrix_free.coboundary.GraphCoboundary`): the same unless dead levels are
    collapsed (:func:`~sheaflinalg.sheaf.matrix_free.dead_levels.collapse`, one sample)."""

    def __init__(self, pattern, collapsed=None):
        self.pattern, self.collapsed = pattern, collapsed
        self.solved = pattern if collapsed is None else collapsed.pattern
        self.rows = None if collapsed is None else collapsed.rows

    def of_samples(self, samples):
        """The system of the samples ``samples`` (indices) alone."""
        if self.collapsed is None:
            return _System({name: p[samples] for name, p in self.pattern.items()})
        return self                 # one sample: the only one

    def hold(self, w, targets, index, minus):
        """The held coordinates and pairs set exactly (:func:`_hold`) and the collapsed levels spread, in place."""
        if self.collapsed is not None:
            self.collapsed.spread(w)
        _hold(w, targets, index, minus)


def _carried(columns, values, new):
    """``values`` (along the last axis, one per held column of ``columns``, rows ``(index, minus)``) moved onto
    the held columns ``new``: the same column's value, 0 for a column not held before."""
    out = np.zeros(values.shape[:-1] + (new.shape[0],))
    where = {tuple(c): i for i, c in enumerate(columns.tolist())}
    pairs = [(i, where[tuple(c)]) for i, c in enumerate(new.tolist()) if tuple(c) in where]
    if pairs:
        to, of = np.array(pairs).T
        out[..., to] = values[..., of]
    return out


def _hold(w, targets, index, minus):
    """Set the held coordinates of ``w`` (in place) exactly: a coordinate to its target, every entry of a group
    held equal (pairs sharing entries) to the group's first entry."""
    w[:, index[minus < 0]] = targets[:, minus < 0]
    pairs = [(int(i), int(j)) for i, j in zip(index[minus >= 0], minus[minus >= 0])]
    first = {entry: entry for pair in pairs for entry in pair}
    changed = True
    while changed:              # the smallest entry of each group spreads along its pairs
        changed = False
        for i, j in pairs:
            low = min(first[i], first[j])
            if first[i] != low or first[j] != low:
                first[i] = first[j] = low
                changed = True
    if first:
        entries = np.fromiter(first, dtype=np.int64)
        w[:, entries] = w[:, [first[e] for e in entries.tolist()]]


def at_rest(sheaf, X, state, layout):
    """Per sample, whether the force on every unpinned coordinate vanishes (to :data:`REST` relative) under
    the pattern read off ``state``: an equilibrium, whatever pattern the solve that found it assumed."""
    _, force = _pinned_forces(sheaf, X, state, layout)(node_values(sheaf.graph, layout, state))
    largest = np.max([np.abs(f).max(axis=1) for f in force.values()], axis=0)
    scale = 1.0 + np.maximum(np.abs(state).max(axis=1), np.abs(X).max(axis=1))
    return largest <= REST * scale


def _pinned_forces(sheaf, X, state, layout):
    """``forces(values) -> (edges, force)`` of :func:`~sheaflinalg.sheaf.matrix_free.switching.check_surfaces`:
    the residuals and the force on every node at ``values`` (views of ``state``), the pattern read off them,
    the output pinned (an identity output's node; otherwise ``yhat``, whose edge pulls on ``z_out``)."""
    graph = sheaf.graph
    out = graph.output_node

    def forces(values):
        res = sheaf.residuals(X, values)
        force = sheaf.force(res)
        if layout.reduced:
            force[out] = np.zeros_like(force[out])
        else:
            z = values[out]
            force[out] = force[out] + output_adjoint(graph.output, z, output_residual(
                graph.output, z, state[:, layout.free("yhat")]))
        return res.edges, force
    return forces

"""Forward Euler of the nonlinear sheaf heat equation on a graph network (conv, pool, residual, ...).

Every step reads the activation pattern off the current state (``z >= 0``
active, the first maximum of each max-pool window; :class:`GraphSheaf`),
computes every node's edge residual ``e_v`` and the force
``F = -delta_P^T e`` on the free node values, adds the output edge (its local
adjoint ``J_phi^T e_y`` for a nonlinear output, or the plain discrepancy), the
soft pins and the reluctance edges, and moves ``S <- S + alpha dt F`` except
on hard-pinned coordinates.  The work is numpy over the whole batch, node by
node: one Python loop over the nodes per step, none over samples.

The batch is cut into sample blocks by its size and the graph alone
(:func:`~sheaflinalg.network.graph.forward.sample_blocks`), which advance
together step by step in a pool of threads (one BLAS thread each), so the
result is the same bit for bit for any number of threads.

Crossings on graphs: the log has one row ``(step, sample, layer, entry, new)``
for every entry of a pattern node whose pattern changed in Euler step
``step``; ``layer`` is the node's position in topological order (1-based, the
layout's ``layer``), ``entry`` the position in its stalk and ``new`` the new
pattern (1/0 for a mask, the new argmax position in the parent's stalk for a
max-pool).  Sliding episodes are not detected on graphs (``sliding`` and
``sliding_total`` are None).
"""

from dataclasses import dataclass

import numpy as np

from ..._common.blocks import BlockRunner
from ..._common.progress import progress_bar
from ..._common.threads import blas_limit
from ...network.graph.forward import sample_blocks
from ...sheaf.matrix_free.residuals import GraphSheaf, output_adjoint, output_residual
from .adaptive import step_control
from .result import HeatHistory, HeatResult
from .run import check_stable, nonfinite_error


@dataclass
class _Setup:
    """What every sample block shares: the sheaf, the layout's slices, the pins' columns, the step."""

    sheaf: GraphSheaf
    slices: list           # (node name, free slice)
    edges: list            # (residual key, edge slice) of every edge but the output edge
    out: tuple             # (yhat slice, output node slice) or None (reduced)
    output: str
    adjoint: bool
    scale: np.ndarray      # alpha dt on the coordinates that move, 0 on hard pins
    update: np.ndarray     # the coordinates that move
    soft_index: np.ndarray
    soft_gamma: np.ndarray
    lam: float
    edge_blocks: list      # edge slices of the layout's edge blocks
    layers: dict           # piecewise-linear pattern node -> layer (1-based position)
    output_slice: slice    # the output stalk (yhat, or the output node when reduced)
    crossings: int         # the log's size (0: no log)


class StateBlock:
    """The samples ``lo <= s < hi``: their rows of the state, inputs, pins, pattern, records, crossings."""

    def __init__(self, setup, problem, S, lo, hi, rec_samples):
        self.setup, self.lo = setup, lo
        self.S, self.X = S[lo:hi], problem.X[lo:hi]
        self.targets = problem.soft.values[lo:hi]
        self.anchor = problem.anchor[lo:hi] if problem.anchor is not None else None
        self.rec_local = rec_samples[(rec_samples >= lo) & (rec_samples < hi)] - lo
        self.pattern, self.log, self.n_logged, self.records = None, [], 0, []
        self.change = 0.0

    def forces(self, edges=True):
        """``(F, E, pattern)`` of the current state, the pattern read off it (``E`` None unless ``edges``)."""
        st, S = self.setup, self.S
        values = {name: S[:, free] for name, free in st.slices}
        res = st.sheaf.residuals(self.X, values)
        force = st.sheaf.force(res)
        F = np.empty_like(S)
        E = np.empty((S.shape[0], st.edge_blocks[-1].stop)) if edges else None
        for name, free in st.slices:
            F[:, free] = force[name]
        for key, edge in st.edges if edges else ():
            E[:, edge] = res.edges[key]
        if st.out is not None:
            yhat, z = st.out
            e_y = output_residual(st.output, S[:, z], S[:, yhat])
            F[:, yhat] = -e_y
            F[:, z] += output_adjoint(st.output, S[:, z], e_y) if st.adjoint else e_y
            if edges:
                E[:, st.edge_blocks[-1]] = e_y
        if st.soft_index.size:
            F[:, st.soft_index] += st.soft_gamma * (self.targets - S[:, st.soft_index])
        if st.lam > 0:
            F += st.lam * (self.anchor - S)
        return F, E, res.pattern

    def advance(self, step, recording):
        """One Euler step from step ``step``; returns whether the new state is finite."""
        self.measure(step, recording)
        return self.move()

    def measure(self, step, recording, control=None):
        """The forces of the current state (kept for :meth:`move`), its crossings and record; the norms of
        ``control``'s state-dependent nodes there (:class:`~.adaptive.StepControl`) or None."""
        with np.errstate(over="ignore", invalid="ignore"):     # a non-finite state is reported by the caller
            self.F, E, pattern = self.forces(edges=recording)
            self.log_crossings(step, pattern)
            if recording:
                self.record(step, E)
            return None if control is None else control.norms(pattern)

    def move(self, factor=1.0):
        """``S += factor alpha dt F`` of the measured forces; returns whether the new state is finite."""
        with np.errstate(over="ignore", invalid="ignore"):
            change = np.multiply(self.F, self.setup.scale, out=self.F)
            if factor != 1.0:
                change *= factor
            self.change = max(float(change.max()), -float(change.min()))     # NaN propagates
            self.S += change
            return np.isfinite(self.change) and (np.isfinite(np.sum(self.S)) or bool(np.all(np.isfinite(self.S))))

    def log_crossings(self, step, pattern):
        """Log the entries whose pattern differs from the previous state's (that state's step ``step``)."""
        previous, self.pattern = self.pattern, pattern
        if previous is None or not self.setup.crossings:
            return
        for name, rows in pattern.items():
            if name not in self.setup.layers:   # a smooth node: its point moves with the state, no piece to cross
                continue
            entry, sample = np.nonzero((rows != previous[name]).T)    # (entry, sample) order
            if entry.size == 0 or self.n_logged >= self.setup.crossings:
                self.n_logged += entry.size
                continue
            new = rows[sample, entry].astype(np.int64)
            cols = [np.full(entry.size, step), sample + self.lo, np.full(entry.size, self.setup.layers[name]),
                    entry, new]
            self.log.append(np.stack(cols, axis=1)[:self.setup.crossings - self.n_logged])
            self.n_logged += entry.size

    def record(self, step, E):
        """One record of the state at ``step``: discord by edge block, per sample, output, chosen states."""
        st, S = self.setup, self.S
        blocks = [0.5 * np.einsum("ij,ij->i", E[:, b], E[:, b]) for b in st.edge_blocks]
        if st.soft_index.size:
            blocks.append(0.5 * (st.soft_gamma * (S[:, st.soft_index] - self.targets) ** 2).sum(axis=1))
        if st.lam > 0:
            blocks.append(0.5 * st.lam * ((S[:, st.update] - self.anchor[:, st.update]) ** 2).sum(axis=1))
        blocks = np.stack(blocks)
        self.records.append((step, blocks.sum(axis=1), blocks.sum(axis=0), S[:, st.output_slice].copy(),
                             S[self.rec_local].copy()))


def graph_setup(problem, settings):
    lay, graph = problem.layout, problem.net.graph
    slices = [(n.name, lay.free(n.name)) for n in graph.nodes]
    edges = [(b.name[2:], lay.edge(b.name)) for b in lay.edge_blocks if b.name != "e_y"]
    out = None if lay.reduced else (lay.free("yhat"), lay.free(graph.output_node))
    scale = np.full(lay.n_free, problem.settings.alpha * settings.dt)
    scale[problem.hard.index] = 0.0
    return _Setup(sheaf=GraphSheaf(graph, lay.skip_encoding), slices=slices, edges=edges, out=out, output=graph.output,
                  adjoint=settings.output_force == "adjoint", scale=scale, update=np.flatnonzero(scale),
                  soft_index=problem.soft.index, soft_gamma=problem.soft.gamma, lam=problem.lam,
                  edge_blocks=[lay.edge(b.name) for b in lay.edge_blocks],
                  layers={name: k + 1 for k, name in enumerate(n.name for n in graph.nodes)
                          if name in graph.pattern_nodes and not graph.node(name).rule.smooth},
                  crossings=settings.max_crossings if settings.crossings else 0,
                  output_slice=lay.free(lay.output_block))


def run_graph_euler(problem, settings):
    """Forward Euler on a graph network from ``problem`` (:class:`~sheaflinalg.dynamics.problem.HeatProblem`)
    with ``settings`` (:class:`~.settings.EulerSettings`); see :func:`sheaflinalg.heat`.  With state-dependent
    nodes the step follows the state (:mod:`.adaptive`)."""
    control = step_control(problem, settings)
    if control is None:
        check_stable(problem, settings)
    setup = graph_setup(problem, settings)
    S = np.ascontiguousarray(problem.S0.T)
    bounds = sample_blocks(problem.net.graph, problem.n_samples)
    blocks = [StateBlock(setup, problem, S, lo, hi, settings.record_states)
              for lo, hi in zip(bounds[:-1], bounds[1:])]
    every, tol, max_steps = settings.record_every, problem.settings.tol, settings.max_steps
    show = problem.settings.progress and max_steps >= 20_000
    step, converged = 0, False
    with blas_limit(1), BlockRunner(problem.settings.threads, len(blocks)) as runner, \
            progress_bar(max_steps, show, "heat", unit="step") as bar:
        while step < max_steps and not converged:
            recording = every > 0 and step % every == 0
            if control is None:
                finite = runner.map(lambda b: b.advance(step, recording), blocks)
            else:
                finite = _adaptive_step(runner, blocks, step, recording, control)
            step += 1
            if not all(finite):
                dt = settings.dt if control is None else control.dts[-1]
                raise nonfinite_error(step, dt, problem.settings.alpha, problem.bound)
            converged = max(b.change for b in blocks) < tol
            if show and step % 1000 == 0:
                bar.update(1000)
        final = runner.map(StateBlock.forces, blocks)
    for b, (_, E, pattern) in zip(blocks, final):
        b.log_crossings(step, pattern)
        if every > 0 and (not b.records or b.records[-1][0] != step):
            b.record(step, E)
    final_change = max(b.change for b in blocks) if step else float("inf")
    return _result(problem, settings, setup, S, np.concatenate([E for _, E, _ in final]), blocks, step, converged,
                   final_change, control)


def _adaptive_step(runner, blocks, step, recording, control):
    """One step of :mod:`.adaptive`: every block's forces and norms, then ``dt_k`` for all, then the move."""
    norms = runner.map(lambda b: b.measure(step, recording, control), blocks)
    factor = control.factor(step, np.max(norms, axis=0))
    return runner.map(lambda b: b.move(factor), blocks)


def _recorded(blocks, k):
    """Item ``k`` of every record, stacked over records and concatenated over the blocks' samples."""
    return np.concatenate([np.stack([r[k] for r in b.records]) for b in blocks], axis=1)


def heat_history(problem, settings, blocks):
    """The blocks' records as one :class:`~.result.HeatHistory` (None without records)."""
    if settings.record_every == 0:
        return None
    labels = [b.name for b in problem.layout.edge_blocks] + (["e_pin"] if problem.soft.size else []) \
        + (["e_rel"] if problem.lam > 0 else [])
    return HeatHistory(
        steps=np.array([r[0] for r in blocks[0].records], dtype=np.int64),
        discord=sum(np.stack([r[1] for r in b.records]) for b in blocks), labels=labels,
        sample_discord=_recorded(blocks, 2), output=_recorded(blocks, 3), states=_recorded(blocks, 4),
        state_samples=settings.record_states, layout=problem.layout)


def final_discord(problem, setup, S, E):
    """Total discord of each sample's final state: edge blocks, soft pins, reluctance."""
    disc = 0.5 * np.einsum("ij,ij->i", E, E)
    if problem.soft.size:
        disc += 0.5 * (setup.soft_gamma * (S[:, setup.soft_index] - problem.soft.values) ** 2).sum(axis=1)
    if problem.lam > 0:
        rows = setup.update
        disc += 0.5 * problem.lam * ((S[:, rows] - problem.anchor[:, rows]) ** 2).sum(axis=1)
    return disc


def crossing_log(setup, blocks):
    """The blocks' crossing logs as one, sorted by (step, layer, entry, sample), cut to the log's size."""
    logs = [row for b in blocks for row in b.log]
    log = np.concatenate(logs) if logs else np.zeros((0, 5), dtype=np.int64)
    return log[np.lexsort((log[:, 1], log[:, 3], log[:, 2], log[:, 0]))][:setup.crossings]


def _result(problem, settings, setup, S, E, blocks, steps, converged, final_change, control):
    log = crossing_log(setup, blocks)
    return HeatResult(
        state=S, output=S[:, setup.output_slice].copy(), steps=steps, converged=converged,
        final_change=final_change, discord=final_discord(problem, setup, S, E), edge_discrepancy=E,
        history=heat_history(problem, settings, blocks), crossings=log, crossings_total=sum(b.n_logged for b in blocks),
        sliding=None, sliding_total=None, layout=problem.layout, pinned=list(problem.hard.labels),
        lambda_max_bound=problem.bound, dt=settings.dt, alpha=problem.settings.alpha,
        dts=None if control is None else np.array(control.dts),
        state_bounds=None if control is None else np.array(control.bounds))

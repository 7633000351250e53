"""The joint dynamics of state and parameters on a graph network (paper section 5.2, any feedforward graph).

One forward-Euler step, every force from the old state and the old parameters:

1. residuals ``e_v`` of every node's defining edge with the pattern read off
   the state, and the force ``-delta_P^T e`` on every node
   (:class:`~sheaflinalg.sheaf.matrix_free.residuals.GraphSheaf`); the output vertex
   is pinned to the targets and the loss edge pulls the output node
   (:mod:`..output_edge`);
2. the parameter velocity ``-dE/dtheta`` from the same residuals
   (:class:`~sheaflinalg.training.velocity.ParameterVelocity`: shared
   convolution weights summed over positions, batch norm's folded affine);
3. ``w += alpha dt force``, ``theta += beta dt velocity``.

:func:`~sheaflinalg.train` validates the settings and hands a graph network
to :class:`GraphJointRun`, which serves the epoch loop of
:mod:`.epochs` as the chain's run does.  What is chain-only: the compiled
tiles (``threads`` is not used: one thread, BLAS limited to ``blas_threads``),
regularisation, the l1/p-norm/Huber losses (refused) and the stagnation
bound's spectral gap (recorded as None).
"""

import dataclasses
import math

import numpy as np

from ..._common.memory import FLOAT, check_batch
from ..._common.rounds import Rounds
from ...network.errors import GraphNetworkError
from ...network.graph.forward import evaluate
from ...network.model import NetworkOverflowError
from ...sheaf.matrix_free.bound import graph_lambda_max_bound, unbounded_nodes
from ...sheaf.matrix_free.residuals import GraphSheaf
from ...sheaf.layout import Layout
from ..checkpoint import RunShape, network_identity
from ..epochs import EpochRun
from ..output_edge import check_graph_loss, edge_discord, loss_pull
from ..velocity import GraphParameters, ParameterVelocity
from ..history import History, Recorder
from . import stagnation as _stagnation


#: Batch-sized arrays a graph step keeps per node value: state, residuals, forces, the epoch's
#: rollback copy, the prediction and transposed products in flight (an estimate for the memory check).
STEP_COPIES = 8


def check_graph_settings(prob, reg, stagnation):
    """What graph networks do not take, refused before any work (GraphNetworkError naming the way out),
    and the batch's memory."""
    check_graph_loss(prob.loss)
    if reg.lam > 0 or reg.mu > 0:
        raise GraphNetworkError("regularisation (reg) is offered for chains of Linear/ReLU layers only; "
                                "train a graph network with reg=None")
    if stagnation is True:
        raise GraphNetworkError("the stagnation bound's spectral gap is computed for chains of Linear/ReLU layers "
                                "only; train a graph network with stagnation='auto' or False")
    graph = prob.net.graph
    check_batch(prob.X.shape[0], STEP_COPIES * FLOAT * sum(graph.sizes.values()), "training a graph network")


def check_graph_step_size(graph, alpha, dt, X=None):
    """Refuse ``alpha dt lambda_max_bound >= 2`` (forward Euler of the state may diverge), naming the largest dt.

    The bound (:func:`~sheaflinalg.sheaf.matrix_free.bound.graph_lambda_max_bound`) holds for every pattern;
    the targets pin ``yhat`` (a principal submatrix: only lower), and the loss edge's pull on the
    output node has a Jacobian of norm at most 1 (``J^T J`` for mse, ``J_phi`` for cross-entropy).  A
    product of two values (``mul``, ``matmul``) has no bound over every state: its bound is read at the
    forward pass of the inputs ``X`` (the state the equilibrium starts from; not a bound over the run).
    """
    unbounded = unbounded_nodes(graph)
    if unbounded and X is None:
        raise ValueError(f"no step size is stable for every state: node(s) {', '.join(map(repr, unbounded))} "
                         "multiply two values; give the inputs to bound them at the forward pass")
    state = evaluate(graph, X).values if unbounded else None
    bound = graph_lambda_max_bound(graph, state=state)
    where = (f" at the forward pass (node(s) {', '.join(map(repr, unbounded))} multiply two values: no bound "
             "holds for every state)") if unbounded else " from the graph's maps"
    if alpha * dt * bound >= 2.0:
        raise ValueError(f"unstable step size: alpha * dt * lambda_max_bound = {alpha * dt * bound:.3g} >= 2 "
                         f"(lambda_max_bound = {bound:.4g}{where}); use dt < {2.0 / (alpha * bound):.3g}")


class GraphJointRun(EpochRun):
    """One joint-dynamics run on a graph network: parameters ``theta``, node values, history.

    The state is every node's value, ``{node: (M, size)}``; :attr:`S` is the free
    cochain in the layout's order as the chain's run keeps it (``(n_free, M)``,
    ``yhat`` rows = the targets).
    """

    def __init__(self, prob, cfg):
        self.prob, self.cfg, self.net = prob, cfg, prob.net
        graph = prob.net.graph
        self.graph = graph
        self.params = GraphParameters(graph)
        self.theta = self.params.flat()
        self.velocity = ParameterVelocity(graph)
        self.layout = Layout.from_graph(graph)
        self.n_move = self.layout.n_free - graph.sizes[graph.output_node]
        self.rng = np.random.default_rng(cfg.seed)
        self.rng_start = self.rng.bit_generator.state
        self.values = self.start_state(cfg.init)
        self.history = History(method="sheaf", loss=prob.loss, edge_names=[b.name for b in self.layout.edge_blocks])
        self.rec = Recorder(self.history, prob.net, prob.X, prob.Y, prob.X_test, prob.Y_test, prob.loss,
                            prob.loss_param, self.theta, params=self.params)
        self.step = 0
        self.rounds = Rounds(cfg.epoch_steps)   # rounds of ~0.1 s: Ctrl-C is honoured between them
        self.grad = np.empty_like(self.theta)
        self.fixed_sq = float(np.sum(prob.X ** 2) + np.sum(prob.Y ** 2)
                              + prob.X.shape[0] * sum(b.size for b in self.layout.boundary_blocks if b.kind == "ones"))

    # ---------------------------------------------------------------- state
    def start_state(self, method):
        """Every node's value ``{node: (M, size)}`` from an init name or an ``(M, n_move or n_free)`` array."""
        X, graph, M = self.prob.X, self.graph, self.prob.X.shape[0]
        if isinstance(method, str) and method == "forward":
            try:
                values = evaluate(self.params.graph(self.theta), X).values
            except NetworkOverflowError:     # parameters grown past float64: the epoch reports the divergence
                return {node.name: np.full((M, graph.sizes[node.name]), np.nan) for node in graph.nodes}
            return {node.name: np.array(values[node.name]) for node in graph.nodes}
        if isinstance(method, str):
            flat = (self.rng.standard_normal((M, self.n_move)) if method == "random" else np.zeros((M, self.n_move)))
        else:
            flat = np.asarray(method, dtype=np.float64)
            if flat.shape not in ((M, self.n_move), (M, self.layout.n_free)):
                raise ValueError(f"init array must have shape ({M}, {self.n_move}) (every node's value in the "
                                 f"layout's order, optionally followed by yhat), got {flat.shape}")
            if not np.all(np.isfinite(flat)):
                raise ValueError("init array holds NaN or Inf")
        return {b.name: np.array(flat[:, b.slice]) for b in self.layout.free_blocks if b.name != "yhat"}

    @property
    def S(self):
        """The free cochain ``(n_free, M)`` in the layout's order (``yhat`` rows hold the targets)."""
        S = np.empty((self.layout.n_free, self.prob.X.shape[0]))
        for b in self.layout.free_blocks:
            S[b.slice] = (self.prob.Y if b.name == "yhat" else self.values[b.name]).T
        return S

    def rows(self):
        return self.S.T.copy()

    def restore(self, saved):
        """Every node's value from a checkpoint's free cochain ``S`` ``(n_free, M)``."""
        self.values = {b.name: np.ascontiguousarray(saved["S"][b.slice].T) for b in self.layout.free_blocks
                       if b.name != "yhat"}

    # ---------------------------------------------------------------- dynamics
    def forces(self, graph):
        """``(residuals, force, e_y)`` of the current state under ``graph``'s parameters."""
        sheaf = GraphSheaf(graph)
        res = sheaf.residuals(self.prob.X, self.values)
        force = sheaf.force(res)
        out = graph.output_node
        pull, e_y = loss_pull(graph.output, self.prob.loss, self.values[out], self.prob.Y)
        force[out] += pull
        return res, force, e_y

    def steps(self, n):
        """``n`` Euler steps; returns the steps done (fewer when the parameters or the state stop being finite)."""
        cfg = self.cfg
        a_dt, b_dt = cfg.alpha * cfg.dt, cfg.beta * cfg.dt
        for k in range(n):
            with np.errstate(over="ignore", invalid="ignore"):
                res, force, _ = self.forces(self.params.graph(self.theta))
                self.velocity.flat(self.params, self.prob.X, self.values, res.edges, out=self.grad)
                for name, f in force.items():
                    self.values[name] += a_dt * f
                self.theta += b_dt * self.grad
                if not (np.isfinite(np.sum(self.theta)) and all(np.isfinite(np.sum(v)) for v in self.values.values())):
                    return k
        return n

    # ---------------------------------------------------------------- records
    def diagnose(self):
        """Total/per-edge discord, edge-vector norm and extended-cochain norm of the current state."""
        res, _, e_y = self.forces(self.params.graph(self.theta))
        per_edge = [float(np.sum(edge_discord(res.edges[b.name[2:]]))) for b in self.layout.edge_blocks[:-1]]
        per_edge.append(float(np.sum(edge_discord(e_y))))
        norm_sq = sum(float(np.sum(e * e)) for e in res.edges.values()) + float(np.sum(e_y * e_y))
        state_norm = math.sqrt(sum(float(np.sum(v * v)) for v in self.values.values()) + self.fixed_sq)
        return float(sum(per_edge)), np.array(per_edge), math.sqrt(norm_sq), state_norm

    def begin(self):
        """Record the initial state (the stagnation bound's gap is chain-only: None); returns the first epoch."""
        total, per_edge, disagreement, state_norm = self.diagnose()
        self.rec.record(0, 0, self.theta, total, per_edge, state_norm)
        _stagnation.start(self.history.stagnation, self.cfg.alpha, self.cfg.beta, disagreement, state_norm)
        return 1

    def run_epoch(self, epoch):
        """One epoch of steps, recorded when due; False (state rolled back) if it diverged."""
        cfg = self.cfg
        n = min(cfg.epoch_steps, cfg.steps - self.step)
        if epoch > 1 and not cfg.warm_start:
            self.values = self.start_state(cfg.restart)
        theta_prev, values_prev = self.theta.copy(), {k: v.copy() for k, v in self.values.items()}
        done = self.rounds.run(n, self.steps)
        self.step += done
        finite = done == n
        if finite and (epoch % cfg.record_every == 0 or epoch == cfg.n_epochs):
            finite = self.record(epoch)
        if not finite:
            self.theta[:], self.values = theta_prev, values_prev
        return finite

    # ---------------------------------------------------------------- checkpoints
    def identity(self):
        """The network's part of the checkpoint's fingerprint: the graph's structure (parameters are arrays)."""
        return network_identity(self.net)

    def expected(self):
        """What a checkpoint of this run must hold (:class:`~sheaflinalg.training.checkpoint.RunShape`)."""
        cfg = self.cfg
        n_trained = len({name for name, *_ in self.params.slices})
        return RunShape({"theta": self.theta.shape, "S": (self.layout.n_free, self.prob.X.shape[0])},
                        ("S", self.layout.free("yhat"), self.prob.Y.T), cfg.steps, cfg.epoch_steps,
                        cfg.record_every, self.rng, self.history, n_trained, cfg.alpha, cfg.beta)

    def save(self, ckpt, epoch):
        ckpt.save({"theta": self.theta, "S": self.S},
                  {"epoch": epoch, "step": self.step, "rng": self.rng.bit_generator.state,
                   "history": dataclasses.asdict(self.history)})


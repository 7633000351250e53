"""``heat()``: the restricted sheaf heat equation, by forward Euler, implicitly or exactly: settings, then dispatch.

The options every method uses are validated into
:class:`~sheaflinalg.dynamics.problem.SharedSettings`, each method's own into its
settings (:class:`~sheaflinalg.dynamics.euler.settings.EulerSettings`,
:class:`~sheaflinalg.dynamics.exact.settings.ExactSettings`); an option the chosen
method does not use is refused (:func:`sheaflinalg._common.options.method_options`).
Nothing runs before every option is checked.
"""

from .._common.options import Default, method_options
from .._common.validation import as_samples
from ..network.model import check_network
from . import problem as _problem
from .euler.graph import run_graph_euler
from .euler.run import run_euler
from .euler.settings import DEFAULTS as EULER_DEFAULTS
from .euler.settings import EulerSettings
from .exact.flow import check_exact_memory, run_exact
from .exact.settings import DEFAULTS as EXACT_DEFAULTS
from .exact.settings import ExactSettings
from .implicit.run import run_graph_implicit
from .implicit.settings import DEFAULTS as IMPLICIT_DEFAULTS
from .implicit.settings import ImplicitSettings
from ..network.paths import GRAPH, engine, require_chain
from ..sheaf.skip_edges.encoding import DEFAULT_SKIP_ENCODING, is_split

#: The options of each method beyond those every method uses.
METHODS = {"euler": tuple(EULER_DEFAULTS), "exact": tuple(EXACT_DEFAULTS), "implicit": tuple(IMPLICIT_DEFAULTS)}
_E, _X, _I = ({name: Default(value) for name, value in d.items()}
              for d in (EULER_DEFAULTS, EXACT_DEFAULTS, IMPLICIT_DEFAULTS))


def heat(net, X, alpha=1.0, dt=_E["dt"], max_steps=_E["max_steps"], tol=1e-12, init="random", seed=None,
         pins=None, soft_pins=None, reluctance=None, record_every=_E["record_every"],
         record_states=_E["record_states"], output_force=_E["output_force"], reduced=None,
         crossings=_E["crossings"], max_crossings=_E["max_crossings"], sliding_window=_E["sliding_window"],
         sliding_min_flips=_E["sliding_min_flips"], check_stability=_E["check_stability"],
         adaptive=_E["adaptive"], progress=True,
         threads=None, method="euler", t_max=_X["t_max"], max_events=_X["max_events"], cg_tol=_I["cg_tol"],
         cg_max_iter=_I["cg_max_iter"], skip_encoding=DEFAULT_SKIP_ENCODING):
    """Run the restricted sheaf heat equation by forward Euler (implicitly, or exactly) until it settles.

    Options shown as ``<default ...>`` belong to one method; giving one to the other method
    is refused (ValueError naming the option and the method).

    A graph network (:attr:`Network.is_graph`) runs forward Euler node by node with the
    pattern read off the state every step (:mod:`sheaflinalg.dynamics.euler.graph`), or the
    linearly implicit scheme (``method="implicit"``, graph networks only); the exact flow takes
    chains only.

    Parameters
    ----------
    net : Network
        A chain, or a graph network (``method="euler"``).
    X : array_like, shape (n_samples, n_0) or (n_0,)
        Inputs (always pinned; a graph network also takes ``(n_samples, *input_shape)``).
        Samples are independent sheaves run together.
    alpha : float
        Diffusion rate.
    dt : float
        Euler step (default 0.01); refused if ``alpha * dt * lambda_max_bound >= 2`` (see
        :func:`lambda_max_bound`), with the largest stable ``dt`` in the message.  Implicit: the first
        step (default 1e4), doubled after every step taken, halved after every step refused.
    max_steps : int
        Euler steps at most (default 100000; implicit: 500).
    tol : float
        Euler, implicit: stop when the largest change of any free coordinate in one step is below ``tol``.
        Exact: stop within ``tol`` (Euclidean distance) of the equilibrium.
    init : {"random", "zeros", "forward"} or array_like
        Initial free stalks (see :func:`sheaflinalg.sheaf.state.initial_state`);
        an array has shape (n_samples, n_free) in the layout's free order.
    seed : int, optional
        Seed of ``init="random"``.
    pins : dict, optional
        Hard pins ``{selector: values}`` (:mod:`sheaflinalg.sheaf.pins.specs`), e.g.
        ``{"a1[2]": 0.5}`` or ``{"yhat": Y}`` (output pinned to labels); on a graph network
        nodes and channels, e.g. ``{"conv1[channel=2]": 0.0}``.
    soft_pins : SoftPins or (targets, gamma), optional
        Penalty edges ``gamma/2 (s_j - p_j)^2``.
    reluctance : float or Reluctance, optional
        Reluctance edges on every free coordinate.
    record_every : int
        Euler, implicit: record discord by edge block, per-sample discord and the output every
        this many steps (and at the last step); 0 (default) records nothing.
    record_states : sequence of int, optional
        Euler, implicit: samples whose full states are recorded as well.
    output_force : {"adjoint", "discrepancy"}
        Euler, nonlinear output: ``J_phi^T (phi(z) - yhat)`` (eq. final-dynamics, default) or
        the plain discrepancy ``phi(z) - yhat``.
    reduced : bool, optional
        Use the reduced system (no output vertex).  Default: for identity
        output without pins on ``yhat``.
    crossings : bool
        Euler, implicit: log sign changes of hidden pre-activations and sliding episodes (default True;
        on a graph network every pattern change, without sliding episodes).
    max_crossings : int
        Euler: size of the crossing log (the count goes on past it; default 100000).
    sliding_window, sliding_min_flips : int
        Euler: a sliding episode is ``>= sliding_min_flips`` flips (default 3) of one coordinate,
        each within ``sliding_window`` steps (default 5) of the previous one.
    check_stability : bool
        Euler: refuse an unstable ``dt`` (default).  A NaN/Inf mid-run always raises
        :class:`NonFiniteStateError` naming the step.
    adaptive : bool, optional
        Euler on a graph network with state-dependent nodes (products of two values, normalisations):
        the step bound is read at every step's state (:mod:`sheaflinalg.dynamics.euler.adaptive`) and an
        unstable ``dt`` is halved until it is stable there (True, the default there; the steps taken are the
        result's ``dts``), or refused naming the nodes (False).  No effect on other networks (their bound
        holds for every state: ``dt`` is checked once).
    progress : bool
        tqdm progress bar: Euler runs of more than 20000 steps, implicit runs of 100 steps or more
        (``max_steps``), exact flows of 1000 samples or more.
    threads : int, optional
        Threads that share the batch (the kernels release the GIL); any positive integer,
        default :func:`sheaflinalg.get_num_threads`.  A batch is cut into parts by its size
        alone (Euler: at least 128 samples, at most 16 parts), so the result is the same bit
        for bit for any number of threads (stopping step, states, crossings, records; see
        :mod:`sheaflinalg.dynamics.euler.parts`).  Implicit: two threads share the coboundary's
        products node by node, the same result bit for bit.
    method : {"euler", "exact", "implicit"}
        ``"implicit"``: graph networks only, the linearly implicit (Rosenbrock-Euler) scheme
        ``(I + alpha dt L(x_k)) d = alpha dt F(x_k)``, ``L`` the Gauss-Newton Hessian (the sheaf Laplacian
        at the state), solved by preconditioned conjugate gradients, every sample's ``dt`` under a
        step control that never lets its energy rise (:mod:`sheaflinalg.dynamics.implicit.run`); the
        force is the energy's gradient (``output_force="adjoint"``).  ``"exact"`` integrates the continuous flow exactly, segment by segment
        between ReLU switches, with Filippov sliding on switching surfaces
        (:mod:`sheaflinalg.dynamics.exact`); identity output only (a nonlinear
        output is not piecewise affine and is refused).
    t_max : float, optional
        Exact: stop at this time (default: run to the equilibrium).
    max_events : int
        Exact: largest number of events per sample (default 10000; then it stops, not converged,
        with a ``RuntimeWarning``; ``stopped_at_max_events`` of the result marks those samples).
    cg_tol : float
        Implicit: the relative residual at which conjugate gradients stop (default 1e-10).
    cg_max_iter : int
        Implicit: conjugate-gradient iterations per step at most (default 200; a truncated solve is
        still a descent direction).
    skip_encoding : {"sum", "edges"}
        ``"edges"``: the paper's encoding of skip connections (one edge per parent of an ``add`` or
        ``concat`` node, :mod:`sheaflinalg.sheaf.skip_edges.encoding`), ``method="euler"``: the flow
        settles at the least-squares state of the tall system (for the pattern it reaches), not at the
        forward pass.  The records' edge blocks are then that layout's.  ``method="implicit"`` takes
        ``"sum"`` only on a network with additions or concatenations.

    Returns
    -------
    HeatResult or ExactHeatResult
        Both are :class:`~sheaflinalg.dynamics.result.FlowResult`;
        :class:`~sheaflinalg.dynamics.exact.result.ExactHeatResult` for ``method="exact"``,
        :class:`~sheaflinalg.dynamics.implicit.run.ImplicitHeatResult` (a ``HeatResult``) for
        ``method="implicit"``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> res = sl.heat(net, [0.5, -1.0], dt=0.05, tol=1e-13, seed=1)
    >>> res.converged, bool(np.allclose(res.output, net.forward([[0.5, -1.0]]), atol=1e-10))
    (True, True)
    >>> sl.heat(net, [0.5, -1.0], method="exact", dt=0.05)
    Traceback (most recent call last):
    ...
    ValueError: heat(method='exact') does not use dt (an option of method='euler' or method='implicit' only); remove it or choose that method
    """
    check_network(net, graphs=True)
    options = dict(dt=dt, max_steps=max_steps, record_every=record_every, record_states=record_states,
                   output_force=output_force, crossings=crossings, max_crossings=max_crossings,
                   sliding_window=sliding_window, sliding_min_flips=sliding_min_flips,
                   check_stability=check_stability, adaptive=adaptive, t_max=t_max, max_events=max_events,
                   cg_tol=cg_tol, cg_max_iter=cg_max_iter)
    if method == "implicit":        # its own defaults of the options it shares with Euler
        options.update({name: _I[name] for name, value in options.items() if name in _I and value is _E.get(name)})
    own = method_options("heat", method, METHODS, options)
    if method == "exact":
        require_chain(net, "heat(method='exact')", "use method='euler'")
    if method == "implicit":
        require_graph(net)
    X, _ = as_samples(X, net.n_inputs, input_shape=net.input_shape)
    shared = _problem.SharedSettings.validated(alpha, tol, init, seed, threads, progress, skip_encoding)
    if method == "implicit" and shared.skip_encoding == "edges" and any(is_split(n, "edges") for n in net.graph.nodes):
        raise ValueError("heat(method='implicit') takes skip_encoding='sum' only on a network with add or concat "
                         "nodes (its Laplacian solves are the default encoding's); use method='euler'")
    reduced = _problem.check_reduced(net, reduced, pins, soft_pins)
    if method == "exact":
        settings, run = ExactSettings.validated(net, **own), run_exact
        check_exact_memory(net, X.shape[0], shared.threads)
    elif method == "implicit":
        settings, run = ImplicitSettings.validated(X.shape[0], **own), run_graph_implicit
    else:
        settings = EulerSettings.validated(X.shape[0], **own)
        run = run_graph_euler if engine(net) == GRAPH else run_euler
    result = run(_problem.prepare(net, X, shared, pins, soft_pins, reluctance, reduced), settings)
    result.path = engine(net)
    return result


def require_graph(net):
    """Refuse a chain for ``method="implicit"`` (a chain runs the compiled Euler kernels; import it as a graph)."""
    if engine(net) != GRAPH:
        raise ValueError("heat(method='implicit') takes a graph network (Network.is_graph); this network is a "
                         "chain: use method='euler' or method='exact', or build it as a graph "
                         "(Network.from_nodes, Network.from_torch)")

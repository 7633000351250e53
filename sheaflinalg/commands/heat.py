"""``sheaflinalg heat``: run the sheaf heat equation (inference by diffusion), with optional pins.

A graph network file (``--network``) runs forward Euler on the graph, or the linearly implicit scheme
(``--method implicit``: graph networks only, a few steps where Euler needs many; the exact flow takes
chains only).  Options of one method (``--dt``, ``--max-steps``, ``--record-every`` for Euler and the
implicit scheme, ``--output-force`` for Euler; ``--t-max`` for the exact flow) are passed to :func:`sheaflinalg.heat` only when given,
so the API's rule refuses one given to the other method.
"""

import numpy as np

from .._common.atomic import save_npz
from . import add_network_options, add_output, network_from_args, number, refuse_ignored
from ..network.paths import GRAPH, engine

HELP = "run the restricted sheaf heat equation to the forward pass (or a pinned equilibrium)"


def add_arguments(parser):
    add_network_options(parser, "2,4,1")
    parser.add_argument("--seed", type=number("--seed", int, minimum=0), default=0,
                        help="seed of the network, inputs and stalks (default 0)")
    parser.add_argument("--samples", type=number("--samples", int, minimum=1), default=None,
                        help="number of inputs, uniform on [-2,2]^n0 (default 1)")
    parser.add_argument("--input", metavar="X1,X2,...", help="one explicit input instead of random ones")
    parser.add_argument("--method", default="euler", choices=("euler", "exact", "implicit"),
                        help="forward Euler (default), the exact piecewise-affine flow (chains, identity output) or "
                             "the linearly implicit scheme (graph networks)")
    parser.add_argument("--t-max", type=number("--t-max", positive=True), default=None,
                        help="--method exact: stop at this time")
    parser.add_argument("--dt", type=number("--dt", positive=True), default=None, help="Euler step (default 0.01; implicit: the first step, 1e4)")
    parser.add_argument("--alpha", type=number("--alpha", positive=True), default=1.0,
                        help="diffusion rate (default 1)")
    parser.add_argument("--max-steps", type=number("--max-steps", int, minimum=0), default=None,
                        help="step limit (default 100000; implicit: 500)")
    parser.add_argument("--tol", type=number("--tol", minimum=0.0), default=1e-12,
                        help="stop when the largest change is below (default 1e-12)")
    parser.add_argument("--init", default="random", choices=("random", "zeros", "forward"),
                        help="initial stalks (default random)")
    parser.add_argument("--pin", action="append", default=[], metavar="SEL=VALUE",
                        help="hard pin, e.g. 'a1[0]=0.5', 'yhat=1' or 'conv1[channel=2]=0' (repeatable)")
    parser.add_argument("--soft-pin", action="append", default=[], metavar="SEL=VALUE",
                        help="soft pin with strength --gamma (repeatable)")
    parser.add_argument("--gamma", type=number("--gamma", positive=True), default=10.0, help="soft-pin strength (default 10)")
    parser.add_argument("--output-force", default=None, choices=("adjoint", "discrepancy"),
                        help="Euler: nonlinear output edge force (default adjoint)")
    parser.add_argument("--record-every", type=number("--record-every", int, minimum=0), default=None,
                        help="Euler, implicit: history interval in steps (default 100 for Euler)")
    add_output(parser, "--save-history", "FILE.npz",
               "write steps, discord by edge block, outputs, crossings and sliding episodes")
    parser.add_argument("--threads", type=number("--threads", int, minimum=1), default=None,
                        help="threads (default: the cores this process may use; SHEAFLINALG_NUM_THREADS lowers it)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def parse_pins(items, option):
    """``["a1[0]=0.5", ...]`` -> ``{"a1[0]": 0.5, ...}`` (comma-separated values give a vector)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{option} needs SELECTOR=VALUE, e.g. 'a1[0]=0.5'; got {item!r}")
        sel, val = item.rsplit("=", 1)
        try:
            vals = [float(v) for v in val.split(",")]
            if not all(np.isfinite(vals)):
                raise ValueError
        except ValueError:
            raise ValueError(f"{option} {item!r}: the value must be a finite number or comma-separated "
                             "finite numbers") from None
        out[sel.strip()] = vals[0] if len(vals) == 1 else np.array(vals)
    return out


def parse_input(text):
    """``--input "0.5,-1"`` -> array of shape (1, 2): finite numbers, no empty entries."""
    try:
        values = [float(v) for v in text.split(",")]
        if not values or not all(np.isfinite(values)):
            raise ValueError
    except ValueError:
        raise ValueError(f"--input must be comma-separated finite numbers like 0.5,-1, got {text!r}") from None
    return np.array([values])


def save_history(res, path):
    """Write the run's history and its switches to ``path`` (.npz, atomically, no pickle): Euler's
    crossings and sliding episodes and records, or the exact flow's events and episodes."""
    arrays = {"state": res.state, "output": res.output}
    if res.method == "exact":
        ev = res.events
        arrays.update(event_time=ev["time"], event_sample=ev["sample"], event_layer=ev["layer"],
                      event_neuron=ev["neuron"], event_kind=ev["kind"], event_active=ev["active"], time=res.time,
                      episodes=res.episodes)
    else:
        arrays.update(crossings=res.crossings)
        if res.sliding is not None:             # None on graph networks
            arrays["sliding"] = res.sliding
        h = res.history
        if h is not None:
            arrays.update(steps=h.steps, discord=h.discord, labels=np.array(h.labels),
                          sample_discord=h.sample_discord, history_output=h.output)
    save_npz(path, arrays, name="--save-history")


def _print_switches(res):
    if res.method == "exact":
        print(f"boundary crossings: {int(res.switches.sum())}  sliding episodes: {len(res.episodes)}")
    elif res.sliding is None:
        print(f"pattern changes: {res.crossings_total}  (sliding episodes are not detected on graph networks)")
    else:
        print(f"boundary crossings: {res.crossings_total}  sliding episodes: {len(res.sliding)}")


def _print_discord(history, graph, largest=5):
    """The last record's discord: by edge type on a chain, the largest edge blocks (nodes) on a graph."""
    if not graph:
        by_type = {k: float(v[-1]) for k, v in history.by_type().items()}
        print("final discord by edge type: " + ", ".join(f"{k} {v:.2e}" for k, v in by_type.items()))
        return
    last = history.discord[-1]
    order = np.argsort(-last, kind="stable")[:largest]
    print(f"final discord, largest {len(order)} edges: "
          + ", ".join(f"{history.labels[i]} {last[i]:.2e}" for i in order))


def method_options(args):
    """The method-specific keywords of :func:`sheaflinalg.heat` that were given (Euler records every 100 steps
    unless told otherwise)."""
    given = {name: getattr(args, name) for name in ("dt", "max_steps", "output_force", "record_every", "t_max")
             if getattr(args, name) is not None}
    if args.method == "euler":
        given.setdefault("record_every", 100)
    return given


def run(args):
    import sheaflinalg as sl

    pins = parse_pins(args.pin, "--pin") or None
    soft = parse_pins(args.soft_pin, "--soft-pin")
    if args.input is not None:
        refuse_ignored(args, {"--samples": "samples"}, "--input (one explicit input)")
        X = parse_input(args.input)
    net = network_from_args(args, graphs=True)
    if args.input is None:
        X = np.random.default_rng(args.seed).uniform(-2.0, 2.0, size=(args.samples or 1, net.n_inputs))
    elif X.shape[1] != net.n_inputs:
        raise ValueError(f"--input has {X.shape[1]} values but the network takes {net.n_inputs} inputs")
    res = sl.heat(net, X, alpha=args.alpha, tol=args.tol, init=args.init, seed=args.seed, pins=pins,
                  soft_pins=(soft, args.gamma) if soft else None, progress=not args.no_progress,
                  threads=args.threads, method=args.method, **method_options(args))
    name = f"graph of {len(net.graph.nodes)} nodes, input {net.input_shape}" if engine(net) == GRAPH else f"{net.dims}"
    if args.method == "exact":
        print(f"network {name} ({net.output}), {X.shape[0]} input(s), exact flow, alpha={args.alpha:g}")
        print(f"segments: {len(res.segments)}  events: {res.n_events}  converged: {res.converged}  "
              f"time: max {res.time.max():.6g}  slowest decay rate: {res.decay_rate.min():.4g}")
    else:
        print(f"network {name} ({net.output}), {X.shape[0]} input(s), dt={res.dt:g}, alpha={args.alpha:g}")
        print(f"steps: {res.steps}  converged: {res.converged}  final change: {res.final_change:.3e}")
    print(f"final total discord: {res.discord.sum():.3e}")
    if pins is None and not soft:
        err = np.abs(res.output - net.forward(X)).max()
        print(f"max |output - forward pass|: {err:.3e}")
    else:
        pinned = ", ".join(res.pinned[:6]) + (f", ... ({len(res.pinned)} coordinates)" if len(res.pinned) > 6 else "")
        print(f"pinned: {pinned or '-'}; soft pins: {', '.join(soft) or '-'}")
    _print_switches(res)
    if res.method != "exact" and res.history is not None and len(res.history.steps):
        _print_discord(res.history, engine(net) == GRAPH)
    if args.save_history:
        save_history(res, args.save_history)
        print(f"history written to {args.save_history}")
    return 0 if res.converged else 1

"""Hypothesis strategies of chain networks: random architectures, output activations, activation patterns
and training steps."""

import numpy as np
from hypothesis import strategies as st

from helpers.naive_training import targets
import sheaflinalg as sl

PATTERN_KINDS = ("forward", "all_active", "all_dead", "random", "zero_preactivations")


@st.composite
def networks(draw, max_hidden=4, max_width=12):
    n_hidden = draw(st.integers(0, max_hidden))
    output = draw(st.sampled_from(sl.activations.OUTPUTS if hasattr(sl, "activations") else
                                  ("identity", "sigmoid", "tanh", "softmax")))
    n_in = draw(st.integers(1, 5))
    n_out = draw(st.integers(2 if output == "softmax" else 1, 4))
    hidden = [draw(st.integers(1, max_width)) for _ in range(n_hidden)]
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    dims = [n_in] + hidden + [n_out]
    weights = [rng.normal(0, np.sqrt(2 / a), size=(b, a)) for a, b in zip(dims[:-1], dims[1:])]
    biases = [rng.normal(0, 0.3, size=b) for b in dims[1:]]
    return sl.Network(weights, biases, output), seed


@st.composite
def network_input_pattern(draw, max_hidden=4, max_width=12):
    """A network, one input and a (possibly frozen) pattern of every kind.

    Returns (net, x, pattern or None, kind).
    """
    net, seed = draw(networks(max_hidden, max_width))
    kind = draw(st.sampled_from(PATTERN_KINDS))
    rng = np.random.default_rng(seed + 1)
    x = rng.uniform(-2, 2, size=net.dims[0])
    hidden = net.dims[1:-1]
    if kind == "forward":
        return net, x, None, kind
    if kind == "all_active":
        return net, x, [np.ones(n, dtype=bool) for n in hidden], kind
    if kind == "all_dead":
        return net, x, [np.zeros(n, dtype=bool) for n in hidden], kind
    if kind == "random":
        return net, x, [rng.random(n) < 0.5 for n in hidden], kind
    # Zero pre-activations: zero biases and a zero input make every z exactly 0.
    net = sl.Network(net.weights, [np.zeros_like(b) for b in net.biases], net.output)
    x = np.zeros(net.dims[0])
    return net, x, None, kind


@st.composite
def step_cases(draw):
    """A chain network, a batch, targets, a loss, a state of every kind and maybe a regularisation.

    Returns (net, X, Y, state, loss, reg or None, rng): the arguments of one training step.
    """
    net, seed = draw(networks(max_hidden=3, max_width=7))
    rng = np.random.default_rng(seed)
    M = draw(st.integers(1, 5))
    X = rng.uniform(-2, 2, size=(M, net.dims[0]))
    Y, loss = targets(net, M, rng)
    if loss is None:
        loss = draw(st.sampled_from(["mse", "l1", "pnorm", "huber"]))
    n_move = sl.Layout(net.dims).kernel_offsets().yhat_off
    kind = draw(st.sampled_from(["random", "forward", "all_active", "all_dead", "zeros_in_z"]))
    state = rng.normal(size=(M, n_move))
    if kind == "forward":
        state = sl.harmonic_extension(net, X).free[:, :n_move].copy()
    elif kind == "all_active":
        state = np.abs(state)
    elif kind == "all_dead":
        state = -np.abs(state)
    elif kind == "zeros_in_z":
        state[rng.random(state.shape) < 0.4] = 0.0
    reg = None
    if draw(st.booleans()):
        reg = sl.Regularization(lam=draw(st.sampled_from([0.0, 0.3])), mu=draw(st.sampled_from([0.0, 0.2])),
                                kind=draw(st.sampled_from(["l2", "l1", "elastic"])), l1_ratio=0.3,
                                anchor=draw(st.sampled_from(["zero", "initial"])))
    return net, X, Y, state, loss, reg, rng

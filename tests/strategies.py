"""Hypothesis strategies: random architectures, output activations and activation patterns."""

import numpy as np
from hypothesis import strategies as st

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

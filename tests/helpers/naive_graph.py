"""Naive dense twins of the graph sheaf, written from the definitions (docs/graph-networks.md).

Every restriction map is a dense matrix filled entry by entry with plain loops
over output positions, channels and kernel offsets (no window tables, no
sparse matrices); the coboundary is ``x_v - sum_u F_(u->v) x_u - diag(b_v) 1_v``
per node, placed at the coordinates the layout names, and ``L = delta^T delta``.
"""

import itertools
import math

import numpy as np

from helpers.naive import phi, phi_jacobian


def _positions(shape):
    return list(itertools.product(*[range(n) for n in shape]))


def _flat(pos, shape):
    return int(np.ravel_multi_index(pos, shape))


def _window(out_pos, kernel, stride, padding, dilation):
    """Input positions (some outside the input) of the window of one output position, in window order."""
    for k in itertools.product(*[range(n) for n in kernel]):
        yield tuple(o * s - p + q * d for o, q, s, p, d in zip(out_pos, k, stride, padding, dilation))


def _tuple(value, n):
    return (value,) * n if isinstance(value, int) else tuple(value)


def _inside(pos, shape):
    return all(0 <= p < n for p, n in zip(pos, shape))


def conv_dense(node, in_shape, out_shape):
    W = node.params["weight"]
    n = W.ndim - 2
    a = node.attrs
    stride, padding, dilation = (_tuple(a[k], n) for k in ("stride", "padding", "dilation"))
    cout, cin_g = W.shape[:2]
    per_group = cout // a["groups"]
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for o in range(cout):
        for out_pos in _positions(out_shape[1:]):
            row = _flat((o,) + out_pos, out_shape)
            for c in range(cin_g):
                cg = (o // per_group) * cin_g + c
                for k, pos in zip(_positions(W.shape[2:]),
                                  _window(out_pos, W.shape[2:], stride, padding, dilation)):
                    if _inside(pos, in_shape[1:]):
                        F[row, _flat((cg,) + pos, in_shape)] += W[(o, c) + k]
    return F


def conv_transpose_dense(node, in_shape, out_shape):
    """Input entry ``(c, i)`` adds ``W[c, o', q] x[c, i]`` to output ``(o, i * stride - padding + q * dilation)``
    for every output channel ``o = group(c) * C_out/groups + o'`` and kernel offset ``q`` that lands inside."""
    W = node.params["weight"]
    n = W.ndim - 2
    a = node.attrs
    stride, padding, dilation = (_tuple(a[k], n) for k in ("stride", "padding", "dilation"))
    cin, cout_g = W.shape[:2]
    cin_g = cin // a["groups"]
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for c in range(cin):
        for in_pos in _positions(in_shape[1:]):
            col = _flat((c,) + in_pos, in_shape)
            for o in range(cout_g):
                og = (c // cin_g) * cout_g + o
                for k, pos in zip(_positions(W.shape[2:]), _window(in_pos, W.shape[2:], stride, padding, dilation)):
                    if _inside(pos, out_shape[1:]):
                        F[_flat((og,) + pos, out_shape), col] += W[(c, o) + k]
    return F


def _pool_length(L, k, s, p, d, ceil_mode):
    """Windows along one axis, counted one by one: window ``o`` starts at ``o * s - p``; without ceil mode it
    must end inside the padded input ``[-p, L + p)``; with it, the window one stride before it (for ``o = 0``
    too) must end before the padded input's last entry, and the window must start inside the input or its
    left padding."""
    o = 0
    while True:
        start, end = o * s - p, o * s - p + d * (k - 1)
        fits = end < L + p if not ceil_mode else end - s < L + p - 1 and start < L
        if not fits:
            return o
        o += 1


def pool_out_shape(node, in_shape):
    """The output shape of an ``avgpool``/``maxpool`` node, window by window (``ceil_mode`` absent: False)."""
    n = len(in_shape) - 1
    a = node.attrs
    kernel, stride, padding = (_tuple(a[k], n) for k in ("kernel_size", "stride", "padding"))
    dilation = _tuple(a.get("dilation", 1), n)
    return (in_shape[0],) + tuple(_pool_length(*axis, a.get("ceil_mode", False))
                                  for axis in zip(in_shape[1:], kernel, stride, padding, dilation))


def pool_dense(node, in_shape, out_shape):
    n = len(in_shape) - 1
    assert node.op == "adaptive_avgpool" or pool_out_shape(node, in_shape) == tuple(out_shape)
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for c in range(in_shape[0]):
        for out_pos in _positions(out_shape[1:]):
            if node.op == "adaptive_avgpool":
                ranges = [range((i * L) // m, -((-(i + 1) * L) // m))
                          for i, L, m in zip(out_pos, in_shape[1:], out_shape[1:])]
                window = list(itertools.product(*ranges))
                divisor = len(window)
            else:
                a = node.attrs
                kernel, stride, padding = (_tuple(a[k], n) for k in ("kernel_size", "stride", "padding"))
                window = [p for p in _window(out_pos, kernel, stride, padding, (1,) * n)]
                inside = [p for p in window if _inside(p, in_shape[1:])]
                # the padded input: a ceil_mode window's positions past it count in no divisor
                padded = [q for q in window if all(i < L + pad for i, L, pad in zip(q, in_shape[1:], padding))]
                divisor = len(padded) if a["count_include_pad"] else len(inside)
                window = inside
            for pos in window:
                F[_flat((c,) + out_pos, out_shape), _flat((c,) + pos, in_shape)] += 1.0 / divisor
    return F


def maxpool_argmax(node, in_shape, out_shape, z):
    """First maximum of every window (window order), as flat positions in the parent's stalk."""
    n = len(in_shape) - 1
    a = node.attrs
    kernel, stride, padding, dilation = (_tuple(a[k], n) for k in ("kernel_size", "stride", "padding", "dilation"))
    assert pool_out_shape(node, in_shape) == tuple(out_shape)
    out = np.zeros(int(np.prod(out_shape)), dtype=np.int64)
    for c in range(in_shape[0]):
        for out_pos in _positions(out_shape[1:]):
            best, arg = -np.inf, -1
            for pos in _window(out_pos, kernel, stride, padding, dilation):
                if _inside(pos, in_shape[1:]):
                    j = _flat((c,) + pos, in_shape)
                    if z[j] > best:
                        best, arg = z[j], j
            out[_flat((c,) + out_pos, out_shape)] = arg
    return out


def read_pattern(graph, values):
    """The pattern every pattern node reads off its parent's value in ``values`` (one sample): ``z >= 0``
    active, the first maximum of each window, a clamp's pieces, a smooth node's linearisation point: its
    parents' values)."""
    return {name: node_pattern(graph.node(name), graph, values) for name in graph.pattern_nodes}


def node_pattern(node, graph, values):
    """The pattern pattern node ``node`` reads off its parents' values in ``values`` (one sample)."""
    z = values[node.inputs[0]]
    if node.rule.smooth:
        return np.concatenate([values[u] for u in node.inputs])
    if node.op == "maxpool":
        return maxpool_argmax(node, graph.shapes[node.inputs[0]], graph.shapes[node.name], z)
    if node.op == "clamp":
        return clamp_pieces(node.attrs, z)
    return z >= 0


def concat_dense(node, shapes):
    """One selection matrix per parent: child entry <- parent entry, by walking the child's positions."""
    axis = node.attrs["axis"]
    child = shapes[node.name]
    maps = [np.zeros((int(np.prod(child)), int(np.prod(shapes[p])))) for p in node.inputs]
    for pos in _positions(child):
        i, offset = 0, pos[axis]
        while offset >= shapes[node.inputs[i]][axis]:
            offset -= shapes[node.inputs[i]][axis]
            i += 1
        parent_pos = pos[:axis] + (offset,) + pos[axis + 1:]
        maps[i][_flat(pos, child), _flat(parent_pos, shapes[node.inputs[i]])] = 1.0
    return maps


def permute_dense(node, in_shape, out_shape):
    """Output position ``q`` takes the parent's position ``p`` with ``p[axes[k]] = q[k]``."""
    axes = tuple(node.attrs["axes"])
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for q in _positions(out_shape):
        p = [0] * len(q)
        for k, a in enumerate(axes):
            p[a] = q[k]
        F[_flat(q, out_shape), _flat(tuple(p), in_shape)] = 1.0
    return F


def mean_dense(node, in_shape, out_shape):
    """Every parent position adds ``1 / count`` to the output position with the averaged axes dropped (or 0)."""
    axes = {int(a) for a in np.atleast_1d(node.attrs["axes"])}
    count = int(np.prod([in_shape[a] for a in axes]))
    weight = 1.0 / count if node.op == "mean" else 1.0
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for p in _positions(in_shape):
        q = tuple(0 if a in axes else i for a, i in enumerate(p)) if node.attrs["keepdim"] else \
            tuple(i for a, i in enumerate(p) if a not in axes)
        F[_flat(q, out_shape), _flat(p, in_shape)] += weight
    return F


def pad_dense(node, in_shape, out_shape):
    """Parent position ``(c, p)`` goes to ``(c, p + before)``."""
    before = tuple(node.attrs["pads"])[::2]
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for p in _positions(in_shape):
        q = (p[0],) + tuple(i + b for i, b in zip(p[1:], before))
        F[_flat(q, out_shape), _flat(p, in_shape)] = 1.0
    return F


def slice_dense(node, in_shape, out_shape):
    """Output position ``q`` takes the parent's position with ``start + q[axis] * step`` on the axis."""
    axis, start, step = node.attrs["axis"], node.attrs["start"], node.attrs["step"]
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for q in _positions(out_shape):
        p = tuple(start + i * step if a == axis else i for a, i in enumerate(q))
        F[_flat(q, out_shape), _flat(p, in_shape)] = 1.0
    return F


def _linear_taps(q, n, s, align_corners):
    """``[(input index, weight)]`` of output index ``q`` of a linear upsampling of a length-``n`` axis by ``s``
    (PyTorch's definition: aligned corners map ``0`` and ``m - 1`` onto ``0`` and ``n - 1``; otherwise pixel
    centres, ``(q + 0.5) / s - 0.5``, a negative coordinate read as 0)."""
    m = n * s
    x = (q * (n - 1) / (m - 1) if m > 1 else 0.0) if align_corners else max((q + 0.5) / s - 0.5, 0.0)
    lo = int(math.floor(x))
    return [(lo, 1.0 - (x - lo)), (min(lo + 1, n - 1), x - lo)]


def upsample_dense(node, in_shape, out_shape):
    """Output position ``(c, q)`` copies the parent's ``(c, q // scale)`` (nearest) or, linear, sums the
    corners around its source coordinate, each weighted by the product of its per-axis weights."""
    scale = tuple(node.attrs["scale"])
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for q in _positions(out_shape):
        if node.attrs["mode"] == "nearest":
            taps = [[(i // s, 1.0)] for i, s in zip(q[1:], scale)]
        else:
            taps = [_linear_taps(i, n, s, node.attrs["align_corners"]) for i, n, s in zip(q[1:], in_shape[1:], scale)]
        for corner in itertools.product(*taps):
            p = (q[0],) + tuple(i for i, _ in corner)
            F[_flat(q, out_shape), _flat(p, in_shape)] += float(np.prod([w for _, w in corner]))
    return F


def _gelu(attrs, z):
    if attrs["approximate"] == "tanh":
        return 0.5 * z * (1 + math.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    return 0.5 * z * (1 + math.erf(z / math.sqrt(2)))


def _gelu_slope(attrs, z):
    if attrs["approximate"] == "tanh":
        u = math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * z ** 2)
        return 0.5 * (1 + math.tanh(u)) + 0.5 * z * du / math.cosh(u) ** 2
    return 0.5 * (1 + math.erf(z / math.sqrt(2))) + z * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _logistic(z):
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def _softplus(attrs, z):
    b = attrs["beta"]
    return z if b * z > attrs["threshold"] else (max(b * z, 0) + math.log1p(math.exp(-abs(b * z)))) / b


def _mish_slope(attrs, z):
    t = math.tanh(_softplus({"beta": 1.0, "threshold": math.inf}, z))
    return t + z * (1 - t * t) * _logistic(z)


#: ``{op: (f(attrs, z), f'(attrs, z))}`` of the smooth elementwise ops, entry by entry from the definitions.
SMOOTH_POINTWISE = {
    "sigmoid": (lambda a, z: _logistic(z), lambda a, z: _logistic(z) * (1 - _logistic(z))),
    "tanh": (lambda a, z: math.tanh(z), lambda a, z: 1 / math.cosh(z) ** 2),
    "gelu": (_gelu, _gelu_slope),
    "silu": (lambda a, z: z * _logistic(z), lambda a, z: _logistic(z) + z * _logistic(z) * (1 - _logistic(z))),
    "softplus": (_softplus, lambda a, z: 1.0 if a["beta"] * z > a["threshold"] else _logistic(a["beta"] * z)),
    "elu": (lambda a, z: z if z > 0 else a["alpha"] * math.expm1(z), lambda a, z: 1.0 if z > 0 else a["alpha"] * math.exp(z)),
    "mish": (lambda a, z: z * math.tanh(_softplus({"beta": 1.0, "threshold": math.inf}, z)), _mish_slope),
    "hardswish": (lambda a, z: z * min(max(z + 3, 0), 6) / 6,
                  lambda a, z: 0.0 if z <= -3 else 1.0 if z >= 3 else (2 * z + 3) / 6),
}
def linear_dense(node, in_shape, out_shape):
    """Output ``(r, o)`` (``r`` the position on the leading axes) adds ``W[o, i]`` times the parent's ``(r, i)``."""
    W, b = node.params["weight"], node.params["bias"]
    F, bias = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape)))), np.zeros(int(np.prod(out_shape)))
    for r in _positions(out_shape[:-1]):
        for o in range(W.shape[0]):
            bias[_flat(r + (o,), out_shape)] = b[o]
            for i in range(W.shape[1]):
                F[_flat(r + (o,), out_shape), _flat(r + (i,), in_shape)] = W[o, i]
    return F, bias


def _broadcast_entry(value, pos):
    """The entry of ``value`` that numpy's broadcasting (aligned on the last axis) gives position ``pos``."""
    pos = pos[len(pos) - value.ndim:]
    return value[tuple(0 if m == 1 else p for m, p in zip(value.shape, pos))]


def affine_dense(node, out_shape):
    """Output ``q`` is ``scale[q] * x[q] + shift[q]`` with both broadcast entry by entry."""
    n = int(np.prod(out_shape))
    F, bias = np.zeros((n, n)), np.zeros(n)
    for q in _positions(out_shape):
        F[_flat(q, out_shape), _flat(q, out_shape)] = _broadcast_entry(node.params["scale"], q)
        bias[_flat(q, out_shape)] = _broadcast_entry(node.params["shift"], q)
    return F, bias


def roll_dense(node, in_shape, out_shape):
    """Output position ``q`` takes the parent's ``q - shift`` modulo the length on every rolled axis."""
    by_axis = dict(zip(node.attrs["axes"], node.attrs["shifts"]))
    F = np.zeros((int(np.prod(out_shape)), int(np.prod(in_shape))))
    for q in _positions(out_shape):
        p = tuple((i - by_axis.get(a, 0)) % in_shape[a] for a, i in enumerate(q))
        F[_flat(q, out_shape), _flat(p, in_shape)] = 1.0
    return F


def _norm_group(node, shape, pos):
    """The group of a position: its leading axes (layer and RMS norms), its channel's group (group norm)."""
    if node.op == "groupnorm":
        return pos[0] // (shape[0] // node.attrs["groups"])
    return pos[:len(shape) - node.attrs["n_axes"]]


def norm_dense(node, shape, p):
    """A normalisation at the point ``p``: its value ``f(p)`` and Jacobian, entry by entry from the definition
    ``y_i = (p_i - m) / sigma`` (``m`` the group's mean, 0 for the RMS norm; ``sigma^2`` the group's mean
    square of ``p - m``, plus eps): ``dy_i/dp_j = ([i = j] - c/n) / sigma - (p_i - m)(p_j - m) / (n sigma^3)``."""
    centred = 0.0 if node.op == "rmsnorm" else 1.0
    members = {}
    for pos in _positions(shape):
        members.setdefault(_norm_group(node, shape, pos), []).append(_flat(pos, shape))
    value, J = np.zeros(p.size), np.zeros((p.size, p.size))
    for group in members.values():
        n = len(group)
        m = centred * sum(p[k] for k in group) / n
        sigma = math.sqrt(sum((p[k] - m) ** 2 for k in group) / n + node.attrs["eps"])
        for i in group:
            value[i] = (p[i] - m) / sigma
            for j in group:
                J[i, j] = ((i == j) - centred / n) / sigma - (p[i] - m) * (p[j] - m) / (n * sigma ** 3)
    return value, J


def normalize_dense(node, shape, p):
    """An L2 normalisation over the last axis at the point ``p``: its value and Jacobian entry by entry from
    ``y_i = p_i / max(|p|, eps)`` (``|p|`` over the position's last-axis vector): ``dy_i/dp_j = [i = j] / |p| -
    p_i p_j / |p|^3`` where ``|p| > eps``, ``[i = j] / eps`` where the norm is clamped."""
    eps = node.attrs["eps"]
    value, J = np.zeros(p.size), np.zeros((p.size, p.size))
    for start in range(0, p.size, shape[-1]):
        group = range(start, start + shape[-1])
        norm = math.sqrt(sum(p[k] ** 2 for k in group))
        for i in group:
            value[i] = p[i] / max(norm, eps)
            for j in group:
                J[i, j] = (i == j) / norm - p[i] * p[j] / norm ** 3 if norm > eps else (i == j) / eps
    return value, J


def clamp_pieces(attrs, z):
    """The piece of every entry of ``z`` under a clamp: -1 below ``min``, 1 above ``max``, 0 between (ties)."""
    pieces = []
    for value in z:
        u = attrs["slope"] * float(value) + attrs["offset"]
        pieces.append(-1 if u < attrs["min"] else 1 if u > attrs["max"] else 0)
    return np.array(pieces, dtype=np.int8)


def clamp_pieces_agree(attrs, z, pieces):
    """Whether the pieces of a clamp agree with its parent's values ``z`` (any shape): the pieces read off ``z``,
    or a neighbouring piece at a tie (``slope * z + offset`` exactly at ``min`` or ``max``)."""
    u = attrs["slope"] * z + attrs["offset"]
    return (((pieces == -1) & (u <= attrs["min"])) | ((pieces == 1) & (u >= attrs["max"]))
            | ((pieces == 0) & (u >= attrs["min"]) & (u <= attrs["max"])))


def _clamp_dense(attrs, pieces):
    """The map and constant of a clamp on its pieces: ``slope`` and ``offset`` in the middle, 0 and the bound
    on a saturated piece."""
    slopes = [attrs["slope"] if p == 0 else 0.0 for p in pieces]
    constant = [attrs["offset"] if p == 0 else attrs["min"] if p < 0 else attrs["max"] for p in pieces]
    return [np.diag(slopes)], np.array(constant, dtype=float)


def _broadcast_from(q, out_shape, shape):
    """The position of a parent of shape ``shape`` that output position ``q`` reads (numpy broadcasting)."""
    q = q[len(out_shape) - len(shape):]
    return tuple(i if n > 1 else 0 for i, n in zip(q, shape))


def mul_dense(node, shapes, point):
    """``F_a[q, a(q)] = b[b(q)]``, ``F_b[q, b(q)] = a[a(q)]``, constant ``-a b``, position by position."""
    out = shapes[node.name]
    sa, sb = (shapes[p] for p in node.inputs)
    a, b = point[:int(np.prod(sa))], point[int(np.prod(sa)):]
    Fa, Fb = np.zeros((int(np.prod(out)), a.size)), np.zeros((int(np.prod(out)), b.size))
    bias = np.zeros(int(np.prod(out)))
    for q in _positions(out):
        i, ja, jb = _flat(q, out), _flat(_broadcast_from(q, out, sa), sa), _flat(_broadcast_from(q, out, sb), sb)
        Fa[i, ja], Fb[i, jb], bias[i] = b[jb], a[ja], -a[ja] * b[jb]
    return [Fa, Fb], bias


def softmax_dense(node, shape, z):
    """``F[q, q'] = y_q (1[q = q'] - y_q')`` within each slice along the axis, masked entries 0; ``y - F z``."""
    axis, n = node.attrs["axis"], int(np.prod(shape))
    F, y = np.zeros((n, n)), np.zeros(n)
    for q in _positions(shape):
        line = [q[:axis] + (j,) + q[axis + 1:] for j in range(shape[axis])]
        if node.attrs["causal"]:
            line = [p for p in line if p[-1] <= p[-2]]
        top = max(z[_flat(p, shape)] for p in line)
        total = sum(math.exp(z[_flat(p, shape)] - top) for p in line)
        if q in line:
            y[_flat(q, shape)] = math.exp(z[_flat(q, shape)] - top) / total
    for q in _positions(shape):
        for j in range(shape[axis]):
            p = q[:axis] + (j,) + q[axis + 1:]
            F[_flat(q, shape), _flat(p, shape)] = y[_flat(q, shape)] * ((p == q) - y[_flat(p, shape)])
    return [F], y - F @ z


def matmul_dense(node, shapes, point):
    """``F_A[(h, r, c), (h, r, l)] = alpha B[h, l, c]``, ``F_B[(h, r, c), (h, l, c)] = alpha A[h, r, l]``, the
    constant ``-alpha A B``, entry by entry."""
    (sa, sb), out = (shapes[p] for p in node.inputs), shapes[node.name]
    A, B = point[:int(np.prod(sa))].reshape(sa), point[int(np.prod(sa)):].reshape(sb)
    alpha = node.attrs["alpha"]
    FA, FB = np.zeros((int(np.prod(out)), A.size)), np.zeros((int(np.prod(out)), B.size))
    bias = np.zeros(int(np.prod(out)))
    for q in _positions(out):
        h, r, c = q[:-2], q[-2], q[-1]
        for l in range(sa[-1]):
            FA[_flat(q, out), _flat(h + (r, l), sa)] = alpha * B[h + (l, c)]
            FB[_flat(q, out), _flat(h + (l, c), sb)] = alpha * A[h + (r, l)]
            bias[_flat(q, out)] -= alpha * A[h + (r, l)] * B[h + (l, c)]
    return [FA, FB], bias


def node_dense(node, graph, pattern):
    """``[(parent, dense F)]`` and the bias vector (or None) of one node, one sample's ``pattern``."""
    shapes = graph.shapes
    out_shape = shapes[node.name]
    if node.op == "constant":        # no parents: its value through the ones block
        return [], np.array([_broadcast_entry(node.params["value"], q) for q in _positions(out_shape)])
    in_shape = shapes[node.inputs[0]]
    n = int(np.prod(out_shape))
    per = n // out_shape[0]
    bias = None
    if node.op == "linear":
        F, bias = linear_dense(node, in_shape, out_shape)
        Fs = [F]
    elif node.op == "affine":
        F, bias = affine_dense(node, out_shape)
        Fs = [F]
    elif node.op == "roll":
        Fs = [roll_dense(node, in_shape, out_shape)]
    elif node.op == "conv":
        Fs, bias = [conv_dense(node, in_shape, out_shape)], np.repeat(node.params["bias"], per)
    elif node.op == "conv_transpose":
        Fs, bias = [conv_transpose_dense(node, in_shape, out_shape)], np.repeat(node.params["bias"], per)
    elif node.op in ("avgpool", "adaptive_avgpool"):
        Fs = [pool_dense(node, in_shape, out_shape)]
    elif node.op == "maxpool":
        S = np.zeros((n, int(np.prod(in_shape))))
        S[np.arange(n), pattern] = 1.0
        Fs = [S]
    elif node.op == "batchnorm":
        Fs, bias = [np.diag(np.repeat(node.params["scale"], per))], np.repeat(node.params["shift"], per)
    elif node.op == "relu":
        Fs = [np.diag(pattern.astype(float))]
    elif node.op == "leaky_relu":
        Fs = [np.diag(np.where(pattern, 1.0, node.attrs["negative_slope"]))]
    elif node.op == "clamp":
        Fs, bias = _clamp_dense(node.attrs, pattern)
    elif node.op in SMOOTH_POINTWISE:
        value, slope = SMOOTH_POINTWISE[node.op]
        slopes = [slope(node.attrs, float(z)) for z in pattern]
        Fs, bias = [np.diag(slopes)], np.array([value(node.attrs, float(z)) - d * float(z)
                                                for z, d in zip(pattern, slopes)])
    elif node.op in ("layernorm", "groupnorm", "rmsnorm"):
        value, J = norm_dense(node, in_shape, np.asarray(pattern, dtype=float))
        Fs, bias = [J], value - J @ pattern
    elif node.op == "normalize":
        value, J = normalize_dense(node, in_shape, np.asarray(pattern, dtype=float))
        Fs, bias = [J], value - J @ pattern
    elif node.op == "mul":
        Fs, bias = mul_dense(node, shapes, pattern)
    elif node.op == "softmax":
        Fs, bias = softmax_dense(node, out_shape, pattern)
    elif node.op == "matmul":
        Fs, bias = matmul_dense(node, shapes, pattern)
    elif node.op in ("add", "reshape"):
        Fs = [np.eye(n) for _ in node.inputs]
    elif node.op in ("permute", "mean", "sum", "pad", "slice", "upsample"):
        Fs = [{"permute": permute_dense, "mean": mean_dense, "pad": pad_dense,
               "slice": slice_dense, "upsample": upsample_dense, "sum": mean_dense}[node.op](node, in_shape, out_shape)]
    else:
        Fs = concat_dense(node, shapes)
    return list(zip(node.inputs, Fs)), bias


def forward(graph, x, pattern=None, residuals=None):
    """Values of every node for one sample (the pattern's own when ``pattern`` is None) and the pattern used;
    ``residuals`` (``{node: vector}``) are added to the nodes' values as they are computed."""
    values, used = {"x": x}, {}
    for node in graph.nodes:
        if node.rule.pattern_dependent:      # a smooth node's tangent at the state: its parents' values
            used[node.name] = pattern[node.name] if pattern is not None else node_pattern(node, graph, values)
        maps, bias = node_dense(node, graph, used.get(node.name))
        v = sum(F @ values[u] for u, F in maps)
        values[node.name] = v + (bias if bias is not None else 0.0) + (0.0 if residuals is None else
                                                                      residuals[node.name])
    return values, used


def coboundary(graph, layout, x, pattern, reduced=False):
    """Dense ``delta`` on the full cochain of one sample, the boundary values, and the edge offset."""
    values, _ = forward(graph, x, pattern)
    delta = np.zeros((layout.n_edges, layout.n_full))
    u_full = np.zeros(layout.n_full)
    u_full[layout.full("x")] = x
    offset = np.zeros(layout.n_edges)
    for node in graph.nodes:
        rows = layout.edge(f"e_{node.name}")
        maps, bias = node_dense(node, graph, pattern[node.name] if node.rule.pattern_dependent else None)
        for u, F in maps:
            delta[rows, layout.full(u)] -= F
        if bias is not None:
            delta[rows, layout.full(f"1>{node.name}")] -= np.diag(bias)
            u_full[layout.full(f"1>{node.name}")] = 1.0
        delta[rows, layout.full(node.name)] += np.eye(graph.sizes[node.name])
    if not reduced:
        z = values[graph.output_node]
        J = phi_jacobian(graph.output, z)
        rows = layout.edge("e_y")
        delta[rows, layout.full(graph.output_node)] -= J
        delta[rows, layout.full("yhat")] += np.eye(z.size)
        offset[rows] = J @ z - phi(graph.output, z)
    return delta, u_full, offset


def dense_force(net, lay, X, S, reduced):
    """``-delta_P^T e`` of each sample from the naive dense maps, the pattern read off the state ``S``."""
    F = np.zeros_like(S)
    for s in range(S.shape[0]):
        state = {name: S[s, lay.free(name)] for name in [n.name for n in net.graph.nodes]}
        values = {"x": X[s], **state}
        pattern = read_pattern(net.graph, values)     # the pattern of the state: read off each node's parents
        for node in net.graph.nodes:
            maps, bias = node_dense(node, net.graph, pattern.get(node.name))
            e = state[node.name] - sum(Fm @ values[u] for u, Fm in maps) - (bias if bias is not None else 0.0)
            F[s, lay.free(node.name)] -= e
            for u, Fm in maps:
                if u != "x":
                    F[s, lay.free(u)] += Fm.T @ e
        if not reduced:
            z = state[net.graph.output_node]
            e_y = S[s, lay.free("yhat")] - phi(net.output, z)
            F[s, lay.free("yhat")] -= e_y
            F[s, lay.free(net.graph.output_node)] += phi_jacobian(net.output, z).T @ e_y
    return F

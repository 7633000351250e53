"""Pin specifications: hard pins, soft pins (penalty edges) and reluctance edges.

The pin format (shared by :func:`sheaflinalg.heat`, :func:`sheaflinalg.assemble`
and :func:`sheaflinalg.complete`)
----------------------------------------------------------------------------------

A *selector* names free coordinates of the layout (see :class:`~sheaflinalg.sheaf.layout.Layout`):

* a block name: ``"z1"``, ``"a2"``, ``"yhat"`` (the whole block); on a graph
  network a node's name, e.g. ``"layer1.0.conv1"`` (clamp a whole feature map);
* one coordinate: ``"a1[3]"``, ``"layer1.0.conv1[17]"`` (the node's stalk in C order);
* several coordinates: ``"a1[0,2,5]"`` or a half-open range ``"z2[1:4]"``;
* on a graph network, channels of a node (the first axis of its shape, e.g.
  ``(C, L)`` or ``(C, H, W)``): ``"conv1[channel=3]"``, ``"conv1[channel=0,2]"``
  or ``"conv1[channel=1:3]"`` (every entry of those feature maps; a node of shape
  ``(n,)`` has ``n`` channels of one entry).

``"yhat"`` is the output vertex.  For identity output, pinning ``"yhat"``
makes the dynamics and the assembler keep the output vertex and edge
(the unreduced system); pin ``"z{k+1}"`` to clamp the pre-activation itself.

**Hard pins** ``pins = {selector: values, ...}`` move the selected
coordinates from ``Omega`` to ``U`` (the paper's "pinning enlarges the
boundary data").  ``values`` is a scalar (every selected coordinate, every
sample), a 1-D array with one value per selected coordinate (every sample),
or a 2-D array ``(n_samples, n_selected)`` (per sample).  Per-sample values
for a single coordinate therefore have shape ``(n_samples, 1)``.  A whole node
or channels of a graph network also take values in the selection's own shape
(the node's shape; ``shape[1:]`` for one channel, ``(k, *shape[1:])`` for ``k``
channels), for every sample or as ``(n_samples, *that shape)``.  The input
is always pinned (its values are the data ``X``); it is not a selector.

**Soft pins** add, for every selected coordinate ``j``, a penalty edge to a
stubborn vertex holding the target ``p_j`` with restriction maps
``sqrt(gamma) P_J`` and ``sqrt(gamma) I`` (paper eq. pinning-maps): the
discord gains ``gamma/2 (omega_j - p_j)^2``.  Give them as
``SoftPins(targets, gamma)`` with ``targets`` in the hard-pin format and
``gamma`` a positive number (or a dict ``{selector: gamma}`` covering the
same selectors), or as the tuple ``(targets, gamma)``.

**Reluctance** (appendix C.2, regularisation as sheaf augmentation) adds an
edge ``sqrt(lambda) (omega_v - omega_0,v)`` from every free coordinate to an
anchor: give ``reluctance=lam`` (anchor 0) or ``Reluctance(lam, anchor)``
with ``anchor`` of shape ``(n_free,)`` or ``(n_samples, n_free)`` in the
layout's free order (hard-pinned coordinates' entries are ignored; freed
inputs, see ``free_inputs``, are anchored at 0).

A coordinate may not be both hard- and soft-pinned, nor selected twice in
one specification.

Every entry point names them the same way (``pins=``, ``soft_pins=``,
``reluctance=``) and turns them into one :class:`ResolvedPins` with
:func:`resolve_pins`, before any work.
"""

import numbers
import re
import warnings
from dataclasses import dataclass

import numpy as np

from ..._common.validation import as_float64, check_real, check_type, did_you_mean
from ..layout import Layout

_SELECTOR = re.compile(r"^\s*([A-Za-z_@>0-9.]+?)\s*(?:\[([^\]]*)\])?\s*$")


@dataclass
class SoftPins:
    """Soft pins: penalty edges of strength ``gamma`` toward ``targets``.

    Parameters
    ----------
    targets : dict
        ``{selector: values}`` in the hard-pin format (see module docstring).
    gamma : float or dict
        Pin strength (> 0), one number or ``{selector: gamma}``.

    Examples
    --------
    >>> sp = SoftPins({"a1[0]": 0.5}, gamma=100.0)
    >>> sp.gamma
    100.0
    """

    targets: dict
    gamma: object = 1.0

    def __post_init__(self):
        check_type(self.targets, dict, "SoftPins targets", "a dict {selector: values}")
        check_type(self.gamma, (numbers.Real, dict), "SoftPins gamma", "a number > 0 or a dict {selector: gamma}")


@dataclass
class Reluctance:
    """Reluctance (regularisation) edges ``sqrt(lam) (omega - anchor)`` on every free coordinate.

    Examples
    --------
    >>> Reluctance(1e-3).lam
    0.001
    """

    lam: float
    anchor: object = None

    def __post_init__(self):
        check_real(self.lam, "Reluctance lam")


@dataclass
class PinSet:
    """A validated pin specification resolved against one layout and batch.

    Attributes
    ----------
    index : ndarray of int64, shape (n,)
        Positions in the layout's free order, sorted.
    values : ndarray, shape (n_samples, n)
        Pin values (hard pins) or targets (soft pins).
    gamma : ndarray, shape (n,)
        Pin strengths (soft pins; ones for hard pins).
    labels : list of str
        Coordinate labels, e.g. ``"a1[3]"``.
    """

    index: np.ndarray
    values: np.ndarray
    gamma: np.ndarray
    labels: list

    @property
    def size(self):
        return int(self.index.size)

    @classmethod
    def empty(cls, n_samples):
        return cls(np.zeros(0, dtype=np.int64), np.zeros((n_samples, 0)), np.zeros(0), [])


def parse_selector(layout, selector):
    """Positions (in the layout's free order) named by ``selector``.

    Examples
    --------
    >>> from sheaflinalg.sheaf.layout import Layout
    >>> parse_selector(Layout([2, 3, 1]), "a1[0,2]").tolist()
    [3, 5]
    """
    return _parse(layout, selector)[0]


def _indices(inner, size, selector, what):
    """The integers of ``i``, ``i,j,...`` or ``i:j`` (bounds default to 0 and ``size``), checked against ``size``."""
    try:
        if ":" in inner:
            lo, hi = inner.split(":")
            idx = np.arange(int(lo) if lo.strip() else 0, int(hi) if hi.strip() else size)
        else:
            idx = np.array([int(t) for t in inner.split(",")], dtype=np.int64)
    except ValueError:
        raise ValueError(f"pin selector {selector!r}: {what} must be integers") from None
    if idx.size == 0:
        raise ValueError(f"pin selector {selector!r} selects no coordinate")
    if idx.min() < 0 or idx.max() >= size:
        raise ValueError(f"pin selector {selector!r}: {what} out of range [0, {size})")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"pin selector {selector!r} repeats a coordinate")
    return idx


def _node_shape(layout, name):
    """The shape of a graph network's free block ``name`` (a node or ``yhat``), or None on a chain."""
    if not layout.is_graph:
        return None
    return tuple(layout.graph.shapes[layout.graph.output_node if name == "yhat" else name])


def _channels(layout, name, selector, inner):
    """Positions in block ``name`` and the selection's shape of a ``channel=...`` selector."""
    shape = _node_shape(layout, name)
    if shape is None:
        raise ValueError(f"pin selector {selector!r}: channel selectors take a graph network's node "
                         f"(a feature map); {name!r} is a block of a chain, select coordinates like '{name}[0,2]'")
    channel = _indices(inner, shape[0], selector, f"channels of node {name!r} of shape {shape}")
    per = int(np.prod(shape[1:], dtype=np.int64))
    idx = (channel[:, None] * per + np.arange(per)).ravel()
    single = "," not in inner and ":" not in inner
    return idx, (shape[1:] if single else (channel.size,) + shape[1:])


def _parse(layout, selector):
    """``(positions in the free order, the selection's own shape or None)`` of ``selector``."""
    if not isinstance(selector, str):
        raise TypeError(f"a pin selector must be a string like 'a1[3]' or 'z2', got {selector!r}")
    m = _SELECTOR.match(selector)
    if not m:
        raise ValueError(f"cannot parse pin selector {selector!r}; use 'block', 'block[i]', 'block[i,j]' or 'block[i:j]'")
    name, inner = m.group(1), m.group(2)
    if name == "x" or name.startswith(("1@", "1>")):
        raise ValueError(f"pin selector {selector!r}: the input and the ones blocks are always pinned "
                         "(inputs come from X; to free inputs use complete(..., free_inputs=...))")
    names = [b.name for b in layout.free_blocks]
    if name not in names:
        hint = ""
        if name == "yhat" and layout.reduced:
            hint = f" (this is a reduced system without the output vertex; pin {layout.output_block!r} instead)"
        raise ValueError(f"pin selector {selector!r}: no free block {name!r}; {did_you_mean(name, names)}{hint}")
    blk = layout.free_block(name)
    channel = re.match(r"^\s*channels?\s*=(.*)$", inner) if inner is not None else None
    if channel is not None:
        idx, shape = _channels(layout, name, selector, channel.group(1).strip())
    elif inner is None:
        idx, shape = np.arange(blk.size), _node_shape(layout, name)
    else:
        idx, shape = _indices(inner.strip(), blk.size, selector, f"indices of block {name!r} of size {blk.size}"), None
    return (blk.offset + idx).astype(np.int64), shape


def _values(value, n_samples, n, what, shape=None):
    """Values ``(n_samples, n)`` of a selection of ``n`` coordinates (of shape ``shape``, if it has one)."""
    scalar = np.ndim(value) == 0
    arr = as_float64(value, what)
    if scalar:
        return np.full((n_samples, n), float(arr.ravel()[0]))
    shaped = shape is not None and len(shape) > 1
    if shaped and arr.shape == tuple(shape):
        arr = arr.reshape(-1)
    elif shaped and arr.shape == (n_samples,) + tuple(shape):
        arr = arr.reshape(n_samples, n)
    also = f", the shape {tuple(shape)} of the selected node or channels or {(n_samples,) + tuple(shape)}" \
        if shaped else ""
    if arr.ndim == 1:
        if arr.shape[0] != n:
            raise ValueError(f"{what}: a 1-D value needs one entry per selected coordinate ({n}), "
                             f"got {arr.shape[0]}; per-sample values have shape ({n_samples}, {n}){also}")
        return np.broadcast_to(arr, (n_samples, n)).copy()
    if arr.ndim == 2 and arr.shape == (n_samples, n):
        return arr.copy()
    raise ValueError(f"{what}: expected a scalar, shape ({n},) or ({n_samples}, {n}){also}; got {arr.shape}")


def resolve(layout, spec, n_samples, what="pins", gamma=None):
    """Resolve a ``{selector: values}`` specification into a :class:`PinSet`.

    Parameters
    ----------
    layout : Layout
    spec : dict or None
    n_samples : int
    what : str
        Name used in error messages.
    gamma : None, float or dict
        Soft-pin strengths (``None`` for hard pins).
    """
    if spec is None or (isinstance(spec, dict) and not spec):
        return PinSet.empty(n_samples)
    if not isinstance(spec, dict):
        raise TypeError(f"{what} must be a dict {{selector: values}}, e.g. {{'a1[0]': 0.5}}; got {type(spec).__name__}")
    if isinstance(gamma, dict):
        extra = set(gamma) - set(spec)
        missing = set(spec) - set(gamma)
        if extra or missing:
            raise ValueError(f"{what}: gamma dict must cover exactly the selectors of the targets "
                             f"(missing {sorted(missing)}, extra {sorted(extra)})")
    idx, vals, gam = [], [], []
    for sel, value in spec.items():
        i, shape = _parse(layout, sel)
        idx.append(i)
        vals.append(_values(value, n_samples, i.size, f"{what}[{sel!r}]", shape))
        if gamma is not None:
            g = gamma[sel] if isinstance(gamma, dict) else gamma
            try:
                g = float(g)
            except (TypeError, ValueError):
                raise TypeError(f"{what}: gamma must be a number, got {g!r}") from None
            if not np.isfinite(g) or g <= 0:
                raise ValueError(f"{what}: gamma must be a finite number > 0, got {g!r}")
            gam.append(np.full(i.size, g))
        else:
            gam.append(np.ones(i.size))
    index = np.concatenate(idx)
    values = np.concatenate(vals, axis=1)
    gam = np.concatenate(gam)
    if np.unique(index).size != index.size:
        raise ValueError(f"{what}: a coordinate is selected more than once")
    order = np.argsort(index, kind="stable")
    labels = layout.free_labels
    return PinSet(index[order], np.ascontiguousarray(values[:, order]), gam[order],
                  [labels[j] for j in index[order]])


def resolve_soft(layout, soft_pins, n_samples):
    """Resolve ``soft_pins`` (``SoftPins``, ``(targets, gamma)`` or None) into a :class:`PinSet`."""
    if soft_pins is None:
        return PinSet.empty(n_samples)
    if isinstance(soft_pins, SoftPins):
        targets, gamma = soft_pins.targets, soft_pins.gamma
    elif isinstance(soft_pins, tuple) and len(soft_pins) == 2:
        targets, gamma = soft_pins
    else:
        raise TypeError("soft_pins must be SoftPins(targets, gamma) or a tuple (targets, gamma), "
                        f"got {type(soft_pins).__name__}")
    return resolve(layout, targets, n_samples, what="soft_pins", gamma=gamma)


def resolve_reluctance(layout, reluctance, n_samples):
    """``(lam, anchor)`` with ``anchor`` of shape (n_samples, n_free), or ``(0.0, None)``."""
    if reluctance is None:
        return 0.0, None
    if isinstance(reluctance, Reluctance):
        lam, anchor = reluctance.lam, reluctance.anchor
    else:
        lam, anchor = reluctance, None
    try:
        lam = float(lam)
    except (TypeError, ValueError):
        raise TypeError(f"reluctance must be a number or Reluctance(lam, anchor), got {reluctance!r}") from None
    if not np.isfinite(lam) or lam <= 0:
        raise ValueError(f"reluctance strength must be a finite number > 0, got {lam!r}")
    if anchor is None:
        return lam, np.zeros((n_samples, layout.n_free))
    return lam, _values(anchor, n_samples, layout.n_free, "reluctance anchor")


def check_disjoint(hard, soft):
    """Refuse a coordinate that is both hard- and soft-pinned."""
    both = np.intersect1d(hard.index, soft.index)
    if both.size:
        lab = [hard.labels[int(np.searchsorted(hard.index, j))] for j in both]
        raise ValueError(f"coordinates {lab} are both hard-pinned and soft-pinned; choose one")


def touches_output(layout, *specs):
    """True if any pin set selects a coordinate of the ``yhat`` block."""
    if layout.reduced:
        return False
    sl_ = layout.free("yhat")
    return any(np.any((p.index >= sl_.start) & (p.index < sl_.stop)) for p in specs)


def spec_mentions_output(spec):
    """True if a raw ``{selector: values}`` dict (or SoftPins/tuple) has a ``yhat`` selector."""
    if spec is None:
        return False
    if isinstance(spec, SoftPins):
        spec = spec.targets
    elif isinstance(spec, tuple) and len(spec) == 2:
        spec = spec[0]
    if not isinstance(spec, dict):
        return False
    for sel in spec:
        if isinstance(sel, str):
            m = _SELECTOR.match(sel)
            if m and m.group(1) == "yhat":
                return True
    return False


def resolve_free_inputs(free_inputs, n_inputs):
    """Validated sorted int64 array of input coordinates to free (empty for None)."""
    if free_inputs is None:
        return np.zeros(0, dtype=np.int64)
    arr = np.atleast_1d(np.asarray(free_inputs))
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype == bool:
        if arr.shape != (n_inputs,):
            raise ValueError(f"free_inputs as a boolean mask needs shape ({n_inputs},), got {arr.shape}")
        return np.flatnonzero(arr).astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"free_inputs must be integer input indices (or a boolean mask), got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= n_inputs:
        raise ValueError(f"free_inputs {arr.tolist()} out of range for {n_inputs} inputs")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"free_inputs {arr.tolist()} repeats an index")
    return np.sort(arr).astype(np.int64)


@dataclass
class ResolvedPins:
    """Pins, soft pins, reluctance edges and freed inputs, validated against one layout and batch.

    Attributes
    ----------
    layout : Layout
    hard : PinSet
        Hard pins (``values`` are the pinned values).
    soft : PinSet
        Soft pins (``values`` are the targets, ``gamma`` the strengths).
    lam : float
        Reluctance strength, 0.0 without reluctance edges.
    anchor : ndarray, shape (n_samples, n_free), or None
        Reluctance anchor (None without reluctance edges).
    free_inputs : ndarray of int64
        Sorted input coordinates to complete (empty unless given).
    """

    layout: Layout
    hard: PinSet
    soft: PinSet
    lam: float
    anchor: object
    free_inputs: np.ndarray


def default_reduced(net, pins=None, soft_pins=None):
    """Whether the default system is the reduced one: identity output, and no pin or soft pin on ``yhat``.

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> default_reduced(net), default_reduced(net, pins={"yhat": 1.0})
    (True, False)
    """
    return net.output == "identity" and not (spec_mentions_output(pins) or spec_mentions_output(soft_pins))


def resolve_pins(net, X, layout=None, pins=None, soft_pins=None, reluctance=None, free_inputs=None):
    """Validate and resolve every pin specification of one call (the one resolver of the package).

    :func:`sheaflinalg.heat`, :func:`sheaflinalg.assemble` and
    :func:`sheaflinalg.complete` all call it before any work.

    Parameters
    ----------
    net : Network
    X : ndarray, shape (n_samples, n_0)
        Validated inputs (only their number of samples is read).
    layout : Layout, optional
        Default: the layout of :func:`default_reduced`.
    pins : dict, optional
        Hard pins ``{selector: values}``.
    soft_pins : SoftPins or (targets, gamma), optional
    reluctance : float or Reluctance, optional
    free_inputs : sequence of int or boolean mask, optional
        Input coordinates to complete (:func:`sheaflinalg.complete` and
        :func:`sheaflinalg.assemble`).

    Returns
    -------
    ResolvedPins

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 3, 1], seed=0)
    >>> r = resolve_pins(net, np.zeros((2, 2)), pins={"a1[1]": 0.5}, reluctance=1e-3)
    >>> r.layout.reduced, r.hard.labels, r.hard.values.tolist(), r.lam
    (True, ['a1[1]'], [[0.5], [0.5]], 0.001)
    """
    if layout is None:
        layout = Layout.for_network(net, reduced=default_reduced(net, pins, soft_pins))
    M = X.shape[0]
    hard = resolve(layout, pins, M, what="pins")
    soft = resolve_soft(layout, soft_pins, M)
    check_disjoint(hard, soft)
    lam, anchor = resolve_reluctance(layout, reluctance, M)
    return ResolvedPins(layout, hard, soft, lam, anchor, resolve_free_inputs(free_inputs, net.n_inputs))


def pins_or_clamp(pins, clamp, stacklevel=3):
    """``pins``, or the value of the deprecated alias ``clamp=`` (with a DeprecationWarning); both is an error.

    ``stacklevel`` points the warning at the caller of the public function.
    """
    if clamp is None:
        return pins
    if pins is not None:
        raise TypeError("give the hard pins once, as pins=; clamp= is its deprecated alias (both were given)")
    warnings.warn("clamp= is deprecated and will be removed in the next release; use pins= (the same "
                  "{selector: values} format as heat and assemble)", DeprecationWarning, stacklevel=stacklevel)
    return clamp

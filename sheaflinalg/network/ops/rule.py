"""The contract of an operation: one :class:`OpRule` object owns everything the engine knows about an op.

A node ``v`` of a graph network has one defining edge with the residual
``r_v = x_v - f_v(x_parents)``.  Its operation's rule says, in one place:

- what it takes: parameters, attributes, the number of parents (:meth:`OpRule.shape`
  validates them and gives the output shape);
- its forward pass (:meth:`OpRule.forward`), with the pattern it reads
  (``pattern``: ``None``, :data:`MASK`, :data:`PIECE`, :data:`SELECTION` or :data:`TANGENT`);
- its restriction maps ``F_(u->v)``: as sparse or dense blocks per sample
  (:meth:`OpRule.blocks`) and matrix-free with their transposes (:meth:`OpRule.maps`);
- its constant term, the block of ones at the boundary (:meth:`OpRule.bias`);
- a sound bound on ``||F_(u->v)||_2`` over every pattern (:meth:`OpRule.norm_bound`);
- the velocity ``-dE/dtheta`` of its parameters (:meth:`OpRule.velocity`);
- work and nonzero estimates (:meth:`OpRule.work`, :meth:`OpRule.nnz`).

Every method is written by the op's own module (``sheaflinalg/network/ops/<op>.py``):
this base class implements none of them, so a rule that forgot one fails loudly
(and the op contract test, ``tests/test_op_contract.py``, checks every registered rule).
Values are ``(n_samples, stalk size)`` float64 arrays, stalks flattened in C order.
"""

from types import MappingProxyType

import numpy as np
import scipy.sparse as sp


class PatternKind:
    """How a piecewise-linear op picks its piece: the dtype of its pattern rows and their meaning.

    Attributes
    ----------
    name : str
        ``"mask"`` (one bool per coordinate: ``True`` = the active piece, ``z >= 0``), ``"piece"`` (one int8
        per coordinate: -1, 0 or 1, the piece of a clamp: below, middle or above), ``"argmax"`` (one int64 per
        output: the selected position in the parent's stalk) or ``"tangent"`` (a smooth op's point).
    dtype : numpy dtype
    """

    def __init__(self, name, dtype):
        self.name, self.dtype = name, np.dtype(dtype)

    def __repr__(self):
        return f"PatternKind({self.name!r})"


#: Pattern of an elementwise piecewise-linear op (ReLU, LeakyReLU): a bool per coordinate.
MASK = PatternKind("mask", bool)
#: Pattern of a clamp (:mod:`.clamp`): the piece of every coordinate, -1 below (the minimum), 0 in the middle
#: (the affine piece), 1 above (the maximum).
PIECE = PatternKind("piece", np.int8)
#: Pattern of a selection (max-pool): the argmax position of every output in the parent's stalk.
SELECTION = PatternKind("argmax", np.int64)
#: Pattern of a smooth op (:mod:`.tangent`): the linearisation point, its parents' values side by side.
TANGENT = PatternKind("tangent", np.float64)

#: ``max_inputs`` of an op taking any number of parents.
MANY = 1 << 30


class OpRule:
    """Everything about one operation (see the module).  Subclasses set the attributes and write every method.

    Attributes
    ----------
    name : str
        The op's name in :class:`~sheaflinalg.network.graph.Node` (``Node.op``) and in graph files.
    params, attrs : tuple of str
        Names of its parameter arrays and of its attributes.
    optional : mapping
        ``{attribute: default}`` of the attributes a node may omit (added to an op after graph files were
        written without them): a node fills them in, and files and checkpoints leave them out at their default.
    min_inputs, max_inputs : int
        How many parents it takes.
    pattern : PatternKind or None
        :data:`MASK`, :data:`PIECE`, :data:`SELECTION`, :data:`TANGENT` (a smooth op, linearised at a state),
        or None for an op whose map does not depend on the state.
    has_bias : bool
        Whether its constant term goes through a block of ones at the boundary.
    state_bound : bool
        Whether the norm of its map depends on the state so much that a heat step follows it: no bound holds
        over every state (a product of two values) or the bound of every state is far above the typical one
        (a normalisation, ``1/sigma``).  Such a rule writes ``norm_at`` (:mod:`.tangent`).
    """

    name = None
    params = ()
    attrs = ()
    optional = MappingProxyType({})
    min_inputs = max_inputs = 1
    pattern = None
    has_bias = False
    state_bound = False

    @property
    def pattern_dependent(self):
        """Whether the op's restriction map depends on a pattern (a piecewise-linear op)."""
        return self.pattern is not None

    @property
    def smooth(self):
        """Whether the op is smooth: its sheaf at a state is its tangent there (pattern :data:`TANGENT`)."""
        return self.pattern is TANGENT

    def __repr__(self):
        return f"<op rule {self.name!r}>"

    def pattern_size(self, node, graph):
        """Entries per sample of the node's pattern rows: one per output (masks, selections), the parents'
        sizes together for a smooth op (its linearisation point)."""
        return graph.sizes[node.name]

    def same_pattern(self, node, new, old):
        """Per sample, whether pattern rows ``new`` and ``old`` are the same piece (a pattern iteration that
        reads back the pattern it solved with has settled): equal rows; a smooth op's points up to rounding."""
        return np.all(new == old, axis=1)

    def constant(self, node, graph, pattern=None):
        """The constant term at one sample's pattern (the ones block carries ``diag(c_v)``), or None.

        The bias (:meth:`bias`) for every op whose constant does not depend on the state; a smooth op's
        tangent has the constant ``f(p) - J(p) p`` of its linearisation point ``p``.
        """
        return self.bias(node, graph)

    def read_decided(self, node, graph, z, forward, previous, rtol=1e-12, tie_rtol=1e-12):
        """A :data:`SELECTION` op's selections read off ``z``, the windows tied at the ``forward`` values given
        back to ``previous`` (the equilibrium's tie rule, ``sheaf/matrix_free/switching.read_pattern``); every
        selection op writes it, any other op never sees it."""
        self._missing("read_decided")

    def _missing(self, method):
        raise NotImplementedError(f"operation {self.name!r} does not define {method}: every rule writes all of "
                                  "OpRule's methods (docs/design.md, 'Adding an op')")

    def shape(self, node, parent_shapes):
        """Validate ``node``'s attributes and parameters against its parents' shapes; its per-sample output shape."""
        self._missing("shape")

    def checked_forward(self, node, graph, then=None):
        """A forward step that also checks its values, and runs the node ``then`` (a rectifier reading this node
        alone) in the same pass: ``step(inputs, out, then_out, then_mask) -> finite``, or None (no such step:
        the default).  ``then_mask`` receives the rectifier's pattern read off (``then`` None: empty arrays).

        Returns ``(step, checks_inputs)`` (``finite`` says whether every value written, and the inputs if
        ``checks_inputs``, is finite) or None.  The forward pass uses it when no pattern is frozen
        (``graph/fusion.py``): a pass over values out of the caches costs as much as the arithmetic.
        """
        return None

    def forward(self, node, graph):
        """``step(inputs, out, pattern, frozen) -> agrees``, writing the node's value for a block of samples.

        ``pattern`` is the block's pattern rows (pattern ops: written when ``frozen`` is False, read when
        True; ``agrees`` then says per sample whether the frozen pattern agrees with the input), else None.
        """
        self._missing("forward")

    def blocks(self, node, graph, pattern=None):
        """``F_(u->v)`` for every parent, in the order of ``node.inputs``: a dense matrix, a 1-D diagonal or a
        CSR matrix (``pattern``: one sample's rows, for pattern ops)."""
        self._missing("blocks")

    def maps(self, node, graph):
        """``(apply, transpose)``: ``apply(i, x, p) = F_(u_i->v) x``, ``transpose(i, y, p) = F^T y`` on rows."""
        self._missing("maps")

    def prepare(self, node, pattern):
        """The pattern rows in the form :meth:`maps` reads fastest (for many products under one pattern)."""
        self._missing("prepare")

    def bias(self, node, graph):
        """``b_v`` over the node's stalk (its ones block carries ``diag(b_v)``), or None without a constant."""
        self._missing("bias")

    def norm_bound(self, node, graph):
        """An upper bound on ``||F_(u->v)||_2`` from each parent, valid for every pattern."""
        self._missing("norm_bound")

    def velocity(self, node, graph):
        """``velocity(x, e) -> {param: -dE/dparam}`` for the parent's value ``x`` and edge residuals ``e``
        (summed over samples), or None for an op without parameters."""
        self._missing("velocity")

    def work(self, node, graph):
        """Multiply-adds per sample of the forward pass (an estimate, for cutting batches and threads)."""
        self._missing("work")

    def nnz(self, node, graph):
        """``(nnz, gram)``: stored entries of the restriction maps (bias included) and a bound on the entries
        of their whole Gram block ``[F_u1 ... F_uk]^T [F_u1 ... F_uk]`` (every pair of parents): the
        assembly's memory estimate, an upper bound (``sheaf/assembled/assembly.py``)."""
        self._missing("nnz")


class Placement(OpRule):
    """An op whose maps place every parent entry, with weight 1, into at most one output entry (the linear
    plumbing: reshape, permutation of axes, zero padding, slice, concatenation, addition's per-parent
    identity): no parameters, no constant, no pattern, and every map a partial permutation, of 2-norm at
    most 1."""

    def prepare(self, node, pattern):
        return pattern

    def bias(self, node, graph):
        return None

    def norm_bound(self, node, graph):
        return 1.0

    def velocity(self, node, graph):
        return None

    def work(self, node, graph):
        return entries_touched(node, graph)

    def nnz(self, node, graph):
        n = sum(graph.sizes[p] for p in node.inputs)
        return n, len(node.inputs) * n      # an output entry takes at most one entry of each parent


class Gather(Placement):
    """A placement whose every output entry takes one parent entry, given by :meth:`sources` (a permutation of
    axes, a slice): the map is a selection of rows of the identity."""

    def sources(self, node, graph):
        """For every output entry, the position of the parent entry it takes."""
        self._missing("sources")

    def forward(self, node, graph):
        src = self.sources(node, graph)

        def step(inputs, out, pattern, frozen):
            np.take(inputs[0], src, axis=1, out=out)
        return step

    def blocks(self, node, graph, pattern=None):
        src = self.sources(node, graph)
        return [csr(np.arange(src.size), src, np.ones(src.size), (src.size, graph.sizes[node.inputs[0]]))]

    def maps(self, node, graph):
        src, size = self.sources(node, graph), graph.sizes[node.inputs[0]]
        if src.size == size and np.array_equal(np.sort(src), np.arange(size)):    # a permutation: gather back
            inverse = np.argsort(src)
            return (lambda i, x, p: x[:, src]), (lambda i, y, p: np.take(y, inverse, axis=1))

        def transpose(i, y, p):
            out = np.zeros((y.shape[0], size))
            out[:, src] = y
            return out
        return (lambda i, x, p: x[:, src]), transpose

    def nnz(self, node, graph):
        n = graph.sizes[node.name]
        return n, n


def identity_map(i, x, pattern):
    """The identity as a matrix-free map (apply or transpose) of parent ``i``."""
    return x


def csr(rows, cols, vals, shape):
    """A sorted CSR matrix from coordinate arrays (duplicates summed)."""
    out = sp.csr_matrix((np.asarray(vals, dtype=np.float64).ravel(), (rows.ravel(), cols.ravel())), shape=shape)
    out.sort_indices()
    return out


def parameterless(node, graph):
    """The :meth:`OpRule.velocity` of an op without parameters: None."""
    return None


def entries_touched(node, graph):
    """Work of an op that touches each entry once: its output and its parents' entries."""
    return graph.sizes[node.name] + sum(graph.sizes[p] for p in node.inputs)


def stateless(step):
    """A forward step of an op without a pattern in the signature every step has."""
    def run(inputs, out, pattern, frozen):
        step(inputs, out)
    return run


def same_shape(node, parent_shapes):
    """The shape rule of an elementwise op of one parent."""
    (parent,) = parent_shapes
    return parent


def per_channel(node, graph, values):
    """Per-channel ``values`` repeated over the node's positions (a vector over its stalk)."""
    return np.repeat(values, graph.sizes[node.name] // values.size)

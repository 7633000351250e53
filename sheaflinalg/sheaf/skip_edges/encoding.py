"""The paper's encoding of skip connections: one two-endpoint edge per parent (``skip_encoding="edges"``).

By default (``"sum"``) a node ``v`` with several parents (``add``, ``concat``)
has one defining hyperedge ``x_v - sum_i F_i x_(u_i)`` and ``delta_Omega``
stays square and unit lower triangular.  With ``"edges"`` that row block is
split into one edge per parent, restricted to the rows of ``v`` that parent
feeds (the rows where ``F_i`` has a nonzero entry):

* ``add``, ``v = u_1 + u_2``: the edges ``x_v - x_(u_1)`` and ``x_v - x_(u_2)``
  (the paper's extra skip edge);
* ``concat``: the edges ``P_i x_v - x_(u_i)``, ``P_i`` selecting the child's
  rows of parent ``i``.

A bias, if the node had one, stays on the edge of its first parent.  Each
split edge's stalk is its parent's stalk.  ``delta_Omega`` becomes tall; it
keeps full column rank (every node still has a row block with the identity on
its own coordinates and nothing to their right: :mod:`sheaflinalg.sheaf.verification.rank`
certifies it), and its harmonic extension is the least-squares solution of
``delta_Omega w = -delta_U u``, a compromise between the parents, not the
forward pass.  Nodes with one parent, products of two values (``mul``, ``matmul``: their tangent
reads both parents together), and the output edge are unchanged, so
on a network without ``add``/``concat`` both encodings give the same matrices.
"""

import numpy as np
import scipy.sparse as sp

from ..._common.validation import check_choice

#: The default ``skip_encoding``: one defining hyperedge per node (``delta_Omega`` square, unit lower triangular).
DEFAULT_SKIP_ENCODING = "sum"
#: The values of ``skip_encoding``.
SKIP_ENCODINGS = (DEFAULT_SKIP_ENCODING, "edges")


def check_skip_encoding(value):
    """Return ``value`` if it names an encoding of nodes with several parents, else a ValueError listing them.

    Examples
    --------
    >>> check_skip_encoding("edges")
    'edges'
    >>> check_skip_encoding("hyper")
    Traceback (most recent call last):
    ...
    ValueError: unknown skip_encoding 'hyper'; expected one of 'sum', 'edges'
    """
    return check_choice(value, SKIP_ENCODINGS, "skip_encoding")


def is_split(node, skip_encoding):
    """Whether ``node``'s defining edge is split into one edge per parent under ``skip_encoding``: a skip
    connection (``add``, ``concat``), not a product of two values (its tangent reads both together)."""
    return skip_encoding == "edges" and len(node.inputs) > 1 and node.rule.pattern is None


def split_edge_names(node):
    """Names of the edges of ``node``'s parents, ``"e_<node><<parent>"`` (``#i`` appended to a repeated parent).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> split_edge_names(SimpleNamespace(name="add1", inputs=("conv2", "x", "x")))
    ['e_add1<conv2', 'e_add1<x', 'e_add1<x#2']
    """
    return [f"e_{node.name}<{u}" + (f"#{i}" if u in node.inputs[:i] else "")
            for i, u in enumerate(node.inputs)]


def node_edges(graph, skip_encoding=DEFAULT_SKIP_ENCODING):
    """The edges of the nodes of ``graph`` in order, as ``(name, size, kind, layer, "parents->node")``.

    One defining edge ``"e_<node>"`` per node; under ``"edges"`` a node with
    several parents has instead one edge per parent, of the parent's size.
    """
    edges = []
    for layer, node in enumerate(graph.nodes, start=1):
        if is_split(node, skip_encoding):
            edges += [(name, graph.sizes[u], node.op, layer, f"{u}->{node.name}")
                      for name, u in zip(split_edge_names(node), node.inputs)]
        else:
            edges.append((f"e_{node.name}", graph.sizes[node.name], node.op, layer,
                          f"{','.join(node.inputs)}->{node.name}"))
    return edges


def fed_rows(F):
    """Rows of a restriction-map block (1-D diagonal, dense or sparse) holding a nonzero entry."""
    if sp.issparse(F):
        F = sp.csr_matrix(F, copy=True)     # eliminate_zeros works in place: never on the caller's block
        F.eliminate_zeros()
        return np.flatnonzero(np.diff(F.indptr))
    if F.ndim == 1:
        return np.flatnonzero(F)
    return np.flatnonzero(np.any(F != 0, axis=1))


def _take_rows(block, rows):
    """``block[rows]`` of a 1-D diagonal, dense or sparse block (a diagonal kept whole when every row is taken)."""
    n = block.shape[0]
    if block.ndim == 1 and not sp.issparse(block):
        if rows.size == n:
            return block
        return sp.csr_matrix((block[rows], (np.arange(rows.size), rows)), shape=(rows.size, n))
    return sp.csr_matrix(block)[rows] if sp.issparse(block) else block[rows]


def split_row(node, entries):
    """The edges encoding of ``node``'s defining block row: one ``(edge name, entries)`` per parent.

    ``entries`` is the node's row ``[(parent, -F), ..., ("1>v", -b_v), (v, identity)]``
    (:func:`sheaflinalg.sheaf.assembled.block_rows.node_row`: parents first in ``node.inputs``
    order, the node itself last).  The edge of parent ``i`` keeps the rows ``R_i``
    that parent feeds: ``[(u_i, -F_i[R_i]), (bias rows R_i: first parent only), (v, I[R_i])]``.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> node = SimpleNamespace(name="s", inputs=("a", "b"))
    >>> rows = split_row(node, [("a", -np.ones(2)), ("b", -np.ones(2)), ("s", np.ones(2))])
    >>> [(edge, [c for c, _ in entries]) for edge, entries in rows]
    [('e_s<a', ['a', 's']), ('e_s<b', ['b', 's'])]
    """
    n_parents = len(node.inputs)
    parents, extra, own = entries[:n_parents], entries[n_parents:-1], entries[-1]
    rows = []
    for i, (name, (u, F)) in enumerate(zip(split_edge_names(node), parents)):
        fed = fed_rows(F)
        kept = [(u, _take_rows(F, fed))] + ([(c, _take_rows(B, fed)) for c, B in extra] if i == 0 else [])
        rows.append((name, kept + [(own[0], _take_rows(own[1], fed))]))
    return rows


def split_static_rows(graph, static, skip_encoding):
    """``{node: [(edge, entries), ...]}``: the split rows of every node with several parents under
    ``"edges"`` (none under ``"sum"``), from ``static`` (``{node: its defining block row}``), computed once
    per batch.  Such nodes (``add``, ``concat``) never depend on the pattern."""
    return {node.name: split_row(node, static[node.name]) for node in graph.nodes if is_split(node, skip_encoding)}

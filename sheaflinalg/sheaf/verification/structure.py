"""The structural certificate that ``delta_Omega`` is square and unit lower triangular, read off the graph.

Under the default encoding (``skip_encoding="sum"``) every node ``v`` has one
defining edge ``e_v = x_v - sum_u F_(u->v) x_u - diag(c_v) 1_v``, and a full
system adds ``e_y = yhat - J z_out``.  The certificate checks the block
pattern of these rows, never a matrix: the edges and the free blocks pair
up one to one, each edge's block on its own vertex is the identity (the
stored diagonal, exactly 1.0 everywhere), and each of its other blocks sits
on a boundary block (the input, a ones block) or on a free vertex earlier in
the order.  Then ``delta_Omega`` is square, block lower triangular with
identity diagonal blocks, hence unit lower triangular: ``det delta_Omega =
1`` and ``det L[Omega, Omega] = det(delta_Omega)^2 = 1`` exactly, whatever the
maps ``F`` hold.  Only names and equality tests are involved: no rounding.
"""

import numpy as np

from ..assembled.block_rows import identity_block


def structure_rows(graph, reduced=False):
    """The block pattern of ``delta`` of ``graph``: ``[(edge, [(column block, diagonal or None), ...]), ...]``.

    The map blocks are not built (None); a vertex's own block is the stored identity diagonal
    (:func:`~sheaflinalg.sheaf.assembled.block_rows.identity_block`).

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    >>> structure_rows(sl.Network.from_nodes((2,), [fc]).graph)
    [('e_fc', [('x', None), ('1>fc', None), ('fc', array([1.]))]), ('e_y', [('fc', None), ('yhat', array([1.]))])]
    """
    rows = []
    for node in graph.nodes:
        columns = [(parent, None) for parent in node.inputs]
        if node.rule.has_bias:
            columns.append((f"1>{node.name}", None))
        rows.append((f"e_{node.name}", columns + [(node.name, identity_block(graph, node.name))]))
    if not reduced:
        rows.append(("e_y", [(graph.output_node, None), ("yhat", identity_block(graph, graph.output_node))]))
    return rows


def unit_triangular_structure(rows, layout):
    """Exact check that the block rows ``rows`` (as :func:`structure_rows`) make ``delta_Omega`` of ``layout``
    square and unit lower triangular.

    Returns
    -------
    passed : bool
    reason : str
        Empty when passed, else the first thing that failed.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.sheaf.layout import Layout
    >>> fc = sl.Node("fc", "linear", ["x"], params={"weight": np.ones((1, 2)), "bias": np.zeros(1)})
    >>> graph = sl.Network.from_nodes((2,), [fc]).graph
    >>> unit_triangular_structure(structure_rows(graph), Layout.from_graph(graph))
    (True, '')
    >>> unit_triangular_structure([("e_fc", [("fc", np.array([2.0]))])], Layout.from_graph(graph, reduced=True))
    (False, "edge 'e_fc': its diagonal block on 'fc' is not the identity (2.0 at 0)")
    """
    free = [block.name for block in layout.free_blocks]
    edges = [block.name for block in layout.edge_blocks]
    if [edge for edge, _ in rows] != edges or len(rows) != len(free):
        return False, f"not square: {len(rows)} edges {[e for e, _ in rows][:4]}... for {len(free)} free blocks"
    position = {name: k for k, name in enumerate(free)}
    boundary = {block.name for block in layout.boundary_blocks}
    for k, (edge, columns) in enumerate(rows):
        own = free[k]
        if layout.edge_blocks[k].size != layout.free_blocks[k].size:
            return False, f"not square: edge {edge!r} has {layout.edge_blocks[k].size} rows, {own!r} " \
                          f"{layout.free_blocks[k].size} columns"
        diagonals = [block for column, block in columns if column == own]
        if len(diagonals) != 1:
            return False, f"edge {edge!r}: {len(diagonals)} blocks on its own vertex {own!r}, not one"
        reason = _identity_reason(diagonals[0], layout.free_blocks[k].size)
        if reason:
            return False, f"edge {edge!r}: its diagonal block on {own!r} is not the identity ({reason})"
        for column, _ in columns:
            if column != own and column not in boundary and position.get(column, len(free)) >= k:
                return False, f"edge {edge!r}: a block on {column!r}, not an earlier vertex (above the diagonal)"
    return True, ""


def _identity_reason(diagonal, size):
    """Why the stored diagonal block is not ``size`` entries exactly 1.0 (empty when it is)."""
    d = np.asarray(diagonal) if diagonal is not None else np.empty(0)
    if d.ndim != 1 or d.size != size:
        return f"shape {d.shape}, not ({size},)"
    if not np.all(d == 1.0):
        i = int(np.argmax(d != 1.0))
        return f"{float(d[i])!r} at {i}"
    return ""

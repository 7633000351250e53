"""The figure of a network's graph as its sheaf sees it: vertices with their stalk sizes, defining edges, hyperedges.

Every computed node is a vertex whose stalk is its value flattened (its size is printed) and whose
one defining edge reads its parents; a node with several parents (residual addition,
concatenation) has a hyperedge, drawn as the parents' lines meeting at a joint before the node.
Nodes are placed in topological layers, top to bottom (a node one row below its deepest parent);
an edge that skips rows is drawn as an arc.  The
boundary (the input ``x``, and the ``1`` vertex that carries the biases, drawn beside each node
that reads it) is grey, pattern-dependent
nodes (relu, leaky relu, max pool) orange, the output vertex ``yhat`` (after phi) blue; the other
nodes' maps are linear.  Graphs larger than about 60 nodes are refused: draw a sub-range.
"""

from ..network.graph import INPUT, Graph
from ..network.model import Network
from .figure import new_figure, save_figure

#: Most nodes drawn in one figure (more are not legible); draw a sub-range with ``nodes=(first, last)``.
MAX_NODES = 60
BOUNDARY, PATTERN, LINEAR, OUTPUT, OUTSIDE = "#BBBBBB", "#E69F00", "#56B4E9", "#0072B2", "#EEEEEE"
ONES, YHAT = "1", "yhat"


def _graph_of(network):
    if isinstance(network, Network):
        return network.graph
    if isinstance(network, Graph):
        return network
    raise TypeError(f"network must be a sheaflinalg.Network or a sheaflinalg Graph, got {type(network).__name__}")


def _selection(graph, nodes, max_nodes):
    """The nodes drawn: all, or those from ``nodes[0]`` to ``nodes[1]`` (names, in the graph's order)."""
    names = [node.name for node in graph.nodes]
    if nodes is not None:
        if not isinstance(nodes, (tuple, list)) or len(nodes) != 2 or any(n not in names for n in nodes):
            raise ValueError(f"nodes must be a pair (first, last) of node names of the graph, got {nodes!r}; the "
                             f"nodes are {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}")
        first, last = names.index(nodes[0]), names.index(nodes[1])
        if first > last:
            raise ValueError(f"nodes: {nodes[0]!r} comes after {nodes[1]!r} in the graph's order")
        names = names[first:last + 1]
    if len(names) > max_nodes:
        raise ValueError(f"the graph has {len(names)} nodes, more than {max_nodes} can be drawn legibly: draw a "
                         f"sub-range with nodes=(first, last), e.g. nodes=({names[0]!r}, {names[max_nodes - 1]!r})")
    return names


def _layers(graph, names):
    """``{vertex: row}``: the boundary (input, parents outside the range) in row 0, each drawn node
    one row below its deepest parent, the output vertex below the output node."""
    drawn = set(names)
    column = {}
    for name in names:
        for parent in graph.node(name).inputs:
            column.setdefault(parent, 0)
        column[name] = 1 + max((column[p] for p in graph.node(name).inputs), default=-1)
    if graph.output_node in drawn:
        column[YHAT] = column[graph.output_node] + 1
    return column


def _parents(graph, vertex):
    if vertex == YHAT:
        return [graph.output_node]
    return list(graph.node(vertex).inputs) if vertex in graph.shapes and vertex != INPUT else []


def _positions(graph, row):
    """``{vertex: (x, y)}`` and the widest row's width: rows top to bottom; in each row, a vertex goes
    under the mean of its parents (a chain stays in a column, branches side by side), one unit apart."""
    by_row = {}
    for vertex, r in row.items():
        by_row.setdefault(r, []).append(vertex)
    x = {}
    for r in sorted(by_row):
        wanted = {}
        for i, vertex in enumerate(by_row[r]):
            above = [x[p] for p in _parents(graph, vertex) if p in x]
            wanted[vertex] = sum(above) / len(above) if above else i - (len(by_row[r]) - 1) / 2.0
        ordered = sorted(by_row[r], key=lambda v: wanted[v])
        placed = [wanted[ordered[0]]]
        for vertex in ordered[1:]:
            placed.append(max(wanted[vertex], placed[-1] + 1.0))
        shift = sum(p - wanted[v] for p, v in zip(placed, ordered)) / len(ordered)
        x.update({v: p - shift for v, p in zip(ordered, placed)})
    pos = {v: (x[v], -float(r)) for v, r in row.items()}
    return pos, max(xx for xx, _ in pos.values()) - min(xx for xx, _ in pos.values()) + 1.0


def _label(graph, vertex, drawn):
    if vertex == YHAT:
        return f"yhat\n{graph.output}({graph.output_node})", OUTPUT
    size = graph.sizes[vertex]
    shape = "x".join(map(str, graph.shapes[vertex]))
    if vertex == INPUT:
        return f"x (input)\n{shape} = {size}", BOUNDARY
    if vertex not in drawn:
        return f"{vertex}\n(outside) {size}", OUTSIDE
    node = graph.node(vertex)
    return f"{vertex}\n{node.op} {shape} = {size}", PATTERN if node.rule.pattern_dependent else LINEAR


#: Half a vertex's height in points: arrows start and end at the boxes' edges.
SHRINK = 13


def _arrow(ax, start, end, head=True, shrink=(SHRINK, SHRINK), **style):
    """An edge from ``start`` to ``end``; one that skips rows bends (an arc) so as not to cross the rows between."""
    rows = abs(start[1] - end[1])
    bend = min(1.4, 3.5 / rows) if rows > 1.5 else 0.0      # over an inch aside: clear of the boxes between
    if start[0] > end[0] + 0.1:                               # from the right: bend out to the right
        bend = -bend
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(
        arrowstyle="-|>" if head else "-", shrinkA=shrink[0], shrinkB=shrink[1], lw=0.9,
        connectionstyle=f"arc3,rad={bend}", color=style.pop("color", "0.3"), **style))


def _draw_edges(ax, graph, names, pos):
    for name in names:
        node = graph.node(name)
        x, y = pos[name]
        if len(node.inputs) > 1:           # a hyperedge: the parents meet at a joint, one arrow to the node
            joint = (x, y + 0.45)
            for parent in node.inputs:
                _arrow(ax, pos[parent], joint, head=False, shrink=(SHRINK, 0))
            ax.plot(*joint, "o", ms=5, color="0.2", zorder=3)
            _arrow(ax, joint, (x, y), shrink=(0, SHRINK))
        elif node.inputs:                  # a constant node has no parent: only its "1" vertex
            _arrow(ax, pos[node.inputs[0]], (x, y))
        if node.rule.has_bias:             # the one "1" vertex, drawn beside each node that reads it
            ones = (x + 0.6, y + 0.45)
            ax.text(*ones, ONES, ha="center", va="center", fontsize=6, zorder=4,
                    bbox=dict(boxstyle="circle,pad=0.2", fc=BOUNDARY, ec="0.5", lw=0.5))
            _arrow(ax, ones, (x, y), shrink=(5, SHRINK), color="0.5", linestyle=":")
    if YHAT in pos:
        _arrow(ax, pos[graph.output_node], pos[YHAT], color=OUTPUT)


def plot_graph(network, path=None, ax=None, nodes=None, max_nodes=MAX_NODES, title=None):
    """Draw a network's graph as its sheaf sees it: vertices, stalk sizes, defining edges and hyperedges.

    Parameters
    ----------
    network : Network or Graph
        A graph network (a chain is drawn as its nodes ``z1, a1, ...``).
    path : str, optional
        Write the figure here (PNG, PDF, SVG by the extension), atomically.
    ax : matplotlib Axes, optional
        Draw into this axes instead of a new figure.
    nodes : (str, str), optional
        Draw only the nodes from the first to the last name (in the graph's order); their parents
        outside the range are drawn as boundary vertices.
    max_nodes : int
        Refuse to draw more nodes than this (default 60).
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        More than ``max_nodes`` nodes (the message suggests a sub-range), or a bad ``nodes``.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> from sheaflinalg.plotting.graph import plot_graph
    >>> conv = sl.Node("conv", "conv", ["x"], {"stride": 1, "padding": 1, "dilation": 1, "groups": 1},
    ...                {"weight": np.ones((2, 1, 3)), "bias": np.zeros(2)})
    >>> net = sl.Network.from_nodes((1, 5), [conv, sl.Node("act", "relu", ["conv"]),
    ...                                      sl.Node("res", "add", ["act", "conv"])])
    >>> ax = plot_graph(net)
    >>> [t.get_text().split()[0] for t in ax.texts if t.get_text()]
    ['1', 'x', 'conv', 'act', 'res', 'yhat']
    """
    graph = _graph_of(network)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes must be a positive integer, got {max_nodes!r}")
    names = _selection(graph, nodes, max_nodes)
    pos, widest = _positions(graph, _layers(graph, names))
    if ax is None:
        n_rows = 1 - min(y for _, y in pos.values())
        _, ax = new_figure(figsize=(min(1.0 + 2.2 * widest, 40.0), min(1.0 + 0.75 * n_rows, 40.0)))
    _draw_edges(ax, graph, names, pos)
    drawn = set(names)
    for vertex, (x, y) in pos.items():
        text, colour = _label(graph, vertex, drawn)
        ax.text(x, y, text, ha="center", va="center", fontsize=7, zorder=4,
                bbox=dict(boxstyle="round,pad=0.3", fc=colour, ec="0.3", lw=0.6))
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.5, max(ys) + 0.5)
    ax.set_axis_off()
    ax.set_title(title if title is not None else (f"{len(names)} of {len(graph.nodes)} nodes; stalk size after '='; "
                                                 "orange: pattern-dependent; grey: boundary"), fontsize=8)
    if path is not None:
        save_figure(ax.figure, path)
    return ax

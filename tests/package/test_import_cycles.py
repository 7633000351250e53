"""No import cycle between modules of the package, function-level imports included; loading Euler loads
neither the exact flow nor the pinned analysis."""

import subprocess
import sys
import textwrap

from helpers.module_graph import PACKAGE, graph


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    edges = graph()
    assert len(edges) > 100 and "sheaflinalg.dynamics.heat" in edges
    assert cycles(edges) == []


def closure(edges, start):
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += edges.get(m, ())
    return seen


def test_euler_imports_nothing_of_the_exact_flow_and_the_exact_flow_nothing_of_euler():
    edges = graph()
    for own, other in (("euler", "exact"), ("exact", "euler")):
        for start in [m for m in edges if m.startswith(f"sheaflinalg.dynamics.{own}")]:
            reached = closure(edges, start)
            assert not {m for m in reached if m.startswith(f"sheaflinalg.dynamics.{other}")}, start


def test_loading_euler_loads_neither_the_exact_flow_nor_the_pinned_analysis():
    # A child process loads Euler's modules under bare parent packages (the package root and
    # sheaflinalg.dynamics export everything; their own code is not run here), then runs Euler.
    code = textwrap.dedent(f"""
        import sys, types
        for name, path in (("sheaflinalg", {str(PACKAGE)!r}), ("sheaflinalg.dynamics", {str(PACKAGE / "dynamics")!r})):
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
        from sheaflinalg.dynamics.euler.run import run_euler
        from sheaflinalg.dynamics.euler.settings import EulerSettings
        loaded = sorted(m for m in sys.modules if m.startswith("sheaflinalg."))
        print(",".join(loaded))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=600).stdout.strip().split(",")
    assert "sheaflinalg.dynamics.euler.run" in out
    assert not [m for m in out if m.startswith("sheaflinalg.dynamics.exact")], out
    loaded = [m for m in out if m.startswith("sheaflinalg.discord")]
    assert not loaded, loaded

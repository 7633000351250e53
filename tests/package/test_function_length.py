"""A function reads on one screen: no function of the package has more than 80 code lines.

Code lines are the lines a function spans that are neither blank, nor comments, nor its docstring
(nested functions count toward the function that holds them).
"""

import ast

import pytest
from helpers.paths import PACKAGE

LIMIT = 80


def code_lines(node, lines):
    """Code lines of the function ``node`` in a file of ``lines``."""
    first, last = node.lineno, node.end_lineno
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        doc = range(body[0].lineno, body[0].end_lineno + 1)
    else:
        doc = range(0)
    return sum(1 for n in range(first, last + 1)
               if n not in doc and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#"))


def long_functions(path):
    text = path.read_text()
    lines = text.splitlines()
    return [(node.name, node.lineno, code_lines(node, lines)) for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and code_lines(node, lines) > LIMIT]


def test_the_counter_counts_code_only():
    source = 'def f():\n    """Doc.\n\n    More."""\n    # a comment\n\n    x = 1\n    return x\n'
    node = ast.parse(source).body[0]
    assert code_lines(node, source.splitlines()) == 3          # def, x = 1, return x


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_over_the_limit(path):
    assert not long_functions(path), f"functions over {LIMIT} code lines (name, line, count): {long_functions(path)}"

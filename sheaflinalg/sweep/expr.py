"""Arithmetic over parameters for ``[derived]`` values, parsed safely (no ``eval`` of text).

The text is parsed with Python's own parser into a syntax tree, and only
numbers, parameter names, ``+ - * / // % **``, unary signs, parentheses and
the functions in :data:`FUNCTIONS` are evaluated; anything else (attributes,
subscripts, strings, comprehensions, other calls) is refused before any run.
"""

import ast
import math
import operator

BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
FUNCTIONS = {"int": int, "float": float, "round": round, "min": min, "max": max, "abs": abs,
             "log": math.log, "log10": math.log10, "exp": math.exp, "sqrt": math.sqrt}


class ExpressionError(ValueError):
    """A derived expression that cannot be parsed or names something it may not use."""


def parse(text, where="expression"):
    """The syntax tree of ``text`` and the parameter names it uses; refuses anything but arithmetic.

    Examples
    --------
    >>> _, names = parse("2 / n_train")
    >>> sorted(names)
    ['n_train']
    """
    if not isinstance(text, str):
        raise ExpressionError(f"{where} must be a string like \"2 / n_train\", got {type(text).__name__}")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{where}: cannot parse {text!r} ({exc.msg})") from None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in FUNCTIONS:
                names.add(node.id)
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS) or node.keywords:
                raise ExpressionError(f"{where}: only the functions {', '.join(FUNCTIONS)} may be called, "
                                      f"in {text!r}")
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ExpressionError(f"{where}: only numbers may appear as constants, in {text!r}")
        elif not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load, *BINARY, *UNARY)):
            raise ExpressionError(f"{where}: {type(node).__name__} is not allowed in {text!r}")
    return tree, names


def evaluate(tree, values, where="expression"):
    """Value of a tree from :func:`parse` with the parameters ``values``.

    Examples
    --------
    >>> evaluate(parse("max(int(T / dt), 100)")[0], {"T": 0.5, "dt": 0.01})
    100
    """
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.BinOp):
            return BINARY[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp):
            return UNARY[type(node.op)](ev(node.operand))
        return FUNCTIONS[node.func.id](*[ev(a) for a in node.args])

    try:
        result = ev(tree)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ExpressionError(f"{where}: {exc}") from None
    if isinstance(result, bool) or not isinstance(result, (int, float)) or not math.isfinite(result):
        raise ExpressionError(f"{where}: the value {result!r} is not a finite number")
    return result

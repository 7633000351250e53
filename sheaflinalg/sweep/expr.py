"""Arithmetic over parameters for ``[derived]`` values, parsed safely (no ``eval`` of text).

The text is parsed with Python's own parser into a syntax tree, and only
numbers, parameter names, ``+ - * / // % **``, unary signs, parentheses and
the functions in :data:`FUNCTIONS` are evaluated; anything else (attributes,
subscripts, strings, comprehensions, other calls) is refused before any run.

The arithmetic is bounded, so that no expression can run for ever or fill the memory: the text
has at most :data:`MAX_TEXT` characters, every integer an operation would build is estimated
before it is built and refused beyond :data:`MAX_BITS` bits (``10**10**10``), and a value must be a
finite float or an integer that fits in 64 bits (the compiled loops count in int64).
"""

import ast
import math
import operator

BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
FUNCTIONS = {"int": int, "float": float, "round": round, "min": min, "max": max, "abs": abs,
             "log": math.log, "log10": math.log10, "exp": math.exp, "sqrt": math.sqrt}

MAX_TEXT = 1000
MAX_BITS = 4096             # intermediate integers (2**4096 is far beyond any float)
INT_LIMIT = 2 ** 63 - 1     # a value that is an integer: int64
MAX_NDIGITS = 400           # round(x, n): no float has more digits


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
    if len(text) > MAX_TEXT:
        raise ExpressionError(f"{where}: an expression has at most {MAX_TEXT} characters, got {len(text)}")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{where}: cannot parse {text!r} ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"{where}: {text[:40]!r}... is nested too deeply") from None
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
            left, right = ev(node.left), ev(node.right)
            _check_size(type(node.op), left, right)
            return BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            return UNARY[type(node.op)](ev(node.operand))
        args = [ev(a) for a in node.args]
        if node.func.id == "round" and len(args) == 2 and isinstance(args[1], int) and abs(args[1]) > MAX_NDIGITS:
            raise _TooLarge(f"round(x, n) needs |n| <= {MAX_NDIGITS}, got {args[1]}")
        return FUNCTIONS[node.func.id](*args)

    try:
        result = ev(tree)
    except _TooLarge as exc:
        raise ExpressionError(f"{where}: {exc}; refused before computing it") from None
    except OverflowError as exc:
        raise ExpressionError(f"{where}: a value is too large for a float ({exc})") from None
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        raise ExpressionError(f"{where}: {exc}") from None
    if isinstance(result, int) and not isinstance(result, bool) and abs(result) > INT_LIMIT:
        raise ExpressionError(f"{where}: the integer value has {result.bit_length()} bits; values must fit "
                              f"in 64 bits (at most {INT_LIMIT})")
    if isinstance(result, bool) or not isinstance(result, (int, float)) or not math.isfinite(result):
        raise ExpressionError(f"{where}: the value {result!r} is not a finite number")
    return result


class _TooLarge(Exception):
    """An integer the arithmetic would build beyond :data:`MAX_BITS` bits."""


def _check_size(op, left, right):
    """Refuse an integer operation whose result would exceed :data:`MAX_BITS` bits, before doing it
    (an upper bound of the result's size: cheap, and exact enough to tell 2**64 from 10**10**10)."""
    if not all(isinstance(v, int) for v in (left, right)):
        return                     # float arithmetic overflows to an error or inf, quickly
    a, b = abs(left).bit_length(), abs(right).bit_length()
    if op is ast.Pow:
        bits = 0 if right <= 0 or abs(left) <= 1 else math.ceil(right * math.log2(abs(left))) + 1
    elif op is ast.Mult:
        bits = a + b
    else:
        bits = max(a, b) + 1
    if bits > MAX_BITS:
        raise _TooLarge(f"{left} {SYMBOLS[op]} {right} would be an integer of about {bits} bits, more than {MAX_BITS}")

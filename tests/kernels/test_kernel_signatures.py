"""The compiled kernels stay readable: named structures instead of long runs of positional arguments,
and no function longer than a screen (issue 20)."""

import ast

import pytest
from helpers.paths import PACKAGE

KERNELS = PACKAGE / "kernels"
MAX_PARAMETERS = 20
MAX_CODE_LINES = 80


def code_lines(fn, lines):
    """Lines of ``fn`` that are neither blank, nor comments, nor its docstring."""
    doc = set()
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        doc = set(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i in range(fn.lineno, fn.end_lineno + 1)
               if i not in doc and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def functions():
    for path in sorted(KERNELS.rglob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                yield path.relative_to(KERNELS).as_posix(), node, text.splitlines()


@pytest.mark.parametrize("name,fn,lines", [pytest.param(*f, id=f"{f[0]}:{f[1].name}") for f in functions()])
def test_kernel_functions_are_short_and_take_few_parameters(name, fn, lines):
    n_params = len(fn.args.args) + len(fn.args.kwonlyargs)
    assert n_params <= MAX_PARAMETERS, f"{name}: {fn.name} takes {n_params} parameters"
    assert code_lines(fn, lines) <= MAX_CODE_LINES, f"{name}: {fn.name} has {code_lines(fn, lines)} code lines"


def test_the_structures_are_module_level_namedtuples_with_every_field_documented():
    # numba's cache finds a structure's class again by module and name; the module docstring names
    # every field once (the kernels' Parameters sections refer to it).
    from sheaflinalg.kernels import structs

    classes = [v for k, v in vars(structs).items() if isinstance(v, type) and issubclass(v, tuple)
               and hasattr(v, "_fields")]
    assert len(classes) >= 10
    for cls in classes:
        assert cls.__module__ == structs.__name__ and getattr(structs, cls.__name__) is cls
        assert cls.__name__ in structs.__doc__
        for field in cls._fields:
            assert f"``{field}``" in structs.__doc__, f"{cls.__name__}.{field} is not documented"

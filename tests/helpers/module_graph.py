"""The import graph of the package, read from the source (imports at any depth of the code, function-level
ones included): shared by the layering test and the import-cycle test."""

import ast
from helpers.paths import PACKAGE

MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path):
    """Absolute names of the sheaflinalg modules that ``path`` imports (at any depth of its code)."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:  # from . import a, b: each name may be a module
                found += [f"{target}.{alias.name}" for alias in node.names]
            else:
                found += [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [m for m in found if m == "sheaflinalg" or m.startswith("sheaflinalg.")]


def graph():
    """``{module: set of the package's modules it imports}`` over every module of the package (root included);
    an imported name that is not a module (``from .x import f``) is left out."""
    paths = sorted(PACKAGE.rglob("*.py"))
    names = {module_name(p) for p in paths}
    return {module_name(p): {m for m in imported_modules(p) if m in names and m != module_name(p)} for p in paths}

"""Sweep specifications: a TOML file (or its text, or a dict) checked whole, then expanded into runs.

Sections: ``[sweep]`` (``function``, ``metrics``, optional ``name`` and ``labels``: parameters that
are recorded with each run but not passed to the call, such as ``T`` or ``beta_M``), ``[fixed]`` (keyword arguments of
every run), ``[grid]`` (the product of its axes), ``[zip]`` (axes varied together, equal lengths) and
``[derived]`` (arithmetic over the other parameters, :mod:`sheaflinalg.sweep.expr`).  A value may be a
range: ``{ logspace = [a, b, n] }`` (``10**a .. 10**b``), ``{ linspace = [a, b, n] }``,
``{ range = [start, stop, step] }``.  Every problem is a :class:`SpecError` naming the key, raised before
any run: names (identifiers, not :data:`RESERVED`, not equal up to case: SQLite column names ignore
case), the plan's size (counted from the axes' lengths before anything is built, at most
:data:`MAX_RUNS`), and every value of every run through the call's own checks
(:data:`sheaflinalg.sweep.calls.DOMAINS`: ``dt = nan`` or ``task = "parabolid"`` are refused here, not
stored as failed runs).
"""

import difflib
import hashlib
import itertools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass

import numpy as np

from .._common.resources import shipped_spec
from ..tasks import PAPER_SWEEPS
from . import calls, expr

SECTIONS = ("sweep", "fixed", "grid", "zip", "derived")
SWEEP_KEYS = ("function", "metrics", "name", "labels")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Columns that :func:`sheaflinalg.sweep.load` and the CSV export add beside the parameters.
RESERVED = ("status", "run_id")
#: Largest plan (number of runs) a specification may expand into.
MAX_RUNS = 100_000
#: Largest specification file read (bytes).
MAX_FILE = 1 << 20


class SpecError(ValueError):
    """A sweep specification that cannot run; the message names the offending key."""


@dataclass
class Spec:
    """A checked sweep: its function, metrics, parameters and the expanded runs.

    Attributes
    ----------
    name, function : str
    metrics : list of str
    axes : list of str
        Parameters that vary (grid and zip axes, derived values), in spec order.
    runs : list of dict
        Full parameters of every run, fixed and derived included.
    text : str
        The specification as JSON (stored with the sweep).
    """

    name: str
    function: str
    metrics: list
    axes: list
    runs: list
    text: str
    labels: tuple = ()

    def run_ids(self):
        return [run_id(self.function, p) for p in self.runs]


def run_id(function, params):
    """The identity of a run: SHA-256 of its function and full parameters (canonical JSON)."""
    text = json.dumps({"function": function, "params": params}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def read(spec):
    """The raw specification dict from a path, a shipped spec's name, a TOML string or a dict."""
    if isinstance(spec, dict):
        return spec
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"a sweep specification is a TOML file name, a shipped spec's name, a TOML text or a "
                        f"dict, got {type(spec).__name__}")
    spec = shipped_spec(spec)           # a shipped spec's bare name (``quick``) becomes its file
    if os.path.exists(spec):
        return _read_file(os.fspath(spec))
    if isinstance(spec, str) and ("\n" in spec or "[sweep]" in spec):
        return _parse(spec, "")
    raise SpecError(f"no sweep specification file {os.fspath(spec)!r}")


def _parse(text, where):
    """The dict of a TOML text (``where``: the file name and a colon, or nothing)."""
    if len(text) > MAX_FILE:
        raise SpecError(f"{where}a specification is a short TOML text (at most {MAX_FILE} bytes)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{where}malformed TOML ({exc})") from None
    except RecursionError:
        raise SpecError(f"{where}malformed TOML (arrays or tables nested too deeply)") from None


def _read_file(path):
    """The dict of a TOML file: a clear error for a directory, an unreadable, huge or binary file."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the specification ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE:
        raise SpecError(f"{path}: a specification is a short TOML text (at most {MAX_FILE} bytes), "
                        "this file is larger")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not a TOML text file (byte {exc.start} is not UTF-8)") from None
    return _parse(text, f"{path}: ")


def _suggest(name, choices):
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean `{close[0]}`?" if close else f"; expected one of {', '.join(sorted(choices))}"


def _axis(key, value):
    """``(kind, args, length)`` of an axis (``kind`` None for a list), checked, without building it."""
    if isinstance(value, list):
        if not value:
            raise SpecError(f"{key}: an axis needs at least one value")
        return None, value, len(value)
    if not isinstance(value, dict):
        raise SpecError(f"{key}: an axis must be a list or a range table, got {type(value).__name__}")
    if len(value) != 1 or next(iter(value)) not in ("logspace", "linspace", "range"):
        raise SpecError(f"{key}: a range is {{ logspace = [a, b, n] }}, {{ linspace = [a, b, n] }} or "
                        f"{{ range = [start, stop, step] }}, got {value!r}")
    kind, args = next(iter(value.items()))
    if (not isinstance(args, list) or len(args) != 3
            or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)):
        raise SpecError(f"{key}: {kind} needs three numbers, got {args!r}")
    if not all(math.isfinite(a) for a in args):
        raise SpecError(f"{key}: {kind} needs finite numbers, got {args!r}")
    if kind == "range":
        if not all(isinstance(a, int) for a in args) or args[2] == 0:
            raise SpecError(f"{key}: range needs three integers with a non-zero step, got {args!r}")
        start, stop, step = args
        length = max(0, -((start - stop) // step))          # len(range(...)), without an int64 limit
    else:
        if not isinstance(args[2], int) or args[2] < 1:
            raise SpecError(f"{key}: {kind} needs a positive integer count, got {args[2]!r}")
        length = args[2]
    if length == 0:
        raise SpecError(f"{key}: the range {args!r} is empty")
    return kind, args, length


def _values(kind, args):
    """The values of an axis from :func:`_axis` (built only once the plan's size is known)."""
    if kind is None:
        return args
    if kind == "range":
        return list(range(*args))
    fn = np.logspace if kind == "logspace" else np.linspace
    return [float(v) for v in fn(args[0], args[1], args[2])]


def _check_type(function, name, value, where, labels=()):
    """Refuse a value of the wrong type or outside the call's own domain (:data:`calls.DOMAINS`)."""
    if name in labels:
        if (isinstance(value, bool) or not isinstance(value, (int, float, str))
                or isinstance(value, float) and not math.isfinite(value)):
            raise SpecError(f"{where}: label `{name}` must be a finite number or a string, got {value!r}")
        return
    types = calls.parameters(function)
    if name not in types:
        raise SpecError(f"{where}: `{name}` is not a parameter of {function}{_suggest(name, types)}")
    want = types[name]
    if value is None:
        return
    ok = {int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          bool: isinstance(value, bool) or (name == "stagnation" and value == "auto"),
          str: isinstance(value, str),
          list: isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                                for v in value) and len(value) >= 2}[want]
    if not ok:
        what = "a list of at least two positive integers" if want is list else want.__name__
        raise SpecError(f"{where}: `{name}` must be {what}, got {value!r}")
    domain = calls.DOMAINS.get(name)
    if isinstance(domain, tuple):
        if value not in domain:
            raise SpecError(f"{where}: unknown {name} {value!r}{_suggest(value, domain)}")
    elif domain is not None:
        try:
            domain(value, f"`{name}`")
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{where}: {exc}") from None


def load(spec):
    """Check a specification whole and expand it into its runs (:class:`Spec`)."""
    try:
        return _load(read(spec))
    except expr.ExpressionError as exc:
        raise SpecError(str(exc)) from None


def _load(raw):
    """The steps of :func:`load`: the header, the parameter sections, the expansion, per-run checks."""
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        key = sorted(map(str, unknown))[0]
        raise SpecError(f"unknown section [{key}]{_suggest(key, SECTIONS)}")
    head = raw.get("sweep")
    if not isinstance(head, dict):
        raise SpecError("[sweep] is missing: it names the function and the metrics")
    function, metrics, labels = _header(head)
    fixed, grid, zipped, derived = _parameters(raw, function, labels)
    runs = _expand(function, fixed, grid, zipped, derived, labels)
    for p in runs:
        _check_setup(function, p, metrics)
    axes = list(grid) + list(zipped) + list(derived)
    text = json.dumps(raw, sort_keys=True, default=str)
    return Spec(head.get("name", function), function, list(metrics), axes, runs, text, labels)


def _header(head):
    """``(function, metrics, labels)`` of the ``[sweep]`` table, checked."""
    for key in head:
        if key not in SWEEP_KEYS:
            raise SpecError(f"[sweep]: unknown key `{key}`{_suggest(key, SWEEP_KEYS)}")
    function = head.get("function")
    if function not in calls.FUNCTIONS:
        raise SpecError(f"[sweep] function: unknown function {function!r}; expected one of "
                        f"{', '.join(calls.FUNCTIONS)}")
    metrics = head.get("metrics")
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise SpecError("[sweep] metrics: a non-empty list of metric names is required")
    known = calls.FUNCTIONS[function]["metrics"]
    for m in metrics:
        if m not in known:
            raise SpecError(f"[sweep] metrics: unknown metric `{m}` of {function}{_suggest(m, known)}")
    name = head.get("name", function)
    if not isinstance(name, str) or not name.strip() or len(name) > 100 or not name.isprintable():
        raise SpecError(f"[sweep] name: a short printable text, got {name!r}")
    labels = head.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(x, str) and NAME.match(x) for x in labels):
        raise SpecError("[sweep] labels: a list of parameter names (identifiers)")
    for x in labels:
        if x in calls.parameters(function):
            raise SpecError(f"[sweep] labels: `{x}` is a parameter of {function}, not a label")
    return function, metrics, tuple(labels)


def _parameters(raw, function, labels):
    """``(fixed, grid, zipped, derived)``: every parameter section checked, ranges expanded, derived
    expressions parsed."""
    sections = {s: raw.get(s, {}) for s in ("fixed", "grid", "zip", "derived")}
    seen = _names(sections)
    fixed = sections["fixed"]
    for name, value in fixed.items():
        _check_type(function, name, value, "[fixed]", labels)
    grid, zipped = _plan(sections["grid"], sections["zip"])
    for s, table in (("grid", grid), ("zip", zipped)):
        for name, values in table.items():
            for v in values:
                _check_type(function, name, v, f"[{s}]", labels)
    derived = {}
    for name, text in sections["derived"].items():
        tree, names = expr.parse(text, f"[derived] {name}")
        for used in names:
            if used not in seen or seen[used] == "derived" and used not in derived:
                raise SpecError(f"[derived] {name}: `{used}` is not a parameter of this sweep"
                                f"{_suggest(used, [k for k in seen if k != name])}")
        derived[name] = tree
    missing = [x for x in labels if x not in seen]
    if missing:
        raise SpecError(f"[sweep] labels: `{missing[0]}` is given no value in [fixed], [grid], [zip] or [derived]")
    return fixed, grid, zipped, derived


def _names(sections):
    """``{name: section}`` of every parameter: identifiers, each set once, none reserved, none equal
    to another up to case (the store's columns ``p_NAME`` are SQLite names, which ignore case)."""
    seen, folded = {}, {}
    for s, table in sections.items():
        if not isinstance(table, dict):
            raise SpecError(f"[{s}] must be a table of `name = value` lines")
        for name in table:
            if not NAME.match(name):
                raise SpecError(f"[{s}] `{name}`: parameter names are identifiers")
            if name in seen:
                raise SpecError(f"[{s}] `{name}` is also set in [{seen[name]}]")
            if name.lower() in RESERVED:
                raise SpecError(f"[{s}] `{name}`: a reserved name (the store's columns "
                                f"{', '.join(RESERVED)}); choose another name")
            other = folded.get(name.lower())
            if other is not None:
                raise SpecError(f"[{s}] `{name}` and `{other}` (in [{seen[other]}]) differ only by case, "
                                "which the store cannot tell apart (SQLite names ignore case); rename one")
            seen[name], folded[name.lower()] = s, name
    return seen


def _plan(grid_raw, zip_raw):
    """The grid and zip axes, built only after their plan's size is counted and found within
    :data:`MAX_RUNS` (a range of 10**9 values is refused before one value is made)."""
    grid = {name: _axis(f"[grid] {name}", v) for name, v in grid_raw.items()}
    zipped = {name: _axis(f"[zip] {name}", v) for name, v in zip_raw.items()}
    if len({a[2] for a in zipped.values()}) > 1:
        raise SpecError(f"[zip]: the axes must have equal lengths, got "
                        f"{', '.join(f'{k}: {a[2]}' for k, a in zipped.items())}")
    sizes = [a[2] for a in grid.values()] + [a[2] for a in list(zipped.values())[:1]]
    total = math.prod(sizes)
    if total > MAX_RUNS:
        axes = ", ".join(f"{k}: {a[2]:,}" for k, a in list(grid.items()) + list(zipped.items()))
        raise SpecError(f"the plan has {total:,} runs ({axes}), more than the limit of {MAX_RUNS:,}; "
                        "split the sweep into smaller ones")
    return ({k: _values(a[0], a[1]) for k, a in grid.items()}, {k: _values(a[0], a[1]) for k, a in zipped.items()})


def _expand(function, fixed, grid, zipped, derived, labels):
    zip_rows = [dict(zip(zipped, vals)) for vals in zip(*zipped.values())] if zipped else [{}]
    runs = []
    for combo in itertools.product(*grid.values()):
        for z in zip_rows:
            p = dict(fixed, **dict(zip(grid, combo)), **z)
            for name, tree in derived.items():
                value = expr.evaluate(tree, p, f"[derived] {name}")
                _check_type(function, name, value, "[derived]", labels)
                p[name] = value
            runs.append(p)
    return runs


def _check_setup(function, p, metrics):
    """Checks that need several parameters of a run (record and group go together, ...)."""
    if ("record" in p) != ("group" in p):
        raise SpecError("`record` and `group` go together (a recorded paper sweep and its group)")
    if "lambda_min_median" in metrics and function in ("train", "sgd") and not p.get("track_every"):
        raise SpecError("[sweep] metrics: `lambda_min_median` needs spectral tracking: set `track_every` "
                        "(steps between spectra) in [fixed]")
    if "max_rel_error_to_record" in metrics and "record" not in p:
        raise SpecError("[sweep] metrics: `max_rel_error_to_record` needs `record` and `group`")
    if "record" not in p:
        task, arch = (p.get(k) or calls.DEFAULTS[k] for k in ("task", "arch"))
        n_in, n_out = calls.task_widths(task)
        if arch[0] != n_in:
            raise SpecError(f"`arch` {arch} takes {arch[0]} inputs, but the samples of task {task!r} have {n_in}")
        if function in ("train", "sgd") and arch[-1] != n_out:
            raise SpecError(f"`arch` {arch} has {arch[-1]} outputs, but the targets of task {task!r} have {n_out}")
    if "record" in p:
        if p["record"] not in PAPER_SWEEPS:
            raise SpecError(f"`record`: unknown paper sweep {p['record']!r}; expected one of "
                            f"{', '.join(PAPER_SWEEPS)}")

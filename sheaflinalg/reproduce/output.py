"""The output directory of a reproduction: figures (PNG and PDF), tables (Markdown, LaTeX, CSV),
finished-item markers for resuming, and the index."""

import csv
import io
import json
import os

import numpy as np

from .._common.atomic import prepare_target, write_text
from .._common.npzfile import FileFormatError
from .._common.records import load_record
from ..plotting.figure import save_figure

MISMATCH = "NOT reproduced"       # in an item's notes: a replay missed its record
#: What a finished item's marker (``done/KEY.json``, written by :meth:`Outputs.mark`) holds.
MARKER = {"settings": "an object", "paths": "a list", "seconds": "a number", "notes": "a string"}


def _cell(value, digits):
    """A table cell: numbers to ``digits`` significant digits (NaN: ``n/a``), anything else as it is."""
    if isinstance(value, (float, np.floating)):
        if np.isnan(value):
            return "n/a"
        return f"{value:.{digits}g}"
    return str(value)


def _latex_row(cells):
    return " & ".join(v.replace("_", r"\_").replace("%", r"\%") for v in cells) + r" \\"


def table_texts(header, rows, digits=4):
    """``(markdown, latex, csv)`` of a table: ``header`` (column names) and ``rows`` (lists of cells).

    Numbers show ``digits`` significant digits in Markdown and LaTeX and every digit (``repr``) in CSV.

    Examples
    --------
    >>> md, tex, text = table_texts(["group", "median"], [["correct", 0.123456], ["wrong", 2]])
    >>> print(md)
    | group | median |
    |---|---|
    | correct | 0.1235 |
    | wrong | 2 |
    <BLANKLINE>
    >>> text.splitlines()[1]
    'correct,0.123456'
    """
    cells = [[_cell(v, digits) for v in row] for row in rows]
    md = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)] + [f"| {' | '.join(r)} |" for r in cells]
    tex = [rf"\begin{{tabular}}{{l{'c' * (len(header) - 1)}}}", r"\toprule", _latex_row(header), r"\midrule"]
    tex += ["  " + _latex_row(r) for r in cells]
    tex += [r"\bottomrule", r"\end{tabular}"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[repr(float(v)) if isinstance(v, (float, np.floating)) else v for v in row] for row in rows])
    return "\n".join(md) + "\n", "\n".join(tex) + "\n", buf.getvalue()


def check_directory(root, name="out"):
    """Create the output directory ``root`` (and its parents) or raise ValueError naming ``name``.

    Refused before any work: a path that is a file (or under one), and a place where the
    directory cannot be created or written.

    Examples
    --------
    >>> import os, tempfile
    >>> here = tempfile.mkdtemp()
    >>> open(os.path.join(here, "f"), "w").close()
    >>> check_directory(os.path.join(here, "f"), "--out")
    Traceback (most recent call last):
    ...
    ValueError: --out: ...f' exists and is not a directory
    """
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise ValueError(f"{name} must be a directory name, got {root!r}")
    root = os.fspath(root)
    if os.path.exists(root) and not os.path.isdir(root):
        raise ValueError(f"{name}: {root!r} exists and is not a directory")
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{name}: cannot create the directory {root!r} ({exc.strerror or exc})") from None
    prepare_target(os.path.join(root, "index.md"), name)      # a probe file: the directory accepts files
    return root


class Outputs:
    """``DIR/figures``, ``DIR/tables``, ``DIR/done`` (one marker per finished item) and ``DIR/index.md``.

    Every file is written atomically, so an interrupted item leaves no half-written output and
    has no marker: a resumed run redoes exactly the unfinished items.
    """

    def __init__(self, root, name="out"):
        self.root = check_directory(root, name)
        for sub in ("figures", "tables", "done", "cache"):
            check_directory(os.path.join(self.root, sub), name)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def figure(self, fig, stem):
        """Write ``fig`` as ``figures/STEM.png`` and ``.pdf``; returns the two paths (relative to the root)."""
        paths = []
        for ext in ("png", "pdf"):
            rel = os.path.join("figures", f"{stem}.{ext}")
            save_figure(fig, self.path(rel))
            paths.append(rel)
        return paths

    def table(self, stem, md, tex, csv_text):
        """Write ``tables/STEM.md``, ``.tex`` and ``.csv``; returns the three paths (relative)."""
        paths = []
        for ext, text in (("md", md), ("tex", tex), ("csv", csv_text)):
            rel = os.path.join("tables", f"{stem}.{ext}")
            write_text(self.path(rel), text)
            paths.append(rel)
        return paths

    def text(self, rel, text):
        """Write ``text`` to ``REL`` (relative to the root); returns ``[rel]``."""
        write_text(self.path(rel), text)
        return [rel]

    def finished(self, key, settings):
        """The marker of item ``key`` when it finished with these ``settings`` (else None).

        A marker that is not one this package wrote (edited: a key missing, a value of another
        kind) is a :class:`~sheaflinalg._common.npzfile.FileFormatError` saying how to start over.
        """
        path = self.path("done", f"{key}.json")
        start_over = (f"delete it to run {key} again, or run without --resume (or with another --out) to "
                      "start over")
        try:
            marker = load_record(path, MARKER, start_over)
        except FileNotFoundError:
            return None
        if not all(isinstance(p, str) for p in marker["paths"]):
            raise FileFormatError(f"{path}: 'paths' must be a list of file names; {start_over}")
        if marker["settings"] != settings:
            return None
        if not all(os.path.exists(self.path(p)) for p in marker["paths"]):
            return None
        return marker

    def mark(self, key, settings, paths, seconds, notes=""):
        write_text(self.path("done", f"{key}.json"),
                   json.dumps({"settings": settings, "paths": paths, "seconds": seconds, "notes": notes}))

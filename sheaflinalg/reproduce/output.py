"""The output directory of a reproduction: figures (PNG and PDF), tables (Markdown, LaTeX, CSV),
finished-item markers for resuming, and the index."""

import json
import os

from .._common.atomic import save_figure, write_text


class Outputs:
    """``DIR/figures``, ``DIR/tables``, ``DIR/done`` (one marker per finished item) and ``DIR/index.md``.

    Every file is written atomically, so an interrupted item leaves no half-written output and
    has no marker: a resumed run redoes exactly the unfinished items.
    """

    def __init__(self, root):
        self.root = os.fspath(root)
        for sub in ("figures", "tables", "done", "cache"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def figure(self, fig, stem):
        """Write ``fig`` as ``figures/STEM.png`` and ``.pdf``; returns the two paths (relative to the root)."""
        import matplotlib.pyplot as plt

        paths = []
        for ext in ("png", "pdf"):
            rel = os.path.join("figures", f"{stem}.{ext}")
            save_figure(fig, self.path(rel), dpi=150, bbox_inches="tight")
            paths.append(rel)
        plt.close(fig)
        return paths

    def table(self, stem, md, tex, csv_text):
        """Write ``tables/STEM.md``, ``.tex`` and ``.csv``; returns the three paths (relative)."""
        paths = []
        for ext, text in (("md", md), ("tex", tex), ("csv", csv_text)):
            rel = os.path.join("tables", f"{stem}.{ext}")
            write_text(self.path(rel), text)
            paths.append(rel)
        return paths

    def finished(self, key, settings):
        """The marker of item ``key`` when it finished with these ``settings`` (else None)."""
        try:
            with open(self.path("done", f"{key}.json")) as f:
                marker = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(marker, dict) or marker.get("settings") != settings:
            return None
        if not all(os.path.exists(self.path(p)) for p in marker.get("paths", [])):
            return None
        return marker

    def mark(self, key, settings, paths, seconds, notes=""):
        write_text(self.path("done", f"{key}.json"),
                   json.dumps({"settings": settings, "paths": paths, "seconds": seconds, "notes": notes}))

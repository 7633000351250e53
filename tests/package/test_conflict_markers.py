"""No merge-conflict markers are left in the repository's text files."""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^(<{7}|>{7})( |$)", re.M)


def _tracked_files():
    try:
        return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):     # not a git checkout: the package's own folders
        return [str(p.relative_to(ROOT)) for top in ("sheaflinalg", "docs", "tests", "benchmarks", "scripts")
                for p in (ROOT / top).rglob("*") if p.is_file()]


def test_no_conflict_markers_in_tracked_text_files():
    files = _tracked_files()
    hits = []
    for name in files:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".toml", ".cfg", ".txt", ".sh", ".yml", ".yaml", ".tex"}:
            continue
        text = path.read_text(errors="replace")
        hits += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in MARKER.finditer(text)]
    assert not hits, f"merge-conflict markers left in: {', '.join(hits)}"

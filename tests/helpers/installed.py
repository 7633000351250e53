"""The package as a user gets it: a wheel built from this tree, installed in a fresh virtual
environment outside the repository, run from a directory of its own.

The environment has no pip, no editable finder and no path to the repository: its site-packages
holds the installed wheel and a ``.pth`` line naming the dependencies' site-packages (numpy, scipy,
numba, ... of the interpreter running the tests), whose own ``.pth`` files (an editable install of
the repository among them) are not read.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
from helpers.paths import ROOT

SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "sheaflinalg")


class Installed:
    """A fresh environment with the wheel installed: :meth:`run` runs a command in ``work``."""

    def __init__(self, base):
        self.base = pathlib.Path(base)
        self.venv, self.work = self.base / "venv", self.base / "work"
        self.bin = self.venv / "bin"

    def build(self):
        """Copy the sources (not the repository's caches), build the wheel, install it; returns the wheel."""
        src, dist = self.base / "src", self.base / "dist"
        src.mkdir()
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
            else:
                shutil.copy2(ROOT / name, src / name)
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        # No build isolation: the build uses this interpreter's setuptools (no download).
        subprocess.run([*pip, "wheel", str(src), "--no-deps", "--no-build-isolation", "-w", str(dist)],
                       check=True, cwd=self.base)
        wheel = next(dist.glob("sheaflinalg-*.whl"))
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)], check=True)
        site = pathlib.Path(subprocess.run([self.bin / "python", "-c", "import sysconfig; print(sysconfig.get_paths()"
                                            "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
        (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        subprocess.run([*pip, "--python", str(self.bin / "python"), "install", "--no-deps", "--no-index", str(wheel)],
                       check=True)
        self.work.mkdir()
        return wheel

    def env(self):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *argv, timeout=1800):
        """Run ``argv`` (``sheaflinalg ...`` or ``python ...`` of the environment) in ``work``."""
        exe = self.bin / argv[0]
        return subprocess.run([str(exe), *argv[1:]], cwd=self.work, env=self.env(), capture_output=True, text=True,
                              timeout=timeout)

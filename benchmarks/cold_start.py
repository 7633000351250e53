"""Time to first result in a fresh environment, before and after ``sheaflinalg warmup`` (issue 33); prints only.

Each command runs in a fresh process whose numba cache (``NUMBA_CACHE_DIR``) is an empty directory
("cold": numba compiles every kernel the command calls), then again after ``sheaflinalg warmup`` has
filled that directory ("warm": what a user meets after ``scripts/setup.sh``, which runs the warm-up).
The commands: ``verify`` (its defaults), ``heat`` (``[2,30,1]``, 50 inputs), ``spectrum`` and
``train --method equilibrium`` (a small MLP on the blobs task, 50 epochs).  The baseline is the
same command with a warm cache, in the same run; the claim is cold/warm.  Also printed: the
warm-up's own time (paid once, at set-up) and ``python -c "import sheaflinalg"``.
Run: ``.venv/bin/python benchmarks/cold_start.py [--runs 1]``
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

CLI = [sys.executable, "-m", "sheaflinalg.cli"]
COMMANDS = {
    "verify": ["verify"],
    "heat": ["heat", "--no-progress", "--samples", "50"],
    "spectrum": ["spectrum", "--no-progress"],
    "train --method equilibrium": ["train", "--task", "blobs", "--method", "equilibrium", "--epochs", "50",
                                   "--no-progress"],
}


def _timed(argv, cache):
    """Wall seconds of one fresh process running ``argv`` with numba's cache in ``cache``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="cold/warm pairs per command (default 1)")
    args = parser.parse_args()
    imports = _timed([sys.executable, "-c", "import sheaflinalg"], tempfile.mkdtemp())
    print(f"import sheaflinalg: {imports:.1f} s (load {os.getloadavg()[0]:.1f})")
    print(f"{'command':<28} {'cold s':>8} {'warm s':>8} {'cold/warm':>10}")
    for name, argv in COMMANDS.items():
        cold, warm = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as cache:
                cold.append(_timed(CLI + argv, cache))
                warm.append(_timed(CLI + argv, cache))
        print(f"{name:<28} {min(cold):8.1f} {min(warm):8.1f} {min(cold) / min(warm):9.1f}x", flush=True)
    with tempfile.TemporaryDirectory() as cache:
        setup = _timed(CLI + ["warmup", "--no-progress"], cache)
        after = {name: _timed(CLI + argv, cache) for name, argv in COMMANDS.items()}
    print(f"sheaflinalg warmup (once, at set-up): {setup:.1f} s; then the first run of each command:")
    for name, seconds in after.items():
        print(f"  {name:<26} {seconds:8.1f} s")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

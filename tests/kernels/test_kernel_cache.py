"""The numba cache is dropped when any kernel source changes (numba itself only watches each file)."""

from sheaflinalg.kernels import drop_stale_numba_cache


def test_cache_survives_unchanged_sources_and_goes_when_one_changes(tmp_path):
    (tmp_path / "force.py").write_text("x = 1\n")
    (tmp_path / "heat.py").write_text("y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    (cache / "heat.run-10.py311.nbi").write_text("old")
    drop_stale_numba_cache(str(tmp_path))  # no stamp yet: unknown provenance, dropped
    assert not (cache / "heat.run-10.py311.nbi").exists()
    (cache / "heat.run-10.py311.nbi").write_text("new")
    (cache / "heat.run-10.py311.1.nbc").write_text("new")
    drop_stale_numba_cache(str(tmp_path))
    assert (cache / "heat.run-10.py311.nbi").exists() and (cache / "heat.run-10.py311.1.nbc").exists()
    (tmp_path / "force.py").write_text("x = 3\n")  # only the callee changes
    drop_stale_numba_cache(str(tmp_path))
    assert not (cache / "heat.run-10.py311.nbi").exists() and not (cache / "heat.run-10.py311.1.nbc").exists()


def test_every_kernel_folder_stamps_its_own_sources():
    # The stamp covers one folder's sources: a subpackage of kernels (the exact engine) must drop its own
    # cache, or an edit of one of its files would leave its callers' cached code stale.
    import hashlib
    import pathlib

    import sheaflinalg.kernels.exact.driver  # noqa: F401  (imports kernels and kernels.exact)

    root = pathlib.Path(sheaflinalg.kernels.__file__).parent
    folders = [init.parent for init in root.rglob("__init__.py")]
    assert root / "exact" in folders
    for folder in folders:
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.py")))).hexdigest()
        assert (folder / "__pycache__" / "kernel-sources.sha256").read_text() == digest, folder


def test_serial_and_parallel_compilations_of_one_kernel_keep_their_own_cache(tmp_path):
    # numba keys cache entries by argument types only: without distinct names the
    # parallel kernel would load the serial code cached before it (or vice versa)
    import os
    import subprocess
    import sys

    script = """
import numpy as np, numba, sheaflinalg as sl
from sheaflinalg.spectral import CoboundaryOperator
from sheaflinalg._common import threads as policy
policy._LOAD = policy.LoadProbe(read=lambda: 1)  # idle, as far as the load probe knows: this test needs the parallel path
net = sl.Network.random([2, 8, 6, 1], seed=0)
ms = net.activation_pattern(np.ones(2))
ops = [CoboundaryOperator(net, ms, threads=t) for t in (1, 2)]
v = np.ones(ops[0].n)
for op in ops:  # the serial kernel compiles (and is cached) first
    op.block_entries = 1
    op.apply_pair((v, np.empty_like(v)), (v, np.empty_like(v)))
print(numba.threading_layer())  # raises unless the parallel code ran
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    for _ in range(2):  # compile and cache, then load from the cache
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    assert any(p.name.startswith("substitution.backward_sweep_parallel") for p in tmp_path.rglob("*.nbi"))


def test_kernels_taking_named_structures_load_from_the_cache_in_a_second_process():
    # The structures are namedtuple classes at module level: numba must find them again when it loads
    # a cached kernel, or every process would compile the heat and training loops anew.
    import os
    import subprocess
    import sys

    script = """
import json, numpy as np, sheaflinalg as sl
from sheaflinalg.kernels import heat, training
X, Y = sl.tasks.paraboloid(40, seed=0)
net = sl.Network.random([2, 5, 1], seed=0)
sl.heat(net, X, max_steps=20, progress=False, threads=1)
sl.train(net, X, Y, steps=20, epoch_steps=10, progress=False, stagnation=False, threads=1)
sl.sgd(net, X, Y, epochs=5, progress=False)
kernels = {"heat_run": heat.heat_run, "heat_finish": heat.heat_finish, "tiled_steps": training.tiled_steps,
           "gd_steps": training.gd_steps}
print(json.dumps({k: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
                  for k, f in kernels.items()}))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    for _ in range(2):  # the first run compiles whatever is not cached yet; the second must load it all
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    import json

    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(hits >= 1 and misses == 0 for hits, misses in stats.values()), stats

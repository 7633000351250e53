"""Functions that do not take graph networks yet refuse them at the entry, naming the graph network.

Every public callable whose first parameter is a network (``net``) is classified here: either it
takes graph networks (:data:`TAKES_GRAPHS`, tested with the sheaf layer) or it refuses one with
:class:`sl.GraphNetworkError` before any work: a short traceback, no file written, and ahead of
the checks of its other arguments (given wrong here on purpose).  A new public function taking a
network fails :func:`test_every_network_function_is_classified` until it is classified.
"""

import inspect
import os
import traceback

import numpy as np
import pytest

from helpers.graph_examples import every_op_network
from helpers.paths import ROOT
from helpers.public_api import PUBLIC, RESULTS
import sheaflinalg as sl

NET = every_op_network()
BAD_X = np.full((2, 5), np.nan)          # wrong width and not finite: refused later than the network
BAD_Y = np.full((2, 7), np.nan)
#: Public callables that take graph networks (the sheaf layer; tested there).
TAKES_GRAPHS = {"sl.assemble", "sl.harmonic_extension", "sl.verify", "sl.complete", "sl.SheafSystem",
                "sl.AugmentedSheafSystem", "sl.discord.pinned", "sl.discord.residuals", "sl.lambda_max_bound",
                "sl.heat", "sl.train", "sl.sgd", "sl.spectrum", "sl.survey"}
REFUSED = {
    "sl.convergence_study": lambda tmp: sl.convergence_study(NET, BAD_X),
}
#: Chain-only members of a network: they describe Linear/ReLU layers.
CHAIN_ONLY = {
    "weights": lambda: NET.weights, "biases": lambda: NET.biases, "dims": lambda: NET.dims,
    "n_hidden": lambda: NET.n_hidden, "replace": lambda: NET.replace(W1=np.ones(1)), "with_weights": lambda: NET.with_weights([]),
    "forward_states": lambda: NET.forward_states(np.zeros((1, 72))), "to_dict": lambda: NET.to_dict(),
    "to_json": lambda: NET.to_json(),
}


def _takes_a_network(fn):
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] in ("net", "network")


def test_every_network_function_is_classified():
    taking = {name for name, fn in PUBLIC.items() if _takes_a_network(fn) and name not in RESULTS}
    assert taking == TAKES_GRAPHS | set(REFUSED), (taking ^ (TAKES_GRAPHS | set(REFUSED)))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_graph_networks_are_refused_first(name, tmp_path):
    with pytest.raises(sl.GraphNetworkError) as info:
        REFUSED[name](str(tmp_path))
    message = str(info.value)
    assert "is a graph network (12 nodes" in message and "conv" in message, message
    assert "Linear/ReLU" in message and "sl.assemble" in message, message
    assert len(traceback.extract_tb(info.value.__traceback__)) <= 5, name
    assert not os.listdir(tmp_path)
    assert isinstance(info.value, TypeError)          # callers catching TypeError keep working


@pytest.mark.parametrize("member", sorted(CHAIN_ONLY))
def test_chain_only_members_refuse_a_graph_network(member):
    with pytest.raises(sl.GraphNetworkError, match=r"graph network \(12 nodes"):
        CHAIN_ONLY[member]()


def test_what_graph_networks_do_take():
    x = np.random.default_rng(0).normal(size=(2, 2, 6, 6))
    assert NET.forward(x).shape == (2, 3)
    assert np.array_equal(NET.forward(x.reshape(2, -1)), NET.forward(x))
    assert NET.n_inputs == 72 and NET.n_outputs == 3 and NET.input_shape == (2, 6, 6)
    assert NET.n_parameters == NET.parameters().size == sum(p.size for n in NET.graph.nodes for p in n.params.values())
    assert NET.copy().forward(x).tobytes() == NET.forward(x).tobytes()


@pytest.mark.parametrize("command", ["discord"])
def test_commands_refuse_a_graph_network_file_in_one_line(command, tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "graph.npz")
    NET.save(path)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-m", "sheaflinalg.cli", command, "--network", path], capture_output=True,
                          text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and f"--network {path} is a graph network" in done.stderr, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["graph.npz"]

"""Every public callable refuses a wrong-typed first argument with a message naming the expected type.

The callables are enumerated, not listed by hand: ``sheaflinalg.__all__`` and the
public functions and classes defined in ``sl.discord``, ``sl.sweep``,
``sl.tasks`` and ``sl.optim``.  A new public callable makes :func:`test_every_public_callable_has_a_case`
fail until it gets a case here.  The outcome must be a TypeError or ValueError
raised at the entry (a short traceback), whose message names what was expected;
never an AttributeError from deep inside.
"""

import os
import re
import traceback

import numpy as np
import pytest

from helpers.public_api import PUBLIC, RESULTS
import sheaflinalg as sl

X = np.random.default_rng(0).uniform(-2, 2, (3, 2))
NET = sl.Network.random([2, 4, 1], seed=0)
Y = NET.forward(X)
#: Frames between the public call and the raise: the entry, its check helper and the helper's helpers.
MAX_DEPTH = 6


#: Callables without arguments.
NO_ARGUMENTS = {"sl.get_num_threads"}

NETWORK = "sheaflinalg.Network"
SYSTEM = "sheaflinalg.SheafSystem"
# name -> (call with the bad first argument and valid others, words the message must contain)
CASES = {
    "sl.set_num_threads": (lambda bad: sl.set_num_threads(bad), "integer"),
    "sl.num_threads": (lambda bad: sl.num_threads(bad), "integer"),
    "sl.process_pool": (lambda bad: sl.process_pool(bad), "integer"),
    "sl.Network": (lambda bad: sl.Network(bad, [np.zeros(1)]), "sequence of arrays"),
    "sl.Graph": (lambda bad: sl.Graph(bad, [sl.Node("a", "relu", ["x"])]), "input_shape must be a tuple"),
    "sl.Node": (lambda bad: sl.Node(bad, "relu", ["x"]), "node name"),
    "sl.Layout": (lambda bad: sl.Layout(bad), "sequence of layer widths"),
    "sl.SheafSystem": (lambda bad: sl.SheafSystem(bad, X, None), NETWORK),
    "sl.AugmentedSheafSystem": (lambda bad: sl.AugmentedSheafSystem(bad, X, None, False, None, None, 0.0, None,
                                                                    None), NETWORK),
    "sl.assemble": (lambda bad: sl.assemble(bad, X[0]), NETWORK),
    "sl.harmonic_extension": (lambda bad: sl.harmonic_extension(bad, X), NETWORK),
    "sl.verify": (lambda bad: sl.verify(bad, X), NETWORK),
    "sl.SoftPins": (lambda bad: sl.SoftPins(bad), "dict"),
    "sl.Reluctance": (lambda bad: sl.Reluctance(bad), "real number"),
    "sl.heat": (lambda bad: sl.heat(bad, X), NETWORK),
    "sl.lambda_max_bound": (lambda bad: sl.lambda_max_bound(bad), NETWORK),
    "sl.complete": (lambda bad: sl.complete(bad, X), NETWORK),
    "sl.convergence_study": (lambda bad: sl.convergence_study(bad, X), NETWORK),
    "sl.switch_statistics": (lambda bad: sl.switch_statistics(bad), "ExactHeatResult"),
    "sl.train": (lambda bad: sl.train(bad, X, Y), NETWORK),
    "sl.sgd": (lambda bad: sl.sgd(bad, X, Y), NETWORK),
    "sl.Regularization": (lambda bad: sl.Regularization(bad), "real number"),
    "sl.spectrum": (lambda bad: sl.spectrum(bad, X), NETWORK),
    "sl.spectrum_of_system": (lambda bad: sl.spectrum_of_system(bad), SYSTEM),
    "sl.SpectralTracker": (lambda bad: sl.SpectralTracker(bad), "numeric|real"),
    "sl.discord.edge_discrepancies": (lambda bad: sl.discord.edge_discrepancies(bad, X), SYSTEM),
    "sl.discord.discord_by_block": (lambda bad: sl.discord.discord_by_block(bad, X), SYSTEM),
    "sl.discord.edge_kind": (lambda bad: sl.discord.edge_kind(bad), "edge-block label"),
    "sl.discord.edge_layer": (lambda bad: sl.discord.edge_layer(bad), "edge-block label"),
    "sl.discord.group": (lambda bad: sl.discord.group(bad, ["e_z1"]), "numeric|real"),
    "sl.discord.group_history": (lambda bad: sl.discord.group_history(bad), "HeatHistory"),
    "sl.discord.attention_blocks": (lambda bad: sl.discord.attention_blocks(bad), "graph network"),
    "sl.discord.pinned": (lambda bad: sl.discord.pinned(bad, X, Y), NETWORK),
    "sl.discord.residuals": (lambda bad: sl.discord.residuals(bad, X, np.zeros((3, 10))), NETWORK),
    "sl.survey": (lambda bad: sl.survey(bad, X, [0, 0, 0], store="unused.db", progress=False), NETWORK),
    "sl.sweep.run": (lambda bad: sl.sweep.run(bad, "unused.db", progress=False), "specification"),
    "sl.sweep.load": (lambda bad: sl.sweep.load(bad), "file name"),
    "sl.sweep.status": (lambda bad: sl.sweep.status(bad), "file name"),
    "sl.sweep.export_csv": (lambda bad: sl.sweep.export_csv(bad, "unused.csv"), "file name"),
    "sl.sweep.Store": (lambda bad: sl.sweep.Store(bad), "file name"),
    "sl.sweep.flatten": (lambda bad: sl.sweep.flatten(bad), "list of dicts"),
    "sl.tasks.blobs": (lambda bad: sl.tasks.blobs(bad), "integer"),
    "sl.tasks.circular": (lambda bad: sl.tasks.circular(bad), "integer"),
    "sl.tasks.paraboloid": (lambda bad: sl.tasks.paraboloid(bad), "integer"),
    "sl.tasks.saddle": (lambda bad: sl.tasks.saddle(bad), "integer"),
    "sl.tasks.mnist1d": (lambda bad: sl.tasks.mnist1d(bad), "integer"),
    "sl.tasks.make": (lambda bad: sl.tasks.make(bad), "task"),
    "sl.tasks.target_function": (lambda bad: sl.tasks.target_function(bad, X), "task"),
    "sl.tasks.load_experiment": (lambda bad: sl.tasks.load_experiment(bad), "file name"),
    "sl.tasks.paper_sweep": (lambda bad: sl.tasks.paper_sweep(bad, "1H"), "sweep"),
    "sl.tasks.table_e1": (lambda bad: sl.tasks.table_e1(bad), "Table E.1 experiment"),
    "sl.optim.Optimizer": (lambda bad: sl.optim.Optimizer(bad), "lr must be a real number"),
    "sl.optim.SGD": (lambda bad: sl.optim.SGD(bad), "lr must be a real number"),
    "sl.optim.Momentum": (lambda bad: sl.optim.Momentum(bad), "lr must be a real number"),
    "sl.optim.Adam": (lambda bad: sl.optim.Adam(bad), "lr must be a real number"),
    "sl.optim.AdamW": (lambda bad: sl.optim.AdamW(bad), "lr must be a real number"),
    "sl.optim.Schedule": (lambda bad: sl.optim.Schedule(bad), "warmup must be an integer"),
    "sl.optim.Constant": (lambda bad: sl.optim.Constant(bad), "warmup must be an integer"),
    "sl.optim.Step": (lambda bad: sl.optim.Step(bad), "every must be an integer"),
    "sl.optim.Exponential": (lambda bad: sl.optim.Exponential(bad), "gamma must be a real number"),
    "sl.optim.Cosine": (lambda bad: sl.optim.Cosine(bad), "final must be a real number"),
    "sl.optim.make_optimizer": (lambda bad: sl.optim.make_optimizer(bad), "optimizer must be a name"),
    "sl.optim.make_schedule": (lambda bad: sl.optim.make_schedule(bad), "schedule must be a name"),
}

#: Wrong for every first argument above: no public callable takes an arbitrary object, None or a number there.
WRONG = [object(), 3.5 + 1j]


def test_every_public_callable_has_a_case():
    uncovered = set(PUBLIC) - set(CASES) - RESULTS - NO_ARGUMENTS
    assert not uncovered, f"public callables without a wrong-type case: {sorted(uncovered)}"
    assert not set(CASES) - set(PUBLIC), "cases for names that are not public"


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("bad", WRONG, ids=lambda b: type(b).__name__)
def test_wrong_first_argument_is_refused_at_the_entry(name, bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)             # nothing a refused call might create lands in the repository
    call, expected = CASES[name]
    with pytest.raises((TypeError, ValueError)) as info:
        call(bad)
    assert re.search(expected, str(info.value)), (name, str(info.value))
    depth = len(traceback.extract_tb(info.value.__traceback__))
    assert depth <= MAX_DEPTH, f"{name}: raised {depth} frames deep:\n" + "".join(traceback.format_tb(
        info.value.__traceback__))
    assert not os.listdir(tmp_path), f"{name} wrote {os.listdir(tmp_path)} before refusing"


@pytest.mark.parametrize("call, hint", [
    (lambda: sl.heat(None, X), "sheaflinalg.Network, got NoneType"),
    (lambda: sl.verify("net.npz", X), "sl.Network.load(path)"),
    (lambda: sl.spectrum_of_system("x"), "sl.assemble"),
    (lambda: sl.spectrum_of_system(NET), "sl.assemble(net, x)"),
    (lambda: sl.switch_statistics(sl.heat(NET, X, max_steps=3, progress=False)), "got HeatResult"),
    (lambda: sl.Network.from_graph(NET), "a sheaflinalg Graph"),
    (lambda: sl.Network.from_nodes((2,), [{"name": "a", "op": "relu"}]), "Node objects, got dict"),
])
def test_messages_say_what_was_got_and_how_to_get_the_right_object(call, hint):
    with pytest.raises(TypeError, match=None) as info:
        call()
    assert hint in str(info.value)

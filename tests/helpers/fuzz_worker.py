"""Child process of tests/common/test_file_fuzz.py: reads files with sheaflinalg's readers, one request per line.

Request (one JSON line on stdin): ``{"reader": NAME, "path": FILE}``.  Reply (one JSON line on
stdout): ``{"outcome": "ok", "digest": SHA-256 of the result}`` or ``{"outcome": EXCEPTION TYPE,
"message": ...}``.  A reader that kills the process (a signal, an abort) leaves no reply; the
parent sees the dead process and its return code.

The same module builds the pristine files (``make_*``), so parent and child share the run settings.
"""

import hashlib
import json
import sys
import warnings

import numpy as np

from helpers.graph_examples import every_op_network
import sheaflinalg as sl

RUN = dict(steps=200, epoch_steps=50, seed=3, progress=False, checkpoint_every=1, stagnation=False,
           reg={"lam": 1e-3, "anchor": "initial"})


def run_data():
    X, Y = sl.tasks.paraboloid(8, seed=1)
    return sl.Network.random([2, 3, 1], seed=2), X, Y


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def read_network(path):
    net = sl.Network.load(path)
    return _digest(net.parameters(), np.array(net.dims), np.array(net.output)), {}


def read_checkpoint(path):
    """Resume (and finish) the run from ``path``."""
    net, X, Y = run_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = sl.train(net, X, Y, checkpoint=path, **RUN)
    h = fit.history
    return (_digest(fit.network.parameters(), fit.state, np.array(h.train_loss), np.array(h.epoch)),
            {"epoch": h.epoch, "step": h.step})


def read_experiment(path):
    exp = sl.tasks.load_experiment(path)
    parts = [exp.network.parameters(), np.array(exp.network.dims), exp.X_train, exp.Y_train, exp.X_test,
             exp.Y_test, exp.init]
    parts += [exp.reference[k] for k in sorted(exp.reference)]
    return _digest(*parts), {"meta": exp.meta, "output": exp.network.output}


def read_graph(path):
    """A graph network file: its parameters, structure and forward pass on fixed inputs."""
    net = sl.Network.load(path)
    X = np.random.default_rng(0).normal(size=(2,) + net.input_shape)
    return _digest(net.parameters(), net.forward(X), np.array(repr(net.graph.nodes))), {}


READERS = {"network": read_network, "checkpoint": read_checkpoint, "experiment": read_experiment,
           "graph": read_graph}


def make_network(path):
    sl.Network.random([2, 3, 2], seed=5, output="softmax").save(path)


def make_checkpoint(path):
    """A checkpoint of ``RUN`` written after its second of four epochs."""
    class Stop(Exception):
        pass

    def stop(info):
        if info.epoch == 3:
            raise Stop

    net, X, Y = run_data()
    try:
        sl.train(net, X, Y, checkpoint=path, callback=stop, **RUN)
    except Stop:
        pass


def make_experiment(path):
    rng = np.random.default_rng(7)
    n, m = 5, 4
    arrays = {"X_train": rng.normal(size=(2, n)), "Y_train": rng.normal(size=(2, n)),
              "X_test": rng.normal(size=(2, m)), "Y_test": rng.normal(size=(2, m)),
              "W1": rng.normal(size=(3, 2)), "b1": rng.normal(size=3), "W2": rng.normal(size=(2, 3)),
              "b2": rng.normal(size=2), "z0_1": rng.normal(size=(3, n)), "a0_1": rng.normal(size=(3, n)),
              "z0_2": rng.normal(size=(2, n)), "sheaf_train_curve": np.ones(3), "sheaf_test_curve": np.ones(3),
              "meta": np.array(json.dumps({"arch": [2, 3, 2], "n_steps": 200, "dt": 0.01, "alpha": 1.0,
                                           "beta": 0.2, "output_activation": "identity", "warm_start": True,
                                           "epoch_steps": 100, "sgd_lr": 0.01, "task": "test"}))}
    np.savez(path, **arrays)


def make_graph(path):
    every_op_network(seed=3, output="softmax").save(path)


MAKERS = {"network": make_network, "checkpoint": make_checkpoint, "experiment": make_experiment, "graph": make_graph}


def main():
    for line in sys.stdin:
        request = json.loads(line)
        try:
            digest, info = READERS[request["reader"]](request["path"])
            reply = {"outcome": "ok", "digest": digest, "info": info}
        except Exception as exc:  # noqa: BLE001 - the parent judges the exception type
            reply = {"outcome": type(exc).__name__, "message": str(exc)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

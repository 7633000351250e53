"""Backpropagation in PyTorch for the case studies: a classifier of MNIST-1D trained, imported and kept.

A model (a ``build(torch, nn)`` function returning an untrained float64 module whose outputs are the
logits) is trained with Adam on the cross-entropy of mini-batches.  Training is seeded and runs on one
torch thread, so the weights are the same on every run and machine size; torch's thread count and
random state are restored afterwards (the library changes no global state).  The trained network is
kept in the output directory as a network file and a JSON record beside it, so that a rerun reuses it
(:func:`trained`).
"""

import contextlib
import json
import time
from dataclasses import dataclass

import numpy as np

from .._common.atomic import write_text
from .._common.progress import progress_bar
from ..network.importers.torch_fx import import_torch
from ..network.model import Network


@dataclass(frozen=True)
class Protocol:
    """How a model is trained: Adam on mini-batches of the training set, ``epochs`` passes."""

    epochs: int = 100
    batch_size: int = 100
    lr: float = 1e-2
    seed: int = 0

    def key(self):
        return {"epochs": self.epochs, "batch_size": self.batch_size, "lr": self.lr, "seed": self.seed}


@contextlib.contextmanager
def isolated(torch):
    """One torch thread and a forked random state, both restored on exit."""
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


def _accuracy(torch, model, X, labels):
    with torch.no_grad():
        return float((model(X).argmax(1) == labels).double().mean())


def train(data, build, protocol, what="the model", progress=True):
    """Train ``build(torch, nn)`` on ``data`` (a :func:`sheaflinalg.tasks.mnist1d` data set) by backpropagation.

    Returns
    -------
    network : Network
        The trained model imported with :meth:`Network.from_torch` (identity output: the logits).
    record : dict
        The protocol, the training loss (mean over each epoch's batches), the test accuracy after
        each epoch (torch's float64 forward pass) and the training time in seconds.
    """
    torch, nn = import_torch()
    with isolated(torch):
        torch.manual_seed(protocol.seed)
        model = build(torch, nn)
        X = torch.from_numpy(data.X_train)[:, None, :]
        y = torch.from_numpy(data.Y_train.argmax(1))
        X_test = torch.from_numpy(data.X_test)[:, None, :]
        y_test = torch.from_numpy(data.Y_test.argmax(1))
        optimizer = torch.optim.Adam(model.parameters(), lr=protocol.lr)
        losses, accuracies = [], []
        start = time.perf_counter()
        with progress_bar(protocol.epochs, progress, f"training {what} (torch)", unit="epoch") as bar:
            for _ in range(protocol.epochs):
                losses.append(_epoch(torch, model, optimizer, X, y, protocol.batch_size))
                accuracies.append(_accuracy(torch, model, X_test, y_test))
                bar.set_postfix(loss=f"{losses[-1]:.3g}", test_accuracy=f"{accuracies[-1]:.3f}")
                bar.update()
        seconds = time.perf_counter() - start
    network = Network.from_torch(model.eval(), input_shape=(1, data.X_train.shape[1]))
    record = {"protocol": protocol.key(), "train_loss": losses, "test_accuracy": accuracies, "seconds": seconds}
    return network, record


def _epoch(torch, model, optimizer, X, y, batch_size):
    """One pass over the training set in a random order (from torch's seeded generator): the mean loss."""
    order = torch.randperm(X.shape[0])
    total = 0.0
    for start in range(0, X.shape[0], batch_size):
        batch = order[start:start + batch_size]
        loss = torch.nn.functional.cross_entropy(model(X[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * batch.shape[0]
    return total / X.shape[0]


def trained(path, data, build, protocol, data_key, what="the model", progress=True):
    """``(network, record)``: the network kept at ``path`` when it was trained the same way, else a new one.

    ``data_key`` describes the data set (seed, size).  The network file ``path`` is written first and
    its record ``path`` + ``.json`` last (both atomically): a record names a complete network file
    of its settings, and an interrupted run leaves at worst a network without a record, which is
    trained again (:func:`train`).
    """
    key = {"protocol": protocol.key(), "data": data_key}
    try:
        with open(path + ".json") as f:
            record = json.load(f)
        if isinstance(record, dict) and record.get("key") == key:
            return Network.load(path), record
    except (OSError, ValueError):
        pass
    network, record = train(data, build, protocol, what, progress)
    record["key"] = key
    network.save(path)
    write_text(path + ".json", json.dumps(record))
    return network, record


def predictions(network, X):
    """The class each sample of ``X`` is given (the largest logit), shape (n,)."""
    return np.argmax(network.forward(X), axis=1)

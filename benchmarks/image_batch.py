"""One equilibrium gradient of a mini-batch of stroke images against torch's forward and backward pass (issue 33).

The network and data of ``benchmarks/image_training.py`` (a 2-D CNN with max-pooling on MNIST-1D curves drawn
on a black background), trained first for ``--epochs`` epochs by each library (Adam): torch's model by
backprop, the imported one at equilibrium (without conv biases in torch, the imported network's zero
biases train: the exact zeros of the first batches are gone after about one epoch).  Then, in ``--rounds`` alternating rounds over the training set's mini-batches, the CPU
seconds (``time.process_time``, one thread each) of ``GraphEquilibrium.gradient`` at the default nudging and of
torch's forward and backward pass (cross-entropy) of the same batch; the medians per batch and their ratio.
``--profile`` prints where the equilibrium's time goes (cProfile, cumulative).

Run: ``.venv/bin/python benchmarks/image_batch.py [--bias no] [--epochs 3] [--rounds 3] [--profile]``
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np

import sheaflinalg as sl
from sheaflinalg.network.importers.torch_fx import import_torch
from sheaflinalg.training.equilibrium.graph import GraphEquilibrium
from sheaflinalg.training.equilibrium.settings import DEFAULTS
from sheaflinalg.training.velocity import GraphParameters

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from image_training import stroke_images, torch_cnn  # noqa: E402
from mnist1d_training import epoch_orders, machine, same_threads  # noqa: E402


def trained_model(X, Y, args):
    """The torch CNN after ``args.epochs`` epochs of Adam (batch ``args.batch_size``): torch's row."""
    torch, _ = import_torch()
    model = torch_cnn(args.seed, args.size, args.bias == "yes")
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    images, labels = torch.from_numpy(X).reshape(-1, 1, args.size, args.size), torch.from_numpy(Y.argmax(1))
    for order in epoch_orders(args.seed, X.shape[0], args.epochs):
        for first in range(0, len(order), args.batch_size):
            batch = torch.from_numpy(order[first:first + args.batch_size])
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(images[batch]), labels[batch]).backward()
            optimizer.step()
    return model


def torch_batch(model, images, labels):
    """Torch's forward and backward pass of one batch (the gradients accumulated into the model)."""
    torch, _ = import_torch()
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(images), labels).backward()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bias", choices=("no", "yes"), default="no")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=3, help="torch's training epochs before the timing")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--n-train", type=int, default=1400)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    torch, _ = import_torch()
    print(machine())
    print(f"sheaflinalg from {sl.__file__.rsplit('/', 2)[0]}")
    X, Y = stroke_images(args.n_train, args.size, seed=args.seed)
    with same_threads(1):
        model = trained_model(X, Y, args)
        net = sl.Network.from_torch(torch_cnn(args.seed, args.size, args.bias == "yes"),
                                    input_shape=(1, args.size, args.size)).replace(output="softmax")
        net = sl.train(net, X, Y, method="equilibrium", epochs=args.epochs, batch_size=args.batch_size,
                       optimizer="adam", lr=args.lr, seed=args.seed, progress=False, loss="cross_entropy").network
        oracle = GraphEquilibrium(net.graph, "cross_entropy")
        theta = GraphParameters(net.graph).flat()
        g = np.empty_like(theta)
        images, labels = torch.from_numpy(X).reshape(-1, 1, args.size, args.size), torch.from_numpy(Y.argmax(1))
        batches = [slice(lo, lo + args.batch_size) for lo in range(0, args.n_train, args.batch_size)]
        oracle.gradient(theta, X[batches[0]], Y[batches[0]], DEFAULTS["nudging"], g)        # warm-up
        torch_batch(model, images[batches[0]], labels[batches[0]])
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for rows in batches:
                oracle.gradient(theta, X[rows], Y[rows], DEFAULTS["nudging"], g)
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
        times, unsettled = [], 0
        for _ in range(args.rounds):
            for rows in batches:
                start = time.process_time()
                torch_batch(model, images[rows], labels[rows])
                middle = time.process_time()
                unsettled += oracle.gradient(theta, X[rows], Y[rows], DEFAULTS["nudging"], g).unsettled
                times.append((middle - start, time.process_time() - middle))
    t = np.median(np.array(times), axis=0)
    print(f"bias {args.bias}, seed {args.seed}, after {args.epochs} epochs: per batch of {args.batch_size}, CPU "
          f"medians of {len(times)}: torch {1e3 * t[0]:.1f} ms, equilibrium {1e3 * t[1]:.1f} ms, ratio "
          f"{t[1] / t[0]:.2f}x; unsettled {unsettled} (load {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

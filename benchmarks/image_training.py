"""Training at equilibrium on images with large zero areas against torch backprop (issue 33).

The data are MNIST-1D's curves (the ``mnist1d`` package, offline) drawn as grey 2-D strokes on a black
``--size`` x ``--size`` background (:func:`stroke_images`): most pixels are exactly 0, so a convolution
gives equal values over most of the image, most max-pool windows hold ties (equal positive values, or
zeros of dead ReLUs) and, without biases (``--bias no``), most pre-activations are exactly 0.  The
network is ``Conv2d(1, 4, 3) -> ReLU -> MaxPool2d(2) -> Conv2d(4, 8, 3) -> ReLU -> Linear`` (padding 1,
float64), built once per seed in torch and imported with ``sl.Network.from_torch`` (softmax output);
both rows start from those weights and visit the same mini-batches (Adam, ``--lr``, ``--batch-size``)
on the same number of threads.  Each row's clock covers its training and the per-epoch records (train
and test loss and accuracy) that a sheaflinalg history makes; an untimed warm-up on two batches comes
first (numba's compilation stays out of every clock).

The table gives, per seed and as means: test accuracy after the last epoch, seconds per epoch, the
ratio to torch's, the equilibria the oracle reported unsettled and sliding per epoch, and the ratios of
the process's CPU seconds (both rows on one thread: a shared machine's load inflates wall times, not these).

Run: ``.venv/bin/python benchmarks/image_training.py [--seeds 0 1 2] [--epochs 20] [--bias no yes]``
"""

import argparse
import os
import sys
import time

import numpy as np

import sheaflinalg as sl
from sheaflinalg.network.importers.torch_fx import import_torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from mnist1d_training import epoch_orders, machine, same_threads  # noqa: E402


def stroke_images(n, size=16, seed=0):
    """``(X, Y)``: ``n`` MNIST-1D curves drawn as grey strokes on a black ``size x size`` image, one-hot labels.

    Curve ``k`` of 40 values becomes a polyline through ``(t_i, x_i)`` (``t`` the columns, ``x`` scaled to the
    rows); every point of a segment (four per segment) adds 0.5 to its pixel, clipped to 1.  ``X`` is
    ``(n, size * size)`` flat, rows first.
    """
    from mnist1d.data import get_dataset_args, make_dataset
    args = get_dataset_args()
    args.num_samples, args.seed = int(np.ceil(n / 0.8)) + 1, seed
    data = make_dataset(args)
    curves = np.concatenate([data["x"], data["x_test"]])[:n]
    labels = np.concatenate([data["y"], data["y_test"]])[:n]
    rows = (curves - curves.min()) / (curves.max() - curves.min()) * (size - 1)
    cols = np.broadcast_to(np.linspace(0.0, size - 1, curves.shape[1]), rows.shape)
    s = np.linspace(0.0, 1.0, 4)[None, None, :]
    r = np.rint(rows[:, :-1, None] + s * np.diff(rows, axis=1)[:, :, None]).astype(int).reshape(n, -1)
    c = np.rint(cols[:, :-1, None] + s * np.diff(cols, axis=1)[:, :, None]).astype(int).reshape(n, -1)
    X = np.zeros((n, size, size))
    np.add.at(X, (np.repeat(np.arange(n), r.shape[1]), r.ravel(), c.ravel()), 0.5)
    return np.minimum(X, 1.0).reshape(n, -1), np.eye(10)[labels]


def torch_cnn(seed, size, bias):
    """The float64 torch CNN (conv-relu-maxpool-conv-relu-linear), its weights drawn from ``seed``."""
    torch, nn = import_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=bias), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 8, 3, padding=1, bias=bias), nn.ReLU(), nn.Flatten(),
                             nn.Linear(8 * (size // 2) ** 2, 10)).double()


def _accuracy(model, X, Y, size):
    """Test accuracy of ``model`` (and the train/test losses a history computes: the same cost)."""
    torch, _ = import_torch()
    with torch.no_grad():
        logits = model(torch.from_numpy(X).reshape(-1, 1, size, size))
        torch.nn.functional.cross_entropy(logits, torch.from_numpy(Y.argmax(1)))
    return float(np.mean(logits.numpy().argmax(1) == Y.argmax(1)))


def run_torch(model, data, orders, cfg):
    """Train ``model`` in place by backprop with Adam in the given batch order; ``(accuracy, s per epoch)``."""
    torch, _ = import_torch()
    X_train, Y_train, X_test, Y_test = data
    X = torch.from_numpy(X_train).reshape(-1, 1, cfg.size, cfg.size)
    labels = torch.from_numpy(Y_train.argmax(1))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    start = time.perf_counter()
    for order in orders:
        for first in range(0, len(order), cfg.batch_size):
            batch = torch.from_numpy(order[first:first + cfg.batch_size])
            loss = torch.nn.functional.cross_entropy(model(X[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        _accuracy(model, X_train, Y_train, cfg.size)
        accuracy = _accuracy(model, X_test, Y_test, cfg.size)
    return accuracy, (time.perf_counter() - start) / len(orders)


def run_equilibrium(net, data, cfg, epochs):
    """``sl.train(method="equilibrium")`` at the default nudging: ``(accuracy, s per epoch, unsettled, sliding,
    trained network)`` (unsettled and sliding per epoch, averaged)."""
    start = time.perf_counter()
    fit = sl.train(net, *data, method="equilibrium", epochs=epochs, batch_size=cfg.batch_size, optimizer="adam",
                   lr=cfg.lr, seed=cfg.seed, progress=False, blas_threads=cfg.threads, loss="cross_entropy")
    seconds = (time.perf_counter() - start) / epochs
    h = fit.history
    return h.test_accuracy[-1], seconds, float(np.mean(h.unsettled[1:])), float(np.mean(h.sliding[1:])), fit.network


def one_seed(data, cfg, bias):
    """Both rows of one seed and bias setting (the imported forward pass checked against torch's first)."""
    torch, _ = import_torch()
    model = torch_cnn(cfg.seed, cfg.size, bias)
    net = sl.Network.from_torch(model, input_shape=(1, cfg.size, cfg.size)).replace(output="softmax")
    with torch.no_grad():
        P = torch.softmax(model(torch.from_numpy(data[2]).reshape(-1, 1, cfg.size, cfg.size)), 1).numpy()
    gap = float(np.max(np.abs(P - net.forward(data[2]))))
    if not gap < 1e-12:
        raise SystemExit(f"the imported network's forward pass differs from torch's by {gap:.1e}")
    small = tuple(a[:2 * cfg.batch_size] for a in data)
    run_torch(torch_cnn(cfg.seed, cfg.size, bias), small, epoch_orders(cfg.seed, small[0].shape[0], 1), cfg)
    run_equilibrium(net, small, cfg, 1)                                  # the warm-up, untimed
    cpu = [time.process_time()]
    reference = run_torch(model, data, epoch_orders(cfg.seed, data[0].shape[0], cfg.epochs), cfg)
    cpu.append(time.process_time())
    equilibrium = run_equilibrium(net, data, cfg, cfg.epochs)
    cpu.append(time.process_time())
    return reference, equilibrium[:4], rounds(model, equilibrium[4], data, cfg), (cpu[2] - cpu[1]) / (cpu[1] - cpu[0])


def rounds(model, net, data, cfg):
    """Seconds per epoch of torch and of the equilibrium at the trained weights, in alternating rounds (one
    epoch each: torch's goes on training, the equilibrium's starts from ``net`` every round):
    ``(torch median, torch min, equilibrium median, equilibrium min, ratio of the medians of the process's CPU
    seconds)`` (CPU time: what a shared machine's load does not inflate, on one thread)."""
    times = []
    for r in range(cfg.rounds):
        orders = epoch_orders(cfg.seed + 1000 + r, data[0].shape[0], 1)
        cpu = time.process_time()
        wall_torch = run_torch(model, data, orders, cfg)[1]
        cpu_torch, cpu = time.process_time() - cpu, time.process_time()
        times.append((wall_torch, run_equilibrium(net, data, cfg, 1)[1], cpu_torch, time.process_time() - cpu))
    t = np.array(times)
    return (np.median(t[:, 0]), t[:, 0].min(), np.median(t[:, 1]), t[:, 1].min(),
            np.median(t[:, 3]) / np.median(t[:, 2]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--bias", nargs="+", choices=("no", "yes"), default=["no", "yes"],
                   help="convolutions without biases (exact-zero pre-activations) and/or with them")
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--n-train", type=int, default=1400)
    p.add_argument("--n-test", type=int, default=600)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds at the trained weights")
    args = p.parse_args(argv)
    print(machine())
    print(f"sheaflinalg from {sl.__file__.rsplit('/', 2)[0]}")
    X, Y = stroke_images(args.n_train + args.n_test, args.size)
    n = args.n_train
    data = (X[:n], Y[:n], X[n:], Y[n:])
    print(f"{args.size}x{args.size} images: {100 * np.mean(X == 0):.0f}% of the pixels exactly 0")
    print("bias | seed | torch acc | eq acc | torch s/epoch | eq s/epoch | ratio | unsettled/epoch | sliding/epoch "
          "| rounds: torch median (min) | eq median (min) | ratio of medians (minima) | CPU ratio: training run "
          "| CPU ratio: rounds' medians")
    for bias in args.bias:
        rows = []
        for seed in args.seeds:
            cfg = argparse.Namespace(**vars(args), seed=seed)
            with same_threads(args.threads):
                (acc_t, sec_t), (acc_e, sec_e, unsettled, sliding), timed, cpu = one_seed(data, cfg, bias == "yes")
            rows.append((acc_t, acc_e, sec_t, sec_e, sec_e / sec_t, unsettled, sliding, *timed[:4],
                         timed[2] / timed[0], timed[3] / timed[1], cpu, timed[4]))
            print(_row(bias, seed, rows[-1]), flush=True)
        print(_row(bias, "mean", np.mean(rows, axis=0)) + f"  (load {os.getloadavg()[0]:.2f})", flush=True)
    return 0


def _row(bias, seed, r):
    """One line of the table."""
    return (f"{bias} | {seed} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.2f}x | {r[5]:.1f} | "
            f"{r[6]:.1f} | {r[7]:.3f} ({r[8]:.3f}) | {r[9]:.3f} ({r[10]:.3f}) | {r[11]:.2f}x ({r[12]:.2f}x) | "
            f"{r[13]:.2f}x | {r[14]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())

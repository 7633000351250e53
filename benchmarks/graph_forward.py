"""Graph networks (issue 21): the forward substitution against torch's own forward pass; prints, asserts nothing.

Cases (the issue's):

* (a) the MNIST-1D CNN: input ``(1, 40)``; conv 1->25 k5 s2 p1, relu, conv 25->25 k3 s2 p1, relu,
  conv 25->25 k3 s2 p1, relu, flatten, linear 125 -> 10; batch 1000;
* (b) a CIFAR ResNet-20: conv3x3 3->16, BN, relu; 3 stages of 3 basic blocks (conv-BN-relu-conv-BN,
  add the shortcut, relu), widths 16/32/64, stride 2 at the stage starts, a 1x1 convolution (+BN)
  shortcut where the shape changes; global average pool, linear 64 -> 10; batch 16 of 3x32x32;
* (c) ResNet-50 (torchvision's definition, ``tests/helpers/zoo.py``: seeded random weights and batch-norm
  statistics), batch 8 of 3x224x224 (issue 33).

All are built in torch (float64, eval mode) and imported with ``sl.Network.from_torch``.  For each
case and each thread count (1 and the available cores; torch's own count is set to the same and
restored): torch's forward pass, ``net.evaluate`` (the forward substitution in ``delta_Omega`` with the
pattern read on the way), the same under the forward pass's own pattern frozen, ``sl.harmonic_extension``,
``--runs`` runs each, interleaved, min and median; the ratio of the medians is the claim.  A second
baseline: torch's forward pass keeping every module's output (forward hooks, rectifiers out of place), as
the harmonic extension keeps every node's value.  Then the
time split by node kind (one thread).  The same before a change: ``benchmarks/before_after.py``.
Run: ``.venv/bin/python benchmarks/graph_forward.py [--runs 9] [--quick] [--cases resnet50]``
"""

import argparse
import collections
import os
import sys
import time

import numpy as np

from bench_threads import timings   # interleaved timing, round by round

import sheaflinalg as sl
from sheaflinalg._common.threads import available_cores, blas_limit, num_threads
from sheaflinalg.network.graph import forward

torch = None


def _torch():
    global torch
    if torch is None:
        import torch as _t

        torch = _t
    return torch


# ----------------------------------------------------------------- the models
def mnist1d_cnn():
    nn = _torch().nn
    return nn.Sequential(nn.Conv1d(1, 25, 5, stride=2, padding=1), nn.ReLU(),
                         nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv1d(25, 25, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(125, 10))


def resnet20():
    nn = _torch().nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = None
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + (x if self.shortcut is None else self.shortcut(x)))

    class ResNet20(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(16)
            blocks, cin = [], 16
            for width, stride in ((16, 1), (32, 2), (64, 2)):
                for i in range(3):
                    blocks.append(Block(cin, width, stride if i == 0 else 1))
                    cin = width
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            out = self.blocks(torch.relu(self.bn(self.conv(x))))
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(out, 1), 1))

    return ResNet20()


def prepared(model, seed):
    """``model`` in float64, eval mode, with seeded random weights and batch-norm statistics."""
    t = _torch()
    t.manual_seed(seed)
    model = model.double().eval()
    for m in model.modules():
        if isinstance(m, t.nn.modules.batchnorm._BatchNorm):
            with t.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model


def resnet50():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
    from helpers import zoo

    return zoo.build("resnet50")[0]


CASES = {"mnist1d_cnn": (mnist1d_cnn, (1, 40), 1000), "resnet20": (resnet20, (3, 32, 32), 16),
         "resnet50": (resnet50, (3, 224, 224), 8)}


def build(case, batch=None):
    """``(torch model, sheaflinalg network, inputs as a float64 array (n, *input_shape))``."""
    make, input_shape, default_batch = CASES[case]
    model = prepared(make(), seed=0)
    net = sl.Network.from_torch(model, input_shape=input_shape)
    X = np.random.default_rng(1).standard_normal((batch or default_batch,) + input_shape)
    return model, net, X


def keeping_all(model):
    """A forward pass of a copy of ``model`` that keeps every module's output (the second baseline: the harmonic
    extension keeps every node's value); in-place rectifiers are made out of place so that nothing is
    overwritten."""
    import copy

    twin, kept = copy.deepcopy(model), []
    for m in twin.modules():
        if hasattr(m, "inplace"):
            m.inplace = False
        if not list(m.children()):
            m.register_forward_hook(lambda module, inputs, output: kept.append(output))

    def forward(x):
        kept.clear()
        return twin(x)
    return forward


# ------------------------------------------------------------------ timing
def _cpu_clock(fn):
    """``fn`` wrapped to record the process's CPU time of every call in ``wrapped.cpu`` (all its threads)."""
    def wrapped():
        t = time.process_time()
        fn()
        wrapped.cpu.append(time.process_time() - t)
    wrapped.cpu = []
    return wrapped


def compare(case, threads, runs, batch=None):
    """Print torch vs sheaflinalg on one case with ``threads`` threads (both libraries); returns the median times."""
    t = _torch()
    model, net, X = build(case, batch)
    Xt = t.from_numpy(X)
    with t.no_grad():
        reference = model(Xt).numpy()
    state = net.evaluate(X)
    frozen, X_flat = state.pattern, X.reshape(X.shape[0], -1)
    error = float(np.max(np.abs(state.values[net.graph.output_node] - reference)))
    keep = keeping_all(model)
    fns = {"torch": lambda: model(Xt), "torch_keeping_all": lambda: keep(Xt), "evaluate": lambda: net.evaluate(X),
           "frozen": lambda: forward.evaluate(net.graph, X_flat, frozen),
           "harmonic_extension": lambda: sl.harmonic_extension(net, X)}
    fns = {k: _cpu_clock(fn) for k, fn in fns.items()}
    before = t.get_num_threads()
    t.set_num_threads(threads)
    try:
        with num_threads(threads), t.no_grad():
            for fn in fns.values():      # compile, warm the caches
                fn()
                fn.cpu.clear()
            ts = timings(fns, runs)
    finally:
        t.set_num_threads(before)
    med = {k: float(np.median(v)) for k, v in ts.items()}
    cpu = {k: float(np.median(fn.cpu)) for k, fn in fns.items()}
    print(f"{case} batch {X.shape[0]} threads {threads} (ms: min / median wall, median CPU of the process):")
    for k, v in ts.items():
        print(f"  {k:20s} {1e3 * v.min():8.2f} / {1e3 * med[k]:8.2f}   CPU {1e3 * cpu[k]:8.2f}   "
              f"ratio to torch {med[k] / med['torch']:.2f}x wall, {cpu[k] / cpu['torch']:.2f}x CPU")
    print(f"  max |sheaflinalg - torch| = {error:.1e}")
    return med


def assembly(case):
    """Print the assembly time and the nonzeros of ``delta_Omega`` for one sample."""
    _, net, X = build(case, 1)
    t = time.perf_counter()
    s = sl.assemble(net, X[0])
    print(f"{case}: assemble on one sample {1e3 * (time.perf_counter() - t):.1f} ms, delta_Omega "
          f"{s.delta_free.shape[0]} x {s.delta_free.shape[1]}, {s.delta_free.nnz} nonzeros")


def node_split(case, runs, batch=None):
    """Print the time of the forward substitution split by node operation (one thread, the batch in one block)."""
    _, net, X = build(case, batch)
    graph = net.graph
    X = X.reshape(X.shape[0], -1)
    steps = forward.node_steps(graph)
    spent = collections.Counter()
    with blas_limit(1):
        for r in range(runs + 1):        # the first run compiles and warms up
            values = {"x": X}
            for node, step in zip(graph.nodes, steps):
                out = np.empty((X.shape[0], graph.sizes[node.name]))
                pattern = (np.empty(out.shape, dtype=np.int64 if node.op == "maxpool" else bool)
                           if node.rule.pattern_dependent else None)
                t = time.perf_counter()
                step([values[p] for p in node.inputs], out, pattern, False)
                spent[node.op] += (time.perf_counter() - t) * (r > 0)
                values[node.name] = out
    total = sum(spent.values())
    print(f"{case}: time by node kind, one thread: " +
          ", ".join(f"{op} {1e3 * s / runs:.2f} ms ({100 * s / total:.0f}%)" for op, s in spent.most_common()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 runs, smaller batches (a smoke test)")
    parser.add_argument("--cases", nargs="*", choices=list(CASES), default=["mnist1d_cnn", "resnet20"])
    args = parser.parse_args(argv)
    runs = 3 if args.quick else args.runs
    batches = {"mnist1d_cnn": 200, "resnet20": 4, "resnet50": 1} if args.quick else {}
    threads = sorted({1, available_cores()})
    for case in args.cases:
        for n in threads:
            compare(case, n, runs, batches.get(case))
        node_split(case, runs, batches.get(case))
        if case != "resnet50":      # its delta_Omega is too big to assemble
            assembly(case)


if __name__ == "__main__":
    main()

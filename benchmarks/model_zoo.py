"""The model zoo: every torchvision classification model and a 2-layer GPT-2, imported and checked against torch.

For each model (random weights and batch-norm statistics, the smallest input it takes: tests/helpers/zoo.py),
one at a time: build it in float64 and eval mode, import it with ``sl.Network.from_torch``, and compare the
harmonic extension ``sl.harmonic_extension(net, X).output`` with torch's own float64 forward pass on a batch
of ``--batch`` standard normal inputs (relative error ``max |ours - torch| / max |torch|``).  Times: the import
(once: it traces, runs and checks the model), the extension and torch's forward pass (the least of 3 runs).  Each model ends as

* ``exact``: the relative error is at most 1e-9;
* ``mismatch``: it imports but the extension differs by more;
* ``refused``: the importer refuses it (the first line of its error; the table groups the refusals by the
  operation they name);
* ``skipped``: more parameters than ``--max-params``.

``--onnx`` runs the smallest member of every family (:data:`FAMILIES`) through ONNX instead: exported with
torch.onnx's TorchScript exporter (``dynamo=False``: the dynamo exporter needs onnxscript; opset
:data:`OPSET`, a symbolic batch axis) to a temporary file, imported with ``sl.Network.from_onnx`` and
compared in the same way; a model ends ``not exported`` where torch.onnx fails, and a refusal names the ONNX
op_type it stops at.  Times: the export and the import (which runs onnx's reference evaluator to check it).

Prints one line per model and writes a markdown table (``--output``).  Run::

    .venv/bin/python benchmarks/model_zoo.py [--models resnet,vgg11] [--output zoo.md] [--max-params 150e6]
    .venv/bin/python benchmarks/model_zoo.py --onnx [--models vit,swin] [--output zoo-onnx.md]
"""

import argparse
import collections
import gc
import os
import re
import sys
import time

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from helpers import zoo  # noqa: E402

import sheaflinalg as sl  # noqa: E402

RTOL = 1e-9
GPT2 = "gpt2_2layers"
#: ``--onnx``: the smallest member of every family (the fewest parameters; SqueezeNet 1.1 the cheaper of two
#: equal ones), and GPT-2.
FAMILIES = {"AlexNet": "alexnet", "VGG": "vgg11", "VGG-BN": "vgg11_bn", "ResNet": "resnet18",
            "ResNeXt": "resnext50_32x4d", "Wide-ResNet": "wide_resnet50_2", "DenseNet": "densenet121",
            "SqueezeNet": "squeezenet1_1", "GoogLeNet": "googlenet", "Inception-v3": "inception_v3",
            "MobileNet-V2": "mobilenet_v2", "MobileNet-V3": "mobilenet_v3_small", "MNASNet": "mnasnet0_5",
            "ShuffleNet-V2": "shufflenet_v2_x0_5", "EfficientNet": "efficientnet_b0",
            "EfficientNet-V2": "efficientnet_v2_s", "RegNet-X": "regnet_x_400mf", "RegNet-Y": "regnet_y_400mf",
            "ConvNeXt": "convnext_tiny", "ViT": "vit_b_16", "Swin": "swin_t", "Swin V2": "swin_v2_t",
            "MaxViT": "maxvit_t", "GPT-2": GPT2}
#: ``--onnx``: the ONNX opset of the exports.
OPSET = 17
#: ``--onnx``: inputs larger than the zoo's where torch.onnx needs them: it exports an adaptive average pool
#: only to an output size dividing its input's (AlexNet's 6x6 and VGG's 7x7 pools, which see 1x1 at the zoo's).
ONNX_INPUTS = {"alexnet": (3, 223, 223), "vgg11": (3, 224, 224), "vgg11_bn": (3, 224, 224)}


def _models(filters):
    """Every model name (torchvision's classifiers and :data:`GPT2`) containing one of ``filters``."""
    names = [*zoo.classifiers(), GPT2]
    return [name for name in names if not filters or any(f in name for f in filters)]


def _timed(function, *args, repeat=1, **kwargs):
    """``(function's result, its least time in seconds over repeat calls)``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = function(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return result, best


def _first_line(exc):
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def run(name, batch=2, max_params=None):
    """One model's row: ``{"name", "params", "input", "status", "reason", "error", "import", "extension", "torch",
    "missing"}`` (times in seconds; ``missing``: :func:`missing`)."""
    import torch

    params = zoo.parameter_count(name) if name != GPT2 else None
    row = {"name": name, "params": params, "input": None, "status": "", "reason": "", "error": None,
           "import": None, "extension": None, "torch": None, "missing": None}
    if max_params and params and params > max_params:
        return {**row, "status": "skipped", "reason": f"{params / 1e6:.0f}M parameters > --max-params"}
    model, row["input"] = _build(name)
    row["missing"] = missing(model)
    try:
        net, row["import"] = _timed(sl.Network.from_torch, model, input_shape=row["input"])
    except Exception as exc:         # the importer's refusal (or a bug of it: the table shows which)
        return {**row, "status": "refused", "reason": _first_line(exc)}
    return _compare(row, model, net, batch)


def _build(name):
    """``(model, per-sample input shape)`` of ``name``, float64, eval mode."""
    model, shape = zoo.gpt2() if name == GPT2 else zoo.build(name)
    return model.double().eval(), tuple(shape)


def _compare(row, model, net, batch):
    """``row`` with the extension's relative error to torch's forward pass, its status and both times."""
    import torch

    X = np.random.default_rng(1).standard_normal((batch,) + row["input"])
    with torch.no_grad():
        expected, row["torch"] = _timed(lambda: model(torch.from_numpy(X)).numpy(), repeat=3)
    output, row["extension"] = _timed(lambda: sl.harmonic_extension(net, X).output, repeat=3)
    expected = expected.reshape(batch, -1)
    row["error"] = float(np.abs(output - expected).max() / np.abs(expected).max())
    row["status"] = "exact" if row["error"] <= RTOL else "mismatch"
    return row


def run_onnx(family, name, directory, batch=2, opset=OPSET):
    """One family's row through ONNX: ``{"family", "name", "input", "status", "reason", "op", "error", "export",
    "import", "extension", "torch"}``: the model exported by torch.onnx's TorchScript exporter
    (:func:`helpers.torch_models.export_onnx`) to ``directory``, imported with ``sl.Network.from_onnx``
    (which checks the import against onnx's reference evaluator) and compared with torch's forward pass;
    ``op``: the operation a refusal names (:func:`group`)."""
    row = {"family": family, "name": name, "input": None, "status": "", "reason": "", "op": "", "error": None,
           "export": None, "import": None, "extension": None, "torch": None}
    from helpers.torch_models import export_onnx

    model, row["input"] = _build(name)
    row["input"] = ONNX_INPUTS.get(name, row["input"])
    path = os.path.join(directory, f"{name}.onnx")
    try:
        _, row["export"] = _timed(export_onnx, model, row["input"], path, opset)
    except Exception as exc:         # torch.onnx cannot export it
        return {**row, "status": "not exported", "reason": _first_line(exc)}
    try:
        net, row["import"] = _timed(sl.Network.from_onnx, path)
    except Exception as exc:
        reason = _first_line(exc).replace(f"{directory}{os.sep}", "")      # the file's name, not its temporary path
        return {**row, "status": "refused", "reason": reason, "op": group(reason)}
    finally:
        os.remove(path)
    return _compare(row, model, net, batch)


def missing(model):
    """Every operation of the model's torch.fx trace that the importer's table has no entry for, by name (sorted;
    a parameter read in ``forward`` is ``get_attr``, an activation supported only at the output counts as
    missing), or None if torch.fx cannot trace the model.  The refusal names the first one only; options
    (``ceil_mode``, ...) are not checked here."""
    import torch

    from sheaflinalg.network.errors import UnsupportedModelError
    from sheaflinalg.network.importers.torch_fx import _converter, _Walk

    try:
        walk = _Walk(torch, torch.fx.symbolic_trace(model))
    except Exception:           # the refusal says why
        return None
    found = set()
    for node in walk.nodes:
        if walk.is_shape(node):
            walk.shape_valued.add(node)
        elif node.op not in ("placeholder", "output"):
            name, op = walk.label(node)
            try:
                known = _converter(walk, node, name, op) is not None
            except UnsupportedModelError:
                known = False
            found |= set() if known else {"get_attr" if node.op == "get_attr" else op}
    return sorted(found)


def group(reason):
    """What a refusal is about: the operation it names (``node 'x' (GELU) is not supported`` -> ``GELU``)."""
    found = re.search(r"node '[^']*' \(([^)]*)\) is not supported: (.*)", reason)
    if found:
        op, why = found.groups()
        unknown = "has no sparse restriction map" in why.split("; ")[0]     # torch's and ONNX's wording
        return op if unknown else f"{op}: {why.split('; ')[0][:90]}"
    return reason.split(": ", 1)[-1][:90]


def _seconds(value):
    return "" if value is None else f"{value:.3f}"


def table(rows):
    """The markdown report: every model's row, then the refusals grouped by operation."""
    lines = ["| model | params (M) | input | status | rel. error | import (s) | extension (s) | torch (s) | reason | "
             "every op missing |", "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        params = "" if r["params"] is None else f"{r['params'] / 1e6:.1f}"
        error = "" if r["error"] is None else f"{r['error']:.1e}"
        reason = r["reason"].split("; supported: ")[0].replace("|", "\\|")[:200]    # not the importer's list
        absent = "(no trace)" if r["missing"] is None and r["status"] == "refused" else ", ".join(r["missing"] or ())
        lines.append(f"| {r['name']} | {params} | {r['input'] or ''} | {r['status']} | {error} | "
                     f"{_seconds(r['import'])} | {_seconds(r['extension'])} | {_seconds(r['torch'])} | {reason} | "
                     f"{absent} |")
    groups = collections.defaultdict(list)
    for r in rows:
        if r["status"] == "refused":
            groups[group(r["reason"])].append(r["name"])
    counts = collections.Counter(r["status"] for r in rows)
    lines += ["", "Summary: " + ", ".join(f"{n} {status}" for status, n in counts.most_common()), "",
              "| refused at (first unsupported operation) | models |", "| --- | --- |"]
    lines += [f"| {op} | {', '.join(names)} |" for op, names in sorted(groups.items(), key=lambda g: -len(g[1]))]
    return "\n".join(lines) + "\n"


def onnx_table(rows, exporter):
    """The markdown report of ``--onnx``: one row per family, then the summary."""
    lines = [f"Exported with {exporter}, opset {OPSET}.", "",
             "| family | model | input | status | rel. error | export (s) | import (s) | extension (s) | torch (s) | "
             "missing ONNX op | reason |", "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        error = "" if r["error"] is None else f"{r['error']:.1e}"
        reason = r["reason"].split("; supported: ")[0].replace("|", "\\|")[:200]
        lines.append(f"| {r['family']} | {r['name']} | {r['input']} | {r['status']} | {error} | "
                     f"{_seconds(r['export'])} | {_seconds(r['import'])} | {_seconds(r['extension'])} | "
                     f"{_seconds(r['torch'])} | {r['op']} | {reason} |")
    counts = collections.Counter(r["status"] for r in rows)
    lines += ["", "Summary: " + ", ".join(f"{n} {status}" for status, n in counts.most_common())]
    return "\n".join(lines) + "\n"


def _exporter():
    """Which torch.onnx exporter ``--onnx`` uses: the TorchScript one, the dynamo one needing onnxscript."""
    import importlib.util

    dynamo = "available" if importlib.util.find_spec("onnxscript") else "unavailable: onnxscript is not installed"
    return f"torch.onnx's TorchScript exporter (dynamo=False; the dynamo exporter: {dynamo})"


def _rows(args, bar):
    """Each selected model's row (``--onnx``: each family's), one model in memory at a time, printed as it ends."""
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for item in bar:
            bar.set_description(item[1] if args.onnx else item)
            rows.append(run_onnx(*item, directory, args.batch) if args.onnx else
                        run(item, args.batch, args.max_params))
            gc.collect()
            r = rows[-1]
            detail = f"rel. error {r['error']:.1e}" if r["error"] is not None else r["reason"][:160]
            tqdm.write(f"{r['name']:24s} {r['status']:12s} {detail}", file=sys.stdout)
            sys.stdout.flush()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated substrings of the model names to run")
    parser.add_argument("--output", help="write the markdown table here")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--max-params", type=float, default=150e6,
                        help="skip models with more parameters (float64 copies take 8 bytes each, several times; "
                             "0: no limit)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--onnx", action="store_true",
                        help="the smallest member of every family (FAMILIES) through torch.onnx and from_onnx")
    args = parser.parse_args(argv)
    filters = [f for f in args.models.split(",") if f]
    if args.onnx:
        items = [(f, n) for f, n in FAMILIES.items() if not filters or any(x in n for x in filters)]
    else:
        items = _models(filters)
    rows = _rows(args, tqdm(items, unit="model", disable=args.no_progress))
    report = onnx_table(rows, _exporter()) if args.onnx else table(rows)
    if args.output:
        with open(args.output, "w") as file:
            file.write(report)
    print(report.split("\n\n", 1)[1])


if __name__ == "__main__":
    main()

"""The model-zoo benchmark (benchmarks/model_zoo.py) on three cheap models: one imported exactly, one refused
(grouped by its operation), one skipped for its size; and the list of every operation the importer lacks."""

import importlib.util

import pytest

from helpers.paths import ROOT

torch = pytest.importorskip("torch")

from helpers import zoo  # noqa: E402

zoo.require("torchvision")

PATH = ROOT / "benchmarks" / "model_zoo.py"
spec = importlib.util.spec_from_file_location("model_zoo", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.slow
def test_zoo_benchmark_reports_exact_refused_and_skipped(tmp_path, capsys):
    out = tmp_path / "zoo.md"
    bench.main(["--models", "squeezenet1_1,resnet18", "--max-params", "5e6", "--output", str(out), "--no-progress"])
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()}
    assert " | exact | " in rows["squeezenet1_1"]
    assert " | skipped | " in rows["resnet18"] and "12M parameters > --max-params" in rows["resnet18"]
    assert "Summary: " in capsys.readouterr().out
    # Swin's window attention is a function torch.fx does not trace into: read through torch.export, and the
    # fx operations that made the import fall back are listed
    bench.main(["--models", "swin_t", "--max-params", "0", "--output", str(out), "--no-progress"])
    rows = {line.split(" | ")[0].strip("| "): line for line in out.read_text().splitlines()}
    assert " | exact | " in rows["swin_t"]
    assert "shifted_window_attention" in rows["swin_t"]


def test_zoo_benchmark_lists_every_missing_operation():
    assert bench.missing(zoo.build("mnasnet0_5")[0]) == []

    class Cumulative(torch.nn.Module):       # cumsum and a parameter read in forward: no restriction maps
        def __init__(self):
            super().__init__()
            self.conv, self.scale = torch.nn.Conv1d(2, 2, 1), torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            return torch.cumsum(self.conv(x), 1).relu() + self.scale

    assert bench.missing(Cumulative()) == ["cumsum", "get_attr"]
    assert bench.group("UnsupportedModelError: node 'f.1' (GELU) is not supported: this operation has no "
                       "sparse restriction map; supported: ...") == "GELU"


@pytest.mark.slow
def test_zoo_benchmark_onnx_reports_each_family_through_torch_onnx(tmp_path, capsys):
    pytest.importorskip("onnx")
    out = tmp_path / "zoo.md"
    bench.main(["--onnx", "--models", "squeezenet1_1", "--output", str(out), "--no-progress"])
    text = out.read_text()
    assert text.startswith("Exported with torch.onnx's TorchScript exporter") and f"opset {bench.OPSET}" in text
    (row,) = [line for line in text.splitlines() if line.startswith("| SqueezeNet |")]
    assert " | squeezenet1_1 | (3, 32, 32) | exact | " in row
    assert "Summary: 1 exact" in capsys.readouterr().out
    assert set(bench.FAMILIES.values()) <= set(zoo.classifiers()) | {bench.GPT2} and len(bench.FAMILIES) == 24
    assert bench.group("UnsupportedModelError: m.onnx: node 'a.Mod' (Mod) is not supported: op_type 'Mod' has no "
                       "sparse restriction map; supported: ...") == "Mod"

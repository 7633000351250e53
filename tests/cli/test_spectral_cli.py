"""The ``sheaflinalg spectrum`` command, the spectral figures, the appendix E.3 table."""

import csv

import numpy as np
import pytest

import sheaflinalg as sl
from sheaflinalg._common.resources import data_path
from sheaflinalg.cli import main


def test_spectrum_command_defaults(capsys):
    assert main(["spectrum", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "[2, 30, 1]" in out and "50 inputs" in out
    X = sl.tasks.make("paraboloid", 300, 100, seed=42).X_train[:50]
    ref = sl.spectrum(sl.Network.random([2, 30, 1], seed=42), X)
    line = next(l for l in out.splitlines() if l.startswith("lambda_min "))
    assert float(line.split()[1]) == pytest.approx(np.median(ref.lambda_min), rel=1e-4)
    assert "z2" in out and "stability" in out


def test_spectrum_command_plot_and_options(tmp_path, capsys):
    png = tmp_path / "spectra.png"
    assert main(["spectrum", "--arch", "2,6,5,1", "--samples", "4", "--system", "free", "-k", "2",
                 "--per-sample", "--plot", str(png), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert png.stat().st_size > 1000
    assert "yhat" in out and len([l for l in out.splitlines() if l.strip().startswith(("0 ", "3 "))]) >= 2
    png2 = tmp_path / "arpack.png"
    assert main(["spectrum", "--arch", "3,9,2", "--samples", "2", "--method", "arpack", "--plot", str(png2),
                 "--no-progress"]) == 0
    assert png2.exists()


def test_spectrum_command_bad_input(tmp_path, capsys):
    assert main(["spectrum", "--samples", "0"]) == 2
    assert main(["spectrum", "--arch", "2,x,1"]) == 2
    assert main(["spectrum", "-k", "100"]) == 2
    assert "N=61" in capsys.readouterr().err
    assert main(["spectrum", "--plot", str(tmp_path / "fig.txt")]) == 2
    assert not (tmp_path / "fig.txt").exists()


def test_tracking_and_histogram_figures(tmp_path):
    from types import SimpleNamespace

    from sheaflinalg.plotting.figure import save_figure
    from sheaflinalg.plotting.spectral import plot_histogram, plot_tracking

    X = np.random.default_rng(0).uniform(-2, 2, size=(8, 2))
    tr = sl.SpectralTracker(X)
    for step, seed in enumerate(range(3)):
        tr(SimpleNamespace(method="sgd", epoch=step, step=step, network=sl.Network.random([2, 5, 1], seed=seed), X=X))
    ax = plot_tracking([tr], "condition")
    ax2 = plot_histogram([sl.spectrum(sl.Network.random([2, 5, 1], seed=s), X) for s in (0, 1)], labels=["a", "b"])
    save_figure(ax.figure, tmp_path / "t.png")
    save_figure(ax2.figure, tmp_path / "h.png")
    assert (tmp_path / "t.png").exists() and (tmp_path / "h.png").exists()


def test_spectral_gap_depth_item(tmp_path):
    from sheaflinalg.reproduce import output, spectra

    paths, notes = spectra.gap_vs_depth(output.Outputs(tmp_path), quick=True)
    assert "decreasing with depth; recorded lambda_1 reproduced" in notes
    for f in ("spectral_gap_depth.md", "spectral_gap_depth.tex", "spectral_gap_depth.csv", "eigvec_energy.png"):
        assert any(p.endswith(f) for p in paths) and (tmp_path / ("figures" if f.endswith("png") else "tables")
                                                      / f).exists()
    rows = list(csv.reader((tmp_path / "tables" / "spectral_gap_depth.csv").read_text().splitlines()))[1:]
    # the paper's own networks: every input's lambda_1 as recorded, hence the paper's medians
    with np.load(data_path("spectral_gap_depth.npz"), allow_pickle=False) as f:
        rec = {k: f[k] for k in f.files}
    paper = {"[2,30,1]": 0.2248, "[2,10,8,1]": 0.0602, "[2,8,6,4,1]": 0.0281}
    for row, tag in zip(rows, ("1H", "2H", "3H")):
        name, median = row[0], float(row[1])
        n_layers = sum(1 for k in rec if k.startswith("W") and k.endswith(tag))
        net = sl.Network([rec[f"W{l}_{tag}"] for l in range(1, n_layers + 1)],
                         [rec[f"b{l}_{tag}"] for l in range(1, n_layers + 1)])
        lam = sl.spectrum(net, rec["X"], vectors=False).lambda_min
        np.testing.assert_allclose(lam, rec[f"gaps_{tag}"], rtol=1e-10)
        assert median == pytest.approx(np.median(lam), rel=1e-5)
        assert round(median, 4) == paper[name]
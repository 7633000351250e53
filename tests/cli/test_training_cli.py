"""``sheaflinalg train`` end to end, and the learned-output figure."""

import csv

import numpy as np

import sheaflinalg as sl
from sheaflinalg.cli import main


def test_train_command_writes_network_and_history(tmp_path, capsys):
    net_path, hist_path = tmp_path / "net.npz", tmp_path / "hist.csv"
    status = main(["train", "--steps", "2000", "--arch", "2,8,1", "--no-progress", "--n-train", "40",
                   "--save", str(net_path), "--history", str(hist_path)])
    assert status == 0
    out = capsys.readouterr().out
    assert "sheaf: 2000 steps" in out
    rows = list(csv.DictReader(open(hist_path)))
    assert [int(r["step"]) for r in rows] == [0, 1000, 2000]
    net = sl.Network.load(net_path)
    data = sl.tasks.make("paraboloid", 40, 100, seed=0)
    assert float(rows[-1]["train_loss"]) == np.mean((net.forward(data.X_train) - data.Y_train) ** 2)


def test_train_command_replays_an_experiment_and_rejects_bad_options(tmp_path, capsys):
    assert main(["train", "--experiment", str(sl.tasks.DATA_DIR / "blobs_1H.npz"), "--steps", "2000",
                 "--method", "sgd", "--no-progress"]) == 0
    out = capsys.readouterr().out
    diff = float(out.split("recorded sgd curves: ")[1].split()[0])
    assert diff < 1e-6
    assert main(["train", "--task", "moons"]) == 2
    assert main(["train", "--dt", "0", "--steps", "10"]) == 2
    assert main(["train", "--steps", "10", "--save", str(tmp_path / "missing" / "n.npz")]) == 2
    assert "moons" in capsys.readouterr().err


def test_learned_output_figure(tmp_path):
    from sheaflinalg.plotting.training import plot_learned_outputs, plot_curves

    rows = []
    for task in ("saddle", "blobs"):
        d = sl.tasks.make(task, 40, 10, seed=0)
        net = sl.Network.random([2, 5, d.Y_train.shape[1]], seed=0, output=d.output)
        target = (lambda X: sl.tasks.target_function("saddle", X)) if task == "saddle" else None
        rows.append({"task": task, "X": d.X_train, "Y": d.Y_train, "target": target, "sheaf": net, "sgd": net})
    path = tmp_path / "fig.png"
    fig = plot_learned_outputs(rows, path)
    assert path.stat().st_size > 1000 and len(fig.axes) >= 6
    h = sl.sgd(net, d.X_train, d.Y_train, epochs=20, progress=False).history
    assert plot_curves([h]).get_yscale() == "log"


def test_train_command_threads_do_not_change_the_network(tmp_path, capsys):
    paths = []
    for threads in ("1", "2", "3"):
        paths.append(tmp_path / f"net{threads}.npz")
        assert main(["train", "--steps", "400", "--arch", "2,6,1", "--n-train", "600", "--threads", threads,
                     "--no-progress", "--save", str(paths[-1])]) == 0
    nets = [sl.Network.load(p).parameters() for p in paths]
    for other in nets[1:]:
        np.testing.assert_array_equal(nets[0], other)

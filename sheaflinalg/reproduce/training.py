"""Section 6.2: training curves (sheaf vs SGD) and the learned surfaces of ``[2,30,1]`` on the paraboloid."""

from .. import tasks
from ..plotting.figure import new_figure
from ..plotting.training import plot_curves, plot_learned_outputs
from .stages import paraboloid_runs


def curves_and_surfaces(outputs, quick):
    """``fig:training-results``: loss curves of both methods, the target and both learned surfaces."""
    exp, runs = paraboloid_runs(quick)
    fig, axes = new_figure(1, 2, figsize=(10, 3.8), sharey=True)
    hist = [runs[m][1] for m in ("sheaf", "sgd")]
    for ax, key in zip(axes, ("train_loss", "test_loss")):
        plot_curves(hist, ax=ax, key=key, labels=["sheaf", "SGD"])
        ax.set_title(key.replace("_", " "))
        ax.set_xlabel("Euler steps / SGD epochs")
        ax.set_ylabel("mean squared error")
    fig.tight_layout()
    paths = outputs.figure(fig, "training_curves")
    row = {"task": "paraboloid", "X": exp.X_train, "Y": exp.Y_train,
           "target": lambda X: tasks.target_function("paraboloid", X),
           "sheaf": runs["sheaf"][2], "sgd": runs["sgd"][2]}
    paths += outputs.figure(plot_learned_outputs([row]), "training_surfaces")
    notes = ", ".join(f"{m} final test loss {runs[m][1].test_loss[-1]:.4g}" for m in ("sheaf", "sgd"))
    return paths, notes

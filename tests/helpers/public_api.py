"""The public callables of the package, enumerated rather than listed by hand: ``sheaflinalg.__all__``
and the public functions and classes defined in ``sl.discord``, ``sl.sweep``, ``sl.tasks`` and ``sl.optim``."""

import inspect

import sheaflinalg as sl


def _public(module, label):
    """(``label.name``, callable) of every public callable of ``module`` (exceptions aside)."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")
                 and getattr(getattr(module, n), "__module__", None) == module.__name__]
    for name in names:
        obj = getattr(module, name)
        if callable(obj) and not inspect.ismodule(obj) and not (inspect.isclass(obj)
                                                               and issubclass(obj, BaseException)):
            yield f"{label}.{name}", obj


PUBLIC = dict(item for module, label in ((sl, "sl"), (sl.discord, "sl.discord"), (sl.sweep, "sl.sweep"),
                                         (sl.tasks, "sl.tasks"), (sl.optim, "sl.optim"))
              for item in _public(module, label))

#: Records the library returns (dataclasses of results): they are built by the library, not from user input.
RESULTS = {"sl.Block", "sl.FlowResult", "sl.HarmonicExtension", "sl.VerificationReport", "sl.HeatResult", "sl.HeatHistory",
           "sl.Completion", "sl.ExactHeatResult", "sl.ImplicitHeatResult", "sl.ConvergenceStudy", "sl.TrainResult", "sl.History",
           "sl.TrainingInfo", "sl.SpectrumResult", "sl.discord.EdgeResiduals", "sl.discord.NodeResiduals",
           "sl.discord.PinnedDiscord", "sl.discord.AttentionBlock", "sl.discord.HeadDiscord", "sl.sweep.Spec", "sl.SurveyResult", "sl.tasks.Dataset", "sl.tasks.Experiment",
           "sl.tasks.SweepRecord"}

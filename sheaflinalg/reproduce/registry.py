"""The list of every reproduced figure and table, with the paper's label, and the resumable runner."""

import difflib
import platform
import time
from dataclasses import dataclass

from .._common.version import VERSION as __version__
from .._common.atomic import write_text
from .._common.progress import progress_iter
from .._common.validation import check_int
from . import case_mnist1d, case_vit, convergence, discord, exact_flow, spectra, sweeps, table_e1, training
from .output import MISMATCH, Outputs


@dataclass(frozen=True)
class Item:
    """One reproduction: ``run(outputs, quick[, jobs=][, progress=]) -> (paths, notes)``."""

    key: str
    paper: str          # the paper's figure / table labels
    title: str
    run: object
    uses_jobs: bool = False
    uses_progress: bool = False


ITEMS = (
    Item("convergence", "Fig. `fig:convergence` (6.1), Fig. `fig:convergence-deep-sigmoid` (E.1)",
         "heat equation converges to the forward pass: [2,4,1] and deep sigmoid [2,6,4,4,1]", convergence.convergence),
    Item("phase_planes", "Fig. `fig:phase-planes` (E.1)", "phase planes with ReLU boundaries and crossings",
         convergence.phase_planes),
    Item("exact_flow", "(beyond the paper)",
         "exact continuous-time flow: phase plane with Filippov sliding, certificate, Euler's first order",
         exact_flow.exact_flow),
    Item("training", "Fig. `fig:training-results` (6.2)", "training curves and learned surfaces, sheaf vs SGD",
         training.curves_and_surfaces),
    Item("table_e1", "Table `tab:full-results`, Fig. `fig:all-training-outputs` (E.2)",
         "Table E.1 replayed from the paper's inputs, learned outputs", table_e1.item, uses_jobs=True),
    Item("beta_scaling", "Fig. `fig:beta-scaling` (6.2)", "beta scaling, replayed from the paper's records",
         sweeps.beta_scaling, uses_jobs=True),
    Item("integration_time", "Fig. `fig:depth-T-sweep` (6.2, E.4)", "integration time x depth, replayed",
         sweeps.integration_time, uses_jobs=True),
    Item("gap_depth", "Table `tab:spectral-gap-depth`, Fig. `fig:eigvec-energy` (E.3)",
         "spectral gap vs depth (the paper's networks), eigenvector energy by block", spectra.gap_vs_depth),
    Item("tracking", "Fig. `fig:spectral-gap-tracking` (E.3)", "lambda_1 along sheaf and SGD training",
         spectra.tracking),
    Item("comparisons", "Fig. `fig:spectral-comparisons` (E.3)", "lambda_1, lambda_max, condition over training",
         spectra.comparisons),
    Item("histograms", "Fig. `fig:spectral-histograms` (E.3)", "lambda_1 over 100 inputs at three training stages",
         spectra.histograms),
    Item("initialisations", "(beyond the paper)", "lambda_1 over 100 random initialisations, three depths",
         spectra.initialisations),
    Item("discord", "Fig. `fig:discord-1H` (6.3), Fig. `fig:discord-3H` (E.3)",
         "per-coordinate discord of sheaf-trained [2,30,1] and [2,12,8,6,1]", discord.per_coordinate),
    Item("residual_stages", "Figs. `fig:discord-residuals-sheaf`, `fig:discord-residuals-sgd` (E.3)",
         "discord residuals at three training stages, shared axes", discord.residual_stages),
    Item("pinned_table", "Table `tab:pinned-discord` (E.3)", "per-edge pinned discord, sheaf vs SGD",
         discord.pinned_table),
    Item("case_mnist1d", "(case study, beyond the paper)",
         "a trained MNIST-1D CNN: spectral gap per class and outcome, Fiedler energy and pinned discord per node",
         case_mnist1d.case_mnist1d, uses_progress=True),
    Item("case_vit", "(case study, beyond the paper)",
         "a small ViT trained on MNIST-1D: spectral gap per class and outcome, Fiedler energy and pinned discord "
         "per sub-layer and attention head", case_vit.case_vit, uses_progress=True),
)


def select(names):
    """The items named in ``names`` (None: every item), in the registry's order, or ValueError.

    An empty selection is refused (it would run nothing and look like success), and so is an
    unknown name (with the closest known one).

    Examples
    --------
    >>> [i.key for i in select(["phase_planes", "convergence"])]
    ['convergence', 'phase_planes']
    >>> select(["tabel_e1"])
    Traceback (most recent call last):
    ...
    ValueError: unknown item 'tabel_e1'; did you mean 'table_e1'?
    """
    if names is None:
        return list(ITEMS)
    if isinstance(names, str):
        names = [names]
    names = list(names)
    keys = [i.key for i in ITEMS]
    if not names:
        raise ValueError(f"no item named: name at least one of {', '.join(keys)} (or none at all for every item)")
    for name in names:
        if name not in keys:
            close = difflib.get_close_matches(str(name), keys, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"expected some of {', '.join(keys)}"
            raise ValueError(f"unknown item {name!r}; {hint}")
    return [i for i in ITEMS if i.key in names]


def run_items(out, quick=False, jobs=1, only=None, resume=False, progress=True, log=print):
    """Run the items (``only``: their keys) into ``out``; finished items are kept when ``resume``.

    Everything is checked before the first item runs: the item names (:func:`select`), the
    output directory (:class:`~sheaflinalg.reproduce.output.Outputs`) and, with ``resume``, every
    item's marker (an edited one is refused, saying how to start over).  Returns ``[(item, paths,
    notes, seconds, reused)]`` and writes ``out/index.md``; an item whose replay misses its record
    says so in its notes and in ``out/mismatches.txt``.
    """
    items = select(only)
    jobs = check_int(jobs, "jobs", 1)
    outputs = Outputs(out)
    settings = {"quick": bool(quick), "version": __version__}
    markers = {item.key: outputs.finished(item.key, settings) for item in items} if resume else {}
    done = []
    for item in progress_iter(items, len(items), progress, "reproduce"):
        marker = markers.get(item.key)
        if marker is not None:
            done.append((item, marker["paths"], marker["notes"], marker["seconds"], True))
            continue
        start = time.perf_counter()
        options = {"jobs": jobs} if item.uses_jobs else {}
        if item.uses_progress:
            options["progress"] = progress
        paths, notes = item.run(outputs, quick, **options)
        seconds = time.perf_counter() - start
        outputs.mark(item.key, settings, paths, seconds, notes)
        done.append((item, paths, notes, seconds, False))
        log(f"{item.key}: {seconds:.1f} s, {notes}")
    write_text(outputs.path("index.md"), index(done, quick))
    return done


def not_reproduced(done):
    """The keys of the finished items whose notes say that a replay missed its record."""
    return [item.key for item, _, notes, _, _ in done if MISMATCH in notes]


def index(done, quick):
    """``index.md``: every output next to the paper's figure or table."""
    lines = ["# Reproduction of the paper's figures and tables", "",
             f"sheaflinalg {__version__}, {'quick' if quick else 'full'} mode, Python {platform.python_version()}.",
             "", "| paper | what | outputs | seconds | notes |", "|---|---|---|---|---|"]
    for item, paths, notes, seconds, reused in done:
        links = ", ".join(f"[{p.split('/')[-1]}]({p})" for p in paths)
        lines.append(f"| {item.paper} | {item.title} | {links} | {seconds:.1f}{' (kept)' if reused else ''} "
                     f"| {notes} |")
    return "\n".join(lines) + "\n"

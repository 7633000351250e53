"""``sheaflinalg warmup`` and :func:`sheaflinalg.warmup.warm_up`: every compiled path runs once."""

from sheaflinalg._common.threads import available_cores
from sheaflinalg.cli import main
from sheaflinalg.commands.warmup import warm_up


def test_warm_up_runs_every_path_on_one_thread_and_on_the_available_cores():
    done = warm_up(progress=False)
    counts = sorted({1, available_cores()})
    per_count = len(done) // len(counts)
    assert len(done) == per_count * len(counts) and per_count >= 14
    assert {d.rsplit(" (", 1)[1] for d in done} == {f"{n} threads)" for n in counts}
    assert any(d.startswith("graph: train (equilibrium)") for d in done)
    assert any(d.startswith("chain: heat (exact)") for d in done)


def test_warmup_command_reports_what_it_compiled(capsys):
    assert main(["warmup", "--no-progress"]) == 0
    assert "compiled the kernels of" in capsys.readouterr().out

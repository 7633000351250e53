"""A Ctrl-C swallowed by a finaliser still stops a command (the command line records every SIGINT)."""

import gc
import os
import signal

import pytest

from sheaflinalg import cli
from sheaflinalg._common.interrupt import catching_interrupts, check_interrupt, interrupt_pending
from sheaflinalg._common.progress import progress_iter
from sheaflinalg.commands import verify as verify_command


class _Finalised:
    """Sends SIGINT to this process while Python finalises it: the KeyboardInterrupt is 'ignored'."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)


def _swallow_a_ctrl_c():
    obj = _Finalised()
    del obj
    gc.collect()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_in_a_finaliser_is_recorded_and_stops_the_next_item():
    seen = []
    with catching_interrupts():
        assert not interrupt_pending()
        with pytest.raises(KeyboardInterrupt):
            for i in progress_iter(range(5), 5, False, "items"):
                seen.append(i)
                if i == 1:
                    _swallow_a_ctrl_c()       # the exception is lost inside __del__
        assert interrupt_pending()
    assert seen == [0, 1]
    assert not interrupt_pending()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_the_command_line_nothing_is_installed_or_recorded():
    before = signal.getsignal(signal.SIGINT)
    for _ in progress_iter(range(3), 3, False, "items"):
        pass
    check_interrupt()
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_command_reports_an_interrupt_that_its_run_swallowed(monkeypatch, capsys):
    def run(args):
        _swallow_a_ctrl_c()
        return 0

    monkeypatch.setattr(verify_command, "run", run)
    assert cli.main(["verify"]) == cli.INTERRUPTED
    assert "interrupted" in capsys.readouterr().err

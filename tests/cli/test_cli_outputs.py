"""Every command checks the places of its output files before any work, by one rule (``add_output``)."""

import argparse

import pytest

import sheaflinalg.cli as cli
from sheaflinalg.cli import build_parser, main


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _writing_options(command_parser):
    """Options whose help says the command writes a file there."""
    return {a.dest: a.option_strings[0] for a in command_parser._actions
            if a.option_strings and a.help and ("write" in a.help.lower() or "checkpoint here" in a.help)}


OUTPUTS = sorted((name, option) for name, p in _commands().items()
                 for option, _ in (p.get_default("_outputs") or {}).values())


def test_every_option_that_writes_a_file_is_declared_as_an_output():
    for name, p in _commands().items():
        declared = set(p.get_default("_outputs") or {})
        assert set(_writing_options(p)) <= declared, (name, _writing_options(p), declared)
    assert ("discord", "--plot") in OUTPUTS and ("spectrum", "--plot") in OUTPUTS and ("train", "--save") in OUTPUTS


@pytest.mark.parametrize("command, option", OUTPUTS)
def test_an_unwritable_output_is_refused_before_the_command_runs(command, option, tmp_path, monkeypatch, capsys):
    ran = []
    module = cli._available_commands()[command]
    monkeypatch.setattr(module, "run", lambda args: ran.append(args) or 0)
    suffixes = next(s for o, s in _commands()[command].get_default("_outputs").values() if o == option)
    ending = suffixes[0] if suffixes else ".out"
    (tmp_path / f"a-directory{ending}").mkdir()
    for target in (tmp_path / "no-such-dir" / f"out{ending}", tmp_path / f"a-directory{ending}"):
        assert main([command, option, str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and option in err and "cannot write" in err, err
    if suffixes:
        assert main([command, option, str(tmp_path / "figure.txt")]) == 2
        assert f"{option} needs a" in capsys.readouterr().err
    assert not ran, f"{command} ran before its {option} was checked"


def test_discord_refuses_training_options_with_a_network_file(tmp_path, capsys):
    import sheaflinalg as sl

    path = tmp_path / "n.npz"
    sl.Network.random([2, 5, 1], seed=0).save(str(path))
    for extra in (["--arch", "2,3,1"], ["--method", "sgd"], ["--steps", "10"], ["--method", "sheaf"]):
        assert main(["discord", "--network", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"{extra[0]} has no effect with --network" in err, err

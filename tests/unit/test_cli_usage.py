"""Usage errors: exit 1 (2 means "changes" to --detailed-exitcode), the subcommand's usage, no abbreviated
flags, and each playbook command takes only the flags its playbook reads."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from mm2spec.cli import build_parser, main
from mm2spec.cli.playbook import COMMAND_FLAGS, FLAGS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def _usage_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.mark.parametrize("argv,command,unknown", [
    (["plan", "--detailed-exitcode", "--fromat", "json", str(EXAMPLE)], "plan", "--fromat"),
    (["promote", str(EXAMPLE), "--from", "dev", "--to", "prod", "--detailed-exitcode", "--bogus"], "promote", "--bogus"),
    (["playbook", "run", "verify", str(EXAMPLE), "--bogus"], "playbook run", "--bogus"),
    (["dev", "down", "--wipe", "--bogus"], "dev down", "--bogus"),
])
def test_an_unknown_flag_exits_1_with_the_subcommands_usage(argv, command, unknown, capsys):
    err = _usage_error(capsys, argv)
    assert err.startswith(f"usage: mm2spec {command} ")
    assert f"mm2spec {command}: error: unrecognized arguments: {unknown}" in err


@pytest.mark.parametrize("argv,flag", [
    (["promote", str(EXAMPLE), "--from", "dev", "--to", "prod", "--baselin", "x.yaml"], "--baselin"),
    (["validate", str(EXAMPLE), "--form", "json"], "--form"),
    (["plan", str(EXAMPLE), "--detailed"], "--detailed"),
    (["failover", str(EXAMPLE), "--source-unreach", "--yes"], "--source-unreach"),
])
def test_an_abbreviated_flag_is_not_taken_for_the_whole_one(argv, flag, capsys):
    assert f"unrecognized arguments: {flag}" in _usage_error(capsys, argv)


def test_no_parser_takes_abbreviations():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 15  # every command and subcommand was walked
    assert [p.prog for p in parsers if p.allow_abbrev] == []


def test_a_missing_argument_or_a_bad_choice_exits_1_not_2(capsys):
    assert "mm2spec promote: error: the following arguments are required: --to" in _usage_error(
        capsys, ["promote", str(EXAMPLE), "--from", "dev"])
    assert "mm2spec plan: error: argument --format: invalid choice" in _usage_error(
        capsys, ["plan", str(EXAMPLE), "--format", "yaml"])
    assert "mm2spec: error: the following arguments are required: COMMAND" in _usage_error(capsys, [])


def test_help_still_exits_0(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--help"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("usage: mm2spec plan ")


@pytest.mark.parametrize("argv,flag", [
    (["verify", str(EXAMPLE), "--stranded", "rebuild"], "--stranded rebuild"),
    (["verify", str(EXAMPLE), "--yes"], "--yes"),
    (["verify", str(EXAMPLE), "--source-unreachable"], "--source-unreachable"),
    (["failover", str(EXAMPLE), "--stranded=keep"], "--stranded=keep"),
    (["failback", str(EXAMPLE), "--source-unreachable"], "--source-unreachable"),
])
def test_a_playbook_command_refuses_a_flag_its_playbook_does_not_read(argv, flag, capsys):
    err = _usage_error(capsys, argv)
    assert err.startswith(f"usage: mm2spec {argv[0]} ") and f"unrecognized arguments: {flag}" in err


def test_each_playbook_command_has_its_flags_and_the_defaults_of_the_others():
    commands = {action.dest: action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)}
    choices = next(iter(commands.values())).choices
    for command in ("verify", "failover", "failback"):
        taken = {s for a in choices[command]._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
        extra = {"--env", "--serve", "--refresh"} if command == "verify" else {"--env"}
        assert taken == set(COMMAND_FLAGS[command]) | extra, command
        args = choices[command].parse_args([str(EXAMPLE)])
        assert all(hasattr(args, flag[2:].replace("-", "_")) for flag in FLAGS)  # run_playbook reads every option
    assert set(COMMAND_FLAGS["run"]) == set(FLAGS)
    assert "--stranded" in COMMAND_FLAGS["failback"] and "--source-unreachable" in COMMAND_FLAGS["failover"]


def test_promote_refuses_the_same_environment_on_both_sides(capsys):
    err = _usage_error(capsys, ["promote", str(EXAMPLE), "--from", "prod", "--to", "prod"])
    assert err.startswith("usage: mm2spec promote ")
    assert "mm2spec promote: error: --from and --to are both prod: promote compares" in err


@pytest.mark.parametrize("baseline", ["git:", "git:  "])
def test_promote_refuses_a_git_baseline_without_a_revision(baseline, capsys):
    assert main(["promote", str(EXAMPLE), "--from", "staging", "--to", "prod", "--baseline", baseline]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: baseline {baseline}: names no revision; write git:REV"), err

"""Every invalid-spec rule has a case in tests/unit/invalid/ with its expected error text (<case>.err).

The CLI runs on each case from inside that folder so file names in messages are stable: ``validate``,
or the command line in ``<case>.args`` when there is one (a case about another command's input, such
as ``render --out``). Regenerate the expected texts with ``pytest --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from mm2spec.cli import main

CASES = Path(__file__).parent / "invalid"


def _command(case: str) -> list[str]:
    args = CASES / f"{case}.args"
    return shlex.split(args.read_text()) if args.is_file() else ["validate", f"{case}.yaml"]  # base and every env


@pytest.mark.parametrize("case", sorted(p.stem for p in CASES.glob("*.yaml")))
def test_invalid_spec_reports_expected_errors(case, capsys, monkeypatch, update_golden):
    monkeypatch.chdir(CASES)
    code = main(_command(case))
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    assert "Traceback" not in captured.err
    expected_file = CASES / f"{case}.err"
    if update_golden:
        expected_file.write_text(captured.err)
    assert captured.err == expected_file.read_text()


def test_secrets_in_invalid_specs_are_never_echoed(capsys, monkeypatch):
    monkeypatch.chdir(CASES)
    main(["validate", "inline_password.yaml"])
    err = capsys.readouterr().err
    for secret in ("hunter2", "changeit-secret", "topsecret-value"):
        assert secret not in err


#: The cases of the fuzz run's findings (issue 26), and the secrets each holds.
SECRET_CASES = {
    # Under a sensitive key as a list, a mapping, a list of mappings, numbers; copied by a YAML alias.
    "password_shapes": ("pw-list-secret-1", "pw-list-secret-2", "pw-map-secret", "918273645", "pw-list-map-secret",
                        "pw-jaas-list-secret", "3.14159265", "pw-alias-secret"),
    "password_tagged": ("pw-tagged-secret",),  # a tagged scalar
    "bootstrap_credentials": ("boot-secret-1", "boot-secret-2", "boot-secret-3", "boot-secret-4"),  # in an address
}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dr-spec.example.yaml"


def _every_output(case: str, out: Path) -> list[list[str]]:
    """Every command and format that reads the case: as the spec, and as promote's baseline (never validated)."""
    spec = f"{case}.yaml"
    return [["validate", spec], ["validate", spec, "--format", "json"], ["validate", spec, "--env", "prod"],
            ["render", spec, "--out", str(out)], ["render", spec, "--env", "prod", "--out", str(out)],
            *(["plan", spec, "--format", fmt] for fmt in ("text", "markdown", "json")),
            *(["promote", spec, "--from", "prod", "--to", "prod", "--format", fmt] for fmt in ("text", "markdown", "json")),
            *(["promote", str(EXAMPLE), "--from", "staging", "--to", "prod", "--baseline", spec, "--format", fmt]
              for fmt in ("text", "markdown", "json"))]


@pytest.mark.parametrize("case", sorted(SECRET_CASES))
def test_no_output_of_any_command_shows_a_secret_whatever_its_shape(case, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(CASES)
    for command in _every_output(case, tmp_path / "out"):
        code = main(command)
        captured = capsys.readouterr()
        shown = captured.out + captured.err
        assert "Traceback" not in shown and "internal error" not in shown, (command, shown)
        for secret in SECRET_CASES[case]:
            assert secret not in shown, (command, shown)
        if "--baseline" not in command:
            assert code == 1, command  # the case itself is invalid: nothing is planned or written
        elif case == "password_shapes" and "json" in command:
            # The baseline was read and compared: its secrets are there, masked, not skipped.
            carried = {row["path"]: row["old"] for row in json.loads(captured.out)["carried"]}
            assert carried["/clusters/primary/security/password"] == "(sensitive)"
            assert carried["/metadata/labels/copied"] == "(sensitive)"
    assert not (tmp_path / "out").exists()


def test_every_rule_of_the_issue_has_a_case():
    # The rules the spec/render issue names; each must have an invalid case file with an expected text.
    rules = ["undefined_cluster", "same_source_target", "duplicate_mirror_names", "identity_cycle", "bad_regex",
             "tasks_max_zero", "bad_bootstrap", "sasl_missing_credentials", "inline_password", "yaml_syntax"]
    for rule in rules:
        assert (CASES / f"{rule}.yaml").is_file() and (CASES / f"{rule}.err").is_file(), rule

"""Every invalid-spec rule has a case in tests/unit/invalid/ with its expected error text (<case>.err).

The CLI runs on each case from inside that folder so file names in messages are stable. Regenerate
the expected texts with ``pytest --update-golden`` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mm2spec.cli import main

CASES = Path(__file__).parent / "invalid"


@pytest.mark.parametrize("case", sorted(p.stem for p in CASES.glob("*.yaml")))
def test_invalid_spec_reports_expected_errors(case, capsys, monkeypatch, update_golden):
    monkeypatch.chdir(CASES)
    code = main(["validate", f"{case}.yaml"])  # the base and every environment
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


def test_every_rule_of_the_issue_has_a_case():
    # The rules the spec/render issue names; each must have an invalid case file with an expected text.
    rules = ["undefined_cluster", "same_source_target", "duplicate_mirror_names", "identity_cycle", "bad_regex",
             "tasks_max_zero", "bad_bootstrap", "sasl_missing_credentials", "inline_password", "yaml_syntax"]
    for rule in rules:
        assert (CASES / f"{rule}.yaml").is_file() and (CASES / f"{rule}.err").is_file(), rule

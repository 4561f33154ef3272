"""The semantic rules run on documents the schema has refused: any type at any field is reported, never a crash.

Every field of the schema (``tests.kit.spec_shapes``) gets every other type, in each example spec, with
the Spark engine and with Connect (their rules differ); the fuzzer (``test_fuzz``) does the same through
the commands, overlays included.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from mm2spec.cli import main
from mm2spec.spec import rules
from tests.kit.spec_shapes import TYPE_CHANGES, field_paths, put

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.parametrize("engine", ["spark", "connect"])
def test_every_field_of_every_type_is_checked_without_a_crash(example, engine):
    base = yaml.safe_load(example.read_text())
    base["engine"] = engine
    crashes = []
    for path in field_paths():
        for value in TYPE_CHANGES:
            data = copy.deepcopy(base)
            if not put(data, path, copy.deepcopy(value)):
                continue
            try:
                rules.check(data, lambda *_a, **_k: None)
            except Exception as exc:  # noqa: BLE001 - each crash is listed, not just the first
                crashes.append(f"/{'/'.join(map(str, path))} = {json.dumps(value)}: {type(exc).__name__}: {exc}")
    assert not crashes, "\n".join(crashes)


@pytest.mark.parametrize("path,value,pointer,message", [
    # check_spark looked the engine up in a dict: a mapping is unhashable.
    (("engine",), {"name": "spark"}, "/engine", "a mapping is not one of: spark, connect"),
    # _check_spark_mode iterated over the mirrors: an int is not iterable.
    (("mirrors",), 7, "/mirrors", "expected array, got an integer"),
    # Real-time mode's batch duration was echoed by its repr: a mapping there may hold a secret.
    (("spark",), {"mode": "realtime", "source": "mirror", "realTimeBatchDuration": {"sasl.jaas.config": "pw-echo-secret"}},
     "/spark/realTimeBatchDuration", "expected string, got a mapping"),
])
def test_a_field_of_another_type_is_one_located_error(path, value, pointer, message, tmp_path, capsys):
    data = yaml.safe_load((ROOT / "examples" / "dr-spec.example.yaml").read_text())
    put(data, path, value)
    spec = tmp_path / "s.dr.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(spec), "--format", "json"]) == 1
    out = capsys.readouterr().out
    errors = json.loads(out)["files"][0]["errors"]
    assert [(e["pointer"], e["message"]) for e in errors if e["pointer"] == pointer] == [(pointer, message)], errors
    assert all(e["line"] for e in errors) and "internal error" not in out and "pw-echo-secret" not in out

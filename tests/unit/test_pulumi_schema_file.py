"""The schema file ``pulumi package gen-sdk`` reads: ``python -m mm2spec.provision.plugin_package --schema FILE``."""

from __future__ import annotations

import json

import pytest

from mm2spec.provision import plugin_package


def test_schema_file_is_the_schema_the_plugin_serves(tmp_path):
    target = tmp_path / "sdk" / "schema.json"
    plugin_package.main(["--schema", str(target)])
    written = json.loads(target.read_text())
    assert written == plugin_package.schema()
    assert sorted(written["resources"]) == sorted(plugin_package.TOKENS)
    # gen-sdk's package names: what a TypeScript or Go user imports.
    assert written["language"]["nodejs"]["packageName"] == "@mm2spec/pulumi"
    assert written["language"]["go"]["importBasePath"] == "example.com/mm2spec/sdk/go/mm2spec"


def test_an_unwritable_schema_path_is_one_line_and_exit_1(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exited:
        plugin_package.main(["--schema", str(blocker / "schema.json")])
    assert str(exited.value).startswith(f"cannot write the schema to {blocker / 'schema.json'}: ")
    assert str(exited.value).endswith("choose a writable path")

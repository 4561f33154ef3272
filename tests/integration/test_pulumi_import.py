"""``pulumi import`` through the ``pulumi-resource-mm2spec`` plugin: a brownfield setup comes under a stack.

The real CLI (scripts/pulumi, a file backend in tmp) on the secured dev clusters, the project of
``test_pulumi_stack`` with ``mm2spec:plugin: true``. The plugin runs from a wrapper put on PATH
(``python -m mm2spec.provision.plugin``), so the test does not depend on the venv having been
reinstalled since the console script was added.

Moving over: a first stack creates the spec's topics and ACLs with the dynamic providers; switched
to the plugin, its preview changes nothing (the plugin resources alias their dynamic twins) and
``up`` moves every resource over with its ID.

Brownfield: that stack is then removed
with ``stack rm --force`` (the clusters keep everything, no state knows them). A new stack imports
them from the file ``mm2spec plan --pulumi-import-file`` writes, and the preview after it changes
nothing on the clusters (the Spark job's config file, which no cluster holds, is written by the
next ``up``); then the preview has no change at all. An ID that names nothing fails, naming it.

A missing Pulumi CLI fails the test when ``CI`` is set and skips it otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import yaml

from mm2spec.dev import ADMIN_PASSWORD
from specs import ADMIN_SECRET, spec_for
from test_pulumi_stack import PROJECT_ROOT, admin_for, project_stack, pulumi_bin  # noqa: F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def plugin_on_path(folder) -> str:
    """A folder holding a ``pulumi-resource-mm2spec`` that runs this checkout's plugin."""
    folder.mkdir()
    wrapper = folder / "pulumi-resource-mm2spec"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mm2spec.provision.plugin "$@"\n')
    wrapper.chmod(0o755)
    return str(folder)


def test_import_brings_existing_resources_under_a_stack_unchanged(pulumi_bin, secure_kafka_pair,  # noqa: F811
                                                                  tmp_path):
    run_id = uuid.uuid4().hex[:6]
    src, dst, orders = f"src{run_id}", f"dst{run_id}", f"orders-{run_id}"
    primary, dr = admin_for(secure_kafka_pair.primary, src), admin_for(secure_kafka_pair.dr, dst)
    primary.create_topic(orders, 2, -1, {"retention.ms": "3600000"})
    stack = project_stack(tmp_path, {ADMIN_SECRET: ADMIN_PASSWORD})
    stack.env["PATH"] = f"{plugin_on_path(tmp_path / 'bin')}:{stack.env['PATH']}"
    spec = spec_for(secure_kafka_pair, [orders], secure=True, manage_acls=True, name=f"it-{run_id}",
                    aliases=(src, dst))
    spec["acls"]["principal"] = f"User:it-{run_id}"
    (stack.project / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))

    def init(name: str, plugin: bool = True) -> None:
        stack.run("stack", "init", name)
        # Absolute: the engine starts the plugin in the program's folder, which here is a symlink to
        # the repository's pulumi/, so a relative spec would be looked up beside the repository's Pulumi.yaml.
        stack.run("config", "set", "mm2spec:spec", str(stack.project / "spec.yaml"))
        stack.run("config", "set", "mm2spec:outDir", "out")
        stack.run("config", "set", "mm2spec:plugin", "true" if plugin else "false")

    def state() -> dict[str, tuple[str, str]]:
        resources = json.loads(stack.run("stack", "export").stdout)["deployment"]["resources"]
        return {r["urn"].split("::")[-1]: (r["type"], r.get("id", "")) for r in resources
                if r["type"].startswith(("mm2spec:index:", "pulumi-python:dynamic/"))
                and r["type"] != "mm2spec:index:DisasterRecovery"}

    stack.run("login")
    # A stack made by the dynamic providers moves over to the plugin in place (aliases).
    init("first", plugin=False)
    stack.run("up", "--yes", "--skip-preview")
    dynamic = state()
    assert dynamic[f"{dst}/{orders}"] == ("pulumi-python:dynamic/kafka:Topic", f"{dst}/{orders}")
    stack.run("config", "set", "mm2spec:plugin", "true")
    assert stack.preview_steps() == {}
    stack.run("up", "--yes", "--skip-preview")
    created = state()
    assert {name: id_ for name, (_kind, id_) in created.items()} == {name: id_ for name, (_k, id_) in dynamic.items()}
    assert created[f"{dst}/{orders}"] == ("mm2spec:index:Topic", f"{dst}/{orders}")
    assert any(kind == "mm2spec:index:AclBinding" for kind, _id in created.values())
    topic_id = dr.topic_ids([orders])[orders]
    stack.run("stack", "rm", "--force", "--yes")  # the clusters keep everything; no state knows it

    init("second")
    plan = subprocess.run([str(PROJECT_ROOT / ".venv" / "bin" / "mm2spec"), "plan", "spec.yaml", "--pulumi-import-file",
                           "import.json"], cwd=stack.project, env=stack.env, capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    entries = json.loads((stack.project / "import.json").read_text())["resources"]
    assert entries[0] == {"type": "mm2spec:index:DisasterRecovery", "name": "mm2spec", "component": True}
    listed = {e["name"]: e["type"] for e in entries[1:]}
    assert listed == {name: kind for name, (kind, _id) in created.items() if kind != "mm2spec:index:SparkDeployment"}
    assert all(e["parent"] == "mm2spec" and e["id"] == e["name"] for e in entries[1:])

    stack.run("import", "--file", "import.json", "--protect=false", "--generate-code=false", "--yes")
    assert stack.preview_steps() == {"spark-mirror": "create"}  # a file, on no cluster
    stack.run("up", "--yes", "--skip-preview")
    stack.run("preview", "--expect-no-changes")
    imported = state()
    assert imported == created  # the same resources, by the same IDs
    assert dr.topic_ids([orders])[orders] == topic_id  # the topic itself, not a re-created one

    # An ID that names nothing fails, naming it (and so does one of a kind that cannot be imported).
    bogus = stack.run("import", "mm2spec:index:Topic", "bogus", f"{dst}/no-such-{run_id}", "--yes",
                      "--generate-code=false", check=False)
    assert bogus.returncode != 0 and f'import ID "{dst}/no-such-{run_id}" names no Topic' in bogus.stdout + bogus.stderr
    assert "Traceback" not in bogus.stdout + bogus.stderr
    stack.run("destroy", "--yes", "--skip-preview")

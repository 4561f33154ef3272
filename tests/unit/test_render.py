"""Rendered files against golden files (structurally), and seed 000's examples key by key."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mm2spec.spec.load import load_desired_state
from mm2spec.errors import OutputUnwritable
from mm2spec.render import files as files_module, render_files, write_files

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "render"
SEED = Path(__file__).parent / "data" / "seed000"
CASES = {
    "example-dev": ("examples/dr-spec.example.yaml", "dev"),
    "example-staging": ("examples/dr-spec.example.yaml", "staging"),
    "example-prod": ("examples/dr-spec.example.yaml", "prod"),
    "seed000": ("examples/redhat-dr-a-to-b.yaml", None),
}


def parse_properties(text: str) -> dict[str, str]:
    """A java.util.Properties reader for what render writes (key=value lines, \\ escapes, # comments)."""
    result = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, value, escaped = [], None, False
        buf = key
        for ch in line:
            if escaped:
                buf.append({"n": "\n", "t": "\t"}.get(ch, ch))
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == "=" and value is None:
                value = []
                buf = value
            elif ch in " \t" and buf is value and not value:
                continue  # unescaped whitespace before a value is not part of it
            else:
                buf.append(ch)
        result["".join(key).strip()] = "".join(value or [])
    return result


def structure(name: str, text: str):
    if name.endswith(".properties"):
        return parse_properties(text)
    if name.endswith(".json"):
        return json.loads(text)
    return text


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_files_match_golden(case, update_golden, monkeypatch):
    monkeypatch.chdir(ROOT)
    spec, env = CASES[case]
    files = render_files(load_desired_state(spec, env))
    folder = GOLDEN / case
    if update_golden:
        for old in folder.glob("*"):
            old.unlink()
        write_files(dict(files), folder)  # the files alone, without a render's manifest
    expected = {p.name: p.read_text() for p in folder.iterdir()}
    assert sorted(files) == sorted(expected), "a file appeared or disappeared"
    for name, text in files.items():
        assert structure(name, text) == structure(name, expected[name]), name


def _fill(value: str, placeholders: dict[str, str]) -> str:
    for placeholder, actual in placeholders.items():
        value = value.replace(placeholder, actual)
    return value


def test_seed000_examples_appear_key_by_key(monkeypatch):
    monkeypatch.chdir(ROOT)
    state = load_desired_state("examples/redhat-dr-a-to-b.yaml", None)
    files = render_files(state)
    placeholders = {
        "<SOURCE_BOOTSTRAP_SERVERS>": state.cluster("A").bootstrap,
        "<TARGET_BOOTSTRAP_SERVERS>": state.cluster("B").bootstrap,
        # Seed 000's topics and groups plus one documented addition: the flow's probe topic and
        # group, which every flow mirrors and checkpoints (mm2spec.mm2.policy.probe_topic; the
        # drill writes and consumes only there).
        "<TOPICS>": "orders,payments,mm2spec-probe-A-to-B",
        "<GROUPS>": "orders-service,mm2spec-probe-A-to-B",
    }
    worker = parse_properties(files["connect-distributed.properties"])
    seed_worker = parse_properties((SEED / "connect-distributed.properties").read_text())
    assert len(seed_worker) == 12
    for key, value in seed_worker.items():
        assert worker.get(key) == _fill(value, placeholders), key
    for connector in ("A-to-B-MirrorSourceConnector", "A-to-B-MirrorCheckpointConnector"):
        seed = json.loads((SEED / f"{connector}.json").read_text())
        rendered = json.loads(files[f"{connector}.json"])
        assert rendered["name"] == seed["name"]
        for key, value in seed["config"].items():
            assert rendered["config"].get(key) == _fill(value, placeholders), (connector, key)


def test_seed000_acls_contain_section_5_7():
    state = load_desired_state(ROOT / "examples/redhat-dr-a-to-b.yaml", None)
    have = {(b.cluster, b.resource_type, b.resource_name, b.operation) for b in state.acl_bindings
            if b.pattern_type == "LITERAL" and b.principal == "User:mm2"}
    for line in (SEED / "acls.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cluster, rtype, name, ops = line.split()
        for op in ops.split(","):
            assert (cluster, rtype, name, op) in have, (cluster, rtype, name, op)


def test_seed000_worker_acls_for_exactly_once():
    state = load_desired_state(ROOT / "examples/redhat-dr-a-to-b.yaml", None)
    have = {(b.cluster, b.resource_type, b.resource_name, b.pattern_type, b.operation) for b in state.acl_bindings}
    assert ("B", "TRANSACTIONAL_ID", "connect-mirrormaker-A-to-B-", "PREFIXED", "WRITE") in have
    assert ("B", "CLUSTER", "kafka-cluster", "LITERAL", "IDEMPOTENT_WRITE") in have
    assert ("B", "GROUP", "connect-mirrormaker-A-to-B", "LITERAL", "READ") in have
    for suffix in ("configs", "offsets", "status"):
        assert ("B", "TOPIC", f"__connect-mirrormaker-A-to-B-{suffix}", "LITERAL", "WRITE") in have


def test_no_password_is_rendered(monkeypatch):
    monkeypatch.setenv("PRIMARY_MM2_PASSWORD", "s3cr3t-primary")
    monkeypatch.setenv("DR_MM2_PASSWORD", "s3cr3t-dr")
    files = render_files(load_desired_state(ROOT / "examples/dr-spec.example.yaml", "prod"))
    joined = "\n".join(files.values())
    assert "s3cr3t" not in joined
    worker = parse_properties(files["connect-distributed.properties"])
    assert worker["sasl.jaas.config"].endswith('password="${env:DR_MM2_PASSWORD}";')
    assert worker["producer.sasl.jaas.config"] == worker["sasl.jaas.config"]
    assert worker["config.providers.env.class"] == "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
    source = json.loads(files["primary-to-dr-MirrorSourceConnector.json"])["config"]
    assert "${env:PRIMARY_MM2_PASSWORD}" in source["source.cluster.sasl.jaas.config"]


def test_properties_escaping_round_trips():
    from mm2spec.render import properties_text

    props = [("topics.exclude", r"mm2.*\.internal,.*\.replica"), ("a b=c:d", " leading"), ("k", "x\\y")]
    assert parse_properties(properties_text(props, "h")) == dict(props)


def test_write_files_is_atomic_and_idempotent(tmp_path):
    state = load_desired_state(ROOT / "examples/dr-spec.example.yaml", "dev")
    first = write_files(render_files(state), tmp_path)
    snapshot = {p.name: p.read_text() for p in first}
    write_files(render_files(state), tmp_path)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == snapshot  # no temp files left behind


OLD_SET = {"a.json": "old a\n", "b.json": "old b\n", "c.json": "old c\n"}
"""A render already in a folder (plus a file of the user's): what a failed render must leave as it was."""
NEW_SET = {"a.json": "new a\n", "b.json": "new b\n", "c.json": "new c\n", "d.json": "new d\n"}


def folder_content(folder: Path) -> dict[str, str]:
    """Each file's content; a folder (a staging folder left behind) as "<folder>"."""
    return {p.name: "<folder>" if p.is_dir() else p.read_text() for p in folder.iterdir()}


def replace_failing_after(monkeypatch, moves: int, failure) -> None:
    """os.replace in write_files does ``moves`` moves, then ``failure()`` once: a disk error or a kill."""
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == moves + 1:
            failure()
        real(src, dst)
    monkeypatch.setattr(files_module.os, "replace", replace)


def old_render(folder: Path) -> dict[str, str]:
    write_files(OLD_SET, folder)
    (folder / "notes.txt").write_text("the user's\n")
    return folder_content(folder)


@pytest.mark.parametrize("moves", [1, 2, 3, 5])
def test_a_failure_half_way_through_the_moves_leaves_the_old_files(tmp_path, monkeypatch, moves):
    before = old_render(tmp_path)

    def disk_full():
        raise OSError(errno.ENOSPC, "No space left on device")
    replace_failing_after(monkeypatch, moves, disk_full)
    with pytest.raises(OutputUnwritable, match="No space left on device; nothing was written"):
        write_files(NEW_SET, tmp_path)
    assert folder_content(tmp_path) == before


@pytest.mark.parametrize("moves", [1, 2, 3, 5])
def test_a_render_killed_half_way_is_rolled_back_by_the_next_write(tmp_path, moves):
    before = old_render(tmp_path)
    # The killed render, in a Python of its own (no exception handler, no finally runs): not a fork
    # of this process, whose other threads (Kafka clients of earlier tests) make a forked child crash.
    killed = (f"import os, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import pytest; "
              "from pathlib import Path; from test_render import NEW_SET, replace_failing_after, write_files; "
              f"replace_failing_after(pytest.MonkeyPatch(), {moves}, lambda: os._exit(9)); "
              f"write_files(NEW_SET, Path({str(tmp_path)!r})); os._exit(0)")
    assert subprocess.run([sys.executable, "-c", killed], cwd=ROOT, timeout=120).returncode == 9
    assert folder_content(tmp_path) != before  # mixed, with the staging folder and its journal
    write_files({"e.json": "e\n"}, tmp_path)
    assert folder_content(tmp_path) == {**before, "e.json": "e\n"}


def test_a_failure_while_staging_leaves_nothing_behind(tmp_path, monkeypatch):
    before = old_render(tmp_path)

    def write_new(path, content, mode):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
    monkeypatch.setattr(files_module, "_write_new", write_new)
    with pytest.raises(OutputUnwritable, match="Disk quota exceeded"):
        write_files(NEW_SET, tmp_path)
    assert folder_content(tmp_path) == before


def test_connectors_of_a_flow_into_another_cluster_than_connects_write_to_their_target(tmp_path, monkeypatch):
    """Active-active with one Connect cluster (on ``west``): the worker's producers write to west, so
    the connectors of ``west-to-east`` point theirs at east (records, checkpoints, heartbeats);
    ``east-to-west``'s keep the worker's. Secrets stay references."""
    monkeypatch.setenv("EAST_PASSWORD", "s3cr3t-east")
    flow = {"replicationPolicy": "default", "topics": ["orders"], "groups": ["app"], "heartbeats": True}
    spec = {"apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": "aa"},
            "clusters": {"east": {"bootstrapServers": ["east-1:9092"],
                                  "security": {"protocol": "SASL_SSL", "saslMechanism": "SCRAM-SHA-512",
                                               "username": "mm2", "passwordSecret": "EAST_PASSWORD"}},
                         "west": {"bootstrapServers": ["west-1:9092"]}},
            "mirrors": [{"source": "east", "target": "west", **flow}, {"source": "west", "target": "east", **flow}],
            "engine": "connect", "acls": {"manage": False, "principal": "User:mm2"}}
    (tmp_path / "aa.yaml").write_text(yaml.safe_dump(spec))
    files = render_files(load_desired_state(tmp_path / "aa.yaml", None))
    assert "s3cr3t" not in "\n".join(files.values())
    assert parse_properties(files["connect-distributed.properties"])["bootstrap.servers"] == "west-1:9092"
    for kind in ("Source", "Checkpoint", "Heartbeat"):
        forward = json.loads(files[f"east-to-west-Mirror{kind}Connector.json"])["config"]
        assert not [k for k in forward if k.startswith("producer.override.")], kind
        back = json.loads(files[f"west-to-east-Mirror{kind}Connector.json"])["config"]
        assert back["producer.override.bootstrap.servers"] == "east-1:9092", kind
        assert back["producer.override.security.protocol"] == "SASL_SSL", kind
        assert back["producer.override.sasl.mechanism"] == "SCRAM-SHA-512", kind
        assert back["producer.override.sasl.jaas.config"].endswith('password="${env:EAST_PASSWORD}";'), kind

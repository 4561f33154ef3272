"""Version guardrails without clusters: the one table of rules (``mm2spec.mm2.versions``), the
brokers' version from an ApiVersions response, the Connect worker's from ``GET /``, and what plan
and verify do with them (refuse with exit 1 naming the cluster, version and feature, or note)."""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from mm2spec.cli import main
from mm2spec.errors import VersionUnsupported
from mm2spec.live.connect import ConnectClient
from mm2spec.live.kafka import BrokerVersion, api_versions_request, finalized_metadata_version
from mm2spec.mm2 import versions
from mm2spec.ops.modules import verify
from mm2spec.plan.build import build_plan, version_findings
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
KAFKA_4_3 = BrokerVersion((4, 3), "4.3, metadata.version level 30")
ALL_CONNECT = versions.spec_needs(on_connect_workers=True, exactly_once=True, groups=True)


@pytest.mark.parametrize("text, version", [("4.3.1", (4, 3, 1)), ("3.7.1-ccs", (3, 7, 1)), ("7.6.0-ce", (7, 6, 0)),
                                           ("3.6", (3, 6)), ("4.3-IV0", (4, 3)), ("", None), (None, None),
                                           ("unknown", None)])
def test_versions_are_parsed_from_what_workers_report(text, version):
    assert versions.parse_version(text) == version


@pytest.mark.parametrize("level, release", [(7, (3, 3)), (14, (3, 6)), (19, (3, 7)), (30, (4, 3)), (99, (4, 4)),
                                            (0, None), (-1, None)])
def test_metadata_version_levels_name_their_release(level, release):
    assert versions.metadata_version_release(level) == release


def test_what_a_spec_needs_follows_its_engine_and_flows():
    assert versions.spec_needs(on_connect_workers=False, exactly_once=True, groups=True) == {versions.TOPIC_IDS}
    assert versions.spec_needs(on_connect_workers=True, exactly_once=False, groups=False) == {
        versions.TOPIC_IDS, versions.CONNECTOR_STOP_AND_OFFSETS}
    assert ALL_CONNECT == {versions.TOPIC_IDS, versions.CONNECTOR_STOP_AND_OFFSETS, versions.EXACTLY_ONCE_SOURCE,
                           versions.MM2_OFFSET_TRANSLATION}


@pytest.mark.parametrize("need, component, below, at, refuses", [
    (versions.EXACTLY_ONCE_SOURCE, "connect", (3, 2, 3), (3, 3, 0), True),
    (versions.CONNECTOR_STOP_AND_OFFSETS, "connect", (3, 5, 2), (3, 6, 0), True),
    (versions.MM2_OFFSET_TRANSLATION, "connect", (3, 7, 0), (3, 7, 1), False),
    (versions.TOPIC_IDS, "kafka", (2, 7), (2, 8), False),
])
def test_every_rule_fires_below_its_version_only(need, component, below, at, refuses):
    [finding] = versions.check(component, "X", below, {need})
    assert finding.rule.need == need and finding.refuses is refuses
    assert f"X runs {versions.show(below)}" in finding.message()
    assert versions.check(component, "X", at, {need}) == []
    assert versions.check(component, "X", below, set()) == [], "not needed: not checked"
    assert versions.check(component, "X", None, {need}) == [], "unknown: the caller notes it"
    other = "kafka" if component == "connect" else "connect"
    assert versions.check(other, "X", below, {need}) == [], "a rule is about one component's version"


def test_the_table_is_one_rule_per_need():
    needs = [rule.need for rule in versions.VERSION_RULES]
    assert len(needs) == len(set(needs)) == 4


def _connect_spec(exactly_once: bool = True):
    state = load_desired_state(ROOT / "examples/redhat-dr-a-to-b.yaml", None)  # engine connect, exactly-once, groups
    assert state.engine == "connect" and state.mirrors[0].exactly_once == exactly_once
    return state


def test_an_old_connect_worker_is_refused_naming_it_its_version_and_the_feature():
    state = _connect_spec()
    findings, notes = version_findings(state, {"A": KAFKA_4_3, "B": KAFKA_4_3}, "3.2.0", "http://connect:8083")
    messages = [f.message() for f in findings if f.refuses]
    assert len(messages) == 2 and notes == []
    assert messages[0].startswith("Kafka Connect at http://connect:8083 runs 3.2.0; exactly-once mirroring "
                                  "(exactlyOnce: true) needs 3.3 or later: exactly-once source connectors arrived")
    assert "failover and failback with engine connect needs 3.6 or later" in messages[1]
    [warning] = [f for f in findings if not f.refuses]
    assert warning.rule.need == versions.MM2_OFFSET_TRANSLATION


def test_a_connect_worker_before_3_7_1_is_only_a_warning_and_unknown_versions_are_noted():
    findings, notes = version_findings(_connect_spec(), {"A": BrokerVersion(None, "unknown (no KRaft metadata.version: "
                                                                            "a ZooKeeper cluster, before 4.0)"),
                                                         "B": BrokerVersion((2, 7), "2.7")}, "3.7.0", None)
    assert [(f.rule.need, f.scope, f.refuses) for f in findings] == [
        (versions.TOPIC_IDS, "B", False), (versions.MM2_OFFSET_TRANSLATION, "connect", False)]
    assert notes == ['cluster "A": version unknown (no KRaft metadata.version: a ZooKeeper cluster, before 4.0): its '
                     "version rules are not checked"]
    assert version_findings(_connect_spec(), {"A": KAFKA_4_3}, "4.3.1", None) == ([], [])


class _Admin:
    """The reads a plan makes before its versions are checked, and nothing else."""

    def __init__(self, version=KAFKA_4_3):
        self.version, self.calls = version, []

    def broker_version(self):
        self.calls.append("broker_version")
        return self.version

    def __getattr__(self, name):
        raise AssertionError(f"the plan read {name} after a refused version")


def test_a_plan_is_refused_before_it_reads_anything_else():
    admins = {"A": _Admin(), "B": _Admin()}
    with pytest.raises(VersionUnsupported, match=r"Kafka Connect runs 3\.5\.1; failover and failback with engine "
                                                 r"connect needs 3\.6 or later"):
        build_plan(_connect_spec(), admins.__getitem__, worker_version=lambda: "3.5.1", failover_states=lambda s: {})
    assert admins["A"].calls == ["broker_version"]


def test_the_cli_plan_exits_1_with_the_refusal(monkeypatch, capsys):
    import mm2spec.live.kafka as kafka
    from mm2spec.engines.connect import ConnectEngine

    monkeypatch.setattr(kafka, "KafkaAdmin", lambda cluster, timeout=None: _Admin())
    monkeypatch.setattr(ConnectEngine, "worker_version", lambda self: "3.2.0")
    code = main(["plan", str(ROOT / "examples/redhat-dr-a-to-b.yaml")])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert "error: Kafka Connect runs 3.2.0; exactly-once mirroring (exactlyOnce: true) needs 3.3 or later" in captured.err
    assert "Traceback" not in captured.err


def _response(features: list[tuple[str, int]] | None, error: int = 0) -> bytes:
    """An ApiVersions v3 response body after its correlation id: error, two api keys, throttle,
    and (tag 2) the finalized features."""
    body = struct.pack(">h", error) + bytes([3]) + struct.pack(">hhh", 18, 0, 4) + b"\0"
    body += struct.pack(">hhh", 3, 0, 13) + b"\0" + struct.pack(">i", 0)
    if features is None:
        return body + b"\0"
    tagged = bytes([len(features) + 1]) + b"".join(
        bytes([len(name) + 1]) + name.encode() + struct.pack(">hh", level, 1) + b"\0" for name, level in features)
    epoch = struct.pack(">q", 5)
    return body + bytes([2, 1, len(epoch)]) + epoch + bytes([2, len(tagged)]) + tagged


def test_the_finalized_metadata_version_is_read_from_an_api_versions_response():
    assert finalized_metadata_version(_response([("group.version", 1), ("metadata.version", 30)])) == 30
    assert finalized_metadata_version(_response([("kraft.version", 1)])) is None
    assert finalized_metadata_version(_response(None)) is None
    with pytest.raises(ValueError, match="error code 35"):
        finalized_metadata_version(_response(None, error=35))


def test_the_api_versions_request_is_v3_with_a_size_prefix():
    request = api_versions_request(7)
    size, key, version, correlation = struct.unpack_from(">ihhi", request)
    assert (size, key, version, correlation) == (len(request) - 4, 18, 3, 7)


def test_the_connect_version_is_get_slash(monkeypatch):
    client = ConnectClient("http://connect:8083")
    monkeypatch.setattr(client, "_call", lambda method, path, *a, **k: {"version": "4.3.1", "commit": "c"}
                        if (method, path) == ("GET", "/") else None)
    assert client.version() == "4.3.1"


def test_verify_fails_a_refused_version_and_passes_a_warning_with_its_words():
    state = _connect_spec()
    admins = {"A": _Admin(), "B": _Admin(BrokerVersion((2, 7), "2.7"))}

    def ctx(worker):
        return SimpleNamespace(flows=state.mirrors, spec=state, admin=admins.__getitem__,
                               engine=SimpleNamespace(worker_version=lambda: worker),
                               options=SimpleNamespace(connect_url=None))

    outcomes = verify.versions(ctx("3.5.0"), {})
    # B warns (2.7), the worker is refused (KIP-875) and warned (KAFKA-14666); no summary line
    assert [(o.status, o.cluster) for o in outcomes] == [("ok", "B"), ("failed", "connect"), ("ok", "connect")]
    assert "runs 3.5.0" in outcomes[1].message and "KIP-875" in outcomes[1].message
    assert outcomes[2].message.startswith("warning: ") and "KAFKA-14666" in outcomes[2].message
    outcomes = verify.versions(ctx("4.3.1"), {})
    assert [o.status for o in outcomes] == ["ok", "ok"]
    assert outcomes[0].message.startswith('warning: Kafka cluster "B" runs 2.7; silent-loss checks')
    assert outcomes[1].message == "versions: A Kafka 4.3, metadata.version level 30, B Kafka 2.7, Connect 4.3.1"

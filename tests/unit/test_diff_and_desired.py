"""The shared diff and the discovery of desired resources, on in-memory snapshots."""

from __future__ import annotations

from pathlib import Path

from mm2spec.spec.load import load_desired_state
from mm2spec.plan.desired import SourceSnapshot, desired_resources
from mm2spec.plan.diff import diff_acls, diff_connector, diff_topic
from mm2spec.live.types import LiveTopic
from mm2spec.spec.model import AclBinding

ROOT = Path(__file__).resolve().parents[2]


def live(name, partitions=3, configs=None, rf=1):
    return LiveTopic(name, partitions, rf, configs or {})


def test_new_topic_is_created_with_its_configs():
    change = diff_topic("t", 3, {"retention.ms": "1000"}, None)
    assert change.action == "create"
    assert [(c.field, c.new) for c in change.changes] == [("partitions", 3), ("config.retention.ms", "1000")]


def test_partitions_grow_and_configs_change_in_place():
    change = diff_topic("t", 6, {"retention.ms": "2000", "cleanup.policy": "compact"},
                        live("t", 3, {"retention.ms": "1000", "segment.ms": "5"}))
    assert change.action == "update"
    assert [(c.field, c.old, c.new) for c in change.changes] == [
        ("partitions", 3, 6), ("config.cleanup.policy", None, "compact"),
        ("config.retention.ms", "1000", "2000"), ("config.segment.ms", "5", None)]


def test_partition_decrease_is_refused_unless_replacement_is_allowed():
    refused = diff_topic("orders", 2, {}, live("orders", 3))
    assert refused.action == "refused"
    assert "orders has 3 partitions; Kafka cannot remove partitions" in refused.reason
    assert "allowTopicReplacement: true" in refused.reason
    assert diff_topic("orders", 2, {}, live("orders", 3), allow_replacement=True).action == "replace"


def test_broker_default_replication_factor_is_never_drift():
    assert diff_topic("t", 3, {}, live("t", 3, rf=3), replication_factor=-1).action == "no-op"


def test_acl_diff_by_identity_not_reason():
    a = AclBinding("dr", "User:mm2", "TOPIC", "orders", "LITERAL", "READ", reason="one")
    same = AclBinding("dr", "User:mm2", "TOPIC", "orders", "LITERAL", "READ", reason="other")
    b = AclBinding("dr", "User:mm2", "TOPIC", "orders", "LITERAL", "WRITE")
    create, delete = diff_acls([a, b], [same, AclBinding("dr", "User:mm2", "GROUP", "g", "LITERAL", "READ")])
    assert create == [b] and [d.resource_name for d in delete] == ["g"]


def test_connector_diff_ignores_name():
    assert diff_connector({"a": "1"}, {"a": "1", "name": "x"}).action == "no-op"
    change = diff_connector({"a": "2"}, {"a": "1"})
    assert change.action == "update" and change.changes[0].old == "1"


def test_desired_resources_follow_the_live_source():
    state = load_desired_state(ROOT / "examples/dr-spec.example.yaml", "dev")
    source = SourceSnapshot("primary", {
        "orders": live("orders", 6, {"retention.ms": "86400000", "min.insync.replicas": "2"}),
        "payments": live("payments", 3),
        "invoices-2026": live("invoices-2026", 2),
        "audit": live("audit", 1),
        "__consumer_offsets": live("__consumer_offsets", 50),
        "mm2-offset-syncs.dr.internal": live("mm2-offset-syncs.dr.internal", 1),
    }, ("orders-service", "billing-eu", "other"))
    resources = desired_resources(state, {"primary": source})
    mirrors = {t.name: t for t in resources.topics if t.kind == "mirror"}
    # the flow's probe topic is not on the source yet: provisioned with the internal topics, its
    # copy is desired in the same run (identity policy: the same name)
    assert sorted(mirrors) == ["invoices-2026", "mm2spec-probe-primary-to-dr", "orders", "payments"]
    assert (mirrors["mm2spec-probe-primary-to-dr"].partitions, mirrors["mm2spec-probe-primary-to-dr"].cluster) == (3, "dr")
    assert mirrors["orders"].partitions == 6 and mirrors["orders"].cluster == "dr"
    # cluster-specific configs are not synced, as in MM2's DefaultConfigPropertyFilter
    assert dict(mirrors["orders"].configs) == {"retention.ms": "86400000"}
    internal = {t.name for t in resources.topics if t.kind == "internal"}
    assert "mm2-offset-syncs.primary.internal" in internal
    resolved = {(r.field, r.pattern): r.matched for r in resources.resolutions}
    assert resolved[("topics", "invoices-.*")] == ("invoices-2026",)
    assert resolved[("groups", "billing-.*")] == ("billing-eu",)
    assert resources.acls == ()  # dev: acls.manage is false


def test_regex_acls_resolve_to_literal_bindings_on_both_clusters(tmp_path):
    spec = (ROOT / "examples/dr-spec.example.yaml").read_text().replace(
        'topics: [orders, payments, "invoices-.*"]', 'topics: ["(refunds|chargebacks)-v[0-9]+"]')
    path = tmp_path / "s.yaml"
    path.write_text(spec)
    state = load_desired_state(path, "prod")
    source = SourceSnapshot("primary", {n: live(n) for n in ("refunds-v1", "chargebacks-v22", "refunds-vx")})
    assert state.mirrors[0].mirrored_topics(source.topics) == ["chargebacks-v22", "refunds-v1"]
    acls = desired_resources(state, {"primary": source}).acls
    topic_acls = {(b.cluster, b.resource_name, b.operation) for b in acls if b.resource_type == "TOPIC"}
    assert ("primary", "refunds-v1", "READ") in topic_acls and ("dr", "chargebacks-v22", "WRITE") in topic_acls
    assert not any(name == "refunds-vx" for _, name, _ in topic_acls)


def test_what_mm2_never_replicates_is_neither_mirrored_nor_granted(tmp_path):
    # default policy, everything selected: internal topics and topics that came from dr (a cycle)
    # are still never mirrored by MM2, so they get neither a target topic nor an ACL
    spec = (ROOT / "examples/dr-spec.example.yaml").read_text().replace(
        'topics: [orders, payments, "invoices-.*"]', 'topics: ["(or|dr|mm2|prim|\\\\.).*"]').replace(
        "replicationPolicy: identity", "replicationPolicy: default")
    path = tmp_path / "s.yaml"
    path.write_text(spec)
    state = load_desired_state(path, "prod")
    names = ["orders", "dr.orders", "primary.dr.audit", "mm2-offset-syncs.dr.internal",
             "primary.checkpoints.internal", ".hidden", "__consumer_offsets"]
    source = SourceSnapshot("primary", {n: live(n) for n in names})
    assert state.mirrors[0].mirrored_topics(source.topics) == ["orders"]
    resources = desired_resources(state, {"primary": source})
    # and the flow's probe topic's copy, which every flow mirrors
    assert sorted(t.name for t in resources.topics if t.kind == "mirror") == [
        "primary.mm2spec-probe-primary-to-dr", "primary.orders"]
    granted = {b.resource_name for b in resources.acls if b.resource_type == "TOPIC" and b.cluster == "primary"}
    assert "orders" in granted and not granted & {"dr.orders", ".hidden", "primary.checkpoints.internal"}


def test_mm2s_internal_topics_are_found_by_the_flows_separator(tmp_path):
    # separator "_": MM2 names (and recognises) its internal topics with it, so another flow's
    # offset-syncs topic on the source is never mirrored, while a "."-named look-alike is a topic
    spec = (ROOT / "examples/dr-spec.example.yaml").read_text().replace(
        'topics: [orders, payments, "invoices-.*"]', 'topics: [".*"]\n    separator: "_"').replace(
        "replicationPolicy: identity", "replicationPolicy: default")
    path = tmp_path / "s.yaml"
    path.write_text(spec)
    flow = load_desired_state(path, "prod").mirrors[0]
    assert flow.offset_syncs_topic == "mm2-offset-syncs_primary_internal"
    names = ["orders", "mm2-offset-syncs_dr_internal", "dr_checkpoints_internal", "dr_orders",
             "primary.checkpoints.internal", "mm2-offset-syncs.dr.internal"]
    assert flow.mirrored_topics(names) == ["orders", "primary.checkpoints.internal"]
    resources = desired_resources(load_desired_state(path, "prod"),
                                  {"primary": SourceSnapshot("primary", {n: live(n) for n in names})})
    assert sorted(t.name for t in resources.topics if t.kind == "mirror") == [
        "primary_mm2spec-probe-primary-to-dr", "primary_orders", "primary_primary.checkpoints.internal"]

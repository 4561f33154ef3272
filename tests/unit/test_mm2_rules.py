"""MM2's rules in one place (mm2spec.mm2): the plan, the playbooks and the Spark job decide alike.

The plan selects topics from the compiled spec (``MirrorFlow.mirrored_topics``); the Spark job from
the config ``mm2spec render`` writes for it (``spark_job_config`` -> ``parse_job_config`` ->
``topic_filter``). Both must mirror the same topics under the same names, or the plan would create
target topics the job never fills (or miss some it writes to). Likewise the job's checkpoints and
the failover playbooks translate offsets by the same offset-sync rule.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mm2spec.mm2 import offsets, policy, selection
from mm2spec.mm2.records import OffsetSync
from mm2spec.ops.modules.translate import mm2_translation, nearest_sync
from mm2spec.render import spark_job_config
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spark.config import parse_job_config
from mm2spark.offsets import OffsetSyncStore
from mm2spark.topics import ReplicationPolicy, checkpoints_topic, group_filter, offset_syncs_topic, topic_filter

SPEC = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata:
  name: rules
clusters:
  primary:
    bootstrapServers: ["primary-1:9092"]
  dr:
    bootstrapServers: ["dr-1:9092"]
mirrors:
  - source: primary
    target: dr
    replicationPolicy: {policy}
    separator: "{separator}"
    offsetSyncsTopicLocation: {location}
    topics: [".*"]
    topicsExclude: ["audit-.*"]
    groups: [".*"]
    groupsExclude: ["batch-.*"]
"""

CASES = [("identity", ".", "target"), ("default", ".", "target"), ("default", ".", "source"),
         ("default", "_", "target"), ("default", "_", "source"), ("identity", "-", "source")]


def topic_names(sep: str) -> list[str]:
    """Plain topics, excludes, internal topics and cycles, spelled with "." and with ``sep``."""
    names = ["orders", "payments", "audit-2024", "orders.replica", "x.replica", "__consumer_offsets",
             "__transaction_state", ".hidden", "a-internal", "b.internal", "heartbeats", "primary.heartbeats",
             "connect-offsets", "mm2-configs.dr.internal", "mm2-status.dr.internal", "adr.orders", "orders.dr",
             "dr", "drorders", "dr-orders", "mm2", "mm2-offset-syncs.primary.internal",
             "mm2-offset-syncs.dr.internal", "primary.checkpoints.internal", "dr.checkpoints.internal"]
    for s in dict.fromkeys([".", sep]):
        names += [f"dr{s}orders", f"primary{s}dr{s}orders", f"x{s}dr{s}y", f"a{s}b{s}dr{s}c", f"dr{s}",
                  f"primary{s}orders", f"mm2-offset-syncs{s}primary{s}internal", f"mm2-offset-syncs{s}dr{s}internal",
                  f"primary{s}checkpoints{s}internal", f"other{s}checkpoints{s}internal", f"mm2x{s}internal"]
    return sorted(set(names))


def flows(tmp_path, policy_kind, separator, location):
    """The same flow as the plan sees it (compiled spec) and as the Spark job sees it (rendered config)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(policy=policy_kind, separator=separator, location=location))
    state = load_desired_state(spec, None)
    job = parse_job_config(spark_job_config(state), environ={})
    return state.mirrors[0], job.flows[0]


@pytest.mark.parametrize("policy_kind,separator,location", CASES)
def test_plan_and_spark_job_mirror_the_same_topics(tmp_path, policy_kind, separator, location):
    flow, job_flow = flows(tmp_path, policy_kind, separator, location)
    names = topic_names(separator)
    accept = topic_filter(job_flow)
    planned = flow.mirrored_topics(names)
    assert planned == [n for n in names if accept(n)]
    # ... and what they agree on is MM2's rule, not a shared mistake
    assert {"orders", "payments", "adr.orders", "orders.dr", "a-internal"} <= set(planned)
    never = {"audit-2024", "orders.replica", "__consumer_offsets", ".hidden", "mm2-configs.dr.internal",
             "mm2-offset-syncs.primary.internal", flow.offset_syncs_topic, flow.checkpoints_topic,
             f"other{separator}checkpoints{separator}internal", f"mm2x{separator}internal"}
    assert not never & set(planned)
    # MM2's policy spots its checkpoints topics by the configured separator only
    assert ("primary.checkpoints.internal" in planned) == (separator != ".")
    cycles = {f"dr{separator}orders", f"primary{separator}dr{separator}orders", f"x{separator}dr{separator}y",
              f"a{separator}b{separator}dr{separator}c"}
    if policy_kind == "default":
        assert not cycles & set(planned)  # came from dr: never mirrored back to it
    else:
        assert cycles <= set(planned)  # the identity policy cannot tell (validation refuses its cycles)


@pytest.mark.parametrize("policy_kind,separator,location", CASES)
def test_plan_and_spark_job_name_topics_alike(tmp_path, policy_kind, separator, location):
    flow, job_flow = flows(tmp_path, policy_kind, separator, location)
    job_policy = ReplicationPolicy.of(job_flow)
    for name in topic_names(separator):
        assert flow.target_topic(name) == job_policy.target_topic(job_flow.source_alias, name)
    assert flow.target_topic("orders") == ("orders" if policy_kind == "identity" else f"primary{separator}orders")
    role, syncs = offset_syncs_topic(job_flow)
    assert (flow.offset_syncs_cluster, flow.offset_syncs_topic) == (getattr(job_flow, f"{role}_alias"), syncs)
    other = "primary" if location == "target" else "dr"  # named after the cluster it is not on
    assert syncs == f"mm2-offset-syncs{separator}{other}{separator}internal"
    assert flow.offset_syncs_cluster == ("dr" if location == "target" else "primary")
    assert flow.checkpoints_topic == checkpoints_topic(job_flow) == f"primary{separator}checkpoints{separator}internal"


@pytest.mark.parametrize("policy_kind,separator,location", CASES[:2])
def test_plan_and_spark_job_select_the_same_groups(tmp_path, policy_kind, separator, location):
    flow, job_flow = flows(tmp_path, policy_kind, separator, location)
    groups = ["orders-service", "billing-eu", "batch-nightly", "console-consumer-42", "connect-mm2", "__x", "connectors"]
    accept = group_filter(job_flow)
    assert flow.mirrored_groups(groups) == sorted(g for g in groups if accept(g))
    assert flow.mirrored_groups(groups) == ["billing-eu", "connectors", "orders-service"]


def test_rendered_job_states_mm2s_defaults_and_the_job_reads_the_same_without_them(tmp_path):
    flow, job_flow = flows(tmp_path, "default", ".", "target")
    assert job_flow.topics_exclude == selection.TOPICS_EXCLUDE_DEFAULT + ("audit-.*",)
    assert job_flow.groups_exclude == selection.GROUPS_EXCLUDE_DEFAULT + ("batch-.*",)
    assert job_flow.replication_policy_class == flow.policy_class == policy.DEFAULT_POLICY


def test_selection_pattern_composes_includes_and_excludes():
    import re

    pattern = selection.selection_pattern(["orders", "invoices-.*"], ["invoices-old.*"])
    assert [n for n in ("orders", "invoices-1", "invoices-old-1", "orders2") if re.fullmatch(pattern, n)] == [
        "orders", "invoices-1"]
    assert selection.selection_pattern([], ["x"]) == "(?!)"
    assert selection.selection_pattern(["a", "b"]) == "(?:(?:a)|(?:b))"
    assert selection.topics_exclude(["__.*", "audit-.*"]) == selection.TOPICS_EXCLUDE_DEFAULT + ("audit-.*",)


def test_configs_mm2_never_syncs():
    assert not selection.config_synced("min.insync.replicas")
    assert not selection.config_synced("message.timestamp.type")
    assert selection.config_synced("retention.ms") and selection.config_synced("cleanup.policy")


def test_internal_topics_follow_the_separator_as_mm2s_policy_does():
    # DefaultReplicationPolicy.isMM2InternalTopic uses the configured separator (internal.topic.separator.enabled)
    dot, underscore = policy.internal_topic_patterns("."), policy.internal_topic_patterns("_")
    import re

    def internal(name, patterns):
        return any(re.fullmatch(p, name) for p in patterns)

    assert internal("mm2-offset-syncs_primary_internal", underscore) and internal("x_checkpoints_internal", underscore)
    assert not internal("x.checkpoints.internal", underscore)  # a plain topic for MM2 with separator "_"
    assert internal("x.checkpoints.internal", dot) and internal("__consumer_offsets", underscore)
    assert internal(".hidden", underscore)


@pytest.mark.parametrize("policy_kind,separator,location", CASES)
def test_upstream_topic_is_the_policys_naming_backwards(tmp_path, policy_kind, separator, location):
    flow, _job_flow = flows(tmp_path, policy_kind, separator, location)
    for name in topic_names(separator):
        assert flow.source_topic(flow.target_topic(name)) == name
    identity = policy_kind == "identity"
    assert policy.upstream_topic("primary", f"dr{separator}orders", identity=identity, separator=separator) == (
        f"dr{separator}orders" if identity else None)  # default policy: came from dr, not from primary
    assert flow.source_topic("orders") == ("orders" if identity else None)


def test_upstream_topic_reads_only_the_flows_source_and_separator():
    assert policy.upstream_topic("primary", "primary.orders", identity=False) == "orders"
    assert policy.upstream_topic("primary", "primary.dr.orders", identity=False) == "dr.orders"
    assert policy.upstream_topic("primary", "primary_orders", identity=False) is None
    assert policy.upstream_topic("primary", "primary_orders", identity=False, separator="_") == "orders"
    assert policy.upstream_topic("primary", "primaryorders", identity=False) is None
    assert policy.upstream_topic("primary", "anything", identity=True) == "anything"


def test_mm2_translates_by_the_latest_sync_at_or_below_and_rounds_up():
    syncs = [(0, 10), (100, 110), (199, 209)]
    assert offsets.translate(syncs, 100) == 110  # exact hit: the sync's downstream offset
    assert offsets.translate(syncs, 150) == 111  # past it: one past (a consumer may re-read, never skip)
    assert offsets.translate(syncs, 200) == 210
    assert offsets.translate(syncs, 0) == 10
    assert offsets.translate([(5, 5)], 4) is None and offsets.translate([], 4) is None
    assert offsets.latest_sync([(10, 12), (10, 15), (20, 30)], 10) == (10, 15)  # of equal upstreams, the last


def test_syncs_after_a_log_went_backwards_replace_the_older_ones():
    written = [(0, 0), (10, 10), (20, 20), (5, 0), (8, 3), (8, 3)]  # upstream went back: topic recreated
    assert offsets.current_syncs(written) == [(5, 0), (8, 3)]
    assert offsets.current_syncs([(0, 0), (10, 10), (12, 4)]) == [(12, 4)]  # downstream truncated
    assert offsets.current_syncs([(3, 4), (1, 2)]) == [(1, 2)] and offsets.current_syncs([]) == []
    assert offsets.went_backwards((10, 10), (10, 9)) and not offsets.went_backwards((10, 10), (10, 10))


WRITTEN = [(0, 0), (1, 1), (4, 2), (4, 3), (9, 8), (30, 20), (31, 21), (3, 0), (3, 1), (7, 5), (7, 5), (50, 60)]


def test_the_spark_job_and_the_playbooks_translate_alike():
    # The job keeps syncs as they arrive (OffsetSyncStore), the playbooks read the topic whole
    # (current_syncs + nearest_sync): the same rule gives every consumer position the same offset.
    store = OffsetSyncStore(max_per_partition=1000)
    for n in range(1, len(WRITTEN) + 1):
        store.add(OffsetSync("t", 0, *WRITTEN[n - 1]))
        current = offsets.current_syncs(WRITTEN[:n])
        for committed in range(-1, 60):
            job = store.translate("t", 0, committed)
            assert job == offsets.translate(current, committed)
            assert job == mm2_translation(nearest_sync(current, committed), committed)

"""Active-active and fan-in DR operations without clusters (fakes for the records, groups and
topics): a group's positions on remote topics (the reverse flow's copies) translated exactly to
their originals at a failover and back at a failback, the failover state per direction, and the
topologies and inputs a failover refuses before anything changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mm2spec.errors import MirrorError, OperationRefused
from mm2spec.live.types import FailoverState, GroupState, LiveTopic, Record
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.mm2.records import OffsetSync
from mm2spec.ops.modules import failback, mirror, offsets, state
from mm2spec.ops.modules.sections import TRANSLATIONS, TRANSLATIONS_SECTION
from mm2spec.ops.modules.topology import turned
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.ops.playbooks.playbook import Playbook, Task
from mm2spec.ops.playbooks.runner import run
from mm2spec.ops.playbooks.module import Module
from mm2spec.ops.playbooks.report import Outcome
from mm2spec.spec.document import Position
from mm2spec.spec.load import load_desired_state
from tests.kit.leases import MemoryLeaseStore

ACTIVE_ACTIVE = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata: {name: aa}
clusters:
  primary: {bootstrapServers: ["127.0.0.1:1"]}
  dr: {bootstrapServers: ["127.0.0.1:2"]}
mirrors:
  - {name: primary-to-dr, source: primary, target: dr, replicationPolicy: default, topics: [orders], groups: [".*"]}
  - {name: dr-to-primary, source: dr, target: primary, replicationPolicy: default, topics: [orders], groups: [".*"]}
"""

FAN_IN = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata: {name: fan-in}
engine: connect
connect: {cluster: dr, restUrl: "http://127.0.0.1:8083"}
clusters:
  east: {bootstrapServers: ["127.0.0.1:1"]}
  west: {bootstrapServers: ["127.0.0.1:2"]}
  dr: {bootstrapServers: ["127.0.0.1:3"]}
mirrors:
  - {name: east-to-dr, source: east, target: dr, replicationPolicy: POLICY, topics: [orders], groups: [".*"]}
  - {name: west-to-dr, source: west, target: dr, replicationPolicy: POLICY, topics: [orders], groups: [".*"]}
"""


# ------------------------------------------------------------------------------------- fakes

def _rec(topic: str, offset: int, seq: int) -> Record:
    # One key and value for every record: only the timestamp (seq) tells them apart.
    return Record(topic, 0, offset, b"k", b"v", 1_000 + seq, ())


class FakeCluster:
    """Partitions (records by offset, an end past the last record where markers are), groups."""

    def __init__(self):
        self.logs: dict[tuple[str, int], list[Record]] = {}
        self.ends: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, int] = {}
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.members: dict[str, tuple[str, ...]] = {}
        self.commits: list[tuple[str, dict]] = []

    def log(self, topic: str, records: list[Record], end: int | None = None, partition: int = 0) -> None:
        self.logs[(topic, partition)] = sorted(records, key=lambda r: r.offset)
        self.partition_counts[topic] = max(self.partition_counts.get(topic, 0), partition + 1)
        if end is not None:
            self.ends[(topic, partition)] = end

    def syncs(self, topic: str, syncs: list[tuple[str, int, int]]) -> None:
        records = []
        for i, (synced, upstream, downstream) in enumerate(syncs):
            sync = OffsetSync(synced, 0, upstream, downstream)
            records.append(Record(topic, 0, i, sync.record_key(), sync.record_value(), 0, ()))
        self.log(topic, records)

    # RecordReader
    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        records = self.logs.get((topic, partition), [])
        low = records[0].offset if records else self.ends.get((topic, partition), 0)
        high = max(records[-1].offset + 1 if records else 0, self.ends.get((topic, partition), 0))
        return low, high

    def read(self, topic: str, partition: int, start: int, end: int) -> list[Record]:
        return [r for r in self.logs.get((topic, partition), []) if start <= r.offset < end]

    def bounds(self, partitions) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: self.watermarks(*tp) for tp in partitions}

    def read_many(self, ranges) -> dict[tuple[str, int], list[Record]]:
        return {tp: self.read(*tp, start, end) for tp, (start, end) in ranges.items()}

    def last_record(self, topic: str, partition: int) -> Record | None:
        records = self.logs.get((topic, partition), [])
        return records[-1] if records else None

    def read_topic(self, topic: str, partitions: int = 1):
        return list(self.logs.get((topic, 0), []))

    # GroupOffsets
    def groups(self) -> list[str]:
        return sorted(self.offsets)

    def describe(self, groups) -> dict[str, GroupState]:
        return {g: GroupState(g, dict(self.offsets.get(g, {})), self.members.get(g, ())) for g in groups}

    def commit(self, group: str, offsets) -> None:
        self.commits.append((group, dict(offsets)))
        self.offsets.setdefault(group, {}).update(offsets)

    def commit_many(self, offsets) -> None:
        for group, found in offsets.items():
            if found:
                self.commit(group, found)

    # KafkaAdmin
    def topics(self, names=None, with_configs: bool = True, include_internal: bool = False) -> dict[str, LiveTopic]:
        found = {t: LiveTopic(t, n, 1, {}) for t, n in self.partition_counts.items()}
        return found if names is None else {t: found[t] for t in names if t in found}


class FakeEngine:
    """Stops flows one by one (Connect's connectors, the Spark job's paused queries) or all at once
    (one Spark job on Kubernetes: ``whole``)."""

    def __init__(self, shared: bool, whole: bool | None = None):
        self.shared_by_flows, self.title, self.stopped = shared, "Spark" if shared else "Connect", []
        self.whole = shared if whole is None else whole

    def stop(self, flows, *, check: bool, timeout: float):
        from mm2spec.engines import Action

        self.stopped += [] if check else [f.name for f in flows]
        return [Action("dr", f"stopped {', '.join(f.name for f in flows)}", changed=True, stops_every_flow=self.whole)]

    def running(self, flow):
        from mm2spec.engines import Running

        return Running(flow.name not in self.stopped, "stopped" if flow.name in self.stopped else "running")


class FakeContext(Context):
    def __init__(self, spec, options, clusters, states=None, engine=None):
        super().__init__(spec, options)
        self.clusters, self.states, self.leases = clusters, states or {}, {}
        if engine is not None:
            self.engine = engine

    def admin(self, alias):
        return self.clusters[alias]

    def client(self, kind, alias, **options):
        assert kind in (RecordReader, GroupOffsets), kind
        return self.clusters[alias]

    def failover_states(self, refresh: bool = False):
        return {name: s for name, s in self.states.items() if name in {f.name for f in self.flows}}

    def lease_store(self, source, target):
        return self.leases.setdefault((source, target), MemoryLeaseStore())


def _spec(tmp_path: Path, text: str, policy: str = "default"):
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace("POLICY", policy))
    return load_desired_state(path, None)


def _active_active(tmp_path, **options) -> FakeContext:
    """primary: local ``orders`` (20 records) and ``dr.orders``, the copy of dr's ``orders``.

    dr's ``orders`` starts at 100 (retention deleted the rest) and holds 100..129; the reverse
    flow copied it to primary's ``dr.orders`` 0..29 with a transaction marker at 10 (so copy 11 is
    original 110), syncing every 10 records. primary's ``orders`` 0..19 is ``primary.orders`` 0..19
    on dr."""
    primary, dr = FakeCluster(), FakeCluster()
    primary.log("orders", [_rec("orders", o, 5_000 + o) for o in range(20)])
    dr.log("primary.orders", [_rec("primary.orders", o, 5_000 + o) for o in range(20)])
    dr.syncs("mm2-offset-syncs.primary.internal", [("orders", 0, 0), ("orders", 10, 10)])
    dr.log("orders", [_rec("orders", o, o) for o in range(100, 130)])
    copy = {o: o + 100 for o in range(10)} | {o: o + 99 for o in range(11, 31)}  # 10: a marker
    primary.log("dr.orders", [_rec("dr.orders", c, orig) for c, orig in copy.items()], end=31)
    primary.syncs("mm2-offset-syncs.dr.internal", [("orders", 100, 0), ("orders", 110, 11), ("orders", 120, 21)])
    # app-1 read 7 local records and 15 remote copies (originals 100..113); app-2 is at the copy's
    # end (originals through 129 read); app-3 read nothing of dr.orders past its first record.
    primary.offsets = {"app-1": {("orders", 0): 7, ("dr.orders", 0): 15}, "app-2": {("dr.orders", 0): 31},
                       "app-3": {("dr.orders", 0): 1}}
    spec = _spec(tmp_path, ACTIVE_ACTIVE)
    return FakeContext(spec, Options(limit_flows=("primary-to-dr",), **options), {"primary": primary, "dr": dr})


# ------------------------------------------------------------------------------ active-active

def test_a_failover_moves_remote_topic_positions_to_the_exact_next_original_record(tmp_path):
    ctx = _active_active(tmp_path)
    outcomes = offsets.translate(ctx, {})
    found = {(t.group, t.topic): t for t in ctx.facts[TRANSLATIONS]}
    # Local: orders on primary -> primary.orders on dr, the flow's own way (as one-way).
    local = found[("app-1", "orders")]
    assert (local.target_topic, local.dr_offset, local.remote) == ("primary.orders", 7, "")
    # Remote: dr.orders on primary -> orders on dr, the original of the next unread copy.
    assert {g: (t.target_topic, t.dr_offset, t.skipped, t.reread, t.verified, t.remote)
            for (g, topic), t in found.items() if topic == "dr.orders"} == {
        "app-1": ("orders", 114, 0, 0, True, "dr-to-primary"),  # copies 0..14: originals 100..113
        "app-2": ("orders", 130, 0, 0, True, "dr-to-primary"),  # everything read: dr's end
        "app-3": ("orders", 101, 0, 0, True, "dr-to-primary")}
    assert all(t.mm2_offset is None for t in found.values() if t.remote), "MM2 has no such translation"
    assert "3 on remote topics (dr.orders on primary) moved to their originals on dr" in outcomes[0].message

    offsets.commit(ctx, {})
    dr = ctx.clusters["dr"]
    assert dict(dr.commits)["app-1"] == {("primary.orders", 0): 7, ("orders", 0): 114}
    assert dict(dr.commits)["app-2"] == {("orders", 0): 130}


@pytest.mark.parametrize("committed,resume", [(14, 114), (16, 115), (17, 115), (18, 115), (20, 117), (33, 130)])
def test_a_remote_copy_with_an_at_least_once_replay_translates_past_what_the_group_read(tmp_path, committed, resume):
    ctx = _active_active(tmp_path)
    primary = ctx.clusters["primary"]
    # The reverse flow wrote 100..114, replayed 112..114 after a restart, then went on from 115.
    originals = list(range(100, 115)) + [112, 113, 114] + list(range(115, 130))
    primary.log("dr.orders", [_rec("dr.orders", c, orig) for c, orig in enumerate(originals)])
    primary.syncs("mm2-offset-syncs.dr.internal", [("orders", 100, 0), ("orders", 110, 10), ("orders", 115, 18)])
    primary.offsets = {"app": {("dr.orders", 0): committed}}
    offsets.translate(ctx, {})
    [t] = ctx.facts[TRANSLATIONS]
    assert (t.dr_offset, t.skipped, t.reread, t.unmirrored, t.verified) == (resume, 0, 0, 0, True), t


def test_the_report_names_the_local_and_the_remote_topic(tmp_path):
    ctx = _active_active(tmp_path)
    offsets.translate(ctx, {})
    text = "\n".join(TRANSLATIONS_SECTION.text_lines(ctx.facts[TRANSLATIONS]))
    assert "app-1 dr.orders-0: source 15 -> dr orders-0 114 (exact, remote topic dr.orders: dr-to-primary's copy " \
           "of orders, skipped 0, re-read 0, MM2 -)" in text
    assert "app-1 orders-0: source 7 -> dr primary.orders-0 7 (exact, skipped 0" in text
    assert "3 on remote topics (active-active)" in text
    as_json = TRANSLATIONS_SECTION.to_json(ctx.facts[TRANSLATIONS])["translations"]
    assert {t["topic"]: t.get("remote") for t in as_json if t["group"] == "app-1"} == \
        {"orders": None, "dr.orders": "dr-to-primary"}
    assert "remote" in json.loads((Path(__file__).parents[2] / "schemas/playbook-report.schema.json").read_text())[
        "$defs"]["translation"]["properties"]


def test_a_remote_copy_that_is_not_the_original_is_not_translated(tmp_path):
    ctx = _active_active(tmp_path)
    # Something else wrote to dr.orders on primary at copy offset 13, among what app-1 read.
    primary = ctx.clusters["primary"]
    records = primary.logs[("dr.orders", 0)]
    assert records[12].offset == 13
    records[12] = Record("dr.orders", 0, 13, b"other", b"x", 1, ())
    outcomes = offsets.translate(ctx, {})
    assert outcomes[0].status == "failed" and "app-1 dr.orders-0" in outcomes[0].message


def test_without_a_reverse_flow_nothing_remote_is_translated(tmp_path):
    ctx = _active_active(tmp_path)
    ctx.spec = _spec(tmp_path, ACTIVE_ACTIVE.rsplit("  - {name: dr-to-primary", 1)[0])
    ctx.flows = list(ctx.spec.mirrors)
    offsets.translate(ctx, {})
    assert {t.topic for t in ctx.facts[TRANSLATIONS]} == {"orders"}


def test_the_turned_syncs_map_the_copy_to_the_original():
    assert turned([(100, 0), (110, 11), (120, 21)]) == [(0, 100), (11, 110), (21, 120)]


def test_unplanned_says_the_remote_positions_stay_behind(tmp_path):
    ctx = _active_active(tmp_path, source_unreachable=True)
    outcomes = offsets.translate(ctx, {})
    assert "not moved: positions on primary's copies of dr's topics (dr-to-primary)" in outcomes[0].message


def test_the_state_is_per_direction_and_names_the_groups_it_moved(tmp_path, monkeypatch):
    written: list[FailoverState] = []
    monkeypatch.setattr(state, "write_state", lambda cluster, new, secrets: written.append(new))
    ctx = _active_active(tmp_path)
    offsets.translate(ctx, {})
    state.record(ctx, {"phase": "failed-over"})
    assert [(s.flow, s.phase, s.source, s.target) for s in written] == [("primary-to-dr", "failed-over", "primary", "dr")]
    assert written[0].groups == ("app-1", "app-2", "app-3")
    assert FailoverState.from_json(written[0].to_json()) == written[0]
    old = written[0].to_json()
    del old["groups"]
    assert FailoverState.from_json(old).groups == ()


@pytest.mark.parametrize("shared, whole", [(False, False), (True, True), (True, False)])
def test_stopping_one_direction_names_what_else_stopped(tmp_path, shared, whole):
    ctx = _active_active(tmp_path)
    ctx.engine = FakeEngine(shared, whole)
    outcomes = mirror.stop(ctx, {})
    assert ctx.engine.stopped == ["primary-to-dr"]
    others = [o.message for o in outcomes if "not failed over" in o.message]
    if whole:
        assert others == ["stopped with it, not failed over by this run: dr-to-primary (one Spark deployment runs "
                          "every flow of the spec; the failback's restart starts them again)"]
    else:
        assert others == [], "Connect stops the selected flow's connectors only, the Spark job pauses its queries"


def _failed_back_ctx(tmp_path, **options) -> FakeContext:
    """app-1 moved to dr by a failover, then read dr's orders up to 125 (originals 100..124)."""
    ctx = _active_active(tmp_path, **options)
    dr = ctx.clusters["dr"]
    dr.offsets = {"app-1": {("orders", 0): 125, ("primary.orders", 0): 20}, "dr-native": {("orders", 0): 103}}
    ctx.states = {"primary-to-dr": FailoverState("primary-to-dr", "failing-back", "planned", "primary", "dr", 1, 2,
                                                 spec="aa", restarted=True, groups=("app-1",))}
    return ctx


def test_a_failback_moves_the_groups_positions_on_dr_s_own_topics_back_to_the_copies(tmp_path):
    ctx = _failed_back_ctx(tmp_path)
    outcomes = failback.remote(ctx, {"timeout": 1})
    translated = ctx.facts[TRANSLATIONS]
    assert [(t.group, t.topic, t.target_topic, t.dr_offset, t.skipped, t.reread, t.remote) for t in translated] == [
        ("app-1", "orders", "dr.orders", 26, 0, 0, "dr-to-primary")]  # original 125 is copy 26
    assert "dr-native" not in {t.group for t in translated}, "only the groups the failover moved"
    primary = ctx.clusters["primary"]
    assert primary.commits == [("app-1", {("dr.orders", 0): 26})]
    assert outcomes[0].status == "ok" and "translated to dr-to-primary's copies on primary" in outcomes[0].message


def test_a_failback_waits_for_the_reverse_flow_to_hold_the_positions(tmp_path):
    ctx = _failed_back_ctx(tmp_path)
    primary = ctx.clusters["primary"]
    full = primary.logs[("dr.orders", 0)]
    primary.logs[("dr.orders", 0)] = full[:20]  # copies of 100..118 only: app-1 read to 124
    reads = {"n": 0}
    real = primary.watermarks

    def growing(topic, partition):
        reads["n"] += 1
        if reads["n"] > 6:  # the reverse mirror catches up while the failback waits
            primary.logs[("dr.orders", 0)] = full
        return real(topic, partition)
    primary.watermarks = growing
    failback.remote(ctx, {"timeout": 30})
    assert primary.commits == [("app-1", {("dr.orders", 0): 26})]


def test_a_failback_whose_reverse_flow_does_not_catch_up_stops_saying_what_to_do(tmp_path):
    ctx = _failed_back_ctx(tmp_path)
    primary = ctx.clusters["primary"]
    primary.logs[("dr.orders", 0)] = primary.logs[("dr.orders", 0)][:20]
    with pytest.raises(MirrorError) as stopped:
        failback.remote(ctx, {"timeout": 0.5})
    text = str(stopped.value)
    assert "dr-to-primary" in text and "run the failback again" in text and "not running" in text
    assert primary.commits == []
    # Check mode does not wait: it says what a run would wait for.
    ctx = _failed_back_ctx(tmp_path, check=True)
    ctx.clusters["primary"].logs[("dr.orders", 0)] = ctx.clusters["primary"].logs[("dr.orders", 0)][:20]
    outcomes = failback.remote(ctx, {"timeout": 30})
    assert "1 not mirrored yet: a run waits for them" in outcomes[0].message and ctx.clusters["primary"].commits == []


# -------------------------------------------------------------------------------- refusals

def test_a_failover_while_the_other_direction_is_failed_over_is_refused(tmp_path, monkeypatch):
    ctx = _active_active(tmp_path)
    other = FailoverState("dr-to-primary", "failed-over", "planned", "dr", "primary", 1_700_000_000_000, spec="aa")
    monkeypatch.setattr(offsets, "read_flow_states", lambda spec, flows, secrets: {"dr-to-primary": other})
    with pytest.raises(OperationRefused) as refused:
        offsets.preflight(ctx, {})
    text = str(refused.value)
    for part in ("dr-to-primary, the other direction of this active-active pair, is failed-over",
                 "mm2spec failback --limit flow=dr-to-primary", "nothing was changed"):
        assert part in text, text
    assert ctx.clusters["dr"].commits == []


def test_both_directions_in_one_run_are_refused_before_any_task(tmp_path):
    ctx = _active_active(tmp_path)
    ctx.flows = list(ctx.spec.mirrors)
    ran: list = []
    task = Task("write", Module("test.write", "w", lambda c, a: ran.append(1) or [Outcome("changed", "dr", "x")]),
                {}, (), None, Position("p.yaml", 1, 1), False)
    with pytest.raises(OperationRefused, match="active-active.*--limit flow=primary-to-dr.*nothing was changed"):
        run(Playbook("failover", "", (task,), "p.yaml"), ctx)
    assert ran == []


def _fan_in(tmp_path, policy: str, **options) -> FakeContext:
    east, west, dr = FakeCluster(), FakeCluster(), FakeCluster()
    east.log("orders", [_rec("orders", o, o) for o in range(5)])
    west.log("orders", [_rec("orders", o, 100 + o) for o in range(5)])
    return FakeContext(_spec(tmp_path, FAN_IN, policy), Options(limit_flows=("east-to-dr",), **options),
                       {"east": east, "west": west, "dr": dr}, engine=FakeEngine(shared=False))


def test_fan_in_with_identity_naming_into_one_topic_is_refused_naming_why(tmp_path, monkeypatch):
    monkeypatch.setattr(offsets, "read_flow_states", lambda *a, **k: {})
    with pytest.raises(OperationRefused) as refused:
        offsets.preflight(_fan_in(tmp_path, "identity"), {})
    text = str(refused.value)
    for part in ("east-to-dr and west-to-dr both write orders on dr", "replicationPolicy: default",
                 "nothing was changed"):
        assert part in text, text
    offsets.preflight(_fan_in(tmp_path, "default"), {})  # east.orders and west.orders: apart


def test_fan_in_fails_over_one_source_and_leaves_the_other_mirroring(tmp_path, monkeypatch):
    written: list[FailoverState] = []
    monkeypatch.setattr(state, "write_state", lambda cluster, new, secrets: written.append(new))
    ctx = _fan_in(tmp_path, "default")
    ctx.clusters["dr"].log("east.orders", [_rec("east.orders", o, o) for o in range(5)])
    ctx.clusters["east"].offsets = {"app": {("orders", 0): 3}}
    ctx.clusters["dr"].syncs("mm2-offset-syncs.east.internal", [("orders", 0, 0)])
    assert [f.name for f in ctx.flows] == ["east-to-dr"]
    outcomes = mirror.stop(ctx, {})
    assert ctx.engine.stopped == ["east-to-dr"] and not any("not failed over" in o.message for o in outcomes)
    offsets.translate(ctx, {})
    offsets.commit(ctx, {})
    state.record(ctx, {"phase": "failed-over"})
    assert [(s.flow, s.phase) for s in written] == [("east-to-dr", "failed-over")]
    assert ctx.clusters["dr"].commits == [("app", {("east.orders", 0): 3})]
    # With one Spark job on Kubernetes for both flows, the report says west-to-dr stopped too, not failed over.
    ctx.engine = FakeEngine(shared=True)
    assert any("not failed over by this run: west-to-dr" in o.message for o in mirror.stop(ctx, {}))
    # Stopped already (failed over before), a flow is not named as stopped with it.
    ctx.engine.stopped.append("west-to-dr")
    assert not any("not failed over" in o.message for o in mirror.stop(ctx, {}))


def test_a_limit_that_selects_no_flow_or_no_group_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(offsets, "read_flow_states", lambda *a, **k: {})
    with pytest.raises(OperationRefused, match=r"--limit flow=west: no such flow in the spec \(flows: east-to-dr, "
                                               "west-to-dr\\)"):
        _fan_in(tmp_path, "default").__class__(_spec(tmp_path, FAN_IN, "default"), Options(limit_flows=("west",)), {})
    ctx = _fan_in(tmp_path, "default", limit_groups="nobody")
    ctx.clusters["east"].offsets = {"app": {}}
    with pytest.raises(OperationRefused, match="--limit group=nobody: no group .*nothing was changed"):
        offsets.preflight(ctx, {})

"""After a failback, DR is ready for the next failover (issue 40): before the forward mirror
restarts, the failback writes an offset sync at each group's offset in what came back and the
checkpoint MM2's rule gives through the syncs, for every group partition, whether the group
consumes again or not; and the copy's own syncs never share a topic and keys with the forward
flow's. Pure parts, then ``failback.restart_mirror`` on fake clusters."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.live.types import FailoverState, GroupState, LiveTopic, Record
from mm2spec.live.writer import RecordWriter
from mm2spec.mm2.records import Checkpoint, OffsetSync
from mm2spec.ops.modules import failback, reverse
from mm2spec.ops.modules.reverse import BackPartition
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.spec.load import load_desired_state

# The switch left the source at 40 and DR at 45 (DR's offsets run 5 ahead). The copy wrote DR's
# 45..49 to the source's 40..44 and, past a transaction marker at DR 50-51, DR's 52..59 to 45..52.
PART = BackPartition("orders", 0, dr_start=45, topic="orders", source_start=40)
COPY_SYNCS = [(45, 40), (52, 45)]  # (DR offset, source offset), as the copy wrote them
FORWARD = [(0, 5), (10, 15), (39, 44)]  # the forward mirror's, before the switch (source, DR)
START = {("orders", 0): (53, "orders", 60)}  # the source's end and DR's end at the restart


def test_a_source_offset_in_the_copy_names_the_dr_record_it_came_from_gaps_included():
    anchors = reverse.anchors(PART, COPY_SYNCS)
    assert [reverse.dr_offset_at(PART, anchors, o) for o in (40, 44, 45, 47, 52)] == [45, 49, 52, 54, 59]
    # The other way round from copied_offset, for every record the copy wrote.
    for o in range(40, 53):
        assert reverse.copied_offset(PART, anchors, reverse.dr_offset_at(PART, anchors, o), 53) == o
    # The copy start and a sync at its first record after a gap share a source offset: the sync names the record.
    gapped = BackPartition("orders", 0, dr_start=45, topic="orders", source_start=40)
    assert reverse.dr_offset_at(gapped, reverse.anchors(gapped, [(47, 40)]), 41) == 48


def _ready(positions, forward=FORWARD, latest=None, back=COPY_SYNCS, part=PART, start=START):
    return failback.ready_records({("orders", 0): part}, start, positions, {("orders", 0): forward},
                                  {("orders", 0): back}, latest or {})


def test_each_group_gets_a_sync_at_its_offset_in_the_copy_and_mm2s_checkpoint_through_it():
    ready = _ready({"reader": {("orders", 0): 47}, "ender": {("orders", 0): 53}, "idle": {("orders", 0): 12}})
    # After the mirror's syncs of before the switch, in order; the restart point last.
    assert [(s.upstream_offset, s.downstream_offset) for s in ready.syncs] == [(47, 54), (53, 60)]
    assert {(c.group, c.upstream_offset, c.downstream_offset) for c in ready.checkpoints} == {
        ("reader", 47, 54), ("ender", 53, 60),
        ("idle", 12, 16)}  # before the switch: MM2's rule through the sync at 10 (never ahead)
    assert all(c.topic == "orders" and c.partition == 0 for c in ready.checkpoints)
    assert (ready.exact, ready.total, ready.groups) == (2, 3, 3)


def test_a_checkpoint_dr_holds_already_is_not_written_again():
    latest = {("idle", "orders", 0): Checkpoint("idle", "orders", 0, 12, 16)}
    ready = _ready({"idle": {("orders", 0): 12}}, latest=latest)
    assert ready.checkpoints == () and ready.total == 1
    # The restart point is always written: a failover before the mirror's first record translates from it.
    assert [(s.upstream_offset, s.downstream_offset) for s in ready.syncs] == [(53, 60)]


def test_a_rerun_goes_on_after_the_syncs_an_earlier_run_wrote():
    positions = {"reader": {("orders", 0): 47}}
    first = _ready(positions)
    written = FORWARD + [(s.upstream_offset, s.downstream_offset) for s in first.syncs]
    again = _ready(positions, forward=written, latest={("reader", "orders", 0): first.checkpoints[0]})
    # Nothing below the last one (it would make MM2 forget the others); the restart point again.
    assert [(s.upstream_offset, s.downstream_offset) for s in again.syncs] == [(53, 60)]
    assert again.checkpoints == () and again.exact == 1


def test_a_group_below_every_sync_gets_no_checkpoint_as_with_mm2():
    ready = _ready({"early": {("orders", 0): 3}}, forward=[(10, 15)])
    assert ready.checkpoints == () and ready.total == 0


def test_a_rebuilt_topic_starts_its_syncs_over():
    """The source topic was recreated from DR's whole log: the forward syncs name the old log, so
    the failback's go backwards from them and MM2 forgets the old ones (and so does the checkpoint)."""
    rebuilt = BackPartition("orders", 0, dr_start=0, topic="orders", source_start=0)
    ready = _ready({"reader": {("orders", 0): 5}}, forward=[(0, 0), (900, 900)], back=[(0, 0)], part=rebuilt,
                   start={("orders", 0): (20, "orders", 20)})
    assert [(s.upstream_offset, s.downstream_offset) for s in ready.syncs] == [(5, 5), (20, 20)]
    assert [(c.upstream_offset, c.downstream_offset) for c in ready.checkpoints] == [(5, 5)]


SPEC = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata: {name: ready}
clusters:
  primary: {bootstrapServers: ["127.0.0.1:1"]}
  dr: {bootstrapServers: ["127.0.0.1:2"]}
mirrors:
  - {source: primary, target: dr, replicationPolicy: POLICY, topics: [orders], groups: [".*"]LOCATION}
"""


def _flow(tmp_path: Path, policy: str = "identity", location: str = ""):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("POLICY", policy).replace("LOCATION", f", offsetSyncsTopicLocation: {location}"
                                                           if location else ""))
    return load_desired_state(path, None)


def test_the_copys_syncs_never_share_the_forward_flows_topic_and_keys(tmp_path):
    # Identity naming, the forward flow's syncs on DR: MM2's place for a DR -> primary flow is
    # that very topic, with the same keys; the copy's go to the source instead.
    flow = _flow(tmp_path).mirrors[0]
    assert (flow.offset_syncs_cluster, flow.offset_syncs_topic) == ("dr", "mm2-offset-syncs.primary.internal")
    assert (reverse.syncs_cluster(flow), reverse.syncs_topic(flow)) == ("primary", "mm2-offset-syncs.dr.internal")
    # The forward flow's syncs on the source: no clash, MM2's place on DR.
    flow = _flow(tmp_path, location="source").mirrors[0]
    assert (reverse.syncs_cluster(flow), reverse.syncs_topic(flow)) == ("dr", "mm2-offset-syncs.primary.internal")
    # A prefix makes the keys differ (primary.orders, not orders): MM2's place on DR, as before.
    flow = _flow(tmp_path, policy="default").mirrors[0]
    assert (reverse.syncs_cluster(flow), reverse.syncs_topic(flow)) == ("dr", "mm2-offset-syncs.primary.internal")


# ------------------------------------------------------------------- restart_mirror, faked
class FakeCluster:
    """Topics as lists of records; groups' offsets; writes appended in order."""

    def __init__(self, name: str, journal: list):
        self.name, self.journal = name, journal
        self.logs: dict[tuple[str, int], list[Record]] = {}
        self.ends: dict[tuple[str, int], int] = {}
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}

    def append(self, topic: str, key: bytes, value: bytes) -> None:
        records = self.logs.setdefault((topic, 0), [])
        records.append(Record(topic, 0, len(records), key, value, 0, ()))

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return 0, self.ends.get((topic, partition), len(self.logs.get((topic, partition), [])))

    def iterate(self, topic: str, partition: int, start: int, end: int):
        return [r for r in self.logs.get((topic, partition), []) if start <= r.offset < end]

    def read_topic(self, topic: str, partitions: int = 1):
        return list(self.logs.get((topic, 0), []))

    def topics(self, names=None, with_configs: bool = True, include_internal: bool = False) -> dict[str, LiveTopic]:
        found = {t: LiveTopic(t, 1, 1, {}) for t, _p in {**self.logs, **self.ends}}
        return found if names is None else {t: found[t] for t in names if t in found}

    def create_topic(self, name, partitions, replication, configs, exist_ok=False) -> None:
        self.logs.setdefault((name, 0), [])

    def groups(self) -> list[str]:
        return sorted(self.offsets)

    def describe(self, groups) -> dict[str, GroupState]:
        return {g: GroupState(g, dict(self.offsets.get(g, {}))) for g in groups}

    # RecordWriter
    def send_raw(self, topic: str, key: bytes, value: bytes, partition: int = 0) -> None:
        self.append(topic, key, value)

    def flush(self) -> None:
        self.journal.append(f"flush {self.name}")


class FakeEngine:
    shared_by_flows, title = False, "Connect"

    def __init__(self, journal: list):
        self.journal, self.started = journal, []

    def location(self, flow):
        return flow.target

    def start_from(self, flows, offsets, *, others_failed_over=(), timeout=0.0):
        from mm2spec.engines import Action

        self.journal.append("start")
        self.started.append(offsets)
        return [Action(f.target, f"{f.name}: started", flow=f.name) for f in flows]


class FakeContext(Context):
    def __init__(self, spec, clusters, state, engine):
        super().__init__(spec, Options())
        self.clusters, self.state, self.engine = clusters, state, engine

    def admin(self, alias):
        return self.clusters[alias]

    def client(self, kind, alias, **options):
        assert kind in (RecordReader, GroupOffsets, RecordWriter), kind
        return self.clusters[alias]

    def failover_states(self, refresh: bool = False):
        return {self.state.flow: self.state}


def _syncs(cluster: FakeCluster, topic: str) -> list[tuple[int, int]]:
    return [(s.upstream_offset, s.downstream_offset)
            for s in (OffsetSync.from_record(r.key, r.value) for r in cluster.read_topic(topic))]


def _checkpoints(cluster: FakeCluster, topic: str) -> list[tuple[str, int, int]]:
    return [(c.group, c.upstream_offset, c.downstream_offset)
            for c in (Checkpoint.from_record(r.key, r.value) for r in cluster.read_topic(topic))]


@pytest.fixture
def restart(tmp_path, monkeypatch):
    """The scenario above on fake clusters, the failback up to its commit done."""
    spec = _flow(tmp_path)
    flow = spec.mirrors[0]
    journal: list = []
    primary, dr = FakeCluster("primary", journal), FakeCluster("dr", journal)
    primary.ends[("orders", 0)], dr.ends[("orders", 0)] = 53, 60
    for u, d in FORWARD:
        sync = OffsetSync("orders", 0, u, d)
        dr.append(flow.offset_syncs_topic, sync.record_key(), sync.record_value())
    for u, d in COPY_SYNCS:
        sync = OffsetSync("orders", 0, u, d)
        primary.append(reverse.syncs_topic(flow), sync.record_key(), sync.record_value())
    primary.offsets = {"reader": {("orders", 0): 47}, "idle": {("orders", 0): 12}}
    stale = Checkpoint("idle", "orders", 0, 12, 11)  # emitted before the mirror's sync at 10 arrived
    dr.append(flow.checkpoints_topic, stale.record_key(), stale.record_value())
    state = FailoverState(flow.name, "failing-back", "planned", "primary", "dr", 1, 2,
                          (("orders", 0, 40, "orders", 45),), "ready",
                          ((PART.dr_topic, 0, PART.dr_start, PART.topic, PART.source_start),), "", 0)
    recorded = []
    monkeypatch.setattr(failback, "write_state", lambda _cluster, new, _secrets: recorded.append(new))
    engine = FakeEngine(journal)
    ctx = FakeContext(spec, {"primary": primary, "dr": dr}, state, engine)
    return ctx, flow, primary, dr, journal, recorded


def test_the_restart_writes_the_syncs_then_the_checkpoints_then_starts_the_mirror(restart):
    ctx, flow, primary, dr, journal, recorded = restart
    outcomes = failback.restart_mirror(ctx, {"timeout": 1})
    assert _syncs(dr, flow.offset_syncs_topic) == FORWARD + [(47, 54), (53, 60)]
    assert _checkpoints(dr, flow.checkpoints_topic) == [("idle", 12, 11), ("idle", 12, 16), ("reader", 47, 54)]
    assert _syncs(primary, reverse.syncs_topic(flow)) == COPY_SYNCS  # the copy's anchors, untouched
    assert journal == ["flush dr", "flush dr", "start"]  # the restarted emitters find both
    assert ctx.engine.started == [{flow.name: {("orders", 0): 53}}]
    assert recorded[-1].restarted
    assert outcomes[0].status == "changed" and outcomes[0].cluster == "dr"
    assert "2 groups, 2 partitions checkpointed on dr at their offsets on primary (1 exact; 1 by MM2's rule " \
           "through the syncs of before the switch" in outcomes[0].message, outcomes[0].message
    assert outcomes[0].diff == (("idle orders-0 checkpoint", "12 -> 11", "12 -> 16"),
                                ("reader orders-0 checkpoint", "-", "47 -> 54"))

    # Run again (the start failed before it was recorded): nothing new but the restart point.
    ctx.state = replace(ctx.state, restarted=False)
    outcomes = failback.restart_mirror(ctx, {"timeout": 1})
    assert _syncs(dr, flow.offset_syncs_topic) == FORWARD + [(47, 54), (53, 60), (53, 60)]
    assert len(_checkpoints(dr, flow.checkpoints_topic)) == 3
    assert outcomes[0].status == "ok"


def test_check_mode_writes_nothing_and_says_what_it_would(restart):
    ctx, flow, primary, dr, journal, recorded = restart
    ctx.options = replace(ctx.options, check=True)
    outcomes = failback.restart_mirror(ctx, {"timeout": 1})
    assert _syncs(dr, flow.offset_syncs_topic) == FORWARD and len(dr.read_topic(flow.checkpoints_topic)) == 1
    assert journal == [] and not recorded
    assert "would write an offset sync at each group's offset on primary" in outcomes[0].message

"""Silent loss without clusters (``mm2spec.ops.modules.loss``): the mirror's position against the
source's log start, recorded topic IDs against live ones, the offset syncs of a topic seen for the
first time, and what ``verify.loss`` and the report say."""

from __future__ import annotations

from pathlib import Path

from mm2spec.live.records import RecordReader
from mm2spec.live.types import Record
from mm2spec.ops.modules import loss, topology, verify
from mm2spec.ops.modules.sections import LOSS, LOSS_SECTION
from mm2spec.ops.modules.topology import MirroredPartition
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
NOW_S = 1_800_000_000.0


# ------------------------------------------------------------------------------- the rules

def test_the_mirror_position_is_one_past_the_synced_record_plus_what_dr_holds_after_it():
    assert topology.mirror_position(None, 50) is None
    assert topology.mirror_position((100, 40), 41) == 101  # the synced record is DR's last
    assert topology.mirror_position((100, 40), 60) == 120  # 19 records copied after it
    assert topology.mirror_position((100, 40), 40) == 101  # DR's end behind the sync (retention): at least past it


def test_records_below_the_log_start_that_the_mirror_had_not_reached_are_lost():
    assert loss.deleted_before_mirrored(120, 300) == 180
    assert loss.deleted_before_mirrored(300, 300) == 0
    assert loss.deleted_before_mirrored(400, 300) == 0  # mirrored before they were deleted
    assert loss.deleted_before_mirrored(None, 300) == 0  # no position known: nothing claimed


def test_a_source_topic_id_that_changed_while_the_dr_copy_did_not_is_a_recreation():
    first = loss.compare_topic_ids({}, {"orders": ("S1", "D1"), "gone": (None, "D9")}, 1000)
    assert first.recreated == {} and first.first_seen == {"orders"}
    assert first.record == {"orders": {"source": "S1", "dr": "D1", "since": 1000}}

    same = loss.compare_topic_ids(first.record, {"orders": ("S1", "D1")}, 2000)
    assert same.recreated == {} and same.first_seen == set() and same.record == first.record

    recreated = loss.compare_topic_ids(first.record, {"orders": ("S2", "D1")}, 3000)
    assert recreated.recreated == {"orders": ("S1", "S2", 1000)}
    assert recreated.record == first.record, "kept, so it is reported again until DR's copy is rebuilt"

    rebuilt = loss.compare_topic_ids(first.record, {"orders": ("S2", "D2")}, 4000)
    assert rebuilt.recreated == {} and rebuilt.first_seen == {"orders"}
    assert rebuilt.record["orders"] == {"source": "S2", "dr": "D2", "since": 4000}


# --------------------------------------------------------------------- a flow, with fakes

class FakeAdmin:
    def __init__(self, starts=None, ends=None, ids=None):
        self.starts, self.ends, self.ids = starts or {}, ends or {}, ids or {}

    def log_starts(self, topic, partitions):
        return [self.starts.get((topic, p), 0) for p in range(partitions)]

    def end_offsets(self, topic, partitions):
        return [self.ends.get((topic, p), 0) for p in range(partitions)]

    def topic_ids(self, names):
        return {n: self.ids[n] for n in names if n in self.ids}


class FakeReader:
    """A partition's records by offset; ``watermarks`` from them (or ``ends``)."""

    def __init__(self, records=None, ends=None):
        self.records, self.ends = records or {}, ends or {}

    def watermarks(self, topic, partition):
        return self.ends[(topic, partition)]

    def read(self, topic, partition, start, end):
        return [r for (t, p, o), r in sorted(self.records.items()) if (t, p) == (topic, partition) and start <= o < end]


def _record(topic, partition, offset, value: bytes) -> Record:
    return Record(topic, partition, offset, b"k", value, 1_700_000_000_000)


class FakeContext(Context):
    def __init__(self, admins, readers, check=False):
        super().__init__(load_desired_state(EXAMPLE, "dev"), Options(check=check), clock=lambda: NOW_S)
        self.admins, self.readers = admins, readers

    def admin(self, alias):
        return self.admins[alias]

    def client(self, kind, alias, **options):
        assert kind is RecordReader
        return self.readers[alias]


def _flow_on(monkeypatch, parts, syncs, recorded):
    """``partitions``, the offset syncs and the DR-state topic replaced; returns what gets written."""
    written = []
    monkeypatch.setattr(loss, "partitions", lambda ctx, flow: parts)
    monkeypatch.setattr(loss, "offset_syncs", lambda ctx, flow: syncs)
    monkeypatch.setattr(loss, "read_topic_ids", lambda cluster, spec, flow, secrets: dict(recorded))
    monkeypatch.setattr(loss, "write_topic_ids", lambda cluster, spec, flow, topics, secrets: written.append(topics))
    return written


PARTS = [MirroredPartition("payments", p, "payments") for p in range(3)]
RECORDED = {"payments": {"source": "S1", "dr": "D1", "since": 1_800_000_000_000}}


def test_verify_names_each_partition_whose_unmirrored_records_were_deleted_and_how_many(monkeypatch):
    # p0: mirrored to 120, log start 300 -> 180 lost; p1: mirrored past its log start; p2: no sync yet.
    syncs = {("payments", 0): [(50, 10), (100, 40)], ("payments", 1): [(500, 200)]}
    _flow_on(monkeypatch, PARTS, syncs, RECORDED)
    source = FakeAdmin(starts={("payments", 0): 300, ("payments", 1): 400}, ends={("payments", 0): 900,
                                                                                   ("payments", 1): 900},
                       ids={"payments": "S1"})
    dr_reader = FakeReader({("payments", 1, 200): _record("payments", 1, 200, b"same")},
                           ends={("payments", 0): (0, 60), ("payments", 1): (0, 300)})
    src_reader = FakeReader({("payments", 1, 500): _record("payments", 1, 500, b"same")})
    ctx = FakeContext({"primary": source, "dr": FakeAdmin(ids={"payments": "D1"})},
                      {"primary": src_reader, "dr": dr_reader})

    (outcome,) = verify.loss(ctx, {})
    assert outcome.status == "failed" and outcome.cluster == "primary"
    assert "180 records deleted on primary before they were mirrored" in outcome.message
    assert "payments-0: 180 records (offsets 120-299)" in outcome.message
    assert "raise the topics' retention.ms" in outcome.message and "payments-1" not in outcome.message
    (found,) = ctx.facts[LOSS]
    assert (found.kind, found.partition, found.records, found.position, found.log_start) == ("deleted", 0, 180, 120, 300)
    text = LOSS_SECTION.text_lines(ctx.facts[LOSS])
    assert text[1].startswith("SILENT LOSS 180 records deleted") and "payments-0: 180 records" in text[2]
    assert LOSS_SECTION.to_json(ctx.facts[LOSS])["loss"][0]["logStart"] == 300


def test_verify_is_ok_when_every_position_is_past_the_log_start(monkeypatch):
    written = _flow_on(monkeypatch, PARTS[:1], {("payments", 0): [(500, 200)]}, RECORDED)
    ctx = FakeContext({"primary": FakeAdmin(starts={("payments", 0): 300}, ends={("payments", 0): 900},
                                            ids={"payments": "S1"}),
                       "dr": FakeAdmin(ids={"payments": "D1"})},
                      {"primary": FakeReader(), "dr": FakeReader()})
    (outcome,) = verify.loss(ctx, {})
    assert outcome.status == "ok" and "no record lost" in outcome.message
    assert written == [], "nothing new to record"


def test_a_recreated_source_topic_is_reported_with_what_to_do_and_stays_recorded(monkeypatch):
    written = _flow_on(monkeypatch, PARTS, {("payments", 0): [(100, 40)]}, RECORDED)
    ctx = FakeContext({"primary": FakeAdmin(ends={("payments", 0): 5}, ids={"payments": "S2"}),
                       "dr": FakeAdmin(ids={"payments": "D1"})},
                      {"primary": FakeReader(), "dr": FakeReader()})
    (outcome,) = verify.loss(ctx, {})
    assert outcome.status == "failed"
    assert "payments deleted and recreated on primary" in outcome.message
    assert "topic ID S1 when recorded at 2027-01-15 08:00:00 UTC, S2 now" in outcome.message
    assert "delete payments on dr, re-mirror from the new topic's start" in outcome.message
    assert [x.partition for x in ctx.facts[LOSS]] == [None], "one finding per topic, no deletion claimed on it"
    assert written == []


def test_a_topic_seen_first_is_judged_by_its_offset_syncs_and_its_ids_recorded(monkeypatch):
    # p0: synced offset 100 but the partition ends at 5; p1: the synced source record is another one.
    syncs = {("payments", 0): [(100, 40)], ("payments", 1): [(3, 3)]}
    written = _flow_on(monkeypatch, PARTS[:2], syncs, {})
    ctx = FakeContext({"primary": FakeAdmin(ends={("payments", 0): 5, ("payments", 1): 9}, ids={"payments": "S2"}),
                       "dr": FakeAdmin(ids={"payments": "D1"})},
                      {"primary": FakeReader({("payments", 1, 3): _record("payments", 1, 3, b"new")}),
                       "dr": FakeReader({("payments", 1, 3): _record("payments", 1, 3, b"old")})})
    (outcome,) = verify.loss(ctx, {})
    assert outcome.status == "failed"
    assert [(x.kind, x.partition) for x in ctx.facts[LOSS]] == [("recreated", 0), ("recreated", 1)]
    assert "the mirror copied its offset 100, the partition now ends at 5" in outcome.message
    assert written == [{"payments": {"source": "S2", "dr": "D1", "since": int(NOW_S * 1000)}}]

    check = FakeContext(ctx.admins, ctx.readers, check=True)
    written.clear()
    verify.loss(check, {})
    assert written == [], "check mode records nothing"


def test_a_cluster_error_is_the_checks_failure_not_a_traceback(monkeypatch):
    from mm2spec.errors import ClusterUnreachable

    def unreachable(ctx, flow):
        raise ClusterUnreachable('cluster "primary" (localhost:9092) is unreachable')

    monkeypatch.setattr(loss, "partitions", unreachable)
    run = next(m for m in verify.MODULES if m.name == "verify.loss").run
    (outcome,) = run(FakeContext({}, {}), {})
    assert outcome.status == "failed" and "unreachable" in outcome.message


def test_topic_ids_that_cannot_be_recorded_leave_the_check_running_and_say_why(monkeypatch):
    from mm2spec.errors import KafkaOperationFailed

    _flow_on(monkeypatch, PARTS[:1], {}, {})

    def refused(cluster, spec, flow, topics, secrets):
        raise KafkaOperationFailed('cluster "dr": TOPIC_AUTHORIZATION_FAILED')

    monkeypatch.setattr(loss, "write_topic_ids", refused)
    ctx = FakeContext({"primary": FakeAdmin(ids={"payments": "S1"}), "dr": FakeAdmin(ids={"payments": "D1"})},
                      {"primary": FakeReader(), "dr": FakeReader()})
    (outcome,) = verify.loss(ctx, {})
    assert outcome.status == "ok"
    assert "could not be recorded in mm2spec.dr-state.internal on dr" in outcome.message
    assert "grant the checking user WRITE" in outcome.message


def test_the_failover_and_failback_reports_carry_the_loss_and_go_on_without_it(monkeypatch):
    from mm2spec.errors import ClusterUnreachable
    from mm2spec.ops.modules.catalogue import CATALOGUE

    assert LOSS_SECTION in CATALOGUE["verify.failover"].sections
    assert LOSS_SECTION in CATALOGUE["failback.preflight"].sections
    ctx = FakeContext({}, {})
    flow = ctx.flows[0]

    def unreachable(ctx, flow):
        raise ClusterUnreachable('cluster "dr" (localhost:9093) is unreachable')

    monkeypatch.setattr(loss, "find_losses", unreachable)
    assert loss.losses_noted(ctx, flow) == ([], '; silent loss not checked (cluster "dr" (localhost:9093) is unreachable)')
    found = [loss.Loss(flow.name, loss.DELETED, "payments", "payments", 0, 5, 10, 15)]
    monkeypatch.setattr(loss, "find_losses", lambda ctx, flow: found)
    assert loss.losses_noted(ctx, flow)[0] == found and "see the report's loss section" in loss.losses_noted(ctx, flow)[1]

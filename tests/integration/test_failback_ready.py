"""After a failback, DR is ready for the next failover, for every group, also one that never
consumes again (issue 40), with each engine.

One cycle per engine: a planned failover; clients write on DR and a group (``*-reader``) consumes
part of it there (5 / 6 / 7 records of its partitions), another (``*-idle``) consumes nothing;
``failback``; then, with no consumer running anywhere: ``verify`` passes; DR's latest checkpoint
of every group and partition is at the group's committed offset on the source, exact for the
group that moved (the records before and at it agree on both clusters), and MM2's own
``RemoteClusterUtils.translateOffsets`` reads the same; every offset sync of the forward flow
names one record on both clusters; no checkpoint written after the failback (the failback's own,
then the restarted emitter's: the Spark job or MM2's MirrorCheckpointConnector) says otherwise;
and a second planned failover lands every group exactly, where RemoteClusterUtils says. DR's
offsets run ahead of the source's (older records of its own), so a sync or checkpoint read the
wrong way round shows. Judged by reading both clusters' records, not by the playbook's report.

The idle group sits before the first switch: its checkpoint is MM2's translation through the
mirror's offset syncs from before the switch (a sync written below a later one would make MM2
forget the older ones), so RemoteClusterUtils may re-read up to ``offsetLagMax`` records there,
as it did before the first failover.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.live.connect import ConnectClient
from mm2spec.live.dr_state import clear_state
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.mm2.policy import IDENTITY_POLICY
from mm2spec.mm2.records import Checkpoint, OffsetSync
from mm2spec.mm2.retry import retry_call
from mm2spec.render import connectors, render_files, spark_job_config, write_files
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import DesiredState

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for
from test_failover import _report, _run, _wait
from test_failover_connect import RUNNING_TIMEOUT, WORKER, _connector_states
from test_spark_mm2_formats import mm2_check  # noqa: F401 - the session fixture: MM2's classes, compiled once

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

PARTITIONS = 3
SEED = 120
ON_DR = 60
#: Records on DR's copy before the mirror's first: DR's offsets are the source's plus this.
DR_AHEAD = 7
#: What the reader consumes on DR after the switch, per partition (the issue's 500 / 600 / 700, scaled).
CONSUMED_ON_DR = (5, 6, 7)
LAG_MAX = 10
MIRROR = {"offsetLagMax": LAG_MAX, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False,
          "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5, "heartbeats": False}
START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
#: A fresh cluster's group coordinator may still load: a commit retries until it answers.
COORDINATOR_TIMEOUT_S = 180.0


class Cycle:
    """One engine's spec on the fixture pair: names, clients, and how the CLI reaches its mirror."""

    def __init__(self, pair, state: DesiredState, spec: Path, prefix: str, cli: tuple[str, ...]):
        self.pair, self.state, self.spec, self.cli = pair, state, spec, cli
        self.flow = state.mirrors[0]
        self.topic = f"{prefix}-ledger"
        self.reader, self.idle = f"{prefix}-reader", f"{prefix}-idle"
        self.source, self.target = state.cluster(self.flow.source), state.cluster(self.flow.target)

    def ends(self, cluster) -> list[int]:
        with RecordReader(cluster) as reader:
            return [reader.watermarks(self.topic, p)[1] for p in range(PARTITIONS)]

    def offsets(self, cluster) -> dict[str, dict[int, int]]:
        found = GroupOffsets(cluster).describe([self.reader, self.idle])
        return {g: {p: o for (t, p), o in s.offsets.items() if t == self.topic} for g, s in found.items()}

    def commit(self, cluster, group: str, offsets: dict[int, int]) -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            retry_call(lambda: consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                               asynchronous=False), deadline_s=COORDINATOR_TIMEOUT_S)
        finally:
            consumer.close()

    def produce(self, cluster, count: int, tag: str) -> None:
        """Repeating keys and values: only the timestamp and the seq header tell records apart."""
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        now = int(time.time() * 1000)
        for i in range(count):
            producer.produce(self.topic, key=f"k{i % 7}".encode(), value=f"v{i % 5}".encode(), partition=i % PARTITIONS,
                             headers=[("seq", f"{tag}{i}".encode())], timestamp=now - 60_000 + i)
        assert producer.flush(60) == 0

    def seed(self) -> None:
        """The topic on both clusters, DR's with older records of its own (its offsets run
        ``DR_AHEAD`` ahead of the source's: a sync or checkpoint read the wrong way round shows)."""
        for cluster in (self.source, self.target):
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            for future in admin.create_topics([NewTopic(self.topic, PARTITIONS, -1)]).values():
                future.result(30)
        self.produce(self.target, DR_AHEAD * PARTITIONS, "older")
        self.produce(self.source, SEED, "seed")
        per = SEED // PARTITIONS
        self.commit(self.source, self.reader, {p: per // 2 + p for p in range(PARTITIONS)})
        self.commit(self.source, self.idle, {p: per // 3 + 2 * p + 1 for p in range(PARTITIONS)})

    def behind(self) -> list[str]:
        if self.topic not in AdminClient({"bootstrap.servers": self.target.bootstrap}).list_topics(timeout=30).topics:
            return [f"{self.topic} not on {self.flow.target} yet"]
        behind = []
        with RecordReader(self.source) as src, RecordReader(self.target) as dr:
            for p in range(PARTITIONS):
                last, copy = src.last_record(self.topic, p), dr.last_record(self.topic, p)
                if copy is None or copy.content() != last.content():
                    behind.append(f"{self.topic}-{p}")
        return behind

    def not_checkpointed(self) -> list[str]:
        """The group partitions with no checkpoint at the group's committed offset on the source yet."""
        if not AdminClient({"bootstrap.servers": self.target.bootstrap}).list_topics(timeout=30).topics.get(
                self.flow.checkpoints_topic):
            return [f"no {self.flow.checkpoints_topic} yet"]
        latest = {(c.group, c.partition): c.upstream_offset for c in self.checkpoint_records()}
        return [f"{g}-{p}" for g, offsets in self.offsets(self.source).items() for p, o in offsets.items()
                if latest.get((g, p)) != o]

    def checkpoint_records(self, start: int = 0) -> list[Checkpoint]:
        """The checkpoints on DR of this module's groups and topic, in the order written, from ``start``."""
        with RecordReader(self.target) as reader:
            end = reader.watermarks(self.flow.checkpoints_topic, 0)[1]
            found = [Checkpoint.from_record(r.key, r.value) for r in reader.read(self.flow.checkpoints_topic, 0, start, end)]
        return [c for c in found if c.group in (self.reader, self.idle) and c.topic == self.topic]

    def untrue_syncs(self) -> list[str]:
        """The forward flow's offset syncs of this topic that do not name one record on both
        clusters (the restart point, at the source's end, names none)."""
        wrong = []
        with RecordReader(self.state.cluster(self.flow.offset_syncs_cluster)) as reader:
            end = reader.watermarks(self.flow.offset_syncs_topic, 0)[1]
            syncs = [OffsetSync.from_record(r.key, r.value) for r in reader.read(self.flow.offset_syncs_topic, 0, 0, end)]
        with RecordReader(self.source) as src, RecordReader(self.target) as dr:
            ends = {p: (src.watermarks(self.topic, p)[1], dr.watermarks(self.topic, p)[1]) for p in range(PARTITIONS)}
            for sync in (s for s in syncs if s.topic == self.topic):
                source_end, dr_end = ends[sync.partition]
                if sync.upstream_offset >= source_end:
                    continue
                mine = src.read(self.topic, sync.partition, sync.upstream_offset, sync.upstream_offset + 1)
                copy = dr.read(self.topic, sync.partition, sync.downstream_offset, min(dr_end, sync.downstream_offset + 1))
                if not copy or copy[0].content() != mine[0].content():
                    wrong.append(f"{sync}")
        return wrong

    def checkpoints_end(self) -> int:
        with RecordReader(self.target) as reader:
            return reader.watermarks(self.flow.checkpoints_topic, 0)[1]

    def same_position(self, source_offset: int, dr_offset: int, partition: int) -> bool:
        """Whether a consumer at ``source_offset`` on the source and one at ``dr_offset`` on DR
        consumed the same last record and read the same next one (by content)."""
        with RecordReader(self.source) as src, RecordReader(self.target) as dr:
            def around(reader, offset):
                end = reader.watermarks(self.topic, partition)[1]
                before = reader.read(self.topic, partition, offset - 1, offset) if offset > 0 else []
                after = reader.read(self.topic, partition, offset, offset + 1) if offset < end else []
                return [r.content() for r in before], [r.content() for r in after]
            return around(src, source_offset) == around(dr, dr_offset)


def _translate_by_mm2(check, cycle: Cycle, group: str) -> dict[int, int]:
    """MM2's RemoteClusterUtils.translateOffsets on DR's checkpoints: partition -> offset on DR."""
    found = {}
    for line in check("translate", cycle.target.bootstrap, cycle.flow.source, group, IDENTITY_POLICY):
        _word, topic, partition, offset = line.split()
        if topic == cycle.topic:
            found[int(partition)] = int(offset)
    return found


def fail_over_back_and_over_again(cycle: Cycle, capsys, check, emitter_repeats: bool) -> None:
    """The issue's scenario, judged as the module docstring says; prints verify's output and the
    second failover's per-group result. ``emitter_repeats``: the restarted emitter writes its own
    first checkpoints again (the Spark job; MM2 skips a checkpoint it holds already), waited for."""
    _wait(cycle.not_checkpointed, CATCH_UP_TIMEOUT, "the mirror's checkpoints of both groups")
    code, out = _run(capsys, "failover", str(cycle.spec), *cycle.cli, "--yes")
    assert code == 0, out
    switch_dr = cycle.ends(cycle.target)
    cycle.produce(cycle.target, ON_DR, "dr")
    cycle.commit(cycle.target, cycle.reader, {p: switch_dr[p] + CONSUMED_ON_DR[p] for p in range(PARTITIONS)})
    on_dr = cycle.offsets(cycle.target)
    mark = cycle.checkpoints_end()

    code, out = _run(capsys, "failback", str(cycle.spec), *cycle.cli, "--yes", "--format", "json")
    assert code == 0, out
    assert _report(out)["totals"]["skipped"] == 0, out
    restart = next(t for t in _report(out)["tasks"] if t["module"] == "failback.restart_mirror")
    back = cycle.offsets(cycle.source)

    # Right after the failback, nobody consuming: DR is healthy, checkpoints included.
    code, verified = _run(capsys, "verify", str(cycle.spec), *cycle.cli)
    assert code == 0, verified
    assert "groups checkpointed" in verified, verified

    latest = {(c.group, c.partition): c for c in cycle.checkpoint_records()}
    with ThreadPoolExecutor(2) as pool:  # a JVM each
        mm2 = dict(zip((cycle.reader, cycle.idle),
                       pool.map(lambda group: _translate_by_mm2(check, cycle, group), (cycle.reader, cycle.idle))))
    assert not cycle.untrue_syncs(), cycle.untrue_syncs()
    for p in range(PARTITIONS):
        moved = latest[(cycle.reader, p)]
        assert moved.upstream_offset == back[cycle.reader][p], (p, moved)
        assert moved.downstream_offset == on_dr[cycle.reader][p], (p, moved, on_dr)
        assert cycle.same_position(moved.upstream_offset, moved.downstream_offset, p), (p, moved)
        still = latest[(cycle.idle, p)]
        assert still.upstream_offset == back[cycle.idle][p], (p, still)
        # MM2's rule from before the switch: never ahead, at most offsetLagMax behind.
        assert 0 <= on_dr[cycle.idle][p] - still.downstream_offset <= LAG_MAX, (p, still, on_dr)
        assert mm2[cycle.reader][p] == moved.downstream_offset and mm2[cycle.idle][p] == still.downstream_offset, mm2

    if emitter_repeats:
        _wait(lambda: [p for p in range(PARTITIONS) if sum(c.group == cycle.reader and c.partition == p
                                                            for c in cycle.checkpoint_records(mark)) < 2],
              CATCH_UP_TIMEOUT, "the restarted emitter's own checkpoints")

    # The second failover, right away: every group exactly where it was on DR, and where MM2 says.
    code, out = _run(capsys, "failover", str(cycle.spec), *cycle.cli, "--yes", "--format", "json")
    assert code == 0, out
    totals = _report(out)["totals"]
    assert totals["skipped"] == 0 and totals["reread"] == 0, totals
    again = cycle.offsets(cycle.target)
    assert again[cycle.reader] == on_dr[cycle.reader] == mm2[cycle.reader], (again, on_dr, mm2)
    assert again[cycle.idle] == on_dr[cycle.idle], (again, on_dr)
    for p in range(PARTITIONS):
        assert cycle.same_position(back[cycle.reader][p], again[cycle.reader][p], p), p
        assert cycle.same_position(back[cycle.idle][p], again[cycle.idle][p], p), p

    # Nothing written after the failback contradicts the failback's checkpoints, the restarted
    # emitter's included.
    written = cycle.checkpoint_records(mark)
    assert written and all(c == latest[(c.group, c.partition)] for c in written), written
    rows = [t for t in _report(out)["translations"] if t["topic"] == cycle.topic]
    with capsys.disabled():
        print(f"\n--- {cycle.flow.name}: the failback's restart ---\n"
              + "\n".join(o["message"] for o in restart["outcomes"]))
        print(f"--- {cycle.flow.name}: verify right after the failback ---\n"
              + verified.split("\n--- stderr ---\n")[0].strip())
        print(f"--- {cycle.flow.name}: the second failover, per group and partition ---")
        for t in sorted(rows, key=lambda t: (t["group"], t["partition"])):
            print(f"{t['group']} {t['topic']}-{t['partition']}: source {t['sourceOffset']} -> DR {t['drOffset']} "
                  f"(skipped {t['skipped']}, re-read {t['reread']}); RemoteClusterUtils: "
                  f"{mm2[t['group']][t['partition']]}")


# ----------------------------------------------------------------------------------- Spark
def test_spark_failback_leaves_dr_ready(kafka_pair, tmp_path, capsys, mm2_check):  # noqa: F811
    spec = spec_for(kafka_pair, ["frs-ledger"], ["frs-.*"], name="it-failback-ready", aliases=("origin", "standby"),
                    mirror=MIRROR)
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second",
                      "checkpointLocation": str(tmp_path / "checkpoint")}
    path = tmp_path / "dr.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    state = load_desired_state(path, None)
    state_dir = tmp_path / "spark"
    cycle = Cycle(kafka_pair, state, path, "frs", ("--state-dir", str(state_dir)))
    cycle.seed()
    try:
        job = mirror.start(spark_job_config(state), state_dir=state_dir, wait_running=START_TIMEOUT)
        _wait(cycle.behind, CATCH_UP_TIMEOUT, "the mirror to copy the seed records", job)
        fail_over_back_and_over_again(cycle, capsys, mm2_check, emitter_repeats=True)
    finally:
        mirror.stop(state_dir)
        clear_state(cycle.target, state.name, cycle.flow.name)


# --------------------------------------------------------------------------------- Connect
def test_connect_failback_leaves_dr_ready(kafka_pair, connect_worker, tmp_path, capsys, mm2_check):  # noqa: F811
    spec = spec_for(kafka_pair, ["frc-ledger"], ["frc-.*"], name="it-failback-ready-connect", engine="connect",
                    aliases=("north", "south"), connect=WORKER, mirror=MIRROR)
    path = tmp_path / "dr.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    state = load_desired_state(path, None)
    write_files(render_files(state), tmp_path / "rendered")
    worker = connect_worker(tmp_path / "rendered" / "connect-distributed.properties",
                            overrides={"listeners": "http://127.0.0.1:0"})
    cycle = Cycle(kafka_pair, state, path, "frc", ("--connect-url", worker.url))
    cycle.seed()
    client = ConnectClient(worker.url)
    names = [c["name"] for c in connectors(state)]
    try:
        for connector in connectors(state):
            client.put_connector_config(connector["name"], connector["config"])
        _wait(lambda: [f"{n}: {s}" for n, s in _connector_states(client, names).items()
                       if not s.startswith("RUNNING tasks=['RUNNING")], RUNNING_TIMEOUT, "the MM2 connectors to run")
        _wait(cycle.behind, CATCH_UP_TIMEOUT, "MM2 to copy the seed records")
        fail_over_back_and_over_again(cycle, capsys, mm2_check, emitter_repeats=False)
    finally:
        for name in names:
            client.delete_connector(name)
        clear_state(cycle.target, state.name, cycle.flow.name)

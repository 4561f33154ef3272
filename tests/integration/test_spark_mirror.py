"""The Spark mirroring job on real clusters: data fidelity, new topics, a driver crash, delivery
guarantees, and MM2's RemoteClusterUtils reading the job's checkpoints for a failover.

Each test starts the job as a deployment would (``mm2spec.runtime.deployment.start``), with a rendered-shape
job config, and judges only what a consumer of the dr cluster sees.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from mm2spec.dev.spark import start_standalone_cluster
from mm2spec.runtime import deployment as mirror
from mm2spec.components import components
from mm2spec.errors import ComponentMissing
from mm2spec.mm2.retry import retry_call

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_spark_mm2_formats import DEFAULT, IDENTITY, mm2_check, missing  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0


@pytest.fixture(scope="module")
def spark_ready():
    try:
        jars = components().spark_kafka_jars
    except ComponentMissing as exc:
        missing(str(exc))
    if not any(j.name == "mm2spec-spark-writer.jar" for j in jars):
        missing("mm2spec-spark-writer.jar is not installed; run scripts/install-spark.sh")
    return jars


def job_config(pair, name: str, topics: str, groups: str, checkpoint: Path, *, exactly_once: bool,
               policy: str = IDENTITY, master: str = "local[2]", max_offsets: int = 5000) -> dict:
    return {
        "apiVersion": "mm2spec/v1", "name": name, "environment": "it",
        "spark": {"master": master, "trigger.interval": "1 second", "max.offsets.per.trigger": max_offsets,
                  "checkpoint.location": str(checkpoint), "executor.instances": 1, "executor.cores": 1,
                  "executor.memory": "512m"},
        "flows": [{
            "name": "primary-to-dr", "source.cluster.alias": "primary", "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": pair.primary.bootstrap,
            "target.cluster.bootstrap.servers": pair.dr.bootstrap,
            "source.cluster.security.protocol": "PLAINTEXT", "target.cluster.security.protocol": "PLAINTEXT",
            "topics": topics, "topics.exclude": "mm2.*\\.internal,.*\\.replica,__.*",
            "groups": groups, "groups.exclude": "console-consumer-.*,connect-.*,__.*",
            "replication.policy.class": policy, "replication.policy.separator": ".",
            "offset-syncs.topic.location": "target", "offset.lag.max": "100",
            "emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
            "refresh.topics.interval.seconds": "1", "refresh.groups.interval.seconds": "1",
            "exactly.once.source.support": "enabled" if exactly_once else "disabled",
            "sync.topic.configs.enabled": "true", "producer.override.compression.type": "lz4",
        }],
    }


def _conf(cluster: str | dict) -> dict:
    """A bootstrap address, or confluent_kafka settings (a secured cluster)."""
    return dict(cluster) if isinstance(cluster, dict) else {"bootstrap.servers": cluster}


def create_topic(bootstrap: str | dict, topic: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient(_conf(bootstrap))
    for future in admin.create_topics([NewTopic(topic, partitions, -1, config=config or {})]).values():
        future.result(30)


def produce(bootstrap: str, topic: str | list[str], count: int, partitions: int, start: int = 0,
            rate: float | None = None) -> None:
    """Keyed records with headers and explicit timestamps, round-robin over partitions (``count``
    into each topic of a list, through one producer)."""
    producer = Producer({**_conf(bootstrap), "linger.ms": 5, "enable.idempotence": True})
    now = int(time.time() * 1000)
    began = time.monotonic()
    topics = [topic] if isinstance(topic, str) else topic
    for name, i in ((t, i) for t in topics for i in range(start, start + count)):
        producer.produce(name, key=f"key-{i % 97}".encode(), value=hashlib.sha256(str(i).encode()).digest() * (1 + i % 3),
                         headers=[("seq", str(i).encode()), ("origin", b"it"), ("empty", None)],
                         partition=i % partitions, timestamp=now - 60_000 + i)
        if rate and (i - start) % 100 == 0:
            producer.poll(0)
            ahead = (i - start) / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> dict[int, list[tuple]]:
    """Every record of every partition: (key, value, headers, timestamp)."""
    consumer = Consumer({**_conf(bootstrap), "group.id": f"it-reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        out = {}
        for partition in sorted(metadata.partitions):
            low, high = watermarks(consumer, topic, partition)
            consumer.assign([TopicPartition(topic, partition, low)])
            records, position, deadline, idle = [], low, time.monotonic() + 120, 0
            while position < high and time.monotonic() < deadline:
                batch = consumer.consume(10000, timeout=1.0)
                idle = 0 if batch else idle + 1
                for msg in batch:
                    if msg.error():
                        continue
                    position = msg.offset() + 1
                    records.append((msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]))
                # transaction markers take offsets but are never delivered, and read_committed stops
                # at open transactions: two idle rounds mean done
                if idle >= 2:
                    break
            out[partition] = records
        return out
    finally:
        consumer.close()


def watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) of a partition, retried while its leader is not known yet: the job creates target
    topics a moment before the test reads them (NOT_LEADER_FOR_PARTITION otherwise, at random)."""
    return retry_call(lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30),
                      unknown_topic_ok=True)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({**_conf(bootstrap), "group.id": "it-offsets"})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if metadata is None or metadata.error:
            return {}
        return {p: watermarks(consumer, topic, p)[1] for p in metadata.partitions}
    finally:
        consumer.close()


def end_offsets_of(bootstrap: str, topics: list[str], partitions: int) -> dict[tuple[str, int], int]:
    """The end offset of every partition of ``topics`` (``partitions`` each) in one ListOffsets
    call; a partition not on the cluster yet (or whose leader is moving) is left out, so a
    comparison with the source's fails until it is there."""
    request = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(partitions)}
    admin = AdminClient(_conf(bootstrap))  # held while the futures are pending: they never end once it is gone
    found = {}
    for tp, future in admin.list_offsets(request, request_timeout=30).items():
        try:
            found[(tp.topic, tp.partition)] = future.result(timeout=60).offset
        except KafkaException:
            pass
    return found


def wait_for(check, timeout: float, what: str, deployment=None, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if deployment is not None and not mirror.status(deployment).running:
            raise AssertionError(f"the job died while waiting for {what}:\n{deployment.log_file.read_text()[-4000:]}")
        time.sleep(interval)
    log = deployment.log_file.read_text()[-4000:] if deployment is not None else ""
    raise AssertionError(f"timed out waiting for {what}\n{log}")


def count_records(bootstrap: str, topic: str, isolation: str) -> int:
    return sum(len(r) for r in read_all(bootstrap, topic, isolation).values())


def digest(records: list[tuple]) -> str:
    h = hashlib.sha256()
    for key, value, headers, ts in records:
        h.update(repr((key, value, headers, ts)).encode())
    return h.hexdigest()


def running_batch(config: dict, flow: str, topic: str) -> tuple[float, int]:
    """Real-time Mode: seconds since the flow's running batch started, and the source offsets of
    ``topic`` it started at (summed), from Spark's logs in the checkpoint (a batch's commit and end
    offsets are written when it ends, so the last ones are where the running batch began);
    (-1, 0) before the first batch ended."""
    folder = Path(config["spark"]["checkpoint.location"]) / flow
    commits = [f for f in (folder / "commits").glob("*") if f.name.isdigit()]
    if not commits:
        return -1.0, 0
    last = max(commits, key=lambda f: int(f.name))
    offsets = folder / "offsets" / last.name
    if not offsets.is_file():
        return -1.0, 0
    started_at = json.loads(offsets.read_text().strip().splitlines()[-1]).get(topic, {})
    return time.time() - last.stat().st_mtime, sum(started_at.values())


def crash_driver(deployment) -> None:
    """kill -9 of the driver: its Python process, its Spark JVM and Python workers (one session)."""
    os.killpg(deployment.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and mirror.status(deployment).running:
        time.sleep(0.2)


def stop_under_load_and_restart(deployment, config: dict, state: Path, primary: str, dr: str, topic: str,
                                partitions: int, *, rate: float):
    """Real-time Mode's graceful stop while a writer adds 6,000 records (from 2,000 on) to ``topic``:
    the running batch ends and commits first, so after the restart DR holds exactly the source's
    records (at-least-once: a replayed batch would show as repeats). Returns the restarted job."""
    writer = threading.Thread(target=produce, args=(primary, topic, 6000, partitions), kwargs={"start": 2000, "rate": rate})
    writer.start()
    wait_for(lambda: sum(end_offsets(dr, topic).values()) >= 3500, 60, "mirroring under load", deployment)
    mirror.stop(deployment)
    assert "did not end within" not in deployment.log_file.read_text()
    deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
    writer.join()
    wait_for(lambda: sum(end_offsets(dr, topic).values()) >= sum(end_offsets(primary, topic).values()), 180,
             "catching up after the stop", deployment)
    source, target = read_all(primary, topic), read_all(dr, topic)
    for p in range(partitions):
        assert digest(target[p]) == digest(source[p]), f"partition {p}: lost, repeated or reordered after a stop"
    return deployment


def dedupe_in_order(records: list[tuple]) -> tuple[list[tuple], int]:
    """First occurrences in order, and how many later repeats there were (at-least-once replays)."""
    seen, first, repeats = set(), [], 0
    for record in records:
        marker = (record[2][0] if record[2] else None, record[1])
        if marker in seen:
            repeats += 1
        else:
            seen.add(marker)
            first.append(record)
    return first, repeats


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """What a source consumer group had consumed (a fresh cluster may still be loading its
    group coordinator: retried)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for attempt in range(30):
            try:
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
                return
            except KafkaException:
                if attempt == 29:
                    raise
                time.sleep(1)
    finally:
        consumer.close()


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        consumer.close()


def group_members(bootstrap: str, group: str) -> int:
    """Members of ``group`` on the cluster now (0: not there, or no member yet)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_consumer_groups([group], request_timeout=30).values()
    try:
        return len(future.result(timeout=60).members)
    except KafkaException:
        return 0  # not found, or its coordinator still loading: asked again


# ------------------------------------------------------------------------------------ tests


def test_at_least_once_mirror_new_topics_crash_and_failover(kafka_pair, spark_ready, mm2_check, tmp_path):  # noqa: F811 - pytest fixture
    """Identity policy, Spark's Kafka sink. One job run covers: fidelity over several partitions,
    a topic created mid-run, a kill -9 under a live producer (no loss, bounded duplicates), MM2
    checkpoints read by RemoteClusterUtils, and group offset sync to inactive groups only."""
    uid = uuid.uuid4().hex[:8]
    orders, later = f"it-{uid}-orders", f"it-{uid}-later"
    done_group, half_group, live_group = f"billing-{uid}-done", f"billing-{uid}-half", f"billing-{uid}-live"
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    create_topic(primary, orders, 4, {"retention.ms": "604800000", "max.message.bytes": "2000000"})
    produce(primary, orders, 4000, 4)
    commit(primary, done_group, {(orders, p): 1000 for p in range(4)})
    commit(primary, half_group, {(orders, p): 250 for p in range(4)})
    commit(primary, live_group, {(orders, p): 1000 for p in range(4)})

    # a consumer on dr is active in live_group (before the job starts): its offsets must not be touched.
    # It also reads a topic of dr's own, so it joins now: the client may not join for a subscription
    # whose topics do not exist yet (orders is created on dr by the job), and a group not joined yet
    # is one MM2 syncs, as the job does.
    local = f"it-{uid}-dr-local"
    create_topic(dr, local, 1)
    live = Consumer({"bootstrap.servers": dr, "group.id": live_group, "enable.auto.commit": False})
    live.subscribe([orders, local])
    stop_live = threading.Event()
    poller = threading.Thread(target=lambda: [live.poll(0.2) for _ in iter(lambda: stop_live.is_set(), True)])
    poller.start()
    wait_for(lambda: group_members(dr, live_group) > 0, 60, f"{live_group} to have a member on dr")

    config = job_config(kafka_pair, f"alo-{uid}", f"it-{uid}-.*", f"billing-{uid}-.*", tmp_path / "checkpoints",
                        exactly_once=False)
    state = tmp_path / "state"
    deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
    try:
        wait_for(lambda: end_offsets(dr, orders) == end_offsets(primary, orders), 240, "the first records", deployment)
        source, target = read_all(primary, orders), read_all(dr, orders)
        for p in range(4):
            assert len(target[p]) == len(source[p]) == 1000
            assert digest(target[p]) == digest(source[p]), f"partition {p}: keys, values, headers, timestamps, order"
        # the target topic was created like MM2 does it: same partitions, the source's topic configs
        dr_admin = AdminClient({"bootstrap.servers": dr})
        described = dr_admin.describe_configs([ConfigResource("topic", orders)])
        configs = next(iter(described.values())).result(30)
        assert configs["max.message.bytes"].value == "2000000"

        # a topic created while the job runs is picked up
        create_topic(primary, later, 3)
        produce(primary, later, 900, 3)
        wait_for(lambda: end_offsets(dr, later) == end_offsets(primary, later), 180, "the new topic", deployment)
        assert all(digest(a) == digest(b) for a, b in zip(read_all(primary, later).values(), read_all(dr, later).values()))

        # checkpoints for the source groups, read with MM2's own client code
        def translated(group):
            lines = mm2_check("translate", dr, "primary", group, IDENTITY)
            return {(ln.split()[1], int(ln.split()[2])): int(ln.split()[3]) for ln in lines}

        wait_for(lambda: len(translated(done_group)) == 4 and len(translated(half_group)) == 4, 120,
                 "checkpoints", deployment)
        assert translated(done_group) == {(orders, p): 1000 for p in range(4)}
        for (topic, p), offset in translated(half_group).items():
            # MM2's rule: at most offset.lag.max behind (re-read), never ahead (skip)
            assert 250 - 101 <= offset <= 250, (topic, p, offset)
        wait_for(lambda: group_offsets(dr, done_group, orders, 4) == {p: 1000 for p in range(4)}, 60,
                 "group offsets synced to dr", deployment)
        assert group_offsets(dr, live_group, orders, 4) == {}, "an active group's offsets were changed"
        stop_live.set()
        poller.join()
        live.close()

        # kill -9 of the driver while a producer keeps writing, then restart from the checkpoint
        writer = threading.Thread(target=produce, args=(primary, orders, 20000, 4), kwargs={"start": 4000, "rate": 2500})
        writer.start()
        wait_for(lambda: sum(end_offsets(dr, orders).values()) >= 4000 + 5000, 120, "mirroring under load", deployment)
        crash_driver(deployment)
        assert not mirror.status(deployment).running
        deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
        writer.join()
        expected = sum(end_offsets(primary, orders).values())
        wait_for(lambda: sum(len(dedupe_in_order(r)[0]) for r in read_all(dr, orders).values()) >= expected, 300,
                 "catching up after the crash", deployment)
        source, target = read_all(primary, orders), read_all(dr, orders)
        repeats = 0
        for p in range(4):
            unique, again = dedupe_in_order(target[p])
            assert digest(unique) == digest(source[p]), f"partition {p}: records lost or reordered after the crash"
            repeats += again
        # at-least-once: a replayed micro-batch is written again; bounded by what one batch holds
        assert repeats <= config["spark"]["max.offsets.per.trigger"] * 2, repeats
        print(f"\nat-least-once crash: {expected} records, {repeats} duplicates after kill -9")

        current = mirror.status(deployment)
        assert current.running and current.state == "running"
        figures = current.flows["primary-to-dr"]
        assert figures["delivery"] == "at-least-once" and figures["offsetSyncsWritten"] > 0
        assert figures["topics"][orders]["records"] > 0
        assert figures["topics"][orders]["replicationLatencyMsAvg"] is not None
    finally:
        mirror.stop(deployment)
        stop_live.set()
        poller.join()
    assert mirror.status(deployment).state == "stopped"


@pytest.mark.parametrize("mode", ["microbatch", "realtime"])
def test_exactly_once_survives_driver_crash(kafka_pair, spark_ready, mm2_check, tmp_path, mode):  # noqa: F811 - pytest fixture
    """DefaultReplicationPolicy (primary.<topic>), transactional writer: after kill -9 and restart,
    a read_committed consumer sees every record exactly once, in order; MM2 translates offsets.
    In Real-time Mode (5 s batches, 2 slices of 3 partitions) the crash replays up to a batch that
    the slices' transactions had partly committed: the replay must skip exactly that part. It
    restarts with one slice (tasksMax 2 -> 1) and a 10-minute transaction.timeout.ms, so an open
    transaction of the second slice ends only when the restart fences it (else DR's read_committed
    end stays behind it for 10 minutes and "catching up" fails)."""
    uid = uuid.uuid4().hex[:8]
    topic, group = f"it-{uid}-pay", f"billing-{uid}"
    remote = f"primary.{topic}"
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    create_topic(primary, topic, 3)
    produce(primary, topic, 3000, 3)
    commit(primary, group, {(topic, p): 1000 for p in range(3)})
    config = job_config(kafka_pair, f"eos-{uid}", f"it-{uid}-.*", f"billing-{uid}", tmp_path / "checkpoints",
                        exactly_once=True, policy=DEFAULT, max_offsets=3000)
    if mode == "realtime":
        del config["spark"]["max.offsets.per.trigger"]
        config["spark"].update({"mode": "realtime", "realtime.batch.duration": "5 seconds"})
        config["flows"][0]["tasks.max"] = "2"
        config["flows"][0]["producer.override.transaction.timeout.ms"] = "600000"
    state = tmp_path / "state"
    stop_writing = threading.Event()

    def keep_writing() -> None:
        """2,000 records/s in chunks until the restart (at most 100,000): the load outlasts the crash,
        however slowly the job starts on a busy machine (Real-time: a batch is crashed mid-way)."""
        start = 3000
        while not stop_writing.is_set() and start < 103_000:
            produce(primary, topic, 1000, 3, start=start, rate=2000)
            start += 1000

    writer = threading.Thread(target=keep_writing)
    deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
    try:
        writer.start()
        wait_for(lambda: count_records(dr, remote, "read_committed") >= 6000 if end_offsets(dr, remote) else False,
                 180, "mirroring under load", deployment)
        if mode == "realtime":
            # Crash 2-4 s into a batch: its slices have committed transactions (every 100 ms) that
            # the replay must skip. Right after a batch boundary the new batch may have written
            # nothing yet, and the replay would prove nothing.
            def mid_batch_with_records() -> bool:
                age, started_at = running_batch(config, "primary-to-dr", topic)
                return 2.0 <= age <= 4.0 and sum(end_offsets(primary, topic).values()) - started_at >= 500

            wait_for(mid_batch_with_records, 60, "a Real-time batch 2-4 s old with records to write", deployment,
                     interval=0.1)
        crash_driver(deployment)
        if mode == "realtime":
            config["flows"][0]["tasks.max"] = "1"
        deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
        if mode == "realtime":
            # The restart fences before its query starts (its status may read running before that).
            # Which slices had a transaction open depends on the instant of the crash (rt-1's, left to
            # its 10-minute timeout, would hold "catching up" back); on a loaded machine the batch's
            # tasks may not have begun one yet, and then there is none to fence.
            wait_for(lambda: re.search(r"fenced \d+ transaction\(s\) an earlier run left open: .*rt-\d|fenced no "
                                       r"transaction", deployment.log_file.read_text()), 120,
                     "the restart to fence the crashed run's open transactions", deployment)
        stop_writing.set()
        writer.join()
        expected = sum(end_offsets(primary, topic).values())
        wait_for(lambda: count_records(dr, remote, "read_committed") >= expected, 300, "catching up", deployment)
        time.sleep(3)  # anything written twice would show up now
        source, target = read_all(primary, topic), read_all(dr, remote, "read_committed")
        for p in range(3):
            assert len(target[p]) == len(source[p]), f"partition {p}: {len(target[p])} != {len(source[p])}"
            assert digest(target[p]) == digest(source[p]), f"partition {p}: not exactly the source records"

        lines = mm2_check("translate", dr, "primary", group, DEFAULT)
        translated = {(ln.split()[1], int(ln.split()[2])): int(ln.split()[3]) for ln in lines}
        assert set(translated) == {(remote, p) for p in range(3)}
        # transaction markers take offsets downstream, so compare by position: the record a failed-over
        # consumer reads first is the one the source group would have read next (or an earlier one)
        for (_, p), offset in translated.items():
            consumer = Consumer({"bootstrap.servers": dr, "group.id": f"it-check-{uid}", "isolation.level": "read_committed"})
            consumer.assign([TopicPartition(remote, p, offset)])
            first = None
            while first is None:
                msg = consumer.poll(10)
                assert msg is not None, f"nothing to read at translated offset {offset} of {remote}-{p}"
                if not msg.error():
                    first = (msg.key(), msg.value(), msg.headers(), msg.timestamp()[1])
            consumer.close()
            index = source[p].index(first)
            assert 1000 - 101 <= index <= 1000, (p, offset, index)
        figures = mirror.status(deployment).flows["primary-to-dr"]
        assert figures["delivery"] == "exactly-once"
        if mode == "realtime":
            # the replayed batch reports its skipped records when it ends (a 5 s batch): wait for it
            wait_for(lambda: mirror.status(deployment).flows["primary-to-dr"]["skippedReplayedRecords"] > 0, 60,
                     "the replayed batch to report the records it skipped (none: the crash replayed nothing, "
                     "the test proves nothing)", deployment)
    finally:
        stop_writing.set()
        mirror.stop(deployment)


def test_runs_on_a_two_worker_standalone_cluster(kafka_pair, spark_ready, tmp_path):
    """spark:// master and two workers from the pip distribution, driver in client mode, one
    executor core on each worker. Micro-batch mode mirrors a backlog exactly. Then Real-time Mode
    (tasksMax 2: a slice on each worker, 120 s batches): the driver's "end the batch" reaches the
    executors (BatchSignals, files in the checkpoint location), so a topic created mid-batch is
    read within seconds, not at the batch's deadline, and a graceful stop under load ends the batch
    first: the restart writes nothing twice (at-least-once, so a replay would show as repeats)."""
    uid = uuid.uuid4().hex[:8]
    topic, orders, later = f"it-{uid}-standalone", f"rtc-{uid}-orders", f"rtc-{uid}-later"
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    create_topic(primary, topic, 2)
    produce(primary, topic, 2000, 2)
    cluster = start_standalone_cluster(tmp_path / "standalone", workers=2, cores=1, memory="1g")
    try:
        config = job_config(kafka_pair, f"sa-{uid}", f"it-{uid}-.*", "none", tmp_path / "checkpoints",
                            exactly_once=False, master=cluster.master_url)
        config["spark"].update({"executor.instances": 2, "executor.cores": 1})
        deployment = mirror.start(config, state_dir=tmp_path / "state", wait_running=START_TIMEOUT)
        try:
            wait_for(lambda: end_offsets(dr, topic) == end_offsets(primary, topic), 240, "mirroring", deployment)
            source, target = read_all(primary, topic), read_all(dr, topic)
            assert all(digest(source[p]) == digest(target[p]) for p in range(2))
            assert any(run.tasks for run in cluster.executors())  # the tasks ran on the workers' executors
        finally:
            mirror.stop(deployment)

        create_topic(primary, orders, 4)
        produce(primary, orders, 2000, 4)
        config = job_config(kafka_pair, f"rtc-{uid}", f"rtc-{uid}-.*", "none", tmp_path / "rt-checkpoints",
                            exactly_once=False, master=cluster.master_url)
        del config["spark"]["max.offsets.per.trigger"]
        config["spark"].update({"mode": "realtime", "realtime.batch.duration": "120 seconds",
                                "executor.instances": 2, "executor.cores": 1})
        config["flows"][0]["tasks.max"] = "2"
        state = tmp_path / "rt-state"
        deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
        try:
            wait_for(lambda: end_offsets(dr, orders) == end_offsets(primary, orders), 240, "the first records", deployment)
            create_topic(primary, later, 2)
            produce(primary, later, 200, 2)
            created = time.monotonic()
            # Within the first 120 s batch: without the cut reaching the executors, the new topic
            # would wait for the batch's deadline.
            wait_for(lambda: end_offsets(dr, later) == end_offsets(primary, later), 60, "the new topic within the batch",
                     deployment)
            assert time.monotonic() - created < 60
            # Each slice holds its executor's one core for the whole batch: one on each worker.
            apps = {run.app for run in cluster.executors()}
            assert len(apps) == 2 and {run.worker for run in cluster.executors() if run.app == max(apps)} == {1, 2}

            deployment = stop_under_load_and_restart(deployment, config, state, primary, dr, orders, 4, rate=1500)
        finally:
            mirror.stop(deployment)
    finally:
        cluster.stop()


def test_sasl_scram_with_the_password_from_the_environment(secure_kafka_pair, spark_ready, tmp_path):
    """SASL/SCRAM clusters: the job resolves ${env:NAME} itself and never writes the password out."""
    from mm2spec.dev.config import ADMIN_USER, password_of

    uid = uuid.uuid4().hex[:8]
    topic = f"it-{uid}-secure"
    primary, dr = secure_kafka_pair.client_config("primary"), secure_kafka_pair.client_config("dr")
    create_topic(primary, topic, 2)
    produce(primary, topic, 1000, 2)
    config = job_config(secure_kafka_pair, f"sasl-{uid}", f"it-{uid}-.*", "none", tmp_path / "checkpoints",
                        exactly_once=False)
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" '
            'password="${env:IT_SPARK_SASL_PASSWORD}";' % ADMIN_USER)
    for side in ("source", "target"):
        config["flows"][0].update({f"{side}.cluster.security.protocol": "SASL_PLAINTEXT",
                                   f"{side}.cluster.sasl.mechanism": "SCRAM-SHA-512",
                                   f"{side}.cluster.sasl.jaas.config": jaas})
    password = password_of(ADMIN_USER)
    deployment = mirror.start(config, state_dir=tmp_path / "state", env={"IT_SPARK_SASL_PASSWORD": password},
                              wait_running=START_TIMEOUT)
    try:
        wait_for(lambda: end_offsets(dr, topic) == end_offsets(primary, topic), 180, "mirroring", deployment)
        source, target = read_all(primary, topic), read_all(dr, topic)
        assert all(digest(source[p]) == digest(target[p]) for p in range(2))
    finally:
        mirror.stop(deployment)
    for name in ("driver.log", "job.json", "status.json"):
        assert password not in (tmp_path / "state" / name).read_text(), f"the password leaked into {name}"


def test_only_whole_topic_names_are_mirrored(kafka_pair, spark_ready, tmp_path):
    """MM2 mirrors a topic when a pattern matches its whole name. Topics whose names only contain
    a selected name (before or after it) stay on the source: Spark's own subscription would take
    any name the pattern is found in."""
    uid = uuid.uuid4().hex[:8]
    orders = f"it-{uid}-orders"
    decoys = [f"pre-{orders}", f"{orders}-tail"]
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    for topic in [*decoys, orders]:
        create_topic(primary, topic, 1)
        produce(primary, topic, 50, 1)
    config = job_config(kafka_pair, f"names-{uid}", orders, "none", tmp_path / "checkpoints", exactly_once=False)
    deployment = mirror.start(config, state_dir=tmp_path / "state", wait_running=START_TIMEOUT)
    try:
        wait_for(lambda: end_offsets(dr, orders) == end_offsets(primary, orders), 240, "the selected topic", deployment)
        # Every record of all three topics was on the source before the job started, and one batch
        # holds them all (150 records, under max.offsets.per.trigger): a decoy the job had
        # subscribed would have been created and written on DR with the selected topic.
        listed = AdminClient({"bootstrap.servers": dr}).list_topics(timeout=30).topics
        assert [t for t in decoys if t in listed] == []
        assert mirror.status(deployment).running
    finally:
        mirror.stop(deployment)


def test_hundreds_of_partitions_run_in_tasks_max_tasks_with_every_record_kept(kafka_pair, spark_ready, tmp_path):
    """The mirror source at width: 300 partitions (60 topics x 5) with tasks.max 3. Spark's own
    listener saw no stage run more than 3 tasks (Spark's Kafka source would run one per partition),
    and every record is on DR in its partition, in order, with its key, value, headers and
    timestamp."""
    uid = uuid.uuid4().hex[:8]
    topics = [f"wide-{uid}-{n:02d}" for n in range(60)]
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    admin = AdminClient({"bootstrap.servers": primary})
    for future in admin.create_topics([NewTopic(t, 5, -1) for t in topics]).values():
        future.result(60)
    produce(primary, topics, 15, 5)  # 3 records in each of the 300 partitions
    config = job_config(kafka_pair, f"wide-{uid}", f"wide-{uid}-.*", "none", tmp_path / "checkpoints",
                        exactly_once=False)
    config["flows"][0]["tasks.max"] = "3"
    deployment = mirror.start(config, state_dir=tmp_path / "state", wait_running=START_TIMEOUT)
    try:
        on_dr = lambda: end_offsets_of(dr, topics, 5) == end_offsets_of(primary, topics, 5)  # noqa: E731
        wait_for(on_dr, 300, "all 300 partitions on DR", deployment)
        # Later batches (new records) go through the same consumers: 3 more records per partition.
        produce(primary, topics, 15, 5, start=15)
        wait_for(on_dr, 300, "the second round on DR", deployment)
        status = json.loads(deployment.status_file.read_text())
        assert 1 <= status["mostTasksPerStage"] <= 3, status["mostTasksPerStage"]
        on_dr, on_primary = read_partitions(dr, topics, 1800), read_partitions(primary, topics, 1800)
        assert len(on_primary) == 300 and sum(len(r) for r in on_primary.values()) == 1800
        assert on_dr == on_primary
    finally:
        mirror.stop(deployment)


def read_partitions(bootstrap: str, topics: list[str], expected: int) -> dict[tuple[str, int], list[tuple]]:
    """Every record of every partition of ``topics`` with one consumer: (topic, partition) ->
    [(offset, key, value, headers, timestamp)] in order; ``expected`` records in all."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"it-reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        metadata = consumer.list_topics(timeout=30).topics
        consumer.assign([TopicPartition(t, p, 0) for t in topics for p in metadata[t].partitions])
        out: dict[tuple[str, int], list[tuple]] = {(t, p): [] for t in topics for p in metadata[t].partitions}
        deadline, count = time.monotonic() + 120, 0
        while count < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10000, timeout=1.0):
                if not msg.error():
                    out[(msg.topic(), msg.partition())].append(
                        (msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]))
                    count += 1
        return out
    finally:
        consumer.close()


def test_realtime_mode_writes_as_records_come_and_stops_without_replay(kafka_pair, spark_ready, mm2_check, tmp_path):  # noqa: F811 - pytest fixture
    """``spark.mode: realtime`` (Spark's Real-time Mode, the mirror source and the per-record
    writer), tasks.max 2 on local[2]: every record arrives in its partition, in order, with key,
    headers and timestamp; a topic created mid-run is picked up within a batch; MM2's client
    translates the group through the job's offset syncs and checkpoints; a graceful stop ends the
    running batch so the restart writes nothing twice; kill -9 loses nothing."""
    uid = uuid.uuid4().hex[:8]
    orders, later, group = f"rt-{uid}-orders", f"rt-{uid}-later", f"rt-{uid}-billing"
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    create_topic(primary, orders, 4)
    produce(primary, orders, 2000, 4)
    commit(primary, group, {(orders, p): 500 for p in range(4)})
    config = job_config(kafka_pair, f"rt-{uid}", f"rt-{uid}-.*", f"rt-{uid}-.*", tmp_path / "checkpoints",
                        exactly_once=False)
    del config["spark"]["max.offsets.per.trigger"]
    config["spark"].update({"mode": "realtime", "realtime.batch.duration": "5 seconds"})
    config["flows"][0]["tasks.max"] = "2"
    state = tmp_path / "state"
    deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
    try:
        wait_for(lambda: end_offsets(dr, orders) == end_offsets(primary, orders), 240, "the first records", deployment)
        assert all(digest(a) == digest(b) for a, b in zip(read_all(primary, orders).values(), read_all(dr, orders).values()))

        create_topic(primary, later, 3)
        produce(primary, later, 300, 3)
        wait_for(lambda: end_offsets(dr, later) == end_offsets(primary, later), 120, "the new topic", deployment)

        def translated():
            lines = mm2_check("translate", dr, "primary", group, IDENTITY)
            return {(ln.split()[1], int(ln.split()[2])): int(ln.split()[3]) for ln in lines}

        wait_for(lambda: len(translated()) == 4, 120, "checkpoints of the Real-time writes", deployment)
        for (_topic, p), offset in translated().items():
            assert 500 - 101 <= offset <= 500, (p, offset)  # MM2's rule: never ahead, at most offset.lag.max behind

        # A graceful stop under load: the running batch ends and commits, so nothing is written twice.
        deployment = stop_under_load_and_restart(deployment, config, state, primary, dr, orders, 4, rate=2000)

        # kill -9 under load: replayed from the last committed batch, nothing lost.
        writer = threading.Thread(target=produce, args=(primary, orders, 4000, 4), kwargs={"start": 8000, "rate": 2000})
        writer.start()
        wait_for(lambda: sum(end_offsets(dr, orders).values()) >= 9000, 60, "mirroring under load", deployment)
        crash_driver(deployment)
        deployment = mirror.start(config, state_dir=state, wait_running=START_TIMEOUT)
        writer.join()
        expected = sum(end_offsets(primary, orders).values())
        wait_for(lambda: sum(len(dedupe_in_order(r)[0]) for r in read_all(dr, orders).values()) >= expected, 180,
                 "catching up after the crash", deployment)
        source, target = read_all(primary, orders), read_all(dr, orders)
        for p in range(4):
            assert digest(dedupe_in_order(target[p])[0]) == digest(source[p]), f"partition {p}: lost after kill -9"
        figures = mirror.status(deployment).flows["primary-to-dr"]
        assert figures["offsetSyncsWritten"] > 0
    finally:
        mirror.stop(deployment)

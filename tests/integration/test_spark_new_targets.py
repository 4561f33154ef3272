"""The Spark job creating hundreds of target topics at once while it mirrors a live load (issue 41).

Measured before: with 200 new topics x 5 partitions the job's producer sent to partitions whose leader
did not take produce requests yet; one partition's first batch was refused for good (a later batch had
been appended first: KAFKA-15591) and sat until delivery.timeout.ms, the batch failed after two minutes,
and the restarted query wrote the whole batch again. Here no batch may fail, the query may not restart,
and DR must hold every record exactly once: at-least-once with no replay leaves DR's count equal to
the source's on every partition.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.runtime import deployment as mirror

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_spark_mirror import START_TIMEOUT, create_topic, end_offsets_of, job_config, produce, wait_for
from test_spark_mirror import spark_ready  # noqa: F401 - the fixture
from test_spark_mm2_formats import DEFAULT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TOPICS, PARTITIONS, RECORDS_PER_TOPIC = 200, 5, 500
"""The issue's width (1,000 new partitions), 100 records a partition."""
LIVE_PARTITIONS, LIVE_RATE, LIVE_RECORDS = 4, 500, 25_000
"""The load the flow carries meanwhile: 500 records/s for 50 s."""


def _create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), 100):
        futures = admin.create_topics([NewTopic(n, partitions, -1) for n in names[i:i + 100]], operation_timeout=60)
        for future in futures.values():
            future.result(120)


def _delete_topics(bootstrap: str, names: list[str]) -> None:
    """The session's clusters are shared: 1,000 partitions each are not left behind."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = [n for n in names if n in existing]
    for i in range(0, len(doomed), 500):
        for future in admin.delete_topics(doomed[i:i + 500], operation_timeout=60).values():
            try:
                future.result(120)
            except Exception:  # noqa: BLE001 - best effort: the cluster is torn down at the session's end anyway
                pass


def test_hundreds_of_new_target_topics_under_load_fail_no_batch_and_copy_each_record_once(
        kafka_pair, spark_ready, tmp_path):  # noqa: F811 - pytest fixture
    uid = uuid.uuid4().hex[:8]
    primary, dr = kafka_pair.primary.bootstrap, kafka_pair.dr.bootstrap
    live = f"it-{uid}-live"
    wide = [f"it-{uid}-wide-{i:03d}" for i in range(TOPICS)]
    remote = {t: f"primary.{t}" for t in [live, *wide]}  # DefaultReplicationPolicy, as in the runs
    create_topic(primary, live, LIVE_PARTITIONS)
    config = job_config(kafka_pair, f"new-targets-{uid}", f"it-{uid}-.*", "none", tmp_path / "checkpoints",
                        exactly_once=False, policy=DEFAULT, max_offsets=1_000_000)
    writer = threading.Thread(target=produce, args=(primary, live, LIVE_RECORDS, LIVE_PARTITIONS), kwargs={"rate": LIVE_RATE})
    deployment = mirror.start(config, state_dir=tmp_path / "state", wait_running=START_TIMEOUT)
    try:
        writer.start()
        wait_for(lambda: sum(end_offsets_of(dr, [remote[live]], LIVE_PARTITIONS).values()) > 0, 180,
                 "the live load on DR", deployment)
        began = time.monotonic()
        _create_topics(primary, wide, PARTITIONS)
        for i in range(0, TOPICS, 50):  # within librdkafka's queue (100,000 records) per flush
            produce(primary, wide[i:i + 50], RECORDS_PER_TOPIC, PARTITIONS)
        writer.join()

        source = {**end_offsets_of(primary, [live], LIVE_PARTITIONS), **end_offsets_of(primary, wide, PARTITIONS)}
        assert len(source) == LIVE_PARTITIONS + TOPICS * PARTITIONS
        assert sum(source.values()) == LIVE_RECORDS + TOPICS * RECORDS_PER_TOPIC

        def on_dr() -> dict[tuple[str, int], int]:
            found = {**end_offsets_of(dr, [remote[live]], LIVE_PARTITIONS),
                     **end_offsets_of(dr, [remote[t] for t in wide], PARTITIONS)}
            return {(t.removeprefix("primary."), p): n for (t, p), n in found.items()}

        # Reached once every partition has at least the source's records (a stalled batch took 120 s
        # and its replay doubled them: counts above the source's would show that below).
        wait_for(lambda: (lambda got: all(got.get(tp, 0) >= n for tp, n in source.items()))(on_dr()), 240,
                 "every record on DR", deployment, interval=2.0)
        caught_up = time.monotonic() - began
        time.sleep(3)  # a batch written twice would land now
        target = on_dr()
        wrong = {tp: (n, target.get(tp)) for tp, n in source.items() if target.get(tp) != n}
        assert not wrong, f"{len(wrong)} partition(s) with DR's count != the source's (source, DR): {sorted(wrong.items())[:5]}"

        figures = mirror.status(deployment).flows["primary-to-dr"]
        log = deployment.log_file.read_text()
        assert figures["errors"] == 0, f"a batch failed: {figures['lastError']}"
        assert figures["restarts"] == 0 and "query failed" not in log, "the query restarted from its checkpoint"
        # The writer's producer logs each refused produce request (Kafka's Sender, WARN). Without the
        # driver's wait for leaders it met hundreds of these on every run, and now and then one of
        # them became the two-minute stall; the single dev broker moves no leader otherwise.
        refused = re.findall(r"Got error produce response .* on topic-partition (\S+), .*NOT_LEADER_OR_FOLLOWER", log)
        assert not refused, f"the writer sent to {len(set(refused))} partition(s) before their leader answered: {refused[:3]}"
        waits = re.findall(r"the leaders of (\d+) target partition\(s\) answer after ([\d.]+) s", log)
        renewals = re.findall(r"replaced (\d+) producer\(s\) stalled", log)
        print(f"\n{TOPICS * PARTITIONS} new target partitions under {LIVE_RATE} records/s: every record on DR "
              f"{caught_up:.0f} s after the topics were created; leader waits {waits}; producer renewals {renewals}")
    finally:
        mirror.stop(deployment)
        if writer.is_alive():
            writer.join()
        _delete_topics(primary, [live, *wide])
        _delete_topics(dr, list(remote.values()))

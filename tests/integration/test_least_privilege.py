"""Least privilege, proven as a matrix, on the secured pair (SASL/SCRAM, StandardAuthorizer).

With only the ACLs ``compile`` derives for ``User:mm2`` in place, every ACL operation x resource
type they do not grant is refused to mm2 by a real client call (``tests.kit.acl_matrix``), and
the Spark engine still mirrors records and syncs a group's offsets as mm2, in one job with an
at-least-once flow and an exactly-once flow (whose writer needs its own group and transactional
ids). (The Connect engine with the same derivation is proven in test_mm2_rendered.py, exactly-once
included.)
``benchmarks/least_privilege.py`` prints the matrix.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mm2spec.dev import MM2_PASSWORD
from tests.kit.acl_matrix import mirror_matrix, render
from tests.kit.ledger import SequencedProducer
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.mm2 import spark_eos
from mm2spec.runtime import deployment as mirror
from mm2spec.runtime.job import render_job
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import MM2_SECRET, SECRETS, spec_for
from test_spark_mirror import spark_ready  # noqa: F401 - the fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

#: Aliases of this module's spec: the Spark job names internal topics after the source alias, and
#: other modules use "primary" on the same session clusters.
SOURCE, TARGET = ALIASES = ("lp", "dr")
#: Intervals short enough that checkpoints and group syncs happen within the test.
FAST = {"refreshTopicsIntervalSeconds": 1, "refreshGroupsIntervalSeconds": 1, "emitCheckpointsIntervalSeconds": 1,
        "syncGroupOffsetsIntervalSeconds": 1}
#: The job's JVM start and first batches on a loaded two-core machine.
JOB_DEADLINE_S = 300.0
RECORDS = 200
#: Commits while the group coordinator loads are retried, a second apart.
COMMIT_ATTEMPTS = 30
#: librdkafka does not flag these retriable, but a new group's coordinator answers them while it loads.
COORDINATOR_MOVES = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                     KafkaError.COORDINATOR_NOT_AVAILABLE)


def committed(conf: dict, group: str, topic: str) -> int:
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        return sum(tp.offset for tp in consumer.committed([TopicPartition(topic, 0)], timeout=30) if tp.offset >= 0)
    finally:
        consumer.close()


def commit(conf: dict, group: str, topic: str, offset: int) -> None:
    """A source group's progress; a fresh cluster may still be loading its group coordinator, a
    retriable error: retried."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                return
            except KafkaException as failure:
                error = failure.args[0]
                if not (error.retriable() or error.code() in COORDINATOR_MOVES) or attempt == COMMIT_ATTEMPTS - 1:
                    raise
                time.sleep(1.0)
    finally:
        consumer.close()


def end_offset(conf: dict, topic: str) -> int:
    consumer = Consumer({**conf, "group.id": "lp-watch"})
    try:
        if topic not in consumer.list_topics(timeout=30).topics:
            return 0
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


def wait_for(check, what: str, deployment) -> None:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while not check():
        assert mirror.status(deployment).running, f"the job died waiting for {what}: {deployment.log_file}"
        assert time.monotonic() < deadline, f"{what}: not within {JOB_DEADLINE_S:.0f}s; see {deployment.log_file}"
        time.sleep(1.0)


def test_only_the_derived_acls_mirror_and_everything_else_is_refused(secure_kafka_pair, spark_ready, tmp_path,  # noqa: F811 - pytest fixture
                                                                       request):
    pair = secure_kafka_pair
    uid = uuid.uuid4().hex[:8]
    topic, outside, group, other_group = f"lp-{uid}-orders", f"lp-{uid}-hr", f"lp-{uid}-billing", f"lp-{uid}-payroll"
    eos_topic = f"lp-{uid}-ledger"
    data = spec_for(pair, [topic], [group], secure=True, engine="spark", manage_acls=True, name=f"lp-{uid}",
                    aliases=ALIASES, mirror={"name": "lp", **FAST})
    data["mirrors"].append({**data["mirrors"][0], "name": "lp-eos", "topics": [eos_topic], "groups": [],
                            "exactlyOnce": True})
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    state = load_desired_state(spec, None)
    admins = {alias: KafkaAdmin(state.cluster(alias), secrets=SECRETS.get) for alias in ALIASES}
    for alias, admin in admins.items():
        admin.create_topic(outside, 1, -1, {})
        derived = [b for b in state.acl_bindings if b.cluster == alias]
        admin.create_acls(derived)
        # Other modules plan against User:mm2 on these clusters: they must not meet this test's ACLs.
        request.addfinalizer(lambda admin=admin, derived=derived: admin.delete_acls(derived))
    source_admin, target_admin = pair.client_config("primary"), pair.client_config("dr")
    for mirrored in (topic, eos_topic):
        admins[SOURCE].create_topic(mirrored, 1, -1, {})
        SequencedProducer(source_admin, mirrored, 1, limit=RECORDS).start().wait()
    commit(source_admin, group, topic, RECORDS // 2)

    # The Spark engine, as mm2, with nothing but the derived ACLs.
    job = render_job(spec, None)
    job["spark"]["checkpoint.location"] = str(tmp_path / "checkpoints")
    deployment = mirror.start(job, state_dir=tmp_path / "state", env={MM2_SECRET: MM2_PASSWORD},
                              wait_running=JOB_DEADLINE_S)
    try:
        wait_for(lambda: end_offset(target_admin, topic) >= RECORDS, "every record on dr", deployment)
        checkpoints = state.mirrors[0].checkpoints_topic
        wait_for(lambda: end_offset(target_admin, checkpoints) > 0, f"checkpoints in {checkpoints}", deployment)
        wait_for(lambda: committed(target_admin, group, topic) > 0, "the group's offset synced to dr", deployment)
        # The exactly-once writer commits each partition's progress (the next source offset) in its transaction.
        progress = spark_eos.progress_group(state.name, "lp-eos")
        wait_for(lambda: committed(target_admin, progress, eos_topic) >= RECORDS,
                 f"the exactly-once flow's progress in {progress}", deployment)
    finally:
        mirror.stop(deployment)
    assert "AUTHORIZATION_FAILED" not in deployment.log_file.read_text(), "the job was refused something as mm2"

    clients = {SOURCE: pair.client_config("primary", "mm2"), TARGET: pair.client_config("dr", "mm2")}
    cells = mirror_matrix(state.acl_bindings, clients, topic=topic, outside=outside, group=group,
                          other_group=other_group, transactional_id=f"lp-{uid}-txn")
    print("\n" + render(cells))
    not_denied = [c for c in cells if not c.granted and not c.denied and c.outcome != "NOT PROBED"]
    assert not not_denied, "mm2 was allowed what the derived ACLs do not grant:\n" + "\n".join(map(str, not_denied))
    assert sum(not c.granted for c in cells) >= 40, "the matrix probed fewer cells than it should"
    assert any(c.granted for c in cells)

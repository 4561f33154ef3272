"""The failover playbook on real clusters and a real Spark mirror.

Groups stop at offsets between the mirror's offset syncs (``offsetLagMax: 10``), so MM2's own
translation would have them re-read records; after the failover a consumer on DR must resume at
exactly the next record. Judged independently of the playbook: by reading the records on both
clusters around each committed offset.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.cli import main
from mm2spec.live.dr_state import read_states
from mm2spec.live.records import GroupOffsets, RecordReader, retrying
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
TOPIC = "fo-orders"
PARTITIONS = 3
RECORDS = 600
GROUPS = [f"fo-app-{i}" for i in range(6)]


def _spec(tmp: Path, pair, exactly_once: bool = False) -> Path:
    spec = spec_for(pair, [TOPIC], ["fo-app-.*"], name="it-failover",
                    mirror={"offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False,
                            "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5,
                            "exactlyOnce": exactly_once})
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint")}
    path = tmp / "dr.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    now = int(time.time() * 1000)  # recent: records older than the topic's retention would be deleted
    for i in range(start, start + count):
        # Repeating keys and values: only the timestamp and the seq header tell some records apart,
        # as in real topics; the translation must not confuse them.
        producer.produce(TOPIC, key=f"k{i % 7}".encode(), value=f"v{i % 5}".encode(), partition=i % PARTITIONS,
                         headers=[("seq", str(i).encode())], timestamp=now - 60_000 + i)
    assert producer.flush(60) == 0


def _commit_source(pair, rng: random.Random) -> dict[str, dict[int, int]]:
    """Each group stops at a random offset of each partition, as consumers on the source had."""
    committed = {}
    for group in GROUPS:
        offsets = {p: rng.randrange(1, RECORDS // PARTITIONS) for p in range(PARTITIONS)}
        consumer = Consumer({"bootstrap.servers": pair.primary.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            retrying(lambda: consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                                             asynchronous=False), f"commit {group}", _cluster(pair, "primary"))
        finally:
            consumer.close()
        committed[group] = offsets
    return committed


def _cluster(pair, alias: str):
    from mm2spec.spec.model import Cluster

    return Cluster(alias, (getattr(pair, alias).bootstrap,))


def _run(capsys, *argv: str) -> tuple[int, str]:
    """The CLI in-process: exit code and stdout, with stderr (progress, errors) after it."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + "\n--- stderr ---\n" + out.err


def _report(out: str) -> dict:
    return json.loads(out.split("\n--- stderr ---\n")[0])


def _dr_offsets(pair) -> dict:
    return {g: dict(s.offsets) for g, s in GroupOffsets(_cluster(pair, "dr")).describe(GROUPS).items()}


@pytest.fixture(scope="module")
def failover_setup(kafka_pair, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failover")
    admin = AdminClient({"bootstrap.servers": kafka_pair.primary.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, -1)]).values():
        future.result(30)
    _produce(kafka_pair.primary.bootstrap, 0, RECORDS)
    committed = _commit_source(kafka_pair, random.Random(7))
    spec = _spec(tmp, kafka_pair)
    state = load_desired_state(spec, None)
    job = mirror.start(spark_job_config(state), state_dir=tmp / "spark", wait_running=START_TIMEOUT)
    yield kafka_pair, spec, tmp / "spark", committed, job
    mirror.stop(tmp / "spark")


def _lagging(pair) -> list[str]:
    """Partitions whose last source record is not DR's last record, with what each side holds."""
    if TOPIC not in AdminClient({"bootstrap.servers": pair.dr.bootstrap}).list_topics(timeout=30).topics:
        return [f"{TOPIC} not on dr yet"]
    behind = []
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        for p in range(PARTITIONS):
            last, copy = src.last_record(TOPIC, p), dr.last_record(TOPIC, p)
            if copy is None or copy.content() != last.content():
                behind.append(f"{TOPIC}-{p}: source ends {last}, dr ends {copy}")
    return behind


def _wait(check, timeout: float, what: str, job=None) -> None:
    deadline = time.monotonic() + timeout
    while problems := check():
        if time.monotonic() > deadline:
            log = Path(job.log_file).read_text()[-3000:] if job else ""
            raise AssertionError(f"timed out waiting for {what}: {problems}\n{log}")
        time.sleep(0.5)


def test_planned_failover_check_then_exact_then_idempotent(failover_setup, capsys):
    pair, spec, state_dir, committed, job = failover_setup
    _wait(lambda: _lagging(pair), CATCH_UP_TIMEOUT, "the mirror to copy the seed records", job)
    args = ("failover", str(spec), "--state-dir", str(state_dir), "--yes")

    # Healthy DR: every verify check passes (checkpoints are emitted every second).
    _wait(lambda: [] if _run(capsys, "verify", str(spec), "--state-dir", str(state_dir), "--quiet")[0] == 0
          else ["verify failed"], 60, "verify to pass")
    code, out = _run(capsys, "verify", str(spec), "--state-dir", str(state_dir), "--format", "json")
    assert code == 0, out
    assert {t["module"]: t["status"] for t in _report(out)["tasks"]} == {
        "verify.mirror": "ok", "verify.topics": "ok", "verify.lag": "ok", "verify.loss": "ok",
        "verify.heartbeats": "skipped", "verify.checkpoints": "ok", "verify.configs": "ok", "verify.versions": "ok"}

    # --check: reads everything, writes nothing (no group offsets, no state record, mirror alive).
    before = _dr_offsets(pair)
    code, out = _run(capsys, *args, "--check", "--format", "json")
    assert code == 2, out
    report = _report(out)
    assert report["check"] is True and report["totals"]["skipped"] == 0
    assert _dr_offsets(pair) == before
    assert mirror.status(state_dir).running
    assert "primary-to-dr" not in read_states(_cluster(pair, "dr"), "it-failover")

    # A consumer of one group is already active on DR: the preflight refuses naming it, before
    # anything is written (the mirror still runs, no state recorded); the run says which tasks ran.
    member = Consumer({"bootstrap.servers": pair.dr.bootstrap, "group.id": GROUPS[0], "client.id": "early-bird",
                       "session.timeout.ms": 45000})
    member.subscribe([TOPIC])
    _wait(lambda: (member.poll(0.2), not member.assignment())[1], 60, "the DR consumer to join")
    code, out = _run(capsys, *args)
    assert code == 1 and "early-bird" in out and "nothing was changed" in out, out
    assert "not run" in out
    assert mirror.status(state_dir).running
    assert "primary-to-dr" not in read_states(_cluster(pair, "dr"), "it-failover")
    assert {g: o for g, o in _dr_offsets(pair).items() if g != GROUPS[0]} == {g: o for g, o in before.items() if g != GROUPS[0]}
    member.close()

    # The re-run converges: every group resumes on DR at exactly the next record.
    code, out = _run(capsys, *args, "--format", "json", "--diff")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0
    assert report["totals"]["partitions"] == len(GROUPS) * PARTITIONS
    assert report["totals"]["mm2Reread"] > 0, "offsets between syncs: MM2's method would re-read"
    assert not mirror.status(state_dir).running
    dr_offsets = _dr_offsets(pair)
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        for group, offsets in committed.items():
            for partition, offset in offsets.items():
                resume = dr_offsets[group][(TOPIC, partition)]
                consumed = src.read(TOPIC, partition, offset - 1, offset)[0]
                following = src.read(TOPIC, partition, offset, offset + 1)[0]
                assert dr.read(TOPIC, partition, resume - 1, resume)[0].content() == consumed.content()
                assert dr.read(TOPIC, partition, resume, resume + 1)[0].content() == following.content()

    # Run again: nothing to do, every task ok or skipped.
    code, out = _run(capsys, *args, "--format", "json")
    assert code == 0, out
    report = _report(out)
    assert {t["status"] for t in report["tasks"]} <= {"ok", "skipped"}, report["tasks"]

    # verify now names what is no longer healthy: the mirror is stopped (by design).
    code, out = _run(capsys, "verify", str(spec), "--state-dir", str(state_dir))
    assert code == 1 and "the mirror is not running" in out, out

    # plan knows the flow is failed over.
    code, out = _run(capsys, "plan", str(spec))
    assert "failed over" in out, out

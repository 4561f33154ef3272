"""Failover when things go wrong, on a pair of clusters of its own (the source gets killed):
a failover killed -9 in the middle converges when run again, and an unplanned failover (the
source broker killed -9) translates from the checkpoints on DR, skipping nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mm2spec.dev import DevPorts, DevStack
from mm2spec.errors import ComponentMissing
from mm2spec.live.dr_state import clear_state, read_states
from mm2spec.live.records import RecordReader
from mm2spec.mm2.records import Checkpoint
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from required import missing_component
from test_failover import (
    CATCH_UP_TIMEOUT, PARTITIONS, START_TIMEOUT, TOPIC, _cluster, _commit_source, _dr_offsets, _lagging,
    _produce, _report, _run, _spec, _wait,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

SPEC_NAME = "it-failover"  # metadata.name of test_failover's spec

CLI = [sys.executable, "-c", "import sys; from mm2spec.cli import main; sys.exit(main(sys.argv[1:]))"]


@pytest.fixture(scope="module")
def own_pair(tmp_path_factory):
    """A primary/dr pair only this module uses: its primary is killed."""
    stack = DevStack(tmp_path_factory.mktemp("own-pair"), ports=DevPorts.free(), tie_to_parent=True,
                     echo=lambda _line: None)
    try:
        state = stack.up(with_connect=False, timeout=300)
    except ComponentMissing as exc:
        missing_component(exc)
        raise
    yield state
    stack.down()


@pytest.fixture(scope="module")
def running_mirror(own_pair, tmp_path_factory):
    import random

    from confluent_kafka.admin import AdminClient, NewTopic

    tmp = tmp_path_factory.mktemp("unplanned")
    admin = AdminClient({"bootstrap.servers": own_pair.primary.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, -1)]).values():
        future.result(30)
    _produce(own_pair.primary.bootstrap, 0, 600)
    committed = _commit_source(own_pair, random.Random(11))
    spec = _spec(tmp, own_pair)
    job = spark_job_config(load_desired_state(spec, None))
    deployment = mirror.start(job, state_dir=tmp / "spark", wait_running=START_TIMEOUT)
    _wait(lambda: _lagging(own_pair), CATCH_UP_TIMEOUT, "the mirror to copy the seed records", deployment)
    yield own_pair, spec, tmp / "spark", job, committed
    mirror.stop(tmp / "spark")


def _exact(pair, committed) -> None:
    dr_offsets = _dr_offsets(pair)
    with RecordReader(_cluster(pair, "primary")) as src, RecordReader(_cluster(pair, "dr")) as dr:
        for group, offsets in committed.items():
            for partition, offset in offsets.items():
                resume = dr_offsets[group][(TOPIC, partition)]
                assert dr.read(TOPIC, partition, resume - 1, resume)[0].content() == \
                    src.read(TOPIC, partition, offset - 1, offset)[0].content()
                assert dr.read(TOPIC, partition, resume, resume + 1)[0].content() == \
                    src.read(TOPIC, partition, offset, offset + 1)[0].content()


def test_a_failover_killed_mid_run_converges_when_run_again(running_mirror, capsys):
    pair, spec, state_dir, _job, committed = running_mirror
    args = ["failover", str(spec), "--state-dir", str(state_dir), "--yes"]
    process = subprocess.Popen(CLI + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith("TASK [Commit the offsets on DR]"):
            break
    assert process.poll() is None, "".join(seen)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)
    # Killed after the switch was recorded and the mirror stopped: DR says "switching".
    state = read_states(_cluster(pair, "dr"), SPEC_NAME)["primary-to-dr"]
    assert state.phase == "switching" and not mirror.status(state_dir).running

    # The killed run still holds the DR pair's lease (it expires in a minute): a re-run is refused
    # naming it, changing nothing; the operator who knows it is dead takes it over.
    code, out = _run(capsys, *args, "--quiet")
    assert code == 1 and "failover by " in out and f"pid {process.pid}" in out and "--break-lease" in out, out
    assert read_states(_cluster(pair, "dr"), SPEC_NAME)["primary-to-dr"].phase == "switching"

    code, out = _run(capsys, *args, "--break-lease", "--format", "json")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0
    assert read_states(_cluster(pair, "dr"), SPEC_NAME)["primary-to-dr"].phase == "failed-over"
    _exact(pair, committed)


def test_unplanned_failover_with_the_source_killed(running_mirror, capsys):
    pair, spec, state_dir, job, _ = running_mirror
    # Back to mirroring (as a failback would leave it), with new groups to move.
    clear_state(_cluster(pair, "dr"), SPEC_NAME, "primary-to-dr")
    deployment = mirror.start(job, state_dir=state_dir, wait_running=START_TIMEOUT)
    _produce(pair.primary.bootstrap, 600, 300)
    import random

    moved = {f"fo-app-u{i}": {p: random.Random(i).randrange(200, 300) for p in range(PARTITIONS)} for i in range(3)}
    from confluent_kafka import Consumer, TopicPartition

    for group, offsets in moved.items():
        consumer = Consumer({"bootstrap.servers": pair.primary.bootstrap, "group.id": group, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
        consumer.close()
    _wait(lambda: _lagging(pair), CATCH_UP_TIMEOUT, "the mirror to copy the new records", deployment)
    # What each group reads next, known before the source dies (the test's own ground truth).
    with RecordReader(_cluster(pair, "primary")) as src:
        following = {(g, p): src.read(TOPIC, p, o, o + 1)[0] for g, offsets in moved.items() for p, o in offsets.items()}

    def checkpointed() -> list:
        with RecordReader(_cluster(pair, "dr")) as dr:
            latest = {}
            for record in dr.read_topic("primary.checkpoints.internal"):
                cp = Checkpoint.from_record(record.key, record.value)
                latest[(cp.group, cp.partition)] = cp.upstream_offset
        return [k for k in following if latest.get(k) != moved[k[0]][k[1]]]
    _wait(checkpointed, CATCH_UP_TIMEOUT, "checkpoints of the new groups", deployment)

    primary = pair.process("primary")
    os.kill(primary.pid, signal.SIGKILL)
    _wait(lambda: [] if not primary.alive() else ["primary still alive"], 30, "the primary to die")

    args = ["failover", str(spec), "--state-dir", str(state_dir), "--limit", "group=fo-app-u.*", "--yes"]
    code, out = _run(capsys, *args, "--quiet")
    assert code == 1 and "--source-unreachable" in out, out  # the plain run names the way out

    code, out = _run(capsys, *args, "--source-unreachable", "--format", "json")
    assert code == 0, out
    report = _report(out)
    assert report["totals"]["skipped"] == 0 and {t["method"] for t in report["translations"]} == {"checkpoint"}
    assert report["rpo"] and all(r["lastMirroredTimestamp"] for r in report["rpo"])
    assert read_states(_cluster(pair, "dr"), SPEC_NAME)["primary-to-dr"].mode == "unplanned"
    bounds = {(t["group"], t["partition"]): t["reread"] for t in report["translations"]}
    dr_offsets = _dr_offsets_of(pair, list(moved))
    with RecordReader(_cluster(pair, "dr")) as dr:
        for (group, partition), record in following.items():
            resume = dr_offsets[group][(TOPIC, partition)]
            ahead = dr.read(TOPIC, partition, resume, resume + bounds[(group, partition)] + 1)
            contents = [r.content() for r in ahead]
            # never skipped: the group's next record is still ahead of it, within the reported bound
            assert record.content() in contents, (group, partition, resume)


def _dr_offsets_of(pair, groups: list[str]) -> dict:
    from mm2spec.live.records import GroupOffsets

    return {g: dict(s.offsets) for g, s in GroupOffsets(_cluster(pair, "dr")).describe(groups).items()}


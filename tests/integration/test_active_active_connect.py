"""Active-active on real clusters with engine ``connect``: MirrorMaker 2's connectors of two flows in
opposite directions (DefaultReplicationPolicy) on a Kafka Connect worker, one direction failed
over and back. The scenario and the judging are ``test_active_active.py``'s (the Spark job).

A group on ``east`` reads its local ``aac-orders`` and the remote ``west.aac-orders``. Failing
``east-to-west`` over must leave it on west at the exact next record of ``east.aac-orders`` and of
west's own ``aac-orders``; failing back, at the exact next record of east's ``aac-orders`` and
``west.aac-orders``. Judged by reading both clusters.

mm2spec renders one Connect cluster per spec (``connect.cluster``, by default the first flow's
target: here west), so one worker runs both flows' connectors. A failover stops only the failed-over
flow's connectors (KIP-875 STOPPED): ``west-to-east`` mirrors on through the incident, and the
failback sets ``east-to-west``'s source offsets to east's end and resumes its connectors.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.engines.connect import connector_names
from mm2spec.live.connect import ConnectClient
from mm2spec.live.dr_state import read_states
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.render import connectors, render_files, write_files
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for
from test_active_active import _bootstrap, _cluster, _ends
from test_failback import PARTITIONS, _commit, _produce
from test_failover import _report, _run, _wait
from test_failover_connect import RUNNING_TIMEOUT, WORKER, _connector_states

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CATCH_UP_TIMEOUT = 180.0
#: Names of this module's own: the Spark test (``aa-orders``, ``aa-app``) runs on the same clusters
#: with the same aliases, and MM2 names its internal topics after the aliases only.
TOPIC = "aac-orders"
GROUP = "aac-app"
NAME = "it-active-active-connect"
SEED = 150
FLOW = {"replicationPolicy": "default", "offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1,
        "syncGroupOffsets": False, "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5}


def _spec(tmp: Path, pair) -> Path:
    spec = spec_for(pair, [TOPIC], ["aac-app.*"], engine="connect", name=NAME, aliases=("east", "west"),
                    connect=WORKER, mirror={"name": "east-to-west", **FLOW})
    spec["mirrors"].append({**spec["mirrors"][0], "name": "west-to-east", "source": "west", "target": "east"})
    path = tmp / "aac.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _behind(pair, source: str, target: str, topic: str = TOPIC) -> list[str]:
    """Partitions of ``source``'s ``topic`` whose last record is not the last of its copy on ``target``."""
    copy = f"{source}.{topic}"
    if copy not in AdminClient({"bootstrap.servers": _bootstrap(pair, target)}).list_topics(timeout=30).topics:
        return [f"{copy} not on {target} yet"]
    with RecordReader(_cluster(pair, source)) as src, RecordReader(_cluster(pair, target)) as dst:
        return [f"{copy}-{p}" for p in range(PARTITIONS)
                if (last := src.last_record(topic, p)) is not None
                and ((mirrored := dst.last_record(copy, p)) is None or mirrored.content() != last.content())]


def _offsets(pair, alias: str, group: str = GROUP) -> dict:
    return dict(GroupOffsets(_cluster(pair, alias)).describe([group])[group].offsets)


def _assert_exact(pair, left: str, left_topic: str, committed: dict, arrived: str, arrived_topic: str,
                  group: str = GROUP) -> None:
    """``group`` left ``left`` at ``committed`` on ``left_topic``; on ``arrived``'s ``arrived_topic``
    the record before its position is the last it consumed, the one at it the next (or both logs end).
    (``test_active_active.py``'s own copies of these helpers name its topic and group.)"""
    now = _offsets(pair, arrived, group)
    with RecordReader(_cluster(pair, left)) as old, RecordReader(_cluster(pair, arrived)) as new:
        for partition, offset in committed.items():
            resume, where = now[(arrived_topic, partition)], (left_topic, arrived_topic, partition, offset)
            assert new.read(arrived_topic, partition, resume - 1, resume)[0].content() == \
                old.read(left_topic, partition, offset - 1, offset)[0].content(), (*where, resume)
            assert [r.content() for r in new.read(arrived_topic, partition, resume, min(
                resume + 1, new.watermarks(arrived_topic, partition)[1]))] == [r.content() for r in old.read(
                    left_topic, partition, offset, min(offset + 1, old.watermarks(left_topic, partition)[1]))], \
                (*where, resume)


def _flow_states(client: ConnectClient, names: dict[str, list[str]]) -> dict[str, str]:
    """Per flow: ``running`` (every connector and task RUNNING; a checkpoint connector has no task
    until its source has a group), ``stopped``, or each connector's state with its tasks'."""
    found = {}
    for flow, connectors_of in names.items():
        states = _connector_states(client, connectors_of)
        found[flow] = ("running" if all(re.fullmatch(r"RUNNING tasks=\[('RUNNING'(, )?)*\]", s) for s in states.values())
                       else "stopped" if set(states.values()) == {"STOPPED tasks=[]"} else str(states))
    return found


def test_connect_one_direction_fails_over_and_back_with_local_and_remote_topics_exact(
        kafka_pair, connect_worker, tmp_path, capsys):
    pair = kafka_pair
    for alias in ("east", "west"):
        admin = AdminClient({"bootstrap.servers": _bootstrap(pair, alias)})
        for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, -1)]).values():
            future.result(30)
        _produce(_bootstrap(pair, alias), TOPIC, 0, SEED, alias)
    rng = random.Random(27)
    local = {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)}
    remote = {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)}
    spec = _spec(tmp_path, pair)
    state = load_desired_state(spec, None)
    # One Connect cluster for both flows, on connect.cluster (the first flow's target).
    assert state.connect.cluster == "west"
    write_files(render_files(state), tmp_path / "rendered")
    worker = connect_worker(tmp_path / "rendered" / "connect-distributed.properties",
                            overrides={"listeners": "http://127.0.0.1:0"})
    log = SimpleNamespace(log_file=worker.process.log)
    client = ConnectClient(worker.url)
    names = {flow.name: connector_names(flow) for flow in state.mirrors}
    for connector in connectors(state):
        client.put_connector_config(connector["name"], connector["config"])
    args = ("--connect-url", worker.url, "--yes")
    try:
        _wait(lambda: {f: s for f, s in _flow_states(client, names).items() if s != "running"}, RUNNING_TIMEOUT,
              "both flows' connectors to run", log)
        _wait(lambda: _behind(pair, "east", "west") + _behind(pair, "west", "east"), CATCH_UP_TIMEOUT,
              "both directions to mirror the seed records", log)
        # The worker is on west: west-to-east's connectors write to east (their producer overrides),
        # not into a copy on the worker's own cluster.
        assert f"west.{TOPIC}" not in AdminClient({"bootstrap.servers": pair.dr.bootstrap}).list_topics(timeout=30).topics
        # The group reads east's topic and west's copy on east, which must exist before it commits there.
        _commit(pair, "primary", TOPIC, GROUP, local)
        _commit(pair, "primary", f"west.{TOPIC}", GROUP, remote)

        # Both directions in one run: refused, nothing changed.
        code, out = _run(capsys, "failover", str(spec), *args)
        assert code == 1 and "active-active" in out and "nothing was changed" in out, out
        assert _flow_states(client, names) == {"east-to-west": "running", "west-to-east": "running"}

        code, out = _run(capsys, "failover", str(spec), *args, "--format", "json", "--limit", "flow=east-to-west")
        assert code == 0, out
        report = _report(out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
        moved = {(t["topic"], t["targetTopic"], t.get("remote")) for t in report["translations"]}
        assert moved == {(TOPIC, f"east.{TOPIC}", None), (f"west.{TOPIC}", TOPIC, "west-to-east")}, moved
        _assert_exact(pair, "east", TOPIC, local, "west", f"east.{TOPIC}")
        _assert_exact(pair, "east", f"west.{TOPIC}", remote, "west", TOPIC)
        # The state is per direction: east-to-west failed over (on west), west-to-east not (on east).
        assert read_states(_cluster(pair, "west"), NAME)["east-to-west"].phase == "failed-over"
        assert read_states(_cluster(pair, "west"), NAME)["east-to-west"].groups == (GROUP,)
        assert "west-to-east" not in read_states(_cluster(pair, "east"), NAME)
        # Only east-to-west's connectors stopped; west-to-east's run on the same worker.
        assert _flow_states(client, names) == {"east-to-west": "stopped", "west-to-east": "running"}

        # On west the group reads on: west's own topic grows and it consumes part of it; the other
        # direction copies those records to east while east-to-west is failed over.
        _produce(pair.dr.bootstrap, TOPIC, SEED, 60, "west-later")
        _wait(lambda: _behind(pair, "west", "east"), CATCH_UP_TIMEOUT,
              "west-to-east to mirror west's new records during the failover", log)
        assert _flow_states(client, names)["east-to-west"] == "stopped"
        on_west = _offsets(pair, "west")
        further = {p: on_west[(TOPIC, p)] + 10 + p for p in range(PARTITIONS)}
        _commit(pair, "dr", TOPIC, GROUP, further)
        back_on_copy = {p: on_west[(f"east.{TOPIC}", p)] for p in range(PARTITIONS)}

        code, out = _run(capsys, "failback", str(spec), *args, "--format", "json", "--limit", "flow=east-to-west")
        assert code == 0, out
        report = _report(out)
        assert report["totals"]["skipped"] == 0 and report["totals"]["reread"] == 0, report["totals"]
        assert any(t.get("remote") == "west-to-east" and t["targetTopic"] == f"west.{TOPIC}"
                   for t in report["translations"]), report["translations"]
        _assert_exact(pair, "west", f"east.{TOPIC}", back_on_copy, "east", TOPIC)
        _assert_exact(pair, "west", TOPIC, further, "east", f"west.{TOPIC}")
        assert "east-to-west" not in read_states(_cluster(pair, "west"), NAME)
        # Resumed from east's end: east's next records arrive once each, and nothing else does.
        assert _flow_states(client, names) == {"east-to-west": "running", "west-to-east": "running"}
        before = _ends(pair, "west", f"east.{TOPIC}")
        _produce(pair.primary.bootstrap, TOPIC, 10_000, 4 * PARTITIONS, "east-after")
        _wait(lambda: _behind(pair, "east", "west"), CATCH_UP_TIMEOUT, "the resumed east-to-west to mirror", log)
        assert _ends(pair, "west", f"east.{TOPIC}") == {p: n + 4 for p, n in before.items()}
    finally:
        for name in (n for connectors_of in names.values() for n in connectors_of):
            client.delete_connector(name)

"""Active-active on real clusters with engine ``connect``: MirrorMaker 2's connectors of two flows in
opposite directions (DefaultReplicationPolicy) on a Kafka Connect worker, one direction failed
over and back. The scenario and the judging are ``test_active_active.py``'s (the Spark job):
``fail_one_direction_over_and_back``, with this engine's ``Mirroring``.

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

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from mm2spec.engines.connect import connector_names
from mm2spec.live.connect import ConnectClient
from mm2spec.render import connectors, render_files, write_files
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for
from test_active_active import Mirroring, fail_one_direction_over_and_back, seed
from test_failover import _wait
from test_failover_connect import RUNNING_TIMEOUT, WORKER, _connector_states

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: Names of this module's own: the Spark test (``aa-orders``, ``aa-app``) runs on the same clusters
#: with the same aliases, and MM2 names its internal topics after the aliases only.
TOPIC = "aac-orders"
GROUP = "aac-app"
NAME = "it-active-active-connect"
FLOW = {"replicationPolicy": "default", "offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1,
        "syncGroupOffsets": False, "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5}


def _spec(tmp: Path, pair) -> Path:
    spec = spec_for(pair, [TOPIC], ["aac-app.*"], engine="connect", name=NAME, aliases=("east", "west"),
                    connect=WORKER, mirror={"name": "east-to-west", **FLOW})
    spec["mirrors"].append({**spec["mirrors"][0], "name": "west-to-east", "source": "west", "target": "east"})
    path = tmp / "aac.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _flow_states(client: ConnectClient, names: dict[str, list[str]]) -> dict[str, str]:
    """Per flow: ``running`` (every connector and task RUNNING; a checkpoint connector has no task
    until its source has a group), ``stopped``, or each connector's state with its tasks'."""
    found = {}
    for flow, connectors_of in names.items():
        states = _connector_states(client, connectors_of)
        found[flow] = ("running" if all(re.fullmatch(r"RUNNING tasks=\[('RUNNING'(, )?)*\]", s) for s in states.values())
                       else "stopped" if set(states.values()) == {"STOPPED tasks=[]"} else str(states))
    return found


class _ConnectWorker(Mirroring):
    """One Connect worker (on west) running both flows' connectors: a failed-over flow's stop."""

    stopped = "stopped"

    def __init__(self, pair, worker, names: dict[str, list[str]]):
        self.pair, self.names, self.client = pair, names, ConnectClient(worker.url)
        self.args, self.progress = ("--connect-url", worker.url, "--yes"), SimpleNamespace(log_file=worker.process.log)

    def flow_states(self) -> dict[str, str]:
        return _flow_states(self.client, self.names)

    def mirrored(self) -> None:
        # The worker is on west: west-to-east's connectors write to east (their producer overrides),
        # not into a copy on the worker's own cluster.
        topics = AdminClient({"bootstrap.servers": self.pair.dr.bootstrap}).list_topics(timeout=30).topics
        assert f"west.{TOPIC}" not in topics

    def refused(self) -> None:
        assert self.flow_states() == {"east-to-west": "running", "west-to-east": "running"}


def test_connect_one_direction_fails_over_and_back_with_local_and_remote_topics_exact(
        kafka_pair, connect_worker, tmp_path, capsys):
    seed(kafka_pair, TOPIC)
    spec = _spec(tmp_path, kafka_pair)
    state = load_desired_state(spec, None)
    # One Connect cluster for both flows, on connect.cluster (the first flow's target).
    assert state.connect.cluster == "west"
    write_files(render_files(state), tmp_path / "rendered")
    worker = connect_worker(tmp_path / "rendered" / "connect-distributed.properties",
                            overrides={"listeners": "http://127.0.0.1:0"})
    engine = _ConnectWorker(kafka_pair, worker, {flow.name: connector_names(flow) for flow in state.mirrors})
    for connector in connectors(state):
        engine.client.put_connector_config(connector["name"], connector["config"])
    try:
        _wait(lambda: {f: s for f, s in engine.flow_states().items() if s != "running"}, RUNNING_TIMEOUT,
              "both flows' connectors to run", engine.progress)
        fail_one_direction_over_and_back(kafka_pair, capsys, spec, engine, TOPIC, GROUP, NAME)
    finally:
        for name in (n for connectors_of in engine.names.values() for n in connectors_of):
            engine.client.delete_connector(name)

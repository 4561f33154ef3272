"""The Connect engine: MirrorMaker 2's connectors (source, checkpoint, heartbeat) of each flow, on
a Kafka Connect cluster reached through its REST API (``mm2spec.live.connect``).

Each flow's connectors stop and start on their own. Starting from given offsets sets the source
connector's offsets (Connect's offsets API, KIP-875) and resumes the flow's connectors.
"""

from __future__ import annotations

from collections.abc import Sequence

from mm2spec.engines import (
    START_TIMEOUT_S,
    Action,
    DeploymentResource,
    DeploymentResources,
    Engine,
    EngineDescriptor,
    MetricsSource,
    Running,
    StartOffsets,
    wait_for,
)
from mm2spec.errors import Mm2specError, OperationRefused
from mm2spec.live.connect import ConnectClient
from mm2spec.mm2.engine_facts import engine_facts
from mm2spec.plan.diff import diff_connector
from mm2spec.plan.model import ResourceChange
from mm2spec.render import connectors, engine_files
from mm2spec.spec.model import DesiredState, MirrorFlow

CONNECTOR_KINDS = ("Source", "Checkpoint", "Heartbeat")
"""The MM2 connectors a flow may run, by the kind in their name."""
WORKER = "connect-worker"
"""The Pulumi name of the worker's properties file resource."""


def connector_names(flow: MirrorFlow) -> list[str]:
    """The connectors the flow runs: the source connector, with groups the checkpoint connector,
    with heartbeats the heartbeat connector."""
    names = [flow.connector_name("Source")]
    if flow.groups:
        names.append(flow.connector_name("Checkpoint"))
    if flow.heartbeats:
        names.append(flow.connector_name("Heartbeat"))
    return names


class ConnectEngine(Engine):
    """MM2's connectors of one spec on its Connect cluster."""

    facts = engine_facts("connect")
    emits_heartbeats = True
    start_hint = "check the connectors' status and logs on Connect; restart failed tasks"
    shared_by_flows = False

    @classmethod
    def create(cls, spec: DesiredState, *, state_dir: str | None = None, connect_url: str | None = None,
               **options) -> "ConnectEngine":
        return cls(spec, url=connect_url, **options)

    def __init__(self, spec: DesiredState, *, url: str | None = None, client: ConnectClient | None = None, **options):
        super().__init__(spec, **options)
        self.url = url or spec.connect.rest_url
        """The Connect REST API: the one given, else the spec's ``connect.restUrl`` (may be None)."""
        self._rest = client

    def rest(self) -> ConnectClient:
        """The Connect REST client; OperationRefused when no URL is known."""
        if self._rest is None:
            if not self.url:
                raise OperationRefused("engine connect: connect.restUrl is not set in the spec; pass --connect-url URL")
            self._rest = ConnectClient(self.url)
        return self._rest

    def location(self, flow: MirrorFlow) -> str:
        return flow.target

    def deployment_files(self) -> dict[str, str]:
        return engine_files(self.spec, self.name)

    def deployment_resources(self) -> DeploymentResources:
        if not self.spec.connect.rest_url:
            raise Mm2specError("engine connect registers connectors on the Connect REST API: set connect.restUrl "
                               "in the spec (for this environment)")
        url = self.spec.connect.rest_url
        return DeploymentResources((
            DeploymentResource("WorkerConfig", WORKER, after_cluster_resources=False),
            *(DeploymentResource("Connector", c["name"], {"connector": c, "connectUrl": url}, after=(WORKER,))
              for c in connectors(self.spec))))

    def plan_changes(self, stopped_on_purpose: bool) -> tuple[list[ResourceChange], list[str]]:
        if self._rest is None and not self.url:
            return [], ["connect.restUrl is not set: connectors are not compared"]
        return connector_changes(self.spec, self.rest()), []

    def worker_version(self) -> str | None:
        if self._rest is None and not self.url:
            return None
        return self.rest().version()

    def connector_states(self, flow: MirrorFlow) -> dict[str, str]:
        """Per connector of the flow: RUNNING, PAUSED, STOPPED, FAILED, or ABSENT; a task that is not
        RUNNING shows as ``<state> (task N <state>)``."""
        client, found = self.rest(), {}
        for name in connector_names(flow):
            status = client.connector_status(name)
            if status is None:
                found[name] = "ABSENT"
                continue
            state = status["connector"]["state"]
            bad = [f"task {t['id']} {t['state']}" for t in status.get("tasks", []) if t["state"] != "RUNNING"]
            found[name] = f"{state} ({', '.join(bad)})" if bad and state == "RUNNING" else state
        return found

    def running(self, flow: MirrorFlow) -> Running:
        states = self.connector_states(flow)
        return Running(all(s == "RUNNING" for s in states.values()), ", ".join(f"{n} {s}" for n, s in states.items()))

    def stop(self, flows: Sequence[MirrorFlow], *, check: bool, timeout: float) -> list[Action]:
        client, actions = self.rest(), []
        for flow in flows:
            states = self.connector_states(flow)
            to_stop = [n for n, s in states.items() if s not in ("STOPPED", "ABSENT")]
            diff = tuple((n, states[n], "STOPPED") for n in to_stop)
            if not to_stop:
                actions.append(Action(flow.target, f"{flow.name}: connectors already stopped", changed=False,
                                      flow=flow.name))
                continue
            if not check:
                for name in to_stop:
                    client.stop_connector(name)
                self._wait(flow, to_stop, ("STOPPED", "ABSENT"), "stop", "stop", timeout)
            actions.append(Action(flow.target, f"{flow.name}: {'would stop' if check else 'stopped'} "
                                  f"{', '.join(to_stop)}", diff=diff, flow=flow.name))
        return actions

    def start_from(self, flows: Sequence[MirrorFlow], offsets: StartOffsets, *,
                   others_failed_over: Sequence[str] = (), timeout: float = START_TIMEOUT_S) -> list[Action]:
        """MM2's source connector keeps, per partition, the last source offset it copied: set it to
        one before each start offset, then resume the flow's connectors."""
        client, actions = self.rest(), []
        for flow in flows:
            start = sorted(offsets[flow.name].items())
            source_name = flow.connector_name("Source")
            client.alter_offsets(source_name, [{"partition": {"cluster": flow.source, "topic": t, "partition": p},
                                                "offset": {"offset": o - 1} if o > 0 else None} for (t, p), o in start])
            names = connector_names(flow)
            for name in names:
                client.resume_connector(name)
            self._wait(flow, names, ("RUNNING",), "run", "start", timeout)
            actions.append(Action(flow.target, f"{flow.name}: set {source_name} to the source's end and resumed "
                                  f"{', '.join(names)}", diff=tuple((f"{t}-{p}", "stopped", f"from {o}")
                                                                    for (t, p), o in start[:20]), flow=flow.name))
        return actions

    def _wait(self, flow: MirrorFlow, names: list[str], states: tuple[str, ...], doing: str, did: str,
              timeout: float) -> None:
        """Wait until every connector of the flow is in one of ``states``."""
        wait_for(lambda: all(s in states for s in self.connector_states(flow).values()), timeout,
                 lambda: f"waiting for {', '.join(names)} to {doing}", f"{flow.name}: connectors did not {did}",
                 self.progress)

    def metrics_source(self) -> MetricsSource:
        return MetricsSource("connect-rest", self.url or "")


def connector_changes(spec: DesiredState, client: ConnectClient) -> list[ResourceChange]:
    """The connectors' part of a plan: each rendered connector against Connect's, and connectors
    this spec used to run (e.g. its groups emptied) to delete."""
    live = client.connector_configs()
    wanted = {c["name"]: c["config"] for c in connectors(spec)}
    changes = []
    for name, config in wanted.items():
        change = diff_connector(config, live.get(name))
        changes.append(ResourceChange("connect", "connector", name, change.action, change.changes))
    ours = {f.connector_name(kind) for f in spec.mirrors for kind in CONNECTOR_KINDS}
    for name in sorted(set(live) - set(wanted)):
        if name in ours:  # a connector this spec used to run (e.g. groups emptied): it goes
            changes.append(ResourceChange("connect", "connector", name, "delete"))
    return changes


DESCRIPTOR = EngineDescriptor(ConnectEngine.facts, ConnectEngine, resource_kinds=("WorkerConfig", "Connector"))
"""Engine connect, as ``engines.descriptor`` finds it."""

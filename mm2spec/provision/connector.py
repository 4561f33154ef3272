"""An MirrorMaker 2 connector registered on the Kafka Connect REST API (engine ``connect``).

Inputs: ``connectUrl`` (the spec's ``connect.restUrl``), ``name`` (``<flow>-Mirror<Kind>Connector``)
and ``config``, the rendered connector config (``mm2spec.render.connectors``). The config holds no
password: SASL settings reference the secret as ``${env:NAME}``, resolved by the worker. Outputs
add ``adopted``: the connector was registered before the stack took it over; ``destroy`` leaves it.

Replaced: another name or another Connect cluster (URL). In place: the config, through
``PUT /connectors/{name}/config``; what changed is ``mm2spec.plan.diff.diff_connector``, the function
``mm2spec plan`` uses. ``readyTimeoutSeconds`` (the spec's ``connect.readyTimeoutSeconds``) is how
long ``up`` waits for the connector to run; it is recorded but never compared.

Healthy or failed: after create and update, ``wait_healthy`` polls the connector's status until the
connector and every task are RUNNING (held for ``HEALTH_SETTLE_S``, so the tasks of the old config
an update replaces do not count), a task or the connector is FAILED (the resource fails with the
first line of its trace) or ``readyTimeoutSeconds`` pass (it fails naming the connector's and its
tasks' states). A connector STOPPED or PAUSED (a failover stops the forward mirror) is left as it
is. A connector that fails so stays registered and, through the plugin, recorded: a partial
create or update (``FailedAfterStart``), so ``destroy`` deletes it (one registered before the stack
is recorded as adopted and left) and the next ``up`` updates it. As a dynamic resource (Pulumi
records nothing of a dynamic provider's failed create) a failed create removes the connector it
registered instead, and a failed update keeps the new config for the next ``up`` to try again.
``preview`` calls neither: it waits for nothing and writes nothing.

``pulumi refresh`` reads the registered config back (``read_connector``, one GET): a config edited
behind the stack shows, and the next preview puts the spec's back; a connector deleted reads back
gone and the next ``up`` registers it.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, UpdateResult

from mm2spec.engines import DeploymentResource
from mm2spec.errors import ProvisionFailed
from mm2spec.live.connect import ConnectClient
from mm2spec.mm2.defaults import CONNECT_READY_TIMEOUT_SECONDS_DEFAULT
from mm2spec.plan.diff import diff_connector
from mm2spec.spec.model import DesiredState
from mm2spec.provision.base import (ADOPTED, FailedAfterStart, ProgramSettings, ProvisionedResource, Provider,
                                    ResourceKind, undone)

#: Between two looks at a connector's status: a worker starts a connector's tasks within seconds.
HEALTH_POLL_S = 1.0
#: How long a connector must look healthy before ``up`` calls it so. Right after a config update
#: the status still shows the old tasks RUNNING until the worker has restarted them with the new
#: config (a second or two), and right after a create the connector is RUNNING before its tasks
#: are even listed; a task that fails at start fails within this window.
HEALTH_SETTLE_S = 5.0
#: States in which a connector is deliberately not running: left as they are, not waited for.
_HALTED = ("STOPPED", "PAUSED")


def connector_inputs(connect_url: str, connector: dict,
                     ready_timeout: int = CONNECT_READY_TIMEOUT_SECONDS_DEFAULT) -> dict[str, Any]:
    """Inputs for one rendered connector (``{"name": ..., "config": {...}}``)."""
    return {"connectUrl": connect_url, "name": connector["name"], "config": dict(connector["config"]),
            "readyTimeoutSeconds": ready_timeout}


def read_connector(client: ConnectClient, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The recorded ``config`` as registered now (``GET /connectors/{name}/config``); None when the
    connector is gone. Connect adds ``name``, which the rendered config does not set: left out."""
    live = client.connector_config(props["name"])
    if live is None:
        return None
    recorded = props.get("config") or {}
    return {"config": {k: v for k, v in live.items() if k != "name" or "name" in recorded}}


def _first_line(trace: str | None) -> str:
    return next((line.strip() for line in (trace or "").splitlines() if line.strip()), "no trace given")


def connector_health(name: str, status: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(verdict, words)`` for a ``GET /connectors/{name}/status`` answer: verdict ``running``
    (connector and every task RUNNING), ``failed`` (words: which part failed and the first line of
    its trace), ``halted`` (STOPPED or PAUSED on purpose) or ``pending``; words name the states."""
    if not status:
        return "pending", "not listed yet"
    state = (status.get("connector") or {}).get("state") or "UNKNOWN"
    tasks = sorted(status.get("tasks") or [], key=lambda t: t.get("id", 0))
    if state == "FAILED":
        return "failed", f"connector {name} FAILED: {_first_line((status.get('connector') or {}).get('trace'))}"
    for task in tasks:
        if task.get("state") == "FAILED":
            return "failed", (f"connector {name}: task {task.get('id')} FAILED on worker {task.get('worker_id', '?')}: "
                              f"{_first_line(task.get('trace'))}")
    words = f"connector {state}, " + (", ".join(f"task {t.get('id')} {t.get('state')}" for t in tasks) or "no task")
    if state in _HALTED:
        return "halted", words
    if state == "RUNNING" and all(t.get("state") == "RUNNING" for t in tasks):
        return "running", words
    return "pending", words


def wait_healthy(client: ConnectClient, name: str, timeout: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> str:
    """Wait until ``name`` and all its tasks run (held for ``HEALTH_SETTLE_S``); what it found.

    ProvisionFailed at once when the connector or a task is FAILED (the first line of its trace),
    and after ``timeout`` seconds naming the states; a STOPPED or PAUSED connector returns at once.
    """
    start = clock()
    healthy_since: float | None = None
    while True:
        verdict, words = connector_health(name, client.connector_status(name))
        now = clock()
        if verdict == "failed":
            raise ProvisionFailed(f"{words.rstrip('.')}. The whole trace is in GET /connectors/{name}/status and the worker's "
                                  "log: fix the cause (often a cluster the worker cannot reach, or a missing "
                                  "secret in the worker's environment), then run pulumi up again")
        if verdict == "halted":
            return words
        healthy_since = (healthy_since if healthy_since is not None else now) if verdict == "running" else None
        if healthy_since is not None and now - healthy_since >= min(HEALTH_SETTLE_S, timeout):
            return words
        if now - start >= timeout:
            raise ProvisionFailed(f"connector {name} is not running after {timeout:.0f} s ({words}): check the "
                                  "Connect worker's log, or give it longer with connect.readyTimeoutSeconds")
        sleep(HEALTH_POLL_S)


class ConnectorProvider(Provider):
    """Registers connectors with ``ConnectClient``; holds nothing."""

    input_keys = ("connectUrl", "name", "config", "readyTimeoutSeconds")
    identity_keys = ("connectUrl", "name")

    def problems(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Iterable[CheckFailure]:
        url = news.get("connectUrl")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            yield CheckFailure("connectUrl", "the Connect REST URL must start with http:// or https:// "
                                             "(set connect.restUrl in the spec)")
        config = news.get("config")
        if not isinstance(config, dict) or "connector.class" not in config:
            yield CheckFailure("config", "a connector config needs connector.class")
        elif any(not isinstance(v, str) for v in config.values()):
            yield CheckFailure("config", "connector config values must be strings")

    def deletes_first(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        # The same name at another URL may be the same Connect cluster under another address:
        # registered first, the "new" connector would be the old one, which the delete then removes.
        return olds.get("name") == news.get("name")

    def diff_properties(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        return DiffResult(changes=diff_connector(news.get("config"), olds.get("config")).action != "no-op")

    def read_live(self, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return read_connector(ConnectClient(props["connectUrl"]), props)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return undone(self.apply_create(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return undone(self.apply_update(_id, olds, news))

    def apply_create(self, props: dict[str, Any]) -> CreateResult | FailedAfterStart:
        client = ConnectClient(props["connectUrl"])
        existing = client.connector_config(props["name"])
        client.put_connector_config(props["name"], dict(props["config"]))
        id_, outs = _recorded_id(props, props["name"]), self.outputs(props, adopted=existing is not None)
        try:
            self._wait(client, props)
        except ProvisionFailed as exc:
            if existing is not None:
                return FailedAfterStart(id_, outs, str(exc), "registered before this stack: recorded as adopted, "
                                        "`pulumi destroy` leaves it", undo=lambda: "")

            def remove() -> str:
                # Left registered unrecorded, the next up would take it for one that was there before
                # the stack (adopted, left by destroy).
                client.delete_connector(props["name"])
                return "the connector was removed again; pulumi up registers it anew"

            return FailedAfterStart(id_, outs, str(exc), "it stays registered, recorded in the stack: "
                                    "`pulumi destroy` removes it", undo=remove)
        return CreateResult(id_, outs)

    def apply_update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult | FailedAfterStart:
        client = ConnectClient(news["connectUrl"])
        client.put_connector_config(news["name"], dict(news["config"]))
        outs = self.outputs(news, adopted=bool(olds.get(ADOPTED)))
        try:
            self._wait(client, news)
        except ProvisionFailed as exc:
            # Unrecorded, the old config stays in the state: the next up puts the new one again.
            return FailedAfterStart(_id, outs, str(exc), "its new config stays registered and recorded", undo=lambda: "")
        return UpdateResult(outs)

    @staticmethod
    def _wait(client: ConnectClient, props: Mapping[str, Any]) -> None:
        timeout = props.get("readyTimeoutSeconds")
        timeout = CONNECT_READY_TIMEOUT_SECONDS_DEFAULT if timeout is None else float(timeout)
        if timeout > 0:
            wait_healthy(client, props["name"], timeout)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if self.leave_adopted(props, f"connector {props['name']} was registered before this stack"):
            return
        ConnectClient(props["connectUrl"]).delete_connector(props["name"])


class Connector(ProvisionedResource, module="connect", name="Connector", provider=ConnectorProvider()):
    """An MM2 connector on a Connect cluster (type ``pulumi-python:dynamic/connect:Connector``)."""


def _deployment_inputs(state: DesiredState, resource: DeploymentResource, _settings: ProgramSettings | None) -> dict[str, Any]:
    """Inputs for a connector engine connect's deployment names (``item``: ``connector``, ``connectUrl``)."""
    return connector_inputs(resource.item["connectUrl"], resource.item["connector"], state.connect.ready_timeout_seconds)


def _recorded_id(inputs: Mapping[str, Any], name: str) -> str:
    """The ID a connector's create records: ``<connectUrl>/connectors/<name>``."""
    return f"{inputs['connectUrl'].rstrip('/')}/connectors/{name}"


KIND = ResourceKind(
    "Connector", Connector,
    "An MM2 connector on the Kafka Connect REST API. Import ID: its name, or `<connectUrl>/connectors/<name>`.",
    learned={ADOPTED: {"type": "boolean"}},
    import_learned=lambda _inputs, _live: {ADOPTED: True},
    recorded_id=_recorded_id,
    deployment_inputs=_deployment_inputs,
    output="connectors", many=True)
"""The connector kind (``kinds.KINDS``); ``DisasterRecovery.connectors`` lists their names."""

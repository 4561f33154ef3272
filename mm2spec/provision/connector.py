"""An MirrorMaker 2 connector registered on the Kafka Connect REST API (engine ``connect``).

Inputs: ``connectUrl`` (the spec's ``connect.restUrl``), ``name`` (``<flow>-Mirror<Kind>Connector``)
and ``config``, the rendered connector config (``mm2spec.render.connectors``). The config holds no
password: SASL settings reference the secret as ``${env:NAME}``, resolved by the worker. Outputs
add ``adopted``: the connector was registered before the stack took it over; ``destroy`` leaves it.

Replaced: another name or another Connect cluster (URL). In place: the config, through
``PUT /connectors/{name}/config``; what changed is ``mm2spec.plan.diff.diff_connector``, the function
``mm2spec plan`` uses.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from mm2spec.live.connect import ConnectClient
from mm2spec.plan.diff import diff_connector

INPUT_KEYS = ("connectUrl", "name", "config")
IDENTITY_KEYS = ("connectUrl", "name")


def connector_inputs(connect_url: str, connector: dict) -> dict[str, Any]:
    """Inputs for one rendered connector (``{"name": ..., "config": {...}}``)."""
    return {"connectUrl": connect_url, "name": connector["name"], "config": dict(connector["config"])}


class ConnectorProvider(ResourceProvider):
    """Registers connectors with ``ConnectClient``; holds nothing."""

    serialize_as_secret_always = False

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        url = news.get("connectUrl")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            failures.append(CheckFailure("connectUrl", "the Connect REST URL must start with http:// or https:// "
                                                       "(set connect.restUrl in the spec)"))
        config = news.get("config")
        if not isinstance(config, dict) or "connector.class" not in config:
            failures.append(CheckFailure("config", "a connector config needs connector.class"))
        elif any(not isinstance(v, str) for v in config.values()):
            failures.append(CheckFailure("config", "connector config values must be strings"))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in IDENTITY_KEYS if olds.get(k) != news.get(k)]
        if replaces:
            return DiffResult(changes=True, replaces=replaces, delete_before_replace=olds.get("name") == news.get("name"))
        change = diff_connector(news.get("config"), olds.get("config"))
        return DiffResult(changes=change.action != "no-op")

    def create(self, props: dict[str, Any]) -> CreateResult:
        client = ConnectClient(props["connectUrl"])
        existing = client.connector_config(props["name"])
        client.put_connector_config(props["name"], dict(props["config"]))
        outs = {k: props.get(k) for k in INPUT_KEYS}
        outs["adopted"] = existing is not None
        return CreateResult(f"{props['connectUrl'].rstrip('/')}/connectors/{props['name']}", outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ConnectClient(news["connectUrl"]).put_connector_config(news["name"], dict(news["config"]))
        outs = {k: news.get(k) for k in INPUT_KEYS}
        outs["adopted"] = bool(olds.get("adopted"))
        return UpdateResult(outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if props.get("adopted"):
            pulumi.log.info(f"connector {props['name']} was registered before this stack: left in place")
            return
        ConnectClient(props["connectUrl"]).delete_connector(props["name"])


PROVIDER = ConnectorProvider()


class Connector(Resource, module="connect", name="Connector"):
    """An MM2 connector on a Connect cluster (type ``pulumi-python:dynamic/connect:Connector``)."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(PROVIDER, name, props, opts)

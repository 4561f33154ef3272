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

from typing import Any, Iterable, Mapping

from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, UpdateResult

from mm2spec.live.connect import ConnectClient
from mm2spec.plan.diff import diff_connector
from mm2spec.provision.base import ADOPTED, ProvisionedResource, Provider


def connector_inputs(connect_url: str, connector: dict) -> dict[str, Any]:
    """Inputs for one rendered connector (``{"name": ..., "config": {...}}``)."""
    return {"connectUrl": connect_url, "name": connector["name"], "config": dict(connector["config"])}


class ConnectorProvider(Provider):
    """Registers connectors with ``ConnectClient``; holds nothing."""

    input_keys = ("connectUrl", "name", "config")
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

    def create(self, props: dict[str, Any]) -> CreateResult:
        client = ConnectClient(props["connectUrl"])
        existing = client.connector_config(props["name"])
        client.put_connector_config(props["name"], dict(props["config"]))
        return CreateResult(f"{props['connectUrl'].rstrip('/')}/connectors/{props['name']}",
                            self.outputs(props, adopted=existing is not None))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ConnectClient(news["connectUrl"]).put_connector_config(news["name"], dict(news["config"]))
        return UpdateResult(self.outputs(news, adopted=bool(olds.get(ADOPTED))))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if self.leave_adopted(props, f"connector {props['name']} was registered before this stack"):
            return
        ConnectClient(props["connectUrl"]).delete_connector(props["name"])


class Connector(ProvisionedResource, module="connect", name="Connector", provider=ConnectorProvider()):
    """An MM2 connector on a Connect cluster (type ``pulumi-python:dynamic/connect:Connector``)."""

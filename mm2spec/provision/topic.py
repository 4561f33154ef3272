"""A Kafka topic as a Pulumi resource.

Inputs: ``cluster`` and ``connection`` (see ``connection``), ``password`` (secret), ``name``,
``partitions``, ``configs`` (only what the topic sets), and ``options``: ``replicationFactor``
(-1: the broker default), ``allowReplacement`` (the mirror's ``allowTopicReplacement``) and, for
the reader of a preview, ``kind`` (internal / mirror), ``purpose`` and ``sourceTopic``. Outputs
add ``adopted``: the topic existed before the stack created it.

Replaced: when the cluster alias or the name changes; when the partition count decreases and
``allowReplacement`` is set (delete first: the new topic has the same name). Refused: a partition
decrease without ``allowReplacement`` (check fails with the reason, so preview and up stop before
touching anything). In place: more partitions, and configs through incremental alter (SET what
changed, DELETE what the spec no longer sets).

Diff compares the new inputs with the recorded outputs through ``mm2spec.plan.diff.diff_topic`` (no
network: drift is ``mm2spec plan``'s job); create and update read the live topic and apply the
same diff to it. An adopted topic is not deleted by ``destroy``: its data was not the stack's.
"""

from __future__ import annotations

import re
import time
from typing import Any, Mapping

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

from mm2spec.plan.desired import TopicSpec
from mm2spec.plan.diff import Change, diff_configs, diff_topic
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.state import LiveTopic
from mm2spec.provision import connection
from mm2spec.errors import ProvisionFailed
from mm2spec.provision.connection import CONNECTION_KEYS

INPUT_KEYS = CONNECTION_KEYS + ("name", "partitions", "configs", "options")
IDENTITY_KEYS = ("cluster", "name")
_LEGAL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def topic_inputs(spec: TopicSpec, conn: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs of the Topic resource for a desired topic."""
    return {
        **conn,
        "name": spec.name,
        "partitions": spec.partitions,
        "configs": dict(spec.configs),
        "options": {
            "replicationFactor": spec.replication_factor,
            "allowReplacement": spec.allow_replacement,
            "kind": spec.kind,
            "purpose": spec.purpose,
            "sourceTopic": spec.source_topic,
        },
    }


def _options(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return props.get("options") or {}


def _rf(props: Mapping[str, Any]) -> int:
    return int(_options(props).get("replicationFactor", -1))


def recorded_topic(props: Mapping[str, Any]) -> LiveTopic:
    """The topic as the stack last left it (outputs or old inputs), in the diff's terms."""
    return LiveTopic(props["name"], int(props["partitions"]), _rf(props), dict(props.get("configs") or {}))


def topic_change(props: Mapping[str, Any], live: LiveTopic | None) -> Change:
    """What ``props`` (desired inputs) needs against ``live``: the shared diff."""
    return diff_topic(props["name"], int(props["partitions"]), dict(props.get("configs") or {}), live,
                      _rf(props), bool(_options(props).get("allowReplacement")))


def _where(props: Mapping[str, Any]) -> str:
    return f'cluster "{props["cluster"]}": topic {props["name"]}'


class TopicProvider(ResourceProvider):
    """CRUD of a topic through ``KafkaAdmin``; holds nothing, so it pickles to a class reference."""

    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        connection.remember_config(req.config)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        name = news.get("name")
        if not isinstance(name, str) or not _LEGAL_NAME.match(name) or name in (".", ".."):
            failures.append(CheckFailure("name", f"{name!r} is not a legal Kafka topic name "
                                                 "(letters, digits, '.', '_', '-'; at most 249)"))
        partitions = news.get("partitions")
        if not isinstance(partitions, (int, float)) or int(partitions) < 1:
            failures.append(CheckFailure("partitions", f"partitions must be at least 1, got {partitions!r}"))
        elif olds and all(olds.get(k) == news.get(k) for k in IDENTITY_KEYS) and "partitions" in olds:
            change = topic_change(news, recorded_topic(olds))
            if change.action == "refused":
                failures.append(CheckFailure("partitions", f'cluster "{news["cluster"]}": {change.reason} '
                                                           f"(the spec now asks for {int(news['partitions'])})"))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in IDENTITY_KEYS if olds.get(k) != news.get(k)]
        if replaces:
            return DiffResult(changes=True, replaces=replaces, delete_before_replace=True)
        change = topic_change(news, recorded_topic(olds))
        if change.action == "replace":
            return DiffResult(changes=True, replaces=["partitions"], delete_before_replace=True)
        if change.action == "refused":  # check refuses first; this is a second line of defence
            raise ProvisionFailed(f'cluster "{news["cluster"]}": {change.reason}')
        other = connection.changed_inputs(olds, news, INPUT_KEYS)
        return DiffResult(changes=change.action != "no-op" or bool(other))

    def create(self, props: dict[str, Any]) -> CreateResult:
        admin = connection.admin(props)
        name = props["name"]
        created = admin.create_topic(name, int(props["partitions"]), _rf(props),
                                     dict(props.get("configs") or {}), exist_ok=True)
        if not created:
            # Already there (made by hand, by MM2, or by an earlier stack): take it over as it is,
            # bring it to the spec in place, and leave it in place on destroy.
            self._reconcile(admin, props)
        outs = {k: props.get(k) for k in INPUT_KEYS + (connection.PASSWORD,)}
        outs["adopted"] = not created
        return CreateResult(f"{props['cluster']}/{name}", outs)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        admin = connection.admin(news)
        self._reconcile(admin, news)
        outs = {k: news.get(k) for k in INPUT_KEYS + (connection.PASSWORD,)}
        outs["adopted"] = bool(olds.get("adopted"))
        return UpdateResult(outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if props.get("adopted"):
            pulumi.log.info(f"{_where(props)} existed before this stack: left in place")
            return
        admin = connection.admin(props, prefer_current=True)
        admin.delete_topic(props["name"])
        _wait_gone(admin, props["name"])

    @staticmethod
    def _reconcile(admin: KafkaAdmin, props: Mapping[str, Any]) -> None:
        """Bring the live topic to ``props`` in place (grow partitions, incremental config alter)."""
        name = props["name"]
        live = admin.topics([name]).get(name)
        if live is None:  # deleted behind the stack's back: create it again
            admin.create_topic(name, int(props["partitions"]), _rf(props),
                               dict(props.get("configs") or {}))
            return
        change = topic_change(props, live)
        if change.action in ("refused", "replace"):
            reason = change.reason or "it cannot be changed in place"
            raise ProvisionFailed(f"{_where(props)} exists with {live.partitions} partitions: {reason}")
        wanted = int(props["partitions"])
        if wanted > live.partitions:
            admin.grow_partitions(name, wanted)
        to_set, to_delete = diff_configs(dict(props.get("configs") or {}), live.configs)
        admin.alter_topic_configs(name, to_set, to_delete)


def _wait_gone(admin: KafkaAdmin, name: str, timeout: float = 15.0) -> None:
    """Deletion completes asynchronously; wait so a replacement can create the same name."""
    deadline = time.monotonic() + timeout
    while name in admin.topics([name], with_configs=False) and time.monotonic() < deadline:
        time.sleep(0.2)


PROVIDER = TopicProvider()


class Topic(Resource, module="kafka", name="Topic"):
    """A Kafka topic managed by the stack (type ``pulumi-python:dynamic/kafka:Topic``)."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        secret = pulumi.ResourceOptions(additional_secret_outputs=[connection.PASSWORD])
        super().__init__(PROVIDER, name, props, pulumi.ResourceOptions.merge(secret, opts))

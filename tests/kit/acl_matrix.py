"""Least privilege as a matrix: for every ACL operation x resource type that the ACLs derived for
the mirror's principal do not grant, a real client call as that principal, which must be refused.

Used by ``tests/integration/test_least_privilege.py`` and ``benchmarks/least_privilege.py`` on the
secured dev pair. A cell is *granted* when a derived binding (or one that Kafka's authorizer
counts as implying it: READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
DESCRIBE_CONFIGS, WRITE on any topic implies IDEMPOTENT_WRITE) covers the probed resource; every
other cell is probed. Probes that could change something use ``validate_only`` where Kafka has it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

from mm2spec.spec.model import AclBinding

#: The operations Kafka's authorizer checks, per resource type (Kafka's ACL documentation).
OPERATIONS = {
    "TOPIC": ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "GROUP": ("READ", "DESCRIBE", "DELETE"),
    "CLUSTER": ("CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                "IDEMPOTENT_WRITE"),
    "TRANSACTIONAL_ID": ("WRITE", "DESCRIBE"),
}
#: An operation is also allowed by any of these (Kafka's implied operations).
IMPLIED_BY = {"DESCRIBE": ("READ", "WRITE", "DELETE", "ALTER"), "DESCRIBE_CONFIGS": ("ALTER_CONFIGS",)}
#: One probe's wait for the broker's answer; a refusal comes back in milliseconds.
PROBE_TIMEOUT_S = 15.0
CLUSTER_RESOURCE = "kafka-cluster"

_QUIET = logging.getLogger("mm2spec.dev.acl-matrix")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


@dataclass(frozen=True)
class Cell:
    """One operation on one resource of one cluster, as the mirror's principal."""

    cluster: str
    resource_type: str
    resource: str
    """The probed name, with what it is, e.g. ``orders (mirrored)``."""
    operation: str
    granted: bool
    """A derived binding (or an implying one) covers it: not probed."""
    call: str = ""
    """The client call that probed it."""
    outcome: str = ""
    """The error code the broker answered (e.g. ``TOPIC_AUTHORIZATION_FAILED``), or ``ALLOWED``."""

    @property
    def denied(self) -> bool:
        """Refused for this cell's reason: the authorization error of its own resource type."""
        return self.outcome == refusal(self.resource_type, self.operation)


def refusal(resource_type: str, operation: str) -> str:
    """The error a broker answers when ``operation`` on a ``resource_type`` is not allowed.
    CreateTopics answers TOPIC_AUTHORIZATION_FAILED whether CREATE on the cluster or on the topic
    is missing."""
    if resource_type == "CLUSTER" and operation == "CREATE":
        return "TOPIC_AUTHORIZATION_FAILED"
    return f"{resource_type}_AUTHORIZATION_FAILED"


def grants(bindings: Iterable[AclBinding], cluster: str, resource_type: str, name: str, operation: str) -> bool:
    """Does any ALLOW binding on ``cluster`` give ``operation`` (or ALL, or an implying one) on ``name``?"""
    wanted = {operation, "ALL", *IMPLIED_BY.get(operation, ())}
    bindings = [b for b in bindings if b.cluster == cluster and b.permission == "ALLOW"]
    if resource_type == "CLUSTER" and operation == "IDEMPOTENT_WRITE":
        # KIP-679: WRITE on any topic or transactional id lets a producer be idempotent.
        if any(b.operation == "WRITE" and b.resource_type in ("TOPIC", "TRANSACTIONAL_ID") for b in bindings):
            return True
    return any(b.resource_type == resource_type and b.operation in wanted and _covers(b, name) for b in bindings)


def _covers(binding: AclBinding, name: str) -> bool:
    if binding.pattern_type == "PREFIXED":
        return name.startswith(binding.resource_name)
    return binding.resource_name in ("*", name)


# ------------------------------------------------------------------------------------- probes


class Prober:
    """Real client calls as one principal on one cluster (``conf``: confluent_kafka settings).

    ``topic`` and ``group`` are ones the principal may describe (the mirrored ones): probes that
    need a topic or a group besides the probed resource use them, so the probed resource is the
    only thing the broker can refuse.
    """

    def __init__(self, conf: dict, *, topic: str, group: str):
        self.conf = {**conf, "logger": _QUIET}
        self.topic, self.group = topic, group

    def probe(self, resource_type: str, operation: str, name: str) -> tuple[str, str]:
        """(the call, the broker's answer: an error code name or ``ALLOWED``)."""
        call, run = self._probes(resource_type, name)[operation]
        return call, _outcome(run)

    def _probes(self, rtype: str, name: str) -> dict[str, tuple[str, Callable[[], None]]]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection
        from confluent_kafka.admin import (AclBinding as KafkaAcl, AclOperation, AclPermissionType,
                                           AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                           ResourcePatternType, ResourceType)

        admin = self._admin()
        if rtype == "TOPIC":
            retention = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
            return {
                "READ": ("Metadata + Fetch (consumer assign)", lambda: self._fetch(name)),
                "WRITE": ("produce", lambda: self._produce(name, idempotent=False)),
                "CREATE": ("CreateTopics (validate only)",
                           lambda: _one(admin.create_topics([NewTopic(name, 1, -1)], validate_only=True))),
                "DELETE": ("DeleteTopics", lambda: _one(admin.delete_topics([name]))),
                "ALTER": ("CreatePartitions (validate only)",
                          lambda: _one(admin.create_partitions([NewPartitions(name, 8)], validate_only=True))),
                "DESCRIBE": ("DescribeTopics", lambda: _one(admin.describe_topics(TopicCollection([name])))),
                "DESCRIBE_CONFIGS": ("DescribeConfigs",
                                     lambda: _one(admin.describe_configs([ConfigResource("topic", name)]))),
                "ALTER_CONFIGS": ("IncrementalAlterConfigs (validate only)", lambda: _one(
                    admin.incremental_alter_configs([ConfigResource("topic", name, incremental_configs=[retention])],
                                                    validate_only=True))),
            }
        if rtype == "GROUP":
            return {
                "READ": ("JoinGroup (subscribe)", lambda: self._join(name)),
                "DESCRIBE": ("OffsetFetch", lambda: _one(
                    admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)]))),
                "DELETE": ("DeleteGroups", lambda: _one(admin.delete_consumer_groups([name]))),
            }
        if rtype == "CLUSTER":
            acl = KafkaAcl(ResourceType.TOPIC, f"lp-{uuid.uuid4().hex[:6]}", ResourcePatternType.LITERAL,
                           "User:nobody", "*", AclOperation.READ, AclPermissionType.ALLOW)
            broker = ConfigResource("broker", "1", incremental_configs=[
                ConfigEntry("log.cleaner.threads", "1", incremental_operation=AlterConfigOpType.SET)])
            fresh = f"lp-new-{uuid.uuid4().hex[:6]}"
            return {
                "CREATE": ("CreateTopics of a new name (validate only)",
                           lambda: _one(admin.create_topics([NewTopic(fresh, 1, -1)], validate_only=True))),
                "ALTER": ("CreateAcls", lambda: _one(admin.create_acls([acl]))),
                "DESCRIBE": ("DescribeAcls", lambda: admin.describe_acls(_any_acl(), request_timeout=PROBE_TIMEOUT_S)
                             .result(PROBE_TIMEOUT_S)),
                "CLUSTER_ACTION": ("(broker-to-broker requests only: no client call)", None),
                "DESCRIBE_CONFIGS": ("DescribeConfigs of the broker",
                                     lambda: _one(admin.describe_configs([ConfigResource("broker", "1")]))),
                "ALTER_CONFIGS": ("IncrementalAlterConfigs of the broker (validate only)",
                                  lambda: _one(admin.incremental_alter_configs([broker], validate_only=True))),
                "IDEMPOTENT_WRITE": ("InitProducerId (idempotent producer)",
                                     lambda: self._produce(self.topic, idempotent=True)),
            }
        if rtype == "TRANSACTIONAL_ID":
            init = ("InitTransactions (FindCoordinator + InitProducerId)", lambda: self._init_transactions(name))
            return {"WRITE": init, "DESCRIBE": init}
        raise ValueError(f"no probes for resource type {rtype}")

    def _admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.conf)

    def _fetch(self, topic: str) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({**self.conf, "group.id": self.group, "enable.auto.commit": False})
        try:
            # librdkafka treats a topic it may not describe as absent and never fetches it: the
            # broker refuses it already in the metadata a fetch needs first.
            found = consumer.list_topics(topic, timeout=PROBE_TIMEOUT_S).topics.get(topic)
            if found is not None and found.error is not None:
                raise KafkaException(found.error)
            consumer.assign([TopicPartition(topic, 0, -2)])  # -2: the beginning, no committed offset wanted
            message = consumer.poll(PROBE_TIMEOUT_S)
            if message is not None and message.error():
                raise KafkaException(message.error())
        finally:
            consumer.close()

    def _produce(self, topic: str, *, idempotent: bool) -> None:
        from confluent_kafka import KafkaException, Producer

        producer = Producer({**self.conf, "enable.idempotence": idempotent, "acks": "all",
                             "message.timeout.ms": int(PROBE_TIMEOUT_S * 1000)})
        if idempotent:
            # A refused producer id is a fatal error, which flush raises (with a delivery callback
            # librdkafka reports only the purged record).
            producer.produce(topic, value=b"least-privilege probe")
            producer.flush(PROBE_TIMEOUT_S * 2)
            return
        failed = []
        producer.produce(topic, value=b"least-privilege probe", on_delivery=lambda err, _m: err and failed.append(err))
        producer.flush(PROBE_TIMEOUT_S * 2)
        if failed:
            raise KafkaException(failed[0])

    def _join(self, group: str) -> None:
        """A subscribing consumer joins ``group`` (librdkafka reports a refused commit only as
        ``_WAIT_COORD``; a refused join comes back as the broker's error)."""
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer({**self.conf, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.subscribe([self.topic])
            message = consumer.poll(PROBE_TIMEOUT_S)
            if message is not None and message.error():
                raise KafkaException(message.error())
        finally:
            consumer.close()

    def _init_transactions(self, transactional_id: str) -> None:
        from confluent_kafka import Producer

        Producer({**self.conf, "transactional.id": transactional_id}).init_transactions(PROBE_TIMEOUT_S)


def _one(futures: dict) -> None:
    for future in futures.values():
        future.result(PROBE_TIMEOUT_S)


def _any_acl():
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def _outcome(run: Callable[[], None] | None) -> str:
    from confluent_kafka import KafkaException

    if run is None:
        return "NOT PROBED"
    try:
        run()
    except KafkaException as failure:
        error = failure.args[0]
        return error.name() if hasattr(error, "name") else str(error)
    return "ALLOWED"


# ------------------------------------------------------------------------------------- matrix


def matrix(bindings: Iterable[AclBinding], probers: dict[str, Prober],
           resources: dict[str, dict[str, list[str]]]) -> list[Cell]:
    """Every (cluster, resource type, resource, operation) cell; ungranted ones probed.

    ``resources[cluster][resource type]`` lists ``"name (what it is)"`` entries to probe (the
    name is the text before the first space); CLUSTER always probes ``kafka-cluster``.
    """
    bindings = list(bindings)
    cells = []
    for cluster, prober in probers.items():
        for rtype, operations in OPERATIONS.items():
            names = [CLUSTER_RESOURCE] if rtype == "CLUSTER" else resources[cluster].get(rtype, [])
            for label in names:
                name = label.split(" ", 1)[0]
                for operation in operations:
                    if grants(bindings, cluster, rtype, name, operation):
                        cells.append(Cell(cluster, rtype, label, operation, True))
                    else:
                        call, outcome = prober.probe(rtype, operation, name)
                        cells.append(Cell(cluster, rtype, label, operation, False, call, outcome))
    return cells


def render(cells: list[Cell]) -> str:
    """The matrix as a text table, one line a cell."""
    lines = [f"{'cluster':<8} {'type':<17} {'resource':<44} {'operation':<17} {'derived ACLs':<12} "
             f"{'result':<38} call"]
    for c in cells:
        result = "-" if c.granted else ("denied: " + c.outcome if c.denied else c.outcome)
        lines.append(f"{c.cluster:<8} {c.resource_type:<17} {c.resource:<44} {c.operation:<17} "
                     f"{'grant' if c.granted else 'no':<12} {result:<38} {c.call}")
    probed = [c for c in cells if not c.granted and c.outcome != "NOT PROBED"]
    lines.append(f"{len(cells)} cells: {sum(c.granted for c in cells)} granted, {len(probed)} probed, "
                 f"{sum(c.denied for c in probed)} denied, {sum(not c.denied for c in probed)} not denied")
    return "\n".join(lines)


def mirror_matrix(bindings: Iterable[AclBinding], clients: dict[str, dict], *, topic: str, outside: str, group: str,
                  other_group: str, transactional_id: str) -> list[Cell]:
    """The matrix for one flow: ``clients[alias]`` are the principal's client settings for the
    source and the target cluster; ``topic`` and ``group`` are mirrored (the topic keeps its name
    on the target: identity policy), ``outside``, ``other_group`` and ``transactional_id`` are not
    the mirror's (``outside`` exists on both clusters)."""
    probers = {alias: Prober(conf, topic=topic, group=group) for alias, conf in clients.items()}
    resources = {alias: {"TOPIC": [f"{topic} (mirrored)", f"{outside} (not mirrored)"],
                         "GROUP": [f"{group} (mirrored)", f"{other_group} (not mirrored)"],
                         "TRANSACTIONAL_ID": [f"{transactional_id} (not the mirror's)"]} for alias in clients}
    return matrix(bindings, probers, resources)

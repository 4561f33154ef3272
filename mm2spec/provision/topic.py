"""A Kafka topic as a Pulumi resource.

Inputs: ``cluster`` and ``connection`` (see ``connection``), ``password`` (secret), ``name``,
``partitions``, ``configs`` (only what the topic sets), and ``options``: ``replicationFactor``
(-1: the broker default), ``allowReplacement`` (the mirror's ``allowTopicReplacement``) and, for
the reader of a preview, ``kind`` (internal / mirror), ``purpose`` and ``sourceTopic``. Outputs
add ``adopted``: the topic held records before the stack took it over (see below).

Replaced: when the cluster alias or the name changes; when the partition count decreases and
``allowReplacement`` is set (delete first: the new topic has the same name). Refused: a partition
decrease without ``allowReplacement`` (check fails with the reason, so preview and up stop before
touching anything). In place: more partitions, and configs through incremental alter (SET what
changed, DELETE what the spec no longer sets).

Diff compares the new inputs with the recorded outputs through ``mm2spec.plan.diff.diff_topic`` (no
network); create and update read the live topic and apply the same diff to it. ``pulumi refresh``
reads the live topic (``read_topic``: its partition count and the configs set on it) into the
outputs, so a config altered or a partition added behind the stack shows, and the next preview
makes the change ``mm2spec plan`` shows (a partition added is then refused, as in the plan); a
topic deleted behind the stack reads back gone, and the next ``up`` creates it. A refresh of many
topics on one cluster shares one read of the whole cluster (``mm2spec.provision.reads``).

What ``destroy`` deletes: a topic the stack created, and a topic it found already there but empty
(no partition had ever been written to: every end offset 0). Such a topic is what a ``pulumi up``
killed after its CreateTopics but before Pulumi recorded the create leaves behind (with
``PULUMI_SKIP_CHECKPOINTS`` none of a killed run's creates is recorded), so the next run must
count it as the stack's; whatever it holds later the stack's mirror wrote. A topic that held
records when the stack found it is *adopted* (output ``adopted``): brought to the spec in place
and left by ``destroy``, since its data was not the stack's. A topic the stack never declared is
never touched.
A delete returns once the brokers no longer list the topic (a replacement takes the name right
after), and fails saying so if they still do after ``TOPIC_DELETE_WAIT``.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Iterable, Mapping

from confluent_kafka.admin import NewTopic

from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, UpdateResult

from mm2spec.errors import ProvisionFailed
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.types import LiveTopic
from mm2spec.plan.desired import TopicSpec
from mm2spec.plan.diff import Change, diff_configs, diff_topic
from mm2spec.provision import batch, connection, reads
from mm2spec.provision.base import ADOPTED, ProvisionedResource, Provider, ResourceKind
from mm2spec.provision.connection import CONNECTION_KEYS

_LEGAL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
#: How long ``delete`` waits for the brokers to stop listing a deleted topic. Kafka deletes
#: asynchronously (DeleteTopics answers before every broker has applied it), and a replacement
#: creates the same name right after: too early, its create would find the old topic and adopt it,
#: data and partitions included. A healthy cluster is done within a second or two; 15 s is the
#: admin client's own request timeout, enough for a loaded cluster without leaving ``pulumi up``
#: waiting long on one whose brokers are down.
TOPIC_DELETE_WAIT = 15.0
#: Between two looks at a deleted topic: a delete usually completes within a second, so look often.
TOPIC_DELETE_POLL = 0.2


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


def read_topic(admin: KafkaAdmin, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The recorded outputs a live topic changes (``partitions``, ``configs`` and, when the spec
    names a replication factor, the live one in ``options``); None when the topic is gone.

    One ``KafkaAdmin.topics`` read (DescribeTopics and DescribeConfigs of this topic): only configs
    set on the topic count, as in ``mm2spec plan``, so broker defaults never show as drift.
    """
    return topic_read(admin.topics([props["name"]]).get(props["name"]), props)


def read_all_topics(admin: KafkaAdmin) -> dict[str, LiveTopic]:
    """Every topic of the cluster with the configs set on it: one metadata listing and one batched
    DescribeConfigs, what a large refresh shares (``mm2spec.provision.reads``)."""
    return admin.topics(include_internal=True)


def topic_read(live: LiveTopic | None, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """``read_topic``'s answer given the live topic (None: gone)."""
    if live is None:
        return None
    read: dict[str, Any] = {"partitions": live.partitions, "configs": dict(live.configs)}
    if _rf(props) > 0:  # -1 (the broker's default) is never compared, so it is kept as recorded
        read["options"] = {**_options(props), "replicationFactor": live.replication_factor}
    return read


def _where(props: Mapping[str, Any]) -> str:
    return f'cluster "{props["cluster"]}": topic {props["name"]}'


class TopicProvider(Provider):
    """CRUD of a topic through ``KafkaAdmin``; holds nothing, so it pickles to a class reference."""

    input_keys = CONNECTION_KEYS + ("name", "partitions", "configs", "options")
    identity_keys = ("cluster", "name")
    secret_keys = (connection.PASSWORD,)

    def problems(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Iterable[CheckFailure]:
        name = news.get("name")
        if not isinstance(name, str) or not _LEGAL_NAME.match(name) or name in (".", ".."):
            yield CheckFailure("name", f"{name!r} is not a legal Kafka topic name "
                                       "(letters, digits, '.', '_', '-'; at most 249)")
        partitions = news.get("partitions")
        if not isinstance(partitions, (int, float)) or int(partitions) < 1:
            yield CheckFailure("partitions", f"partitions must be at least 1, got {partitions!r}")
        elif olds and all(olds.get(k) == news.get(k) for k in self.identity_keys) and "partitions" in olds:
            change = topic_change(news, recorded_topic(olds))
            if change.action == "refused":
                yield CheckFailure("partitions", f'cluster "{news["cluster"]}": {change.reason} '
                                                 f"(the spec now asks for {int(news['partitions'])})")

    def deletes_first(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        return True  # the replacement for a partition decrease takes the same name

    def diff_properties(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        change = topic_change(news, recorded_topic(olds))
        if change.action == "replace":
            return self.replacement(["partitions"], olds, news)
        if change.action == "refused":  # check refuses first; this is a second line of defence
            raise ProvisionFailed(f'cluster "{news["cluster"]}": {change.reason}')
        return DiffResult(changes=change.action != "no-op" or bool(self.changed_inputs(olds, news)))

    def read_live(self, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
        admin = connection.admin(props, prefer_current=True)
        everything = reads.shared("topics", connection.cluster_from(props), lambda: read_all_topics(admin))
        if everything is not None and props["name"] in everything:
            return topic_read(everything[props["name"]], props)
        # Read alone: few reads of this cluster so far, or a name the listing lacks (a listing can
        # lag behind a topic created a moment ago; a topic gone is confirmed by its own describe).
        return read_topic(admin, props)

    def create(self, props: dict[str, Any]) -> CreateResult:
        reads.forget(connection.cluster_from(props))
        name = props["name"]
        created = _create(props)
        adopted = False
        if not created:
            # Already there (made by a killed run of this stack, by hand, by MM2): take it over as it
            # is and bring it to the spec in place; adopted (left by destroy) only if it holds data.
            admin = connection.admin(props)
            adopted = _held_records(admin, name)
            self._reconcile(admin, props)
        return CreateResult(f"{props['cluster']}/{name}", self.outputs(props, adopted=adopted))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        reads.forget(connection.cluster_from(news))
        self._reconcile(connection.admin(news), news)
        return UpdateResult(self.outputs(news, adopted=bool(olds.get(ADOPTED))))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        if self.leave_adopted(props, f"{_where(props)} existed before this stack"):
            return
        reads.forget(connection.cluster_from(props))
        _delete(props)

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


def _held_records(admin: KafkaAdmin, name: str) -> bool:
    """Whether any partition of the existing topic was ever written to (an end offset above 0)."""
    live = admin.topics([name], with_configs=False).get(name)
    return live is not None and any(admin.end_offsets(name, live.partitions))


def _create(props: Mapping[str, Any]) -> bool:
    """Create the topic, False if it existed: in one CreateTopics with the creates of other resources
    on the same cluster running at the same time (``batch``; its thread reaches the cluster with the
    first of them's inputs, which name the same cluster and password)."""
    key = connection.connection_key(props)

    def send() -> Callable[[list[NewTopic]], list[bool]]:
        def create(topics: list[NewTopic]) -> list[bool]:
            created = connection.admin(props).create_topics(topics, exist_ok=True)
            return [t.topic in created for t in topics]
        return create

    topic = NewTopic(props["name"], num_partitions=int(props["partitions"]), replication_factor=_rf(props),
                     config=dict(props.get("configs") or {}))
    return batch.coalescer(("create-topics", key), send)(topic)


def _delete(props: Mapping[str, Any]) -> None:
    """Delete the topic and wait until the brokers no longer list it (so a replacement can take its
    name): in one DeleteTopics with the deletes of other resources on the same cluster running at
    the same time (``batch``)."""
    key = connection.connection_key(props, prefer_current=True)

    def send() -> Callable[[list[str]], list[None]]:
        def delete(names: list[str]) -> list[None]:
            admin = connection.admin(props, prefer_current=True)
            admin.delete_topics(names)
            deadline = time.monotonic() + TOPIC_DELETE_WAIT
            while listed := admin.topics(names, with_configs=False):
                if time.monotonic() >= deadline:
                    raise ProvisionFailed(
                        f'cluster "{key[0].alias}": topic {min(listed)} was deleted, but the brokers still list it '
                        f"after {TOPIC_DELETE_WAIT:.0f} s, so its name is not free for a replacement: check that the "
                        "cluster's brokers are up and in sync, then run the command again (deleting a topic that "
                        "is already gone is no error)")
                time.sleep(TOPIC_DELETE_POLL)
            return [None] * len(names)
        return delete

    batch.coalescer(("delete-topics", key), send)(props["name"])


class Topic(ProvisionedResource, module="kafka", name="Topic", provider=TopicProvider()):
    """A Kafka topic managed by the stack (type ``pulumi-python:dynamic/kafka:Topic``)."""


def _topics_that_exist(items: list[tuple[Mapping[str, Any], str]], admin_for: Callable[[str], KafkaAdmin]) -> set[str]:
    """The names of ``items`` whose topic exists: one metadata read per cluster."""
    by_cluster: dict[str, list[tuple[str, str]]] = {}
    for inputs, name in items:
        by_cluster.setdefault(inputs["cluster"], []).append((inputs["name"], name))
    found = set()
    for alias, pairs in by_cluster.items():
        live = admin_for(alias).topics([topic for topic, _name in pairs], with_configs=False)
        found.update(name for topic, name in pairs if topic in live)
    return found


KIND = ResourceKind(
    "Topic", Topic,
    "A Kafka topic (an MM2 internal topic or a mirrored target topic). Import ID: `<cluster>/<topic>`.",
    learned={ADOPTED: {"type": "boolean"}},
    import_learned=lambda inputs, _live: {ADOPTED: _held_records(connection.admin(inputs), inputs["name"])},
    exists=_topics_that_exist)
"""The topic kind (``kinds.KINDS``)."""

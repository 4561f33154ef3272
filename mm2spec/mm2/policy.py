"""Replication policies: what MM2 calls a mirrored topic and its own internal topics.

Mirrors ``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy`` with
``replication.policy.internal.topic.separator.enabled`` at its default (true): internal topic
names use the configured separator too. mm2spec never renders that setting.
"""

from __future__ import annotations

import re
from typing import Literal

PolicyKind = Literal["identity", "default"]

IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
"""Keeps topic names: ``orders`` on the source is ``orders`` on the target (active/passive only)."""

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
"""Prefixes the source alias: ``orders`` from ``primary`` is ``primary.orders`` on the target."""

REPLICATION_POLICY_DEFAULT = DEFAULT_POLICY
"""``replication.policy.class`` when unset (``MirrorClientConfig.REPLICATION_POLICY_CLASS_DEFAULT``)."""

SEPARATOR_DEFAULT = "."
"""``replication.policy.separator`` when unset (``MirrorClientConfig.REPLICATION_POLICY_SEPARATOR_DEFAULT``)."""

POLICY_CLASSES: dict[PolicyKind, str] = {"identity": IDENTITY_POLICY, "default": DEFAULT_POLICY}
"""The spec's ``replicationPolicy`` values and the MM2 classes they stand for."""


def policy_class(kind: PolicyKind) -> str:
    """The ``replication.policy.class`` for the spec's ``identity`` or ``default``."""
    return POLICY_CLASSES[kind]


def policy_kind(class_name: str) -> PolicyKind | None:
    """``identity`` or ``default`` for a ``replication.policy.class``; None for any other policy."""
    if class_name.endswith("IdentityReplicationPolicy"):
        return "identity"
    if class_name.endswith("DefaultReplicationPolicy"):
        return "default"
    return None


def target_topic(source_alias: str, topic: str, *, identity: bool, separator: str = SEPARATOR_DEFAULT) -> str:
    """The name ``topic`` from ``source_alias`` gets on the target (``ReplicationPolicy.formatRemoteTopic``).

    IdentityReplicationPolicy keeps the name; DefaultReplicationPolicy makes it
    ``<source><separator><topic>``. Not modelled: MM2's IdentityReplicationPolicy still prefixes
    heartbeats topics (names ending in ``heartbeats``) as the default policy does.
    """
    return topic if identity else f"{source_alias}{separator}{topic}"


def upstream_topic(source_alias: str, remote_topic: str, *, identity: bool,
                   separator: str = SEPARATOR_DEFAULT) -> str | None:
    """The topic of ``source_alias`` that target topic ``remote_topic`` mirrors: ``target_topic``
    backwards (``ReplicationPolicy.upstreamTopic``, for a topic whose ``topicSource`` is ``source_alias``).

    IdentityReplicationPolicy: the name itself. DefaultReplicationPolicy: the name without its
    ``<source><separator>`` prefix; None when it has no such prefix (it did not come from
    ``source_alias``).
    """
    if identity:
        return remote_topic
    prefix = f"{source_alias}{separator}"
    return remote_topic[len(prefix):] if remote_topic.startswith(prefix) else None


def offset_syncs_topic(source_alias: str, target_alias: str, location: str,
                       separator: str = SEPARATOR_DEFAULT) -> str:
    """The flow's offset-syncs topic: ``mm2-offset-syncs<sep><alias><sep>internal``.

    MM2 names it after the cluster it is *not* on (``MirrorConnectorConfig.offsetSyncsTopic``,
    ``DefaultReplicationPolicy.offsetSyncsTopic``): the source's alias when it lives on the target
    (``offset-syncs.topic.location=target``), the target's when it lives on the source.
    """
    other = source_alias if location == "target" else target_alias
    return f"mm2-offset-syncs{separator}{other}{separator}internal"


def offset_syncs_cluster(source_alias: str, target_alias: str, location: str) -> str:
    """The alias of the cluster holding the offset-syncs topic (``offset-syncs.topic.location``)."""
    return target_alias if location == "target" else source_alias


def checkpoints_topic(source_alias: str, separator: str = SEPARATOR_DEFAULT) -> str:
    """``<source><sep>checkpoints<sep>internal``, on the target (``DefaultReplicationPolicy.checkpointsTopic``)."""
    return f"{source_alias}{separator}checkpoints{separator}internal"


PROBE_TOPIC_PREFIX = "mm2spec-probe-"
"""What every flow's probe topic starts with (``probe_topic``): not ``__``, ``.`` or ``mm2``, so no
internal-topic rule or default exclude of MM2 matches it."""

PROBE_TOPIC_PARTITIONS = 3
"""Partitions of a provisioned probe topic (the drill's ``--probe-partitions`` default too)."""

TOPIC_NAME_MAX = 249
"""The longest topic name Kafka accepts (``org.apache.kafka.common.internals.Topic.MAX_NAME_LENGTH``)."""


def probe_topic(flow: str) -> str:
    """The flow's probe topic on its source: ``mm2spec-probe-<flow>``, mm2spec's own rule.

    Every flow mirrors it whatever its ``topics`` say, as MM2 always carries its heartbeats: the
    drill writes its synthetic load there, never into an application's topics. One per flow, so
    flows into one target (fan-in, identity naming) never share one; the replication policy names
    its copy on the target as any other topic's (``target_topic``).
    """
    return f"{PROBE_TOPIC_PREFIX}{flow}"


def probe_group(flow: str) -> str:
    """The flow's probe consumer group: the probe topic's name (``probe_topic``). A flow that
    checkpoints groups checkpoints it whatever its ``groups`` say, so the drill's probe group on the
    probe topic fails over with the application's groups."""
    return probe_topic(flow)


def internal_topic_patterns(separator: str = SEPARATOR_DEFAULT) -> tuple[str, ...]:
    """Regexes (Java and Python alike) of the topics ``ReplicationPolicy.isInternalTopic`` calls internal.

    Kafka's own (``__*``, ``.*``) and MM2's (``isMM2InternalTopic``): ``mm2*<sep>internal``
    (offset-syncs, dedicated mode's configs/offsets/status) and ``*<sep>checkpoints<sep>internal``.
    Both policies share the rule; MM2 never replicates these, whatever ``topics`` says.
    """
    sep = re.escape(separator)
    return (r"__.*", r"\..*", f"mm2.*{sep}internal", f".*{sep}checkpoints{sep}internal")


def cycle_pattern(target_alias: str, separator: str = SEPARATOR_DEFAULT) -> str:
    """Regex of the names DefaultReplicationPolicy reads as having come from ``target_alias``.

    ``MirrorSourceConnector.isCycle``: a topic whose chain of sources (``dr.x``, ``primary.dr.x``)
    includes the target is never mirrored back to it. IdentityReplicationPolicy cannot tell where a
    topic came from, so it has no such rule (mm2spec's validation refuses identity-policy cycles).
    """
    sep = re.escape(separator)
    return f"(?:.*{sep})?{re.escape(target_alias)}{sep}.*"

"""Which topics and groups a flow mirrors, and what the mirrored topics are called: MM2's rules.

The rules themselves are ``mm2spec.mm2`` (shared with mm2spec's plan and Pulumi program, shipped
to the executors with this package); this module applies them to a flow of the job config.
MM2 replicates a topic when it matches ``topics`` and not ``topics.exclude`` (each a comma-separated
list of Java regexes matched against the whole name), is not an internal topic of Kafka, Connect
or MM2, and (DefaultReplicationPolicy) did not come from the target cluster (a cycle). The same
rules compile into one Java regex for Spark's ``subscribePattern``, so new matching topics are
picked up by the source itself, and into a Python regex for the driver's own decisions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mm2spark.config import MirrorFlowConfig
from mm2spec.mm2 import policy as mm2_policy
from mm2spec.mm2 import selection


@dataclass(frozen=True)
class ReplicationPolicy:
    """IdentityReplicationPolicy (same names) or DefaultReplicationPolicy (``<source><sep><topic>``)."""

    identity: bool
    separator: str = mm2_policy.SEPARATOR_DEFAULT

    @classmethod
    def of(cls, flow: MirrorFlowConfig) -> "ReplicationPolicy":
        return cls(identity=flow.identity, separator=flow.replication_policy_separator)

    def target_topic(self, source_alias: str, topic: str) -> str:
        return mm2_policy.target_topic(source_alias, topic, identity=self.identity, separator=self.separator)

    def checkpoints_topic(self, source_alias: str) -> str:
        return mm2_policy.checkpoints_topic(source_alias, self.separator)

    def cycle_pattern(self, target_alias: str) -> str | None:
        """Names whose chain of sources includes the target (never mirrored back); None for identity."""
        return None if self.identity else mm2_policy.cycle_pattern(target_alias, self.separator)


def offset_syncs_topic(flow: MirrorFlowConfig) -> tuple[str, str]:
    """(cluster role, topic name): MM2 names the topic after the *other* cluster than the one holding it."""
    location = flow.offset_syncs_topic_location
    name = mm2_policy.offset_syncs_topic(flow.source_alias, flow.target_alias, location,
                                         flow.replication_policy_separator)
    return ("target" if location == "target" else "source"), name


def checkpoints_topic(flow: MirrorFlowConfig) -> str:
    """Lives on the target; named after the source (``<source>.checkpoints.internal``)."""
    return mm2_policy.checkpoints_topic(flow.source_alias, flow.replication_policy_separator)


def topic_pattern(flow: MirrorFlowConfig) -> str:
    """One regex, valid in Java and Python, whose full match is MM2's decision to replicate."""
    return selection.topic_pattern(flow.topics, flow.topics_exclude, identity=flow.identity,
                                   target_alias=flow.target_alias, separator=flow.replication_policy_separator)


def subscribe_pattern(flow: MirrorFlowConfig) -> str:
    """``topic_pattern`` for Spark's ``subscribePattern``, anchored at both ends.

    Spark's Kafka source takes a topic when the regex is *found* in its name (``Regex.findFirstIn``
    in its ``SubscribePatternStrategy``), not when it matches the whole name as MM2's filter does:
    unanchored, ``orders`` would also take ``pre-orders`` and ``orders-tail``, and an include of
    ``.*`` could pass an exclude by matching from a later character (``heartbeats`` as ``eartbeats``).
    """
    return f"^(?:{topic_pattern(flow)})$"


def group_pattern(flow: MirrorFlowConfig) -> str:
    """One regex whose full match is MM2's decision to checkpoint a group (none: matches nothing)."""
    return selection.selection_pattern(flow.groups, flow.groups_exclude)


@dataclass(frozen=True)
class NameFilter:
    """A compiled include/exclude decision (Python's re stands in for java.util.regex)."""

    pattern: str

    def __post_init__(self):
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    def __call__(self, name: str) -> bool:
        return self._regex.fullmatch(name) is not None  # type: ignore[attr-defined]


def topic_filter(flow: MirrorFlowConfig) -> NameFilter:
    return NameFilter(topic_pattern(flow))


def group_filter(flow: MirrorFlowConfig) -> NameFilter:
    return NameFilter(group_pattern(flow))

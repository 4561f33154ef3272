"""Which topics and groups a flow mirrors, and what the mirrored topics are called: MM2's rules.

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

#: MM2's DefaultReplicationPolicy.isInternalTopic: Kafka's own (``__*``, ``.*``) and MM2's
#: (``mm2*.internal``: offset-syncs, dedicated-mode configs/offsets/status; ``*.checkpoints.internal``).
#: Checked name by name against the real class in tests/integration/test_spark_mm2_formats.py.
INTERNAL_TOPIC_PATTERNS = (r"__.*", r"\..*", r"mm2.*\.internal", r".*\.checkpoints\.internal")


@dataclass(frozen=True)
class ReplicationPolicy:
    """IdentityReplicationPolicy (same names) or DefaultReplicationPolicy (``<source><sep><topic>``)."""

    identity: bool
    separator: str = "."

    @classmethod
    def of(cls, flow: MirrorFlowConfig) -> "ReplicationPolicy":
        return cls(identity=flow.identity, separator=flow.replication_policy_separator)

    def target_topic(self, source_alias: str, topic: str) -> str:
        return topic if self.identity else f"{source_alias}{self.separator}{topic}"

    # MM2 names its internal topics with "." unless replication.policy.internal.topic.separator
    # .enabled; the default is enabled, so the configured separator is used.
    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs{self.separator}{cluster_alias}{self.separator}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self.separator}checkpoints{self.separator}internal"

    def cycle_pattern(self, target_alias: str) -> str | None:
        """Names whose chain of sources includes the target (never mirrored back); None for identity."""
        if self.identity:
            return None
        sep = re.escape(self.separator)
        return f"(?:.*{sep})?{re.escape(target_alias)}{sep}.*"


def offset_syncs_topic(flow: MirrorFlowConfig) -> tuple[str, str]:
    """(cluster role, topic name): MM2 names the topic after the *other* cluster than the one holding it."""
    policy = ReplicationPolicy.of(flow)
    if flow.offset_syncs_topic_location == "target":
        return "target", policy.offset_syncs_topic(flow.source_alias)
    return "source", policy.offset_syncs_topic(flow.target_alias)


def checkpoints_topic(flow: MirrorFlowConfig) -> str:
    """Lives on the target; named after the source (``<source>.checkpoints.internal``)."""
    return ReplicationPolicy.of(flow).checkpoints_topic(flow.source_alias)


def _alternatives(patterns) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def topic_pattern(flow: MirrorFlowConfig) -> str:
    """One regex, valid in Java and Python, whose full match is MM2's decision to replicate."""
    excludes = list(flow.topics_exclude) + list(INTERNAL_TOPIC_PATTERNS)
    cycle = ReplicationPolicy.of(flow).cycle_pattern(flow.target_alias)
    if cycle:
        excludes.append(cycle)
    return f"(?!(?:{_alternatives(excludes)})$)(?:{_alternatives(flow.topics)})"


def group_pattern(flow: MirrorFlowConfig) -> str:
    if not flow.groups:
        return "(?!)"  # matches nothing
    if not flow.groups_exclude:
        return f"(?:{_alternatives(flow.groups)})"
    return f"(?!(?:{_alternatives(flow.groups_exclude)})$)(?:{_alternatives(flow.groups)})"


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

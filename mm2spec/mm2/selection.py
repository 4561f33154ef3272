"""What MM2 replicates: topics, consumer groups and topic configs.

MM2 replicates a topic when it matches ``topics`` and no ``topics.exclude`` pattern (each a list
of Java regexes matched against the whole name: ``DefaultTopicFilter``), is not an internal topic
and, with DefaultReplicationPolicy, did not come from the target (a cycle; both rules in
``MirrorSourceConnector.shouldReplicateTopic``). Groups follow ``groups`` / ``groups.exclude``
(``DefaultGroupFilter``); topic configs all but a few (``DefaultConfigPropertyFilter``).

Patterns stay plain strings; the regexes built here are valid in Java and in Python alike.
"""

from __future__ import annotations

from typing import Iterable

from mm2spec.mm2.policy import SEPARATOR_DEFAULT, cycle_pattern, internal_topic_patterns

TOPICS_INCLUDE_DEFAULT = (".*",)
"""``topics`` when unset: every topic (``DefaultTopicFilter.TOPICS_INCLUDE_DEFAULT``)."""

TOPICS_EXCLUDE_DEFAULT = (r"mm2.*\.internal", r".*\.replica", r"__.*")
"""``topics.exclude`` when unset (``DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT``)."""

GROUPS_INCLUDE_DEFAULT = (".*",)
"""``groups`` when unset: every consumer group (``DefaultGroupFilter.GROUPS_INCLUDE_DEFAULT``)."""

GROUPS_EXCLUDE_DEFAULT = (r"console-consumer-.*", r"connect-.*", r"__.*")
"""``groups.exclude`` when unset (``DefaultGroupFilter.GROUPS_EXCLUDE_DEFAULT``)."""

CONFIGS_NOT_SYNCED = frozenset({
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "message.timestamp.type", "unclean.leader.election.enable",
    "min.insync.replicas",
})
"""Topic configs MM2 never copies to the target, being cluster-specific
(``DefaultConfigPropertyFilter.CONFIG_PROPERTIES_EXCLUDE_DEFAULT``; its patterns are plain names)."""


def config_synced(name: str) -> bool:
    """Whether MM2 copies topic config ``name`` to the target (``DefaultConfigPropertyFilter.shouldReplicateConfigProperty``)."""
    return name not in CONFIGS_NOT_SYNCED


def _with_defaults(defaults: tuple[str, ...], extra: Iterable[str]) -> tuple[str, ...]:
    return defaults + tuple(p for p in extra if p not in defaults)


def topics_exclude(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """MM2's default ``topics.exclude`` followed by those of ``extra`` that are not among them.

    MM2 replaces its defaults when ``topics.exclude`` is set; mm2spec renders them plus the spec's
    own, so a spec's excludes never re-admit MM2's internal or ``.replica`` topics.
    """
    return _with_defaults(TOPICS_EXCLUDE_DEFAULT, extra)


def groups_exclude(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """MM2's default ``groups.exclude`` followed by the rest of ``extra``; see ``topics_exclude``."""
    return _with_defaults(GROUPS_EXCLUDE_DEFAULT, extra)


def never_replicated(*, identity: bool, target_alias: str, separator: str = SEPARATOR_DEFAULT) -> tuple[str, ...]:
    """Regexes of the topics MM2 never replicates to ``target_alias``, whatever ``topics`` says.

    ``MirrorSourceConnector.shouldReplicateTopic``: internal topics (``ReplicationPolicy.isInternalTopic``)
    and, with DefaultReplicationPolicy, cycles (``isCycle``: names that came from the target).
    """
    internal = internal_topic_patterns(separator)
    return internal if identity else internal + (cycle_pattern(target_alias, separator),)


def literal_pattern(name: str) -> str:
    """A regex (Java and Python alike) matching exactly topic name ``name``: its dots escaped (a
    topic name's other characters, letters, digits, ``_`` and ``-``, are literal in a regex)."""
    return name.replace(".", r"\.")


def with_probe(include: Iterable[str], probe: str) -> tuple[str, ...]:
    """A flow's ``topics`` as rendered: the spec's patterns, then its probe topic (``policy.probe_topic``)
    as a literal pattern, so the mirror carries it whatever the patterns select."""
    include = tuple(include)
    probe_pattern = literal_pattern(probe)
    return include if probe_pattern in include else include + (probe_pattern,)


def alternatives(patterns: Iterable[str]) -> str:
    """``(?:a)|(?:b)|...``: any of the patterns, as ``MirrorUtils.compilePatternList`` joins a list."""
    return "|".join(f"(?:{p})" for p in patterns)


def selection_pattern(include: Iterable[str], exclude: Iterable[str] = ()) -> str:
    """One regex whose *full* match is MM2's filter decision: some ``include``, no ``exclude``.

    Valid in Java (Spark's ``subscribePattern``) and Python (``re.fullmatch``); excludes take
    precedence over includes, as in ``DefaultTopicFilter`` / ``DefaultGroupFilter``. No include
    selects nothing.
    """
    include, exclude = tuple(include), tuple(exclude)
    if not include:
        return "(?!)"
    if not exclude:
        return f"(?:{alternatives(include)})"
    return f"(?!(?:{alternatives(exclude)})$)(?:{alternatives(include)})"


def topic_pattern(include: Iterable[str], exclude: Iterable[str], *, identity: bool, target_alias: str,
                  separator: str = SEPARATOR_DEFAULT) -> str:
    """One regex of the topics a flow to ``target_alias`` replicates: the filter's decision minus
    what the policy never replicates (``never_replicated``). ``exclude`` is ``topics.exclude`` as
    configured (MM2's defaults only if they are part of it)."""
    never = never_replicated(identity=identity, target_alias=target_alias, separator=separator)
    return selection_pattern(include, tuple(exclude) + never)

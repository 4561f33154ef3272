"""Which Kafka and Connect versions a spec needs: the one table of version rules.

``plan`` and ``verify`` read the brokers' version (their finalized ``metadata.version``, which
names the release whose features the cluster runs with) and the Connect worker's (``GET /``), ask
``spec_needs`` what the spec uses and ``check`` each version against ``VERSION_RULES``. A rule
that ``refuses`` stops a plan (exit 1): the feature would fail late, in the middle of a failover.
The others warn: the feature works, worse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal

Version = tuple[int, ...]
Component = Literal["kafka", "connect"]

EXACTLY_ONCE_SOURCE = "exactly-once-source"
"""Need: a flow mirrors exactly once on Connect workers (``exactlyOnce`` with engine connect)."""
CONNECTOR_STOP_AND_OFFSETS = "connector-stop-and-offsets"
"""Need: the playbooks stop MM2's connectors and set their offsets (engine connect)."""
MM2_OFFSET_TRANSLATION = "mm2-offset-translation"
"""Need: MM2's checkpoints translate groups' offsets (``groups`` with engine connect)."""
TOPIC_IDS = "topic-ids"
"""Need: ``verify.loss`` tells a recreated source topic by its topic ID (always)."""


@dataclass(frozen=True)
class VersionRule:
    """One thing a spec may need and the first version that has it."""

    need: str
    """What the spec needs (``spec_needs``), e.g. ``EXACTLY_ONCE_SOURCE``."""
    component: Component
    """Whose version decides: the brokers' (``kafka``) or the Connect worker's (``connect``)."""
    minimum: Version
    """The first release that has it."""
    refuses: bool
    """True: an older version is refused (exit 1); False: a warning (it works, worse)."""
    feature: str
    """What the spec uses, in the spec's words."""
    why: str
    """What the version lacks and what follows, for the message."""


VERSION_RULES = (
    VersionRule(EXACTLY_ONCE_SOURCE, "connect", (3, 3), True, "exactly-once mirroring (exactlyOnce: true)",
                "exactly-once source connectors arrived in Kafka Connect 3.3 (KIP-618): the worker would "
                "refuse exactly.once.source.support"),
    VersionRule(CONNECTOR_STOP_AND_OFFSETS, "connect", (3, 6), True, "failover and failback with engine connect",
                "stopping a connector and setting its offsets arrived in Kafka Connect 3.6 (KIP-875): the "
                "playbooks stop MM2's connectors and restart them from exact offsets"),
    VersionRule(MM2_OFFSET_TRANSLATION, "connect", (3, 7, 1), False, "consumer group checkpoints (groups)",
                "MM2 before 3.7.1 translates group offsets worse (KAFKA-14666 and follow-ups): checkpoints fall "
                "further behind, so groups re-read more after a failover (the playbooks' own translation is exact)"),
    VersionRule(TOPIC_IDS, "kafka", (2, 8), False, "silent-loss checks (verify.loss)",
                "topic IDs arrived in Kafka 2.8 (KIP-516): a source topic deleted and recreated under the same "
                "name is found only by a sync past the partition's end"),
)
"""Every version rule, in the order they are checked."""

METADATA_VERSIONS = {
    1: (3, 0), 2: (3, 1), 3: (3, 2), 4: (3, 3), 5: (3, 3), 6: (3, 3), 7: (3, 3), 8: (3, 4), 9: (3, 5), 10: (3, 5),
    11: (3, 5), 12: (3, 6), 13: (3, 6), 14: (3, 6), 15: (3, 7), 16: (3, 7), 17: (3, 7), 18: (3, 7), 19: (3, 7),
    20: (3, 8), 21: (3, 9), 22: (4, 0), 23: (4, 0), 24: (4, 0), 25: (4, 0), 26: (4, 1), 27: (4, 1), 28: (4, 2),
    29: (4, 2), 30: (4, 3), 31: (4, 4),
}
"""``metadata.version`` feature level -> the release it belongs to (``MetadataVersion``, Kafka 4.3.1:
``3.3-IV3`` is level 7, ``4.3-IV0`` level 30). A KRaft cluster runs with the features of its
finalized level, whatever its binaries."""


def parse_version(text: str | None) -> Version | None:
    """``4.3.1`` -> (4, 3, 1); a vendor suffix is ignored (``7.6.0-ccs`` -> (7, 6, 0)); None when no
    version number starts the text."""
    match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def show(version: Version) -> str:
    return ".".join(str(part) for part in version)


def metadata_version_release(level: int) -> Version | None:
    """The release of a ``metadata.version`` feature level; a level above the table's is at least
    its newest release. None for level 0 or less (no KRaft metadata version)."""
    if level <= 0:
        return None
    if level in METADATA_VERSIONS:
        return METADATA_VERSIONS[level]
    return max(METADATA_VERSIONS.values()) if level > max(METADATA_VERSIONS) else None


def spec_needs(*, on_connect_workers: bool, exactly_once: bool, groups: bool) -> frozenset[str]:
    """What a spec needs of the versions: the engine runs MM2 on Connect workers
    (``EngineFacts.runs_on_connect_workers``), some flow is exactly-once, some flow checkpoints groups."""
    needs = {TOPIC_IDS}
    if on_connect_workers:
        needs.add(CONNECTOR_STOP_AND_OFFSETS)
        if exactly_once:
            needs.add(EXACTLY_ONCE_SOURCE)
        if groups:
            needs.add(MM2_OFFSET_TRANSLATION)
    return frozenset(needs)


@dataclass(frozen=True)
class VersionFinding:
    """A rule the version of a cluster does not meet."""

    rule: VersionRule
    where: str
    """Who runs the version, e.g. ``Kafka cluster "dr"`` or ``Kafka Connect at http://...``."""
    version: Version
    scope: str = ""
    """The cluster's alias, or ``connect``: where a report puts the finding."""

    @property
    def refuses(self) -> bool:
        return self.rule.refuses

    def message(self) -> str:
        then = ("upgrade it, or change the spec" if self.rule.refuses else "upgrade it for the better behaviour")
        return (f"{self.where} runs {show(self.version)}; {self.rule.feature} needs {show(self.rule.minimum)} or "
                f"later: {self.rule.why}; {then}")


def check(component: Component, where: str, version: Version | None, needs: Iterable[str],
          scope: str = "") -> list[VersionFinding]:
    """The rules of ``component`` that ``needs`` names and ``version`` does not meet (nothing for an
    unknown version: the caller says it could not be read)."""
    if version is None:
        return []
    wanted = set(needs)
    return [VersionFinding(rule, where, version, scope) for rule in VERSION_RULES
            if rule.component == component and rule.need in wanted and version < rule.minimum]

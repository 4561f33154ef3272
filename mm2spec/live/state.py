"""What live clusters hold, as plain values: importable without confluent-kafka, so the diff and
the plan formats can be used (and tested) without a client library."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class LiveTopic:
    """A topic as it is on a cluster."""

    name: str
    """The topic's name on that cluster."""
    partitions: int
    """Its partition count."""
    replication_factor: int
    """Replicas of its partitions (the largest, should they differ)."""
    configs: Mapping[str, str]
    """Only the configs set on the topic (``DYNAMIC_TOPIC_CONFIG``): broker defaults never show as drift."""

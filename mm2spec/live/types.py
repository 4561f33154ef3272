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


@dataclass(frozen=True)
class Record:
    """One record as read from a partition (``headers`` as a tuple of (key, value bytes))."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    """Milliseconds since the epoch (the record's own timestamp, which the mirror preserves)."""
    headers: tuple = ()

    def content(self) -> tuple:
        """What a mirror copies unchanged: key, value, timestamp and headers (not the offset)."""
        return (self.key, self.value, self.timestamp, self.headers)


@dataclass(frozen=True)
class GroupState:
    """A consumer group on one cluster: its committed offsets and who is in it now."""

    group: str
    offsets: Mapping[tuple[str, int], int]
    """Committed offset per (topic, partition); partitions never committed are absent."""
    members: tuple[str, ...] = ()
    """``client.id@host`` of each active member; empty when nobody consumes."""
    state: str = ""
    """The coordinator's state name (``EMPTY``, ``STABLE``, ``DEAD`` ...)."""


FAILOVER_STATE_FORMAT = 1
"""``formatVersion`` of the failover records on the DR cluster."""


@dataclass(frozen=True)
class FailoverState:
    """A flow's failover, as recorded on its target (DR) cluster.

    ``phase`` is ``switching`` from the moment the failover stops the flow's mirror until the
    groups are committed on DR, then ``failed-over``; ``failing-back`` from the moment a failback
    starts copying DR's records back until it clears the record. While a record exists the flow's forward
    mirror must stay stopped: ``plan`` and ``pulumi up`` read it (failback clears it).
    """

    flow: str
    phase: str
    mode: str
    """``planned`` (the source answered) or ``unplanned`` (``--source-unreachable``)."""
    source: str
    target: str
    started_at: int
    """Milliseconds since the epoch when the failover stopped the mirror."""
    completed_at: int | None = None
    positions: tuple = ()
    """(source topic, partition, source end, DR topic, DR end) per mirrored partition at the switch."""
    spec: str = ""
    """``metadata.name`` of the spec whose flow this is: flows of different specs may share a name."""
    failback: tuple = ()
    """Phase ``failing-back``: (DR topic, partition, DR start, source topic, source start) per
    partition: the reverse copy writes DR's records from ``DR start`` to the source from ``source
    start`` on, one for one, so a re-run knows where it stands from the source's end alone."""
    stranded: str = ""
    """Phase ``failing-back``: what was done with records stranded on the source (``keep``,
    ``rebuild``, or empty when there were none)."""
    syncs_from: int = 0
    """Phase ``failing-back``: the reverse offset-syncs topic's end when the failback began; only
    syncs from there on belong to this failback's copy (an earlier failback's map DR offsets
    to records the source may no longer hold)."""
    restarted: bool = False
    """Phase ``failing-back``: the forward mirror was reset to the source's end (and started);
    the copy, translation and commit are done."""
    groups: tuple = ()
    """The groups the failover moved (committed on DR), sorted: an active-active failback moves
    their positions on DR's own topics back to the reverse flow's copies (empty in records written
    before it was kept: then every selected group on DR)."""

    def to_json(self) -> dict:
        return {"formatVersion": FAILOVER_STATE_FORMAT, "spec": self.spec, "flow": self.flow, "phase": self.phase,
                "mode": self.mode, "source": self.source, "target": self.target, "startedAt": self.started_at,
                "completedAt": self.completed_at,
                "positions": [{"topic": t, "partition": p, "sourceEnd": s, "drTopic": dt, "drEnd": d}
                              for t, p, s, dt, d in self.positions],
                "failback": [{"drTopic": dt, "partition": p, "drStart": d, "topic": t, "sourceStart": s}
                             for dt, p, d, t, s in self.failback],
                "stranded": self.stranded, "reverseSyncsFrom": self.syncs_from, "forwardRestarted": self.restarted,
                "groups": list(self.groups)}

    @classmethod
    def from_json(cls, data: Mapping) -> "FailoverState":
        return cls(flow=data["flow"], phase=data["phase"], mode=data.get("mode", "planned"), source=data["source"],
                   target=data["target"], started_at=int(data["startedAt"]), completed_at=data.get("completedAt"),
                   positions=tuple((p["topic"], int(p["partition"]), int(p["sourceEnd"]), p["drTopic"], int(p["drEnd"]))
                                   for p in data.get("positions", ())), spec=data.get("spec", ""),
                   failback=tuple((p["drTopic"], int(p["partition"]), int(p["drStart"]), p["topic"], int(p["sourceStart"]))
                                  for p in data.get("failback", ())),
                   stranded=data.get("stranded", ""), syncs_from=int(data.get("reverseSyncsFrom", 0)),
                   restarted=bool(data.get("forwardRestarted", False)),
                   groups=tuple(str(g) for g in data.get("groups", ())))

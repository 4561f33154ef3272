"""The plan as data: what applying a spec would change, per cluster. Built by ``plan.build``,
rendered by ``plan.formats``; plain frozen values, no client library."""

from __future__ import annotations

from dataclasses import dataclass

from mm2spec.plan.desired import PatternResolution
from mm2spec.plan.diff import Action, FieldChange

PLAN_FORMAT_VERSION = "mm2spec-plan/v1"
"""The ``formatVersion`` of ``--format json`` (``schemas/plan.schema.json``)."""


@dataclass(frozen=True)
class ResourceChange:
    """One resource that changes (or is refused, or stays: ``no-op``)."""

    scope: str
    """Where it lives: a cluster alias, ``connect`` or ``spark``."""
    kind: str
    """``topic``, ``acl``, ``connector`` or ``spark-deployment``."""
    name: str
    """The topic or connector name, the ACL binding as one line, or the Spark job's name."""
    action: Action
    """``create``, ``update``, ``replace``, ``delete``, ``no-op`` or ``refused``."""
    changes: tuple[FieldChange, ...] = ()
    """Field by field, live (old) -> desired (new); secrets are masked only when rendered."""
    reason: str = ""
    """Why a replacement destroys data, or why a change is refused and what to do instead."""
    detail: str = ""
    """Context for a reader: partitions and replication factor, an ACL's purpose, ..."""


@dataclass(frozen=True)
class ClusterInfo:
    """A cluster in the plan: where it is and what RF -1 resolves to there."""

    alias: str
    """The cluster's alias in the spec."""
    bootstrap: str
    """Its bootstrap servers, comma-separated."""
    default_replication_factor: int | None
    """The brokers' ``default.replication.factor`` (what -1 means); None when not readable."""
    authorizer: bool | None = None
    """Whether the cluster enforces ACLs; None when ACLs are not managed (not asked)."""
    version: str | None = None
    """The brokers' version as read (``4.3, metadata.version level 30``, or why it is unknown);
    None: not read."""


@dataclass(frozen=True)
class FlowSummary:
    """A replication flow as the plan shows it."""

    name: str
    """The flow's name (``<source>-to-<target>`` unless the spec names it)."""
    source: str
    """The source cluster's alias."""
    target: str
    """The target cluster's alias."""
    policy: str
    """The replication policy: ``identity`` (same names) or ``default`` (``<source>.<topic>``)."""
    exactly_once: bool
    """Whether the flow mirrors with exactly-once delivery."""
    topics: tuple[str, ...]
    """The spec's topic patterns, as written."""
    groups: tuple[str, ...]
    """The spec's consumer-group patterns, as written."""

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "target": self.target, "policy": self.policy,
                "exactlyOnce": self.exactly_once, "topics": list(self.topics), "groups": list(self.groups)}


@dataclass(frozen=True)
class Plan:
    """What applying the spec would change, per cluster, with how patterns resolved."""

    spec_name: str
    """``metadata.name`` of the spec."""
    environment: str | None
    """The environment planned (None: the base spec)."""
    source_file: str
    """The spec file, as given on the command line."""
    engine: str
    """``spark`` or ``connect``: which mirror the plan compares."""
    clusters: tuple[ClusterInfo, ...]
    """Every cluster the spec uses, in order of first use."""
    flows: tuple[FlowSummary, ...]
    """The spec's replication flows."""
    changes: tuple[ResourceChange, ...]
    """Every resource compared, ``no-op`` ones included."""
    resolutions: tuple[PatternResolution, ...] = ()
    """What each topic and group pattern matched on the live source cluster."""
    notes: tuple[str, ...] = ()
    """What was not compared and why (no authorizer, no Connect URL, ...)."""
    connect_version: str | None = None
    """The Connect worker's version (``GET /``) when the engine runs on Connect workers; None: not read."""

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def has_changes(self) -> bool:
        return any(c.action != "no-op" for c in self.changes)

    @property
    def refused(self) -> tuple[ResourceChange, ...]:
        return tuple(c for c in self.changes if c.action == "refused")

    def summary(self) -> dict[str, int]:
        return {action: self.count(action) for action in ("create", "update", "replace", "delete", "refused")}

"""The one diff: what must change to get from live state to desired state.

``mm2spec plan`` and the Pulumi providers' ``diff()`` both call these functions, so a plan and a
``pulumi preview`` can never disagree about what changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Mapping

from mm2spec.live.types import LiveTopic
from mm2spec.spec.model import AclBinding

Action = Literal["create", "update", "replace", "delete", "no-op", "refused"]


@dataclass(frozen=True)
class FieldChange:
    """One field that differs: ``old`` is live (None: absent), ``new`` is desired (None: removed)."""

    field: str
    """The field: ``partitions``, ``replication_factor``, ``config.<key>``, a connector or Spark job key."""
    old: object
    """The live value; None when absent (e.g. on a topic or connector still to create)."""
    new: object
    """The desired value; None when removed (a topic config or connector key no longer wanted)."""


@dataclass(frozen=True)
class Change:
    """What a resource needs. ``refused`` carries why a change cannot be made (e.g. fewer partitions)."""

    action: Action
    """``create``, ``update``, ``replace``, ``delete``, ``no-op`` or ``refused``."""
    changes: tuple[FieldChange, ...] = ()
    """Field by field, live (old) -> desired (new); for ``refused``, what was asked for."""
    reason: str = ""
    """Why a ``replace`` loses data, or why a change is ``refused`` and what to do instead; else empty."""

    @property
    def replaces(self) -> bool:
        return self.action == "replace"


def diff_configs(desired: Mapping[str, str], live: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Configs to SET (differ or missing) and to DELETE (set on the topic, no longer wanted)."""
    to_set = {k: v for k, v in desired.items() if live.get(k) != v}
    to_delete = sorted(k for k in live if k not in desired)
    return to_set, to_delete


def diff_topic(name: str, partitions: int, configs: Mapping[str, str], live: LiveTopic | None,
               replication_factor: int = -1, allow_replacement: bool = False) -> Change:
    """Create, grow partitions / alter configs in place, replace (if allowed) or refuse.

    Replication factor -1 (broker default) is never compared: it is not a property of the topic but
    a request to the broker, and the live factor is whatever the broker chose.
    """
    if live is None:
        return Change("create", (FieldChange("partitions", None, partitions),) +
                           tuple(FieldChange(f"config.{k}", None, v) for k, v in sorted(configs.items())))
    changes: list[FieldChange] = []
    to_set, to_delete = diff_configs(configs, live.configs)
    changes += [FieldChange(f"config.{k}", live.configs.get(k), v) for k, v in sorted(to_set.items())]
    changes += [FieldChange(f"config.{k}", live.configs[k], None) for k in to_delete]
    rf_change = replication_factor > 0 and replication_factor != live.replication_factor
    if partitions < live.partitions or rf_change:
        what = ([FieldChange("partitions", live.partitions, partitions)] if partitions != live.partitions else []) + (
            [FieldChange("replication_factor", live.replication_factor, replication_factor)] if rf_change else [])
        if allow_replacement:
            return Change("replace", tuple(what + changes),
                               f"topic {name} must be deleted and re-created: its data on this cluster is lost")
        why = (f"topic {name} has {live.partitions} partitions; Kafka cannot remove partitions"
               if partitions < live.partitions else f"topic {name}: the replication factor cannot change in place")
        return Change("refused", tuple(what + changes),
                           f"{why}. Set allowTopicReplacement: true on the mirror to delete and re-create it "
                           "(its data on this cluster is lost), or keep the partition count")
    if partitions > live.partitions:
        changes.insert(0, FieldChange("partitions", live.partitions, partitions))
    return Change("update" if changes else "no-op", tuple(changes))


def diff_acls(desired: Iterable[AclBinding], live: Iterable[AclBinding]) -> tuple[list[AclBinding], list[AclBinding]]:
    """Bindings to create (desired, not live) and to delete (live, not desired), compared by identity."""
    desired_by_key = {b.key: b for b in desired}
    live_by_key = {b.key: b for b in live}
    create = [b for k, b in desired_by_key.items() if k not in live_by_key]
    delete = [b for k, b in live_by_key.items() if k not in desired_by_key]
    return create, delete


def diff_connector(desired: Mapping[str, str] | None, live: Mapping[str, str] | None) -> Change:
    """A connector's config on the Connect REST API versus the rendered one (``name`` is ignored)."""
    if desired is None and live is None:
        return Change("no-op")
    if live is None:
        return Change("create", tuple(FieldChange(k, None, v) for k, v in sorted(desired.items())))
    if desired is None:
        return Change("delete")
    keys = sorted((set(desired) | set(live)) - {"name"})
    changes = tuple(FieldChange(k, live.get(k), desired.get(k)) for k in keys if live.get(k) != desired.get(k))
    return Change("update" if changes else "no-op", changes)

"""Consumer group failover support: MirrorCheckpointConnector's work, done by the job's driver.

Every ``emit.checkpoints.interval.seconds`` it reads the committed offsets of the source groups that
match ``groups``/``groups.exclude``, translates those on mirrored topics through the offset syncs,
and writes MM2 Checkpoint records to ``<source>.checkpoints.internal`` on the target, where
``RemoteClusterUtils.translateOffsets`` finds them. With ``sync.group.offsets.enabled`` it also
commits the translated offsets to the same groups on the target, but only to groups with no
active members (KIP-545) and never moving a group backwards.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from mm2spark import kafka
from mm2spark.config import MirrorFlowConfig
from mm2spark.offsets import OffsetSyncStore
from mm2spark.records import Checkpoint
from mm2spark.topics import ReplicationPolicy, checkpoints_topic, group_filter, topic_filter

log = logging.getLogger("mm2spark.groups")

#: Group states in which nobody consumes, so committing offsets cannot disturb a live consumer.
INACTIVE_STATES = frozenset({"EMPTY", "DEAD", "UNKNOWN"})

#: The shortest pause between two rounds, whatever the intervals say: a config of 0 s must not
#: turn the thread into a busy loop of admin calls against both clusters.
MIN_ROUND_INTERVAL_S = 0.2
#: At stop, how long the checkpoints producer may take to deliver what it still holds (a round
#: writes at most one record per group and partition, so this is a few round trips).
CLOSE_FLUSH_TIMEOUT_S = 10.0
#: At stop, how long to wait for a round that is under way, after which the daemon thread is left
#: to die with the driver (its checkpoints are emitted again after a restart). Half of one admin
#: call's timeout, so that the whole stop stays well within mm2spec's grace before SIGKILL.
STOP_JOIN_TIMEOUT_S = 15.0


@dataclass
class GroupSyncCounters:
    checkpoints_written: int = 0
    groups_synced: int = 0
    groups_skipped_active: int = 0
    errors: int = 0
    last_error: str | None = None
    last_checkpoint_time: float | None = None
    groups: list = field(default_factory=list)


class GroupOffsetMirror:
    """Checkpoints and group offset sync for one flow; ``run_once`` is the unit of work."""

    def __init__(self, flow: MirrorFlowConfig, store: OffsetSyncStore):
        self.flow = flow
        self.store = store
        self.policy = ReplicationPolicy.of(flow)
        self.topics = topic_filter(flow)
        self.groups = group_filter(flow)
        self.topic = checkpoints_topic(flow)
        self.counters = GroupSyncCounters()
        # Group -> (target topic, partition) -> the last checkpoint written (upstream, downstream).
        # Only groups of the latest listing are kept: groups come and go (console consumers, one
        # group per deployment), and a job runs for months.
        self._last: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
        self._group_list: list[str] = []
        self._groups_listed_at = 0.0
        self._last_sync = 0.0
        self._source = None
        self._target = None
        self._producer = None

    def _clients(self):
        if self._source is None:
            self._source = kafka.admin(self.flow.source)
            self._target = kafka.admin(self.flow.target)
            self._producer = kafka.internal_producer(self.flow.target)
            kafka.ensure_internal_topic(self._target, self.topic)
        return self._source, self._target, self._producer

    def _mirrored_groups(self, source) -> list[str]:
        now = time.monotonic()
        if not self._group_list or now - self._groups_listed_at >= self.flow.refresh_groups_interval_s:
            self._group_list = [g for g in kafka.list_groups(source) if self.groups(g)]
            self._groups_listed_at = now
        return self._group_list

    def checkpoints(self, group: str, offsets: dict[tuple[str, int], int]) -> list[Checkpoint]:
        """Translated positions of one group (source topic-partitions -> target ones)."""
        out = []
        for (topic, partition), upstream in sorted(offsets.items()):
            if not self.topics(topic):
                continue
            downstream = self.store.translate(topic, partition, upstream)
            if downstream is None:
                continue
            target_topic = self.policy.target_topic(self.flow.source_alias, topic)
            out.append(Checkpoint(group, target_topic, partition, upstream, downstream, ""))
        return out

    def _changed(self, checkpoint: Checkpoint) -> bool:
        previous = self._last.get(checkpoint.group, {}).get((checkpoint.topic, checkpoint.partition))
        if previous == (checkpoint.upstream_offset, checkpoint.downstream_offset):
            return False
        # Like MM2's checkpoint store: a translation never moves backwards unless the group did.
        if previous and checkpoint.upstream_offset >= previous[0] and checkpoint.downstream_offset < previous[1]:
            return False
        return True

    def run_once(self, sync_groups: bool | None = None) -> list[Checkpoint]:
        """Emit changed checkpoints; sync target group offsets when due. Returns what was written."""
        source, target, producer = self._clients()
        groups = self._mirrored_groups(source)
        all_checkpoints: dict[str, list[Checkpoint]] = {}
        for group in groups:
            all_checkpoints[group] = self.checkpoints(group, kafka.group_offsets(source, group))
        fresh = [c for cps in all_checkpoints.values() for c in cps if self._changed(c)]
        if fresh:
            kafka.produce_all(producer, self.topic, ((c.record_key(), c.record_value()) for c in fresh))
            for c in fresh:
                self._last.setdefault(c.group, {})[(c.topic, c.partition)] = (c.upstream_offset, c.downstream_offset)
            self.counters.checkpoints_written += len(fresh)
        for gone in set(self._last).difference(all_checkpoints):
            del self._last[gone]
        self.counters.last_checkpoint_time = time.time()
        self.counters.groups = sorted(all_checkpoints)
        due = (self.flow.sync_group_offsets
               and time.monotonic() - self._last_sync >= self.flow.sync_group_offsets_interval_s)
        if sync_groups if sync_groups is not None else due:
            self._last_sync = time.monotonic()
            self.sync_group_offsets(target, all_checkpoints)
        return fresh

    def sync_group_offsets(self, target, checkpoints: dict[str, list[Checkpoint]]) -> None:
        wanted = {g: cps for g, cps in checkpoints.items() if cps}
        states = kafka.group_states(target, sorted(wanted))
        for group, cps in wanted.items():
            state, members = states.get(group, ("DEAD", 0))
            if members or state not in INACTIVE_STATES:
                self.counters.groups_skipped_active += 1
                log.debug("group %s is active on %s (%s); offsets not synced", group, self.flow.target_alias, state)
                continue
            current = kafka.group_offsets(target, group) if state != "DEAD" else {}
            offsets = {(c.topic, c.partition): c.downstream_offset for c in cps
                       if current.get((c.topic, c.partition), -1) < c.downstream_offset}
            if offsets:
                kafka.alter_group_offsets(target, group, offsets)
                self.counters.groups_synced += 1
                log.info("synced offsets of group %s on %s: %d partitions", group, self.flow.target_alias, len(offsets))

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(CLOSE_FLUSH_TIMEOUT_S)


class GroupOffsetThread(threading.Thread):
    """Runs ``GroupOffsetMirror.run_once`` every emit.checkpoints.interval.seconds until stopped."""

    def __init__(self, mirror: GroupOffsetMirror):
        super().__init__(name=f"mm2spark-checkpoints-{mirror.flow.name}", daemon=True)
        self.mirror = mirror
        self.stopping = threading.Event()
        self.interval = max(MIN_ROUND_INTERVAL_S, min(mirror.flow.emit_checkpoints_interval_s,
                                     mirror.flow.sync_group_offsets_interval_s if mirror.flow.sync_group_offsets
                                     else mirror.flow.emit_checkpoints_interval_s))

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            try:
                self.mirror.run_once()
            except Exception as exc:  # noqa: BLE001 - this thread must live on
                # Deliberately broad: whatever fails here (a cluster away, a group deleted meanwhile,
                # a bug), this thread must live on and the data keeps being mirrored without it; the
                # failure is counted and logged, and the next round retries.
                self.mirror.counters.errors += 1
                self.mirror.counters.last_error = str(exc)
                log.warning("checkpoints for flow %s failed: %s", self.mirror.flow.name, exc)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=STOP_JOIN_TIMEOUT_S)
        self.mirror.close()

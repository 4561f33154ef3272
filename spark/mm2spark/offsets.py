"""Offset syncs: which upstream offset landed at which downstream offset, and translation.

MM2's MirrorSourceTask writes an OffsetSync for a partition when (a) it has written none yet,
(b) the upstream offsets skipped (compaction, transaction markers), (c) the downstream partition
went backwards (truncated or recreated), or (d) the downstream offset moved ``offset.lag.max`` or
more past the offset the last sync translates to; and it later flushes a delayed sync for the
latest record so an idle partition translates exactly. ``OffsetSyncEmitter`` applies the same
rule to *runs* of records (u0+i landed at d0+i), so a micro-batch costs arithmetic, not a loop.

Translation is MM2's OffsetSyncStore rule, ``mm2spec.mm2.offsets`` (the failover playbooks use it
too): the latest sync at or below the consumer's upstream offset; an exact hit gives its downstream
offset, anything past it downstream+1.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterable, Iterator

from mm2spark.records import OffsetSync
from mm2spec.mm2 import offsets as offset_rule


@dataclass(frozen=True)
class Run:
    """Records ``upstream_start + i`` of a source partition landed at ``downstream_start + i``, i < count."""

    topic: str
    partition: int
    upstream_start: int
    downstream_start: int
    count: int

    @property
    def upstream_end(self) -> int:
        return self.upstream_start + self.count - 1

    @property
    def downstream_end(self) -> int:
        return self.downstream_start + self.count - 1


@dataclass
class _PartitionState:
    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1
    last_sync_upstream: int = -1


class OffsetSyncEmitter:
    """Decides which offset syncs to write, partition by partition (MM2's offset.lag.max rule)."""

    def __init__(self, offset_lag_max: int):
        self.offset_lag_max = max(0, int(offset_lag_max))
        self._partitions: dict[tuple[str, int], _PartitionState] = {}

    def _sync(self, state: _PartitionState, run: Run, index: int) -> OffsetSync:
        upstream, downstream = run.upstream_start + index, run.downstream_start + index
        state.last_sync_upstream, state.last_sync_downstream = upstream, downstream
        return OffsetSync(run.topic, run.partition, upstream, downstream)

    def on_run(self, run: Run) -> list[OffsetSync]:
        """Syncs due while writing ``run``, not counting the delayed sync for its last record."""
        if run.count <= 0:
            return []
        state = self._partitions.setdefault((run.topic, run.partition), _PartitionState())
        syncs: list[OffsetSync] = []
        first_due = (
            state.last_sync_downstream < 0
            or run.upstream_start - state.previous_upstream != 1
            or run.downstream_start < state.previous_downstream
            or run.downstream_start - (state.last_sync_downstream + 1) >= self.offset_lag_max
        )
        if first_due:
            syncs.append(self._sync(state, run, 0))
        # Inside a run offsets advance together, so only the staleness condition can fire again:
        # next at downstream == last_sync + 1 + offset.lag.max.
        step = max(1, self.offset_lag_max + 1)
        index = state.last_sync_downstream + step - run.downstream_start
        while 0 < index < run.count:
            syncs.append(self._sync(state, run, index))
            index += step
        state.previous_upstream, state.previous_downstream = run.upstream_end, run.downstream_end
        return syncs

    def delayed(self, topic: str, partition: int) -> OffsetSync | None:
        """The sync for the partition's latest record, unless it was already written."""
        state = self._partitions.get((topic, partition))
        if state is None or state.previous_upstream < 0 or state.previous_upstream == state.last_sync_upstream:
            return None
        state.last_sync_upstream = state.previous_upstream
        state.last_sync_downstream = state.previous_downstream
        return OffsetSync(topic, partition, state.previous_upstream, state.previous_downstream)

    def on_batch(self, runs: Iterable[Run]) -> list[OffsetSync]:
        """All syncs for one micro-batch: the rule's, then the delayed sync of each touched partition."""
        syncs: list[OffsetSync] = []
        touched: dict[tuple[str, int], None] = {}  # ordered, O(1) membership (1,000s of partitions a batch)
        for run in sorted(runs, key=lambda r: (r.topic, r.partition, r.upstream_start)):
            syncs.extend(self.on_run(run))
            touched[(run.topic, run.partition)] = None
        for topic, partition in touched:
            delayed = self.delayed(topic, partition)
            if delayed:
                syncs.append(delayed)
        return syncs


class OffsetSyncStore:
    """Recent offset syncs per source partition, for translating consumer group offsets by MM2's
    rule (``mm2spec.mm2.offsets``).

    Thread-safe: the batch thread adds, the checkpoint thread translates.
    """

    def __init__(self, max_per_partition: int = 4096):
        self.max_per_partition = max_per_partition
        self._syncs: dict[tuple[str, int], list[offset_rule.Sync]] = {}
        self._lock = threading.Lock()

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        new = (sync.upstream_offset, sync.downstream_offset)
        with self._lock:
            syncs = self._syncs.setdefault(key, [])
            if syncs and offset_rule.went_backwards(syncs[-1], new):
                syncs.clear()
            if syncs and new[0] == syncs[-1][0]:
                # Upstream offsets stay unique: the later sync of the same record wins, as in translation.
                syncs[-1] = new
                return
            syncs.append(new)
            if len(syncs) > self.max_per_partition:
                # Thin the older half to every other entry: recent syncs stay dense, old ones sparse.
                half = len(syncs) // 2
                self._syncs[key] = syncs[:half:2] + syncs[half:]

    def add_all(self, syncs: Iterable[OffsetSync]) -> None:
        for sync in syncs:
            self.add(sync)

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The downstream offset a consumer at ``upstream_offset`` upstream should resume from."""
        with self._lock:
            syncs = self._syncs.get((topic, partition))
            return offset_rule.translate(syncs, upstream_offset) if syncs else None

    def partitions(self) -> Iterator[tuple[str, int]]:
        with self._lock:
            return iter(list(self._syncs))

"""How MM2 translates a consumer group's offset through offset syncs (``OffsetSyncStore``).

An offset sync ``(upstream, downstream)`` says: source offset ``upstream`` of a partition was
written at offset ``downstream`` of its mirror. MM2 translates a group's committed upstream offset
with the latest sync at or below it: an exact hit gives the sync's downstream offset, anything past
it gives downstream + 1. Never ahead of what was really mirrored: a failed-over consumer may re-read
(up to ``offset.lag.max`` records per partition), never skip.

When a partition's upstream or downstream offsets go backwards from one sync to the next (the topic
was recreated or truncated), the older syncs describe a log that no longer exists and are dropped.

A partition's syncs are ``(upstream, downstream)`` pairs, sorted; the Spark job's checkpoint emitter
(``spark/mm2spark/offsets.py``) and the failover playbooks (``mm2spec.ops``) both translate here.
"""

from __future__ import annotations

import bisect
from typing import Sequence

Sync = tuple[int, int]
"""One offset sync of a partition: (upstream offset, downstream offset)."""


def went_backwards(previous: Sync, sync: Sync) -> bool:
    """Whether the upstream or the downstream log went backwards from ``previous`` to ``sync``
    (a recreated or truncated topic): MM2 then forgets every sync before ``sync``."""
    return sync[0] < previous[0] or sync[1] < previous[1]


def current_syncs(written: Sequence[Sync]) -> list[Sync]:
    """A partition's syncs in the order written, reduced to those after the last time a log went
    backwards, sorted and without repeats: the syncs MM2 still translates with."""
    start = 0
    for i in range(1, len(written)):
        if went_backwards(written[i - 1], written[i]):
            start = i
    return sorted(set(written[start:]))


def latest_sync(syncs: Sequence[Sync], upstream_offset: int) -> Sync | None:
    """The latest sync whose upstream offset is at or below ``upstream_offset`` (``syncs`` sorted);
    of several at the same upstream offset, the last. None when every sync is above it."""
    i = bisect.bisect_right(syncs, (upstream_offset, float("inf"))) - 1
    return syncs[i] if i >= 0 else None


def translated_offset(sync: Sync, upstream_offset: int) -> int:
    """Where a group at ``upstream_offset`` resumes downstream, by ``sync`` (its latest sync at or
    below): the sync's downstream offset on an exact hit, else one past it."""
    upstream, downstream = sync
    return downstream if upstream == upstream_offset else downstream + 1


def translate(syncs: Sequence[Sync], upstream_offset: int) -> int | None:
    """MM2's translation of ``upstream_offset`` through a partition's sorted ``syncs``; None when
    no sync is at or below it (MM2 emits no checkpoint then)."""
    sync = latest_sync(syncs, upstream_offset)
    return None if sync is None else translated_offset(sync, upstream_offset)


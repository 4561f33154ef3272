"""A DR pair's lease kept in memory, fenced the way Kafka's transactions fence (``mm2spec.live.lease``).

``MemoryLeaseStore`` stands for one pair's record on the DR cluster; each ``open_writer`` is an
``init_transactions`` with the pair's ``transactional.id``: it bumps the epoch, and a writer of an
older epoch commits nothing (``write`` returns False). Several ``PairLease`` objects sharing one store are
several runs (processes, hosts) contending for the pair.
"""

from __future__ import annotations

from typing import Callable

from mm2spec.live.lease import LeaseRecord


class MemoryWriter:
    """One ``init_transactions``: commits only while no later writer was opened."""

    def __init__(self, store: "MemoryLeaseStore", epoch: int):
        self.store, self.epoch = store, epoch

    def write(self, record: LeaseRecord | None) -> bool:
        self.store.before_commit(self.store)
        if self.epoch != self.store.epoch:
            return False
        self.store.record = record
        self.store.commits.append(record)
        return True

    def close(self) -> None:
        pass


class MemoryLeaseStore:
    """One pair's lease; ``before_commit`` lets a test slip another run in between a writer's read
    and its commit; ``unreachable`` makes every call fail as a cluster that does not answer."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.epoch = 0
        self.commits: list[LeaseRecord | None] = []
        self.before_commit: Callable[["MemoryLeaseStore"], None] = lambda _store: None
        self.unreachable = False

    def open_writer(self) -> MemoryWriter:
        self._answer()
        self.epoch += 1
        return MemoryWriter(self, self.epoch)

    def read(self) -> LeaseRecord | None:
        self._answer()
        return self.record

    def _answer(self) -> None:
        if self.unreachable:
            from mm2spec.errors import ClusterUnreachable

            raise ClusterUnreachable('cluster "dr" did not answer')

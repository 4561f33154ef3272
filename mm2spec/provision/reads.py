"""One batched read per cluster for a ``pulumi refresh`` of thousands of resources.

A refresh calls every resource's ``read`` (from the provider host's threads). Read alone, a topic
costs three requests (DescribeCluster, DescribeTopics, DescribeConfigs) and an ACL resource a
DescribeAcls of all its principal's bindings of that type: at 10,000 topics, 30,000 requests, and
each ACL resource reads the same bindings again. So once a cluster has been read ``BATCH_AFTER``
times in one run, ``shared`` takes one read of the whole cluster (every topic with its configs in
one listing and one batched DescribeConfigs; a principal's bindings in one DescribeAcls) and every
later read of the run looks its resource up there. A stack with a few resources on a big shared
cluster keeps reading only its own, which costs less than describing every topic there.

What was read is kept in this module (never in a provider, which Pulumi pickles) for one Pulumi
operation: the provider host is a process per operation. Should a process serve more than one
(the automation API), a read older than ``MAX_AGE_S`` is taken again, and any write to a cluster
through these providers drops that cluster's reads (``forget``), so nothing written in the run is
read back from before the write. Creates and updates never read through here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

#: Reads of one cluster (and kind) in a run before the whole cluster is read once for the rest.
BATCH_AFTER = 50
#: A whole-cluster read older than this is taken again (a refresh of 10,000 resources takes about a minute).
MAX_AGE_S = 120.0


@dataclass
class _Shared:
    reads: int = 0
    value: Any = None
    failed: bool = False
    taken: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


_LOCK = threading.Lock()
_SHARED: dict[tuple, _Shared] = {}


def shared(kind: str, cluster: Hashable, read_all: Callable[[], Any], *key: Hashable, after: int | None = None) -> Any:
    """What ``read_all()`` (a read of the whole ``cluster``) returned in this run, or None while
    no more than ``after`` (``BATCH_AFTER``) reads of this ``kind`` (and ``key``) of the cluster asked: the caller
    then reads its own resource alone (``after=0``: where a resource's own read costs as much as
    the whole one, every read shares it). The first caller past the threshold reads; the others wait
    for it. Should the whole read fail (a topic of someone else's the credentials may not describe,
    the cluster unreachable), None too, for ``MAX_AGE_S``: each resource is then read alone and
    fails, or not, on its own, as it did before any of this."""
    with _LOCK:
        entry = _SHARED.setdefault((kind, cluster, *key), _Shared())
        entry.reads += 1
        if entry.reads <= (BATCH_AFTER if after is None else after):
            return None
    with entry.lock:
        now = time.monotonic()
        if entry.failed and now - entry.taken <= MAX_AGE_S:
            return None
        if entry.value is None or now - entry.taken > MAX_AGE_S:
            try:
                entry.value, entry.failed = read_all(), False
            except Exception:  # noqa: BLE001 - the callers' own reads report what is wrong
                entry.value, entry.failed = None, True
            entry.taken = time.monotonic()
        return entry.value


def forget(cluster: Hashable | None = None) -> None:
    """Drop what was read of ``cluster`` (every cluster: None), after a write to it."""
    with _LOCK:
        for key, entry in _SHARED.items():
            if cluster is None or key[1] == cluster:
                entry.value, entry.failed = None, False
        if cluster is None:
            _SHARED.clear()

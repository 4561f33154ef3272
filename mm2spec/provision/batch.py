"""Group commit for the providers' threads: requests of one kind to one cluster that arrive while
one is in flight go to the cluster together, as the next request.

Why: a KRaft controller commits each CreateTopics, DeleteTopics or CreateAcls request on its own,
so one topic per request caps creates at a few dozen topics a second however many of the engine's
requests run at once, while one request for hundreds of topics takes about as long as one for one
(pulumi/README.md, "Scale"). A provider method still handles one
resource, as the engine asks; ``Coalescer`` makes the requests of those that run at the same time
one request, with no waiting added: the first goes alone, the next ones gather behind it.

A batch that fails is sent again item by item, so each resource fails with its own error (a bad
config of one topic does not fail the others), and a retried ``pulumi up`` finds what succeeded.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, Generic, Hashable, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

#: The most items one request carries (the admin client chunks further by what the broker accepts).
LIMIT = 500
#: Seconds a coalescer's thread waits for more before it ends (a next call starts another).
IDLE_S = 5.0


class Coalescer(Generic[Item, Result]):
    """Calls ``send(items) -> results`` (one result per item, in order) from a thread of its own
    for the items callers hand to ``__call__``, as many at once as have arrived."""

    def __init__(self, send: Callable[[list[Item]], list[Result]], limit: int = LIMIT):
        self._send, self._limit = send, limit
        self._ready = threading.Condition()
        self._queue: list[tuple[Item, Future]] = []
        self._sender: threading.Thread | None = None

    def __call__(self, item: Item) -> Result:
        """The item's result once a request holding it is answered; its error, raised, otherwise."""
        done: Future = Future()
        with self._ready:
            self._queue.append((item, done))
            if self._sender is None:
                self._sender = threading.Thread(target=self._serve, name="mm2spec-batch", daemon=True)
                self._sender.start()
            self._ready.notify()
        return done.result()

    def _serve(self) -> None:
        """Answer batches until ``IDLE_S`` pass with nothing to send; then the thread ends, and with
        it the admin clients cached for it (``connection.admin``), so none is left polling a cluster
        after the operation (a fork of a process with such busy threads can crash)."""
        while True:
            with self._ready:
                while not self._queue:
                    if not self._ready.wait(IDLE_S) and not self._queue:
                        self._sender = None
                        return
                batch, self._queue = self._queue[:self._limit], self._queue[self._limit:]
            self._answer(batch)

    def _answer(self, batch: list[tuple[Item, Future]]) -> None:
        try:
            results = self._send([item for item, _ in batch])
        except BaseException as exc:  # noqa: BLE001 - each caller gets its own error, below; no caller waits forever
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for one in batch:  # each alone: its own result, or its own error
                self._answer([one])
            return
        for (_item, done), result in zip(batch, results):
            done.set_result(result)


_COALESCERS: dict[Hashable, Coalescer] = {}
_LOCK = threading.Lock()


def coalescer(key: Hashable, send: Callable[[], Callable[[list], list]], limit: int = LIMIT) -> Coalescer:
    """The process's coalescer for ``key`` (e.g. the request kind and the cluster's connection),
    made with ``send()`` and ``limit`` on first use."""
    with _LOCK:
        found = _COALESCERS.get(key)
        if found is None:
            found = _COALESCERS[key] = Coalescer(send(), limit)
        return found

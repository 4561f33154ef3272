"""``provision.batch``: the requests of resources handled at the same time go to the cluster as one,
each caller gets its own result, and a failed batch is sent again item by item so each fails alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from mm2spec.provision import batch


class Cluster:
    """Answers a request of names after the first one is let through (``gate``): the names it got."""

    def __init__(self, refuse: str | None = None):
        self.requests: list[list[str]] = []
        self.gate, self.refuse = threading.Event(), refuse

    def send(self, names: list[str]) -> list[str]:
        self.gate.wait(5)
        self.requests.append(list(names))
        if self.refuse in names:
            raise ValueError(f"{self.refuse}: refused")
        return [f"done {n}" for n in names]


def test_calls_that_arrive_while_one_is_in_flight_go_together_and_each_gets_its_own_result():
    cluster = Cluster()
    coalesce = batch.Coalescer(cluster.send)
    with ThreadPoolExecutor(max_workers=20) as pool:
        first = pool.submit(coalesce, "t-0")
        while not (coalesce._sender and coalesce._queue == []):  # the first is in flight, alone
            pass
        rest = [pool.submit(coalesce, f"t-{i}") for i in range(1, 20)]
        while len(coalesce._queue) < 19:
            pass
        cluster.gate.set()
        assert first.result() == "done t-0" and [f.result() for f in rest] == [f"done t-{i}" for i in range(1, 20)]
    assert cluster.requests == [["t-0"], [f"t-{i}" for i in range(1, 20)]]


def test_a_failed_batch_is_sent_again_item_by_item_so_only_the_bad_one_fails():
    cluster = Cluster(refuse="t-3")
    cluster.gate.set()
    coalesce = batch.Coalescer(cluster.send)
    results = {}
    release = threading.Event()

    def call(name):
        release.wait(5)
        try:
            results[name] = coalesce(name)
        except ValueError as exc:
            results[name] = str(exc)

    threads = [threading.Thread(target=call, args=(f"t-{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert results == {f"t-{i}": ("t-3: refused" if i == 3 else f"done t-{i}") for i in range(6)}
    # every name reached the cluster once alone at least, the refused one only alone at last
    assert ["t-3"] in cluster.requests and all(len(r) >= 1 for r in cluster.requests)


def test_a_batch_holds_at_most_the_limit():
    cluster = Cluster()
    coalesce = batch.Coalescer(cluster.send, limit=4)
    with ThreadPoolExecutor(max_workers=10) as pool:
        futures = [pool.submit(coalesce, f"t-{i}") for i in range(10)]
        while len(coalesce._queue) + sum(len(r) for r in cluster.requests) < 9:
            pass
        cluster.gate.set()
        assert sorted(f.result() for f in futures) == sorted(f"done t-{i}" for i in range(10))
    assert max(len(r) for r in cluster.requests) <= 4 and sum(len(r) for r in cluster.requests) == 10


def test_one_coalescer_per_key():
    made = []
    first = batch.coalescer(("test-kind", "k1"), lambda: made.append(1) or (lambda items: items))
    assert batch.coalescer(("test-kind", "k1"), lambda: made.append(2) or (lambda items: items)) is first
    assert batch.coalescer(("test-kind", "k2"), lambda: made.append(3) or (lambda items: items)) is not first
    assert made == [1, 3] and first("x") == "x"


@pytest.mark.parametrize("size", [1, 7])
def test_the_order_of_results_follows_the_items(size):
    coalesce = batch.Coalescer(lambda items: [i * 2 for i in items])
    with ThreadPoolExecutor(max_workers=size) as pool:
        assert list(pool.map(coalesce, range(size))) == [i * 2 for i in range(size)]


def test_the_thread_ends_when_idle_and_a_next_call_starts_another(monkeypatch):
    monkeypatch.setattr(batch, "IDLE_S", 0.05)
    coalesce = batch.Coalescer(lambda items: items)
    assert coalesce("a") == "a"
    first = coalesce._sender
    first.join(5)
    assert not first.is_alive() and coalesce._sender is None
    assert coalesce("b") == "b" and coalesce._sender is not first

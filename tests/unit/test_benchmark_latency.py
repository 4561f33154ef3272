"""The mirror benchmark's latency arithmetic (benchmarks/mirror_throughput.py), on made-up timelines:
a wrong figure here would be a wrong figure in spark/README.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from mirror_throughput import PARTITIONS, latencies_from, pct

LAST = 1 + 50 * 1999  # the writer's last end offset per partition


def writer(slices: int = 2000):
    """50 records per partition every 5 ms (60,000 records/s over 6 partitions), after one warm record."""
    return [(k * 0.005, [1 + 50 * k] * PARTITIONS) for k in range(slices)]


def target(lag_s: float, samples: int = 520, extra=lambda t, offset: 0):
    """The target's end offsets sampled every 20 ms, ``lag_s`` behind the writer."""
    out = []
    for k in range(samples):
        t = k * 0.02 + lag_s
        offset = min(1 + 200 * k, LAST)
        out.append((t, [offset + extra(t, offset)] * PARTITIONS))
    return out


def test_a_steady_lag_is_measured_to_within_one_sample():
    latency = latencies_from(writer(), target(0.25), counted_from=2.0, counted_to=8.0)
    assert latency.missing == 0
    assert latency.records == 6 * 50 * (1 + int(6.0 / 0.005))  # the slices of [2 s, 8 s], both ends counted
    assert 250 <= pct(latency, 0.5) <= 270 and 250 <= pct(latency, 0.99) <= 270
    assert latency.produced_per_s == pytest.approx(60_000, rel=0.01)
    assert len(latency.worst_per_second) == 7 and max(latency.worst_per_second) <= 270


def test_transaction_markers_do_not_make_records_look_early():
    # One marker per 100 records: unmapped, a record would look readable 1 ms early per 10,000
    # records copied before it (50 ms in mid-run); spread over the run, the lag stays what it is.
    markers = target(0.25, extra=lambda t, offset: offset // 100)
    latency = latencies_from(writer(), markers, counted_from=2.0, counted_to=8.0)
    assert 245 <= pct(latency, 0.01) and 250 <= pct(latency, 0.5) <= 275 and pct(latency, 0.99) <= 275


def test_records_that_never_arrive_count_as_slowest():
    stalled = [(t, [min(e[0], 1 + 50 * 1000)] * PARTITIONS) for t, e in target(0.25)]  # stops at 5 s
    latency = latencies_from(writer(), stalled, counted_from=2.0, counted_to=8.0)
    assert latency.missing == 6 * 50 * int(3.0 / 0.005)
    assert pct(latency, 0.25) <= 270
    assert pct(latency, 0.99) == float("inf")

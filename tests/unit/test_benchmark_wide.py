"""The width benchmark's arithmetic (benchmarks/mirror_wide.py), on made-up timelines: whether the
live writer held its rate, lag figures, the target's surplus over the source, CPU per million
records. A wrong figure here would be a wrong figure in spark/README.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from mirror_wide import (
    WRITER_WARMUP_MAX_S,
    WRITER_WARMUP_S,
    WideRun,
    figures,
    judge_writer,
    lag_figures,
    live_per_partition,
    per_million,
    print_table,
    ratio,
    surplus,
    warmed_up,
    writer_linger_ms,
    writer_windows,
)


def steady_acks(rate: float, began: float, seconds: float, every: float = 0.02) -> list[tuple[float, int]]:
    """The source acknowledging ``rate`` records/s in slices ``every`` s apart."""
    return [(began + k * every, int(rate * k * every)) for k in range(int(seconds / every) + 1)]


def test_the_warm_up_ends_once_the_writer_holds_its_rate():
    # Acknowledged at 100 records/s for 20 s (a fresh writer on a busy source), then in step.
    slow = [(k * 0.02, int(100 * k * 0.02)) for k in range(1000)]
    acks = slow + [(20.0 + t, n + 2000) for t, n in steady_acks(5000, 0.0, 30.0)[1:]]
    assert warmed_up(acks, 0.0, WRITER_WARMUP_S, 5000) is None
    assert warmed_up(acks, 0.0, 21.0, 5000) is None
    assert warmed_up(acks, 0.0, 24.5, 5000) is None
    assert warmed_up(acks, 0.0, 25.5, 5000) == 25.5
    # A writer in step from its start still writes the least warm-up.
    steady = steady_acks(5000, 0.0, 30.0)
    assert warmed_up(steady, 0.0, WRITER_WARMUP_S - 0.5, 5000) is None
    assert warmed_up(steady, 0.0, WRITER_WARMUP_S + 0.5, 5000) == WRITER_WARMUP_S + 0.5
    # One that never keeps up starts counting at the cap (and is judged behind).
    assert warmed_up(slow, 0.0, WRITER_WARMUP_MAX_S, 5000) == WRITER_WARMUP_MAX_S


def test_a_writer_that_keeps_its_rate_is_held():
    run = WideRun("mm2", 1, 1000, 0, live_rate=5000)
    judge_writer(run, steady_acks(5000, 100.0, 40.0), counted_from=105.0, seconds=30.0)
    assert run.writer_behind is False and run.writer_windows_behind == 0
    assert len(run.writer_windows) == 30
    assert run.writer_rate_per_s == pytest.approx(5000, rel=0.01)


def test_a_stalled_second_is_reported_even_when_a_burst_makes_up_the_total():
    acks = steady_acks(5000, 0.0, 10.0)
    # Nothing acknowledged in [4 s, 5 s), then the second's records all at once at 5 s.
    stalled = [(t, n) for t, n in acks if not 4.0 <= t < 5.0]
    run = WideRun("spark", 1, 1000, 0, live_rate=5000)
    judge_writer(run, stalled, counted_from=0.0, seconds=10.0)
    assert run.writer_behind is True and run.writer_windows_behind == 1
    assert run.writer_slowest_window_per_s < 0.05 * 5000
    assert run.writer_rate_per_s == pytest.approx(5000, rel=0.01)


def test_a_writer_five_percent_slow_everywhere_is_behind_in_every_second():
    run = WideRun("spark", 1, 1000, 0, live_rate=5000)
    judge_writer(run, steady_acks(4700, 0.0, 12.0), counted_from=1.0, seconds=10.0)
    assert run.writer_windows_behind == 10


def test_windows_count_only_whole_seconds():
    assert writer_windows(steady_acks(1000, 0.0, 5.0), 0.0, 3.5) == pytest.approx([1000, 1000, 1000], rel=0.03)


def test_the_linger_keeps_the_writer_to_its_request_budget():
    assert writer_linger_ms(1000, 5000) == 800  # a partition's batch every 0.8 s: ~4 records, 1,250 requests/s
    assert writer_linger_ms(100, 1000) == 5  # 1,000 records/s are 1,000 requests/s at most: no linger
    assert writer_linger_ms(6, 5000) == 5  # the floor
    assert writer_linger_ms(10_000, 5000) == 1000  # the ceiling


def test_live_per_partition_counts_the_round_robin():
    start, written, width = 20_003, 1_234, 7
    counts = [0] * width
    for i in range(start, start + written):
        counts[i % width] += 1
    assert live_per_partition(start, written, width) == counts


def test_duplicates_and_missing_records_do_not_cancel_out():
    source = [10, 10, 10, 0]
    target = [12, 9, 10, 0]  # 2 duplicated on partition 0, 1 lost on partition 1
    assert surplus(source, target) == (2, 1)
    assert surplus(source, source) == (0, 0)


def test_lag_figures_take_mean_p99_and_max():
    run = WideRun("mm2", 1, 1000, 0)
    lag_figures(run, list(range(1, 201)))
    assert run.lag_mean_records == pytest.approx(100.5)
    assert run.lag_p99_records == 199.0
    assert run.lag_max_records == 200.0


def test_cpu_per_million_records():
    assert per_million(12.5, 250_000) == 50.0
    assert per_million(1.0, 0) is None


def test_the_warm_up_counts_in_no_lag_or_latency():
    """Two partitions; the writer's record ``start + n`` goes to partition ``(start + n) % 2``. The
    warm-up's records reach DR 3 s after the source, the counted ones 0.5 s after."""
    start, width = 0, 2
    timeline = [(0.0, 0), (1.0, 2), (WRITER_WARMUP_S + 1.0, 4)]  # 2 warm-up records, 2 counted
    samples = []
    for k in range(0, 41):
        t = k * 0.25
        on_source = [1 if t >= 1.0 else 0, 1 if t >= 1.0 else 0]
        on_target = [1 if t >= 4.0 else 0, 1 if t >= 4.0 else 0]
        if t >= WRITER_WARMUP_S + 1.0:
            on_source = [2, 2]
        if t >= WRITER_WARMUP_S + 1.5:
            on_target = [2, 2]
        samples.append((t, on_source, t, on_target))
    run = WideRun("spark", 1, width, 0)
    figures(run, timeline, samples, [0, 0], [0, 0], width, start, counted_from=WRITER_WARMUP_S)
    assert run.latency_max_ms == 500
    assert run.lag_max_records == 2.0  # not the warm-up's, which stood at 2 for 3 s as well
    assert run.lag_mean_records < 2.0


def test_the_table_says_loudly_when_the_writer_fell_behind(capsys):
    held = WideRun("mm2", 1, 1000, 200_000, live_rate=5000, writer_behind=False, writer_windows=[5000.0] * 3,
                   writer_windows_behind=0, writer_slowest_window_per_s=5000.0, writer_rate_per_s=5000.0,
                   lag_max_records=300.0, cpu_live_per_million=40.0, duplicates=0, missing=0)
    behind = WideRun("spark", 1, 1000, 200_000, live_rate=5000, writer_behind=True,
                     writer_windows=[5000.0, 1000.0, 5000.0], writer_windows_behind=1,
                     writer_slowest_window_per_s=1000.0, writer_rate_per_s=3700.0, lag_max_records=600.0,
                     cpu_live_per_million=60.0, duplicates=12, missing=0, spark_errors=1, spark_restarts=0)
    print_table([held, behind])
    out = capsys.readouterr().out
    assert "WRITER FELL BEHIND in spark round 1: 1 of 3" in out
    assert "WRITER FELL BEHIND in mm2" not in out
    assert "lag max 2.00x" in out and "live 1.50x" in out
    print_table([held])
    assert "held 95% of the asked rate in every" in capsys.readouterr().out


def test_a_ratio_against_none_at_all_shows_both_figures():
    assert ratio(2106.0, 0.0) == "2,106 against 0"
    assert ratio(300.0, 150.0) == "2.00x"
    assert ratio(None, 150.0) == "-"

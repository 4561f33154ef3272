"""The failover's offset translation alone, in process, over in-memory logs of ``failover.py``'s
shape: no Kafka, no Spark; the CPU the playbook spends in ``offsets.translate`` once the windows
are read. Prints a table; asserts nothing (but says when the two ways disagree).

    .venv/bin/python benchmarks/translate_cpu.py                    # 1,000 groups, 10 x 6 partitions, 3 rounds
    .venv/bin/python benchmarks/translate_cpu.py --groups 100 --rounds 5
    .venv/bin/python benchmarks/translate_cpu.py --replays 2 --marker-every 50   # at-least-once replays, EOS markers

The logs, per partition (``--topics`` x ``--partitions``): ``--records`` source records (keys
repeat over 13 values, the values are equal, the timestamps repeat over ~20 records, a header
tells them apart, as ``failover.py`` writes them), each copied in order to DR (``--marker-every``:
a transaction marker's offset after every that many DR records, as an exactly-once writer leaves;
``--replays``: that many at-least-once replays per partition, the last 10-60 records written
again); an offset sync every ``--offset-lag-max`` source offsets and at each replay's start (MM2
then forgets the syncs before it). ``--groups`` groups each commit a random offset below
``--committed-below`` on every partition, group after group, as ``offsets._planned`` lists them.

Each round times both ways over fresh windows (the reads are list slices here, so what is timed
is the walk and what it builds): ``per position`` is one exact walk per distinct (partition,
offset), ``exact_translation`` each, as ``translate_all`` did until 2026-12-02; ``translate_all``
is the playbook's. Both must give equal translation lists (checked every round). Wall and CPU
seconds, the medians and their ratio, and the load average before and after: the machine is
shared, so the figures are indicative.
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mm2spec.live.types import Record
from mm2spec.mm2.offsets import current_syncs
from mm2spec.ops.modules.offsets import Windows, exact_translation, translate_all
from mm2spec.ops.modules.topology import MirroredPartition
from mm2spec.ops.modules.translate import Translation

VALUE = b"x" * 100


class MemoryLog:
    """A ``RecordReader`` over in-memory partitions (sorted by offset), for ``Windows``."""

    def __init__(self, logs: dict[tuple[str, int], list[Record]]):
        self.logs = logs
        self.offsets = {tp: [r.offset for r in records] for tp, records in logs.items()}

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        records = self.logs[(topic, partition)]
        return (records[0].offset, records[-1].offset + 1) if records else (0, 0)

    def bounds(self, partitions) -> dict:
        return {tp: self.watermarks(*tp) for tp in partitions}

    def read(self, topic: str, partition: int, start: int, end: int) -> list[Record]:
        offsets = self.offsets[(topic, partition)]
        return self.logs[(topic, partition)][bisect.bisect_left(offsets, start):bisect.bisect_left(offsets, end)]

    def read_many(self, ranges) -> dict:
        return {tp: self.read(*tp, start, end) for tp, (start, end) in ranges.items()}


def _copy(record: Record, topic: str, offset: int) -> Record:
    # Fresh bytes objects, as a read from the other cluster gives (their hashes are not shared).
    return Record(topic, record.partition, offset, bytes(bytearray(record.key)), bytes(bytearray(record.value)),
                  record.timestamp, tuple((k, bytes(bytearray(v))) for k, v in record.headers))


def build(args: argparse.Namespace) -> tuple[list, dict, MemoryLog, MemoryLog]:
    """(wanted, syncs, source log, DR log) of the configured shape."""
    rng = random.Random(args.seed)
    parts, source, dr, syncs = [], {}, {}, {}
    for t in range(args.topics):
        topic = f"bfo-t{t}"
        for p in range(args.partitions):
            part = MirroredPartition(topic, p, f"primary.{topic}")
            parts.append(part)
            src = [Record(topic, p, o, f"k{rng.randrange(13)}".encode(), bytes(bytearray(VALUE)),
                          1_764_000_000_000 + o // 20, (("tag", f"seed-{o}".encode()),)) for o in range(args.records)]
            replay_after = set(rng.sample(range(60, args.records), args.replays)) if args.replays else set()
            copies, written, offset, synced = [], [], 0, None
            for o, record in enumerate(src):
                batch = [record] + (src[o - rng.randrange(10, 60) + 1:o + 1] if o in replay_after else [])
                for n, each in enumerate(batch):
                    # A sync when the lag since the last one reaches offsetLagMax, and first thing
                    # after a restart (a replay), which makes MM2 forget the syncs before it.
                    if synced is None or n == 1 or each.offset - synced >= args.offset_lag_max:
                        written.append((each.offset, offset))
                        synced = each.offset
                    copies.append(_copy(each, part.target_topic, offset))
                    offset += 1
                    if args.marker_every and len(copies) % args.marker_every == 0:
                        offset += 1  # a transaction marker's offset: no record there
            source[(topic, p)], dr[(part.target_topic, p)] = src, copies
            syncs[(topic, p)] = current_syncs(written)
    wanted = [(f"g{g}", part, rng.randrange(1, args.committed_below)) for g in range(args.groups) for part in parts]
    return wanted, syncs, MemoryLog(source), MemoryLog(dr)


def per_position(wanted: list, syncs: dict, source: Windows, dr: Windows) -> list[Translation]:
    """One exact walk per distinct (partition, offset), each group a copy: ``translate_all``
    until 2026-12-02, the reference the new way must equal."""
    walked: dict = {}
    found = []
    for group, part, committed in wanted:
        same = walked.get((part, committed))
        if same is None:
            same = walked[(part, committed)] = exact_translation(group, part, committed,
                                                                 syncs.get((part.topic, part.partition), []), source, dr)
        found.append(same if same.group == group else replace(same, group=group))
    return found


def timed(way, wanted, syncs, source_log, dr_log) -> tuple[float, float, list[Translation]]:
    source, dr = Windows(source_log), Windows(dr_log)
    wall, cpu = time.perf_counter(), time.process_time()
    found = way(wanted, syncs, source, dr)
    return time.perf_counter() - wall, time.process_time() - cpu, found


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=1200, help="source records per partition")
    parser.add_argument("--committed-below", type=int, default=1000, help="groups commit at random offsets 1..this-1")
    parser.add_argument("--offset-lag-max", type=int, default=100, help="source offsets between two offset syncs")
    parser.add_argument("--marker-every", type=int, default=0, help="a transaction marker after every N DR records")
    parser.add_argument("--replays", type=int, default=0, help="at-least-once replays per partition on DR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--only", choices=("both", "new", "old"), default="both")
    args = parser.parse_args()

    wanted, syncs, source_log, dr_log = build(args)
    positions = len({(part, committed) for _g, part, committed in wanted})
    print(f"{args.topics} x {args.partitions} partitions, {args.records} records each, {args.groups} groups: "
          f"{len(wanted)} group-partitions, {positions} distinct positions; syncs every {args.offset_lag_max}, "
          f"markers every {args.marker_every or '-'}, {args.replays} replays a partition")
    print(f"machine: {os.cpu_count()} cores, load average before: {load()}")
    ways = {"per position": per_position, "translate_all": translate_all}
    if args.only != "both":
        ways = {name: way for name, way in ways.items() if (name == "translate_all") == (args.only == "new")}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for round_no in range(1, args.rounds + 1):
        results = {}
        for name, way in (ways.items() if round_no % 2 else reversed(ways.items())):
            wall, cpu, results[name] = timed(way, wanted, syncs, source_log, dr_log)
            times[name].append((wall, cpu))
            print(f"  round {round_no}: {name:<14} {wall:7.2f} s wall {cpu:7.2f} s CPU   load {load()}", flush=True)
        found = next(iter(results.values()))
        if len(results) == 2 and results["per position"] != results["translate_all"]:
            differ = sum(a != b for a, b in zip(results["per position"], results["translate_all"]))
            print(f"  round {round_no}: THE TWO WAYS DISAGREE on {differ} of {len(found)} translations")
        exact = [t for t in found if t.dr_offset is not None]
        print(f"  round {round_no}: {len(exact)} translated, {len(found) - len(exact)} not; "
              f"skipped {sum(max(0, t.skipped) for t in exact)}, re-read {sum(max(0, t.reread) for t in exact)}, "
              f"unknown {sum(t.skipped < 0 or t.reread < 0 for t in exact)}; "
              f"MM2 would re-read {sum(t.mm2_reread or 0 for t in exact)}")
    print(f"\n{'seconds':<14} {'wall median':>12} {'(min-max)':>16} {'CPU median':>11}")
    for name, values in times.items():
        walls = [w for w, _c in values]
        print(f"{name:<14} {statistics.median(walls):12.2f} {f'({min(walls):.2f}-{max(walls):.2f})':>16} "
              f"{statistics.median(c for _w, c in values):11.2f}")
    if len(times) == 2:
        old, new = (statistics.median(c for _w, c in times[name]) for name in ("per position", "translate_all"))
        print(f"CPU ratio per position / translate_all: {old / new:.1f}x")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()

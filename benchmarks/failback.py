"""Failback end to end through the CLI: incremental (only what DR received after the switch is
copied back) against the full-copy rebuild (the source topic recreated and DR's whole log copied
into it, Strimzi's documented answer), on the same amounts of data. Prints a table.

    .venv/bin/python benchmarks/failback.py                       # 1,000,000 history + 1,000,000 on DR, 100 groups
    .venv/bin/python benchmarks/failback.py --history 100000 --on-dr 100000 --groups 20   # a quick look

Each mode has its own topic (``--partitions`` partitions) and spec, so the two never share data:

1. ``--history`` records written to the source; ``--groups`` groups committed there at random
   offsets; the Spark mirror (at-least-once) started and waited for until DR holds them all.
2. ``mm2spec failover`` (planned). Rebuild mode only: one record per partition is then written to
   the source by a writer nobody fenced, so the failback finds records stranded there and
   ``--stranded=rebuild`` recreates the topic.
3. ``--on-dr`` records written to DR (the clients after the failover); every group commits on DR
   at a random offset of the records written there.
4. ``mm2spec failback --format json`` in a subprocess: RTO (start to groups committed on the
   source), each task's wall time, skipped and re-read from its report; then the records copied
   back counted on the source (the source's end minus its end when the failback began) and
   checked against the records written on DR after the switch.

Not a test: it asserts nothing; the load average is printed with every run.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from failover import (KAFKA_CALL_TIMEOUT_S, SparkMirror, Topics, clusters, commit_groups, load_average, log,
                      produce, wait_caught_up)
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.spec.load import load_desired_state

import yaml

MODES = ("incremental", "rebuild")
#: The failback's own waits bound it (copy passes, the forward mirror's start); this only catches a hung command.
FAILBACK_TIMEOUT_S = 3600.0


def write_records(bootstrap: str, topics: Topics, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                         "enable.idempotence": True, "compression.type": "lz4"})
    each = topics.each()
    for i in range(count):
        topic, partition = each[i % len(each)]
        produce(producer, topic, partition, f"{tag}-{i}")
    producer.flush(KAFKA_CALL_TIMEOUT_S * 10)


def write_spec(path: Path, dev, mode: str, topics: Topics, prefix: str, workdir: Path) -> Path:
    flow = {"name": "bench", "source": "primary", "target": "dr", "replicationPolicy": "identity",
            "topics": topics.names, "groups": [f"{prefix}.*"], "syncGroupOffsets": False, "heartbeats": False,
            "emitCheckpointsIntervalSeconds": 5}
    spec = {"apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": f"bench-failback-{mode}"},
            "clusters": {"primary": {"bootstrapServers": [dev.primary.bootstrap]},
                         "dr": {"bootstrapServers": [dev.dr.bootstrap]}},
            "mirrors": [flow], "engine": "spark", "acls": {"manage": False, "principal": "User:mm2"},
            "spark": {"master": "local[2]", "checkpointLocation": str(workdir / "checkpoint")}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def ends(cluster, topics: Topics) -> dict:
    with RecordReader(cluster) as reader:
        return {tp: reader.watermarks(*tp)[1] for tp in topics.each()}


def cli(*argv: str) -> tuple[int, dict, float]:
    command = [str(Path(sys.executable).with_name("mm2spec")), *argv, "--format", "json", "--quiet", "--yes"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=FAILBACK_TIMEOUT_S)
    wall = time.monotonic() - started
    try:
        return done.returncode, json.loads(done.stdout), wall
    except ValueError:
        raise RuntimeError(f"{argv[0]}: no JSON report (exit {done.returncode}):\n{done.stderr[-3000:]}") from None


def bench(mode: str, dev, args, workdir: Path) -> dict:
    folder = workdir / mode
    folder.mkdir(parents=True, exist_ok=True)
    topics = Topics([f"bfb-{mode}"], args.partitions)
    prefix = f"bfb-{mode}-g"
    spec = write_spec(folder / "dr.yaml", dev, mode, topics, prefix, folder)
    state = load_desired_state(spec, None)
    primary, dr = state.cluster("primary"), state.cluster("dr")
    admin = AdminClient({"bootstrap.servers": dev.primary.bootstrap})  # kept: its futures die with it
    for future in admin.create_topics([NewTopic(t, topics.partitions, -1) for t in topics.names]).values():
        future.result(KAFKA_CALL_TIMEOUT_S)
    log(f"{mode}: writing {args.history:,} records of history (load {load_average()})")
    write_records(dev.primary.bootstrap, topics, args.history, "history")
    groups = [f"{prefix}{i}" for i in range(args.groups)]
    commit_groups(state, "primary", topics, groups, args.history // len(topics.each()), random.Random(mode))
    mirror = SparkMirror(folder)
    mirror.start(state)
    wait_caught_up(state, topics, False)
    log(f"{mode}: failing over")
    code, report, _wall = cli("failover", str(spec), *mirror.cli_args())
    if code != 0:
        raise RuntimeError(f"{mode}: failover failed: {json.dumps(report)[:2000]}")
    stranded = 0
    if mode == "rebuild":
        write_records(dev.primary.bootstrap, topics, len(topics.each()), "stranded")
        stranded = len(topics.each())
    switch_dr = ends(dr, topics)
    log(f"{mode}: writing {args.on_dr:,} records on DR (load {load_average()})")
    write_records(dev.dr.bootstrap, topics, args.on_dr, "on-dr")
    dr_end = ends(dr, topics)
    rng = random.Random(f"{mode}-dr")
    client = GroupOffsets(dr)
    for group in groups:
        client.commit(group, {tp: rng.randrange(switch_dr[tp] + 1, dr_end[tp] + 1) for tp in topics.each()})
    before = ends(primary, topics)
    load = [load_average()]
    log(f"{mode}: failing back (load {load[0]})")
    extra = ["--stranded=rebuild"] if mode == "rebuild" else []
    code, report, wall = cli("failback", str(spec), *mirror.cli_args(), *extra)
    load.append(load_average())
    after = ends(primary, topics)
    copied = sum(after.values()) - (0 if mode == "rebuild" else sum(before.values()))
    mirror.close()
    return {"mode": mode, "exit": code, "rto_s": report["rto"]["seconds"], "wall_s": round(wall, 1),
            "phases": {p["task"]: p["seconds"] for p in report["rto"]["phases"]}, "totals": report["totals"],
            "copied": copied, "written_on_dr": sum(dr_end.values()) - sum(switch_dr.values()),
            "dr_log": sum(dr_end.values()), "stranded": stranded, "load": load}


def print_table(runs: list[dict]) -> None:
    print("\n| mode | exit | RTO s | wall s | records copied back | written on DR after the switch | DR log | "
          "groups x partitions | skipped | re-read | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        t = r["totals"]
        print(f"| {r['mode']} | {r['exit']} | {r['rto_s']} | {r['wall_s']} | {r['copied']:,} | {r['written_on_dr']:,} | "
              f"{r['dr_log']:,} | {t.get('partitions')} | {t.get('skipped')} | {t.get('reread')} | "
              f"{r['load'][0]}-{r['load'][1]} |")
    for r in runs:
        print(f"\n{r['mode']}: RTO by phase (s)")
        for name, seconds in r["phases"].items():
            print(f"  {seconds:8.1f}  {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=int, default=1_000_000, help="records on the source before the failover")
    parser.add_argument("--on-dr", type=int, default=1_000_000, help="records written on DR after the failover")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--dev", action="store_true", help="use the running `mm2spec dev up` clusters")
    parser.add_argument("--workdir", help="keep the working files here (default: a temporary folder)")
    parser.add_argument("--json", help="also write the runs to this file")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mm2spec-bench-failback-"))
    dev, stack = clusters(args, workdir)
    runs = []
    try:
        for mode in args.modes.split(","):
            runs.append(bench(mode, dev, args, workdir))
            log(f"{mode}: {json.dumps(runs[-1])}")
    finally:
        if stack is not None:
            stack.down()
        if args.json:
            Path(args.json).write_text(json.dumps(runs, indent=1))
    print_table(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

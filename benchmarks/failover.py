"""Planned failover end to end through the CLI, per mirroring engine: RTO split by phase, records
skipped and re-read, and what MM2's own translation would have re-read. Prints tables.

    .venv/bin/python benchmarks/failover.py                     # every engine, 100 groups, 10 x 6, 3 rounds
    .venv/bin/python benchmarks/failover.py --engine spark,connect --groups 1000
    .venv/bin/python benchmarks/failover.py --rounds 1 --groups 20 --topics 2   # a quick look
    .venv/bin/python benchmarks/failover.py --engine connect --rounds 1 --groups 1000 --profile /tmp/prof
    .venv/bin/python benchmarks/failover.py --dev               # on the running `mm2spec dev up` clusters

What one run is, per engine (``spark``, ``spark-eos``: the Spark job in micro-batches,
at-least-once and exactly-once; ``spark-rt``: the same at-least-once in Spark's Real-time Mode,
``spark.mode: realtime``; ``connect``: MM2's rendered connectors on a Connect worker started from
the spec's rendered worker config). Engines run one after the other, each on its own topics:

* The engine's own topics ``bfo-<engine>-t<i>`` (``--partitions`` each) on primary, seeded with
  ``--seed`` records per partition; a live producer thread writes ``--rate`` records/s across
  them while the mirror starts and runs, and stops as the failover begins, as the applications
  do in a planned failover (or are fenced: ``failover: {fence: true}`` on a secured pair). The
  failover's drain then copies what was in flight. A producer that keeps writing never lets the
  drain finish: it waits until DR holds each partition's last record, and a partition written
  faster than the mirror's latency always has records in flight.
* The round's groups ``bfo-<engine>-r<round>-g<i>``, each committed on primary at its own random
  offset of every partition in the seeded range, without joining (the groups have no members).
* The mirror is (re)started from a spec selecting those groups (``offsetLagMax`` from
  ``--offset-lag-max``, MM2's default 100; ``syncGroupOffsets: false``) and resumes where the
  last round stopped it; the run starts once DR's end offsets reach the source's as they were
  when the wait began (the backlog of the stopped period copied).
* ``mm2spec failover SPEC --format json --quiet --yes`` in a subprocess; from its report: ``rto.seconds``
  (start until the groups are committed on DR), ``rto.phases`` (each task's wall time, grouped
  below by the playbook's phases: preflight, drain, switch, translate, commit, after the RTO),
  the totals (skipped, re-read, MM2's re-read), and the command's own wall time (interpreter
  start included). A round with a record skipped or re-read is flagged (the aim is 0 and 0).
  ``--profile DIR`` runs the command under cProfile (``DIR/<engine>-r<round>.prof``): for
  profiling the playbook's side, not for the figures (the profiler slows Python down).
* Between rounds the DR-state record is cleared by a tombstone (``clear_state``), so the next
  round is a first failover again; the next round's groups are new ones.

Medians over ``--rounds`` with the spread, and every round; the load average is printed with every
run (the machine is shared, so figures vary with what else runs). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mm2spec.dev import DevPorts, DevStack, DevState, ConnectWorker
from mm2spec.dev import process
from mm2spec.dev.stack import DEFAULT_ROOT
from mm2spec.errors import Mm2specError
from mm2spec.live.connect import ConnectClient
from mm2spec.live.dr_state import clear_state
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.mm2.retry import retry_call
from mm2spec.render import connectors, render_files, spark_job_config, write_files
from mm2spec.runtime import deployment
from mm2spec.spec.load import load_desired_state

ENGINES = ("spark", "spark-eos", "spark-rt", "connect")
"""spark: micro-batch at-least-once; spark-eos: micro-batch exactly-once; spark-rt: Real-time Mode
at-least-once; connect: MM2 on a Connect worker."""
#: The other benchmarks' name of the micro-batch at-least-once job.
ALIASES = {"spark-alo": "spark"}
#: The playbook's phases, by task name (``playbooks/failover.yaml``); a task not named here is
#: shown under its own name, and a task the report marks ``inRto: false`` goes to "after RTO".
PHASES = (("preflight", ("Preflight",)), ("fence", ("Fence",)), ("drain", ("Wait until DR holds",)),
          ("switch", ("Record the switch", "Stop the mirror")), ("translate", ("Translate",)),
          ("commit", ("Commit the offsets",)),
          ("after RTO", ("Lift a fence", "Grant the clients", "Record the failover as complete", "Verify")))
#: A JVM (the Spark driver, a Connect worker) takes a minute or more to start on two loaded cores.
START_TIMEOUT_S = 600.0
#: Copying the backlog of a stopped period (a few thousand records) takes seconds; the rest is load.
CATCH_UP_TIMEOUT_S = 600.0
#: The failover's own waits (drain 300 s, stop 120 s) bound it; this only catches a hung command.
FAILOVER_TIMEOUT_S = 900.0
KAFKA_CALL_TIMEOUT_S = 60.0
#: A fresh cluster creates and loads __consumer_offsets (50 partitions) on the first group commit:
#: seconds when idle, over a minute on two cores shared with other JVMs.
COORDINATOR_TIMEOUT_S = 180.0
#: How often the catch-up wait and the connector wait re-read the clusters.
POLL_S = 0.5
#: Connect commits source offsets, and MM2 writes the sync of a partition's latest record, every
#: offset.flush.interval.ms (60 s by default); the Spark job writes its syncs with each batch.
CONNECT_FLUSH_MS = "1000"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> float:
    return round(os.getloadavg()[0], 1)


def wait_until(done, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(POLL_S)


# ------------------------------------------------------------------------------------ data


@dataclass
class Topics:
    """One engine's source topics and their partitions."""

    names: list[str]
    partitions: int

    def each(self):
        return [(t, p) for t in self.names for p in range(self.partitions)]


def create_and_seed(bootstrap: str, topics: Topics, seed: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, topics.partitions, -1) for t in topics.names]).values():
        future.result(KAFKA_CALL_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i in range(seed):
        for topic, partition in topics.each():
            produce(producer, topic, partition, f"seed-{i}")
    producer.flush(KAFKA_CALL_TIMEOUT_S * 5)


def produce(producer: Producer, topic: str, partition: int, tag: str) -> None:
    """Keys and values repeat, as in real topics; the header tells records apart (by content)."""
    while True:
        try:
            producer.produce(topic, key=f"k{hash(tag) % 13}".encode(), value=b"x" * 100, partition=partition,
                             headers=[("tag", tag.encode())])
            return
        except BufferError:
            producer.poll(0.05)


class LiveProducer(threading.Thread):
    """Writes ``rate`` records/s round-robin over every partition until stopped."""

    def __init__(self, bootstrap: str, topics: Topics, rate: float):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        self.topics, self.rate = topics, rate
        self.stopping = threading.Event()
        self.sent = 0

    def run(self) -> None:
        targets, start = self.topics.each(), time.monotonic()
        while not self.stopping.is_set():
            topic, partition = targets[self.sent % len(targets)]
            produce(self.producer, topic, partition, f"live-{id(self)}-{self.sent}")
            self.sent += 1
            self.producer.poll(0)
            # Pacing, not a race: the next record is due at sent / rate seconds after the start.
            self.stopping.wait(max(0.0, start + self.sent / self.rate - time.monotonic()))
        self.producer.flush(KAFKA_CALL_TIMEOUT_S)

    def stop(self) -> None:
        self.stopping.set()
        self.join()


def commit_groups(state, alias: str, topics: Topics, groups: list[str], seed: int, rng: random.Random) -> None:
    """Each group at its own random offset of each partition, committed without joining."""
    warm_up_coordinator(state.cluster(alias), topics)
    client = GroupOffsets(state.cluster(alias))
    for group in groups:
        client.commit(group, {tp: rng.randrange(1, seed) for tp in topics.each()})


def warm_up_coordinator(cluster, topics: Topics) -> None:
    """One consumer commit first: its synchronous commit waits out a group coordinator still
    loading on a fresh cluster, where AdminClient's alter-offsets call gives up after its timeout."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"bfo-warm-up-{os.getpid()}",
                         "enable.auto.commit": False})
    try:
        retry_call(lambda: consumer.commit(offsets=[TopicPartition(topics.names[0], 0, 0)], asynchronous=False),
                   deadline_s=COORDINATOR_TIMEOUT_S)
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------ specs


def write_spec(path: Path, dev: DevState, engine: str, topics: Topics, group_prefix: str, args,
               workdir: Path) -> Path:
    flow = {"name": f"bench-{engine}", "source": "primary", "target": "dr", "replicationPolicy": "identity",
            "topics": topics.names, "groups": [f"{group_prefix}.*"], "tasksMax": 2,
            "offsetLagMax": args.offset_lag_max, "syncGroupOffsets": False, "heartbeats": False,
            "emitCheckpointsIntervalSeconds": 5, "exactlyOnce": engine == "spark-eos"}
    spec = {"apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": f"bench-failover-{engine}"},
            "clusters": {"primary": {"bootstrapServers": [dev.primary.bootstrap]},
                         "dr": {"bootstrapServers": [dev.dr.bootstrap]}},
            "mirrors": [flow], "engine": "connect" if engine == "connect" else "spark",
            "acls": {"manage": False, "principal": "User:mm2"}}
    if engine == "connect":
        spec["connect"] = {"config": {"offset.flush.interval.ms": CONNECT_FLUSH_MS}}
    else:
        spec["spark"] = {"master": args.master, "checkpointLocation": str(workdir / "checkpoint")}
        if engine == "spark-rt":
            spec["spark"]["mode"] = "realtime"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------ engines


class SparkMirror:
    """The Spark job, restarted per round from the round's spec; its checkpoint carries over."""

    def __init__(self, workdir: Path):
        self.state_dir = workdir / "spark-state"

    def start(self, state) -> None:
        deployment.start(spark_job_config(state), state_dir=self.state_dir, wait_running=START_TIMEOUT_S)

    def cli_args(self) -> list[str]:
        return ["--state-dir", str(self.state_dir)]

    def close(self) -> None:
        deployment.stop(self.state_dir)


class ConnectMirror:
    """A Connect worker from the spec's rendered worker config; the round's rendered connectors
    are created afresh each round (Connect keeps the source connector's offsets by name)."""

    def __init__(self, workdir: Path, state):
        write_files(render_files(state), workdir / "rendered")
        [port] = process.pick_free_ports(1)
        config = workdir / "rendered" / "connect-distributed.properties"
        config.write_text(config.read_text() + f"\nlisteners=http://127.0.0.1:{port}\n")  # the last key wins
        worker = ConnectWorker(config, workdir, name="connect-bench")
        self.proc = worker.start(tie_to_parent=True)
        process.wait_all_ready({self.proc: worker.ready}, timeout=START_TIMEOUT_S)
        self.url = worker.url
        self.client = ConnectClient(self.url)

    def start(self, state) -> None:
        rendered = connectors(state)
        for connector in rendered:
            self.client.delete_connector(connector["name"])
            self.client.put_connector_config(connector["name"], connector["config"])
        wait_until(lambda: all(self._running(c["name"]) for c in rendered), START_TIMEOUT_S, "the MM2 connectors to run")

    def _running(self, name: str) -> bool:
        status = self.client.connector_status(name) or {}
        tasks = status.get("tasks") or []
        return status.get("connector", {}).get("state") == "RUNNING" and bool(tasks) and all(
            t["state"] == "RUNNING" for t in tasks)

    def cli_args(self) -> list[str]:
        return ["--connect-url", self.url]

    def close(self) -> None:
        process.stop(self.proc)


def wait_caught_up(state, topics: Topics, exactly_once: bool) -> None:
    """Until DR's end offsets reach the source's as they were when the wait began: the backlog of
    the stopped period is copied (exactly-once: transaction markers make DR's ends run ahead, so
    the failover's own drain finishes the job and is measured)."""
    with RecordReader(state.cluster("primary")) as src, RecordReader(state.cluster("dr"),
                                                                     read_committed=exactly_once) as dr:
        target = {tp: src.watermarks(*tp)[1] for tp in topics.each()}
        admin = AdminClient({"bootstrap.servers": state.cluster("dr").bootstrap})

        def copied() -> bool:
            if not set(topics.names) <= set(admin.list_topics(timeout=KAFKA_CALL_TIMEOUT_S).topics):
                return False
            return all(dr.watermarks(*tp)[1] >= end for tp, end in target.items())
        wait_until(copied, CATCH_UP_TIMEOUT_S, "the mirror to catch up")


# ------------------------------------------------------------------------------------ runs


@dataclass
class Run:
    engine: str
    round: int
    rto_s: float | None
    wall_s: float
    exit_code: int
    phases: dict[str, float]
    totals: dict[str, int]
    load: list[float] = field(default_factory=list)
    after_rto: list[str] = field(default_factory=list)
    """Tasks the report marks as not in the RTO (``inRto``: after the commit)."""


def failover(spec: Path, mirror, engine: str, round_no: int, profile: str | None) -> Run:
    load = [load_average()]
    if profile:
        Path(profile).mkdir(parents=True, exist_ok=True)
        launcher = Path(profile) / "mm2spec_cli.py"  # cProfile runs a script or a module with a __main__
        launcher.write_text("import sys\nfrom mm2spec.cli import main\nsys.exit(main())\n")
        command = [sys.executable, "-m", "cProfile", "-o", str(Path(profile) / f"{engine}-r{round_no}.prof"),
                   str(launcher)]
    else:
        command = [str(Path(sys.executable).with_name("mm2spec"))]
    command += ["failover", str(spec), *mirror.cli_args(), "--format", "json", "--quiet", "--yes"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=FAILOVER_TIMEOUT_S)
    wall = time.monotonic() - started
    try:
        report = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"{engine} round {round_no}: no JSON report (exit {done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}") from None
    if done.returncode != 0:
        failed = [t for t in report["tasks"] if t["status"] == "failed"]
        log(f"{engine} round {round_no}: exit {done.returncode}: {json.dumps(failed)[:2000]}")
    return Run(engine, round_no, report["rto"]["seconds"], round(wall, 2), done.returncode,
               {p["task"]: p["seconds"] for p in report["rto"]["phases"]}, report["totals"],
               load + [load_average()], [p["task"] for p in report["rto"]["phases"] if not p.get("inRto", True)])


def phase_of(task: str, run: Run) -> str:
    if task in run.after_rto:
        return "after RTO"
    return next((phase for phase, starts in PHASES if task.startswith(starts)), task)


def by_phase(run: Run) -> dict[str, float]:
    """The round's task times summed per playbook phase."""
    found: dict[str, float] = {}
    for task, seconds in run.phases.items():
        found[phase_of(task, run)] = found.get(phase_of(task, run), 0.0) + seconds
    return found


def exact(run: Run) -> bool:
    """The aim: no record skipped, none re-read (-1, unknown, counts as not exact)."""
    return run.exit_code == 0 and run.totals.get("skipped") == 0 and run.totals.get("reread") == 0


def bench_engine(engine: str, dev: DevState, args, workdir: Path) -> list[Run]:
    folder = workdir / engine
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"bfo-{engine}-{os.getpid()}"
    topics = Topics([f"{tag}-t{i}" for i in range(args.topics)], args.partitions)
    log(f"{engine}: {len(topics.each())} partitions, seeding {args.seed} records each")
    create_and_seed(dev.primary.bootstrap, topics, args.seed)
    rng, runs, mirror, live = random.Random(f"{engine}-{args.seed}"), [], None, None
    try:
        for round_no in range(1, args.rounds + 1):
            prefix = f"{tag}-r{round_no}-"
            spec = write_spec(folder / f"round{round_no}.yaml", dev, engine, topics, prefix, args, folder)
            state = load_desired_state(spec, None)
            clear_state(state.cluster("dr"), state.name, state.mirrors[0].name)
            commit_groups(state, "primary", topics, [f"{prefix}g{i}" for i in range(args.groups)], args.seed, rng)
            if mirror is None:
                mirror = ConnectMirror(folder, state) if engine == "connect" else SparkMirror(folder)
            live = LiveProducer(dev.primary.bootstrap, topics, args.rate)
            live.start()
            log(f"{engine} round {round_no}: starting the mirror (load {load_average()})")
            mirror.start(state)
            wait_caught_up(state, topics, engine == "spark-eos")
            live.stop()
            log(f"{engine} round {round_no}: failing over {args.groups} groups (the producer stopped after "
                f"{live.sent} live records)")
            run = failover(spec, mirror, engine, round_no, args.profile)
            runs.append(run)
            log(f"{engine} round {round_no}: RTO {run.rto_s}s (wall {run.wall_s}s), skipped "
                f"{run.totals.get('skipped')}, re-read {run.totals.get('reread')}, MM2 would re-read "
                f"{run.totals.get('mm2Reread')}, load {run.load}; by phase: "
                + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in by_phase(run).items())
                + ("" if exact(run) else "; NOT EXACT (records skipped or re-read, or the run failed)"))
        return runs
    finally:
        if live is not None and live.is_alive():
            live.stop()
        if mirror is not None:
            mirror.close()


# ------------------------------------------------------------------------------------ output


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def print_tables(runs: list[Run], args, engines: list[str]) -> None:
    engines = [e for e in engines if any(r.engine == e for r in runs)]
    print(f"\nPlanned failover: {args.groups} groups x {args.topics} topics x {args.partitions} partitions "
          f"({args.groups * args.topics * args.partitions} group-partitions), offsetLagMax {args.offset_lag_max}, "
          f"live producer {args.rate:g} rec/s until the failover; median (min-max) of {args.rounds} rounds"
          + ("; under cProfile (not figures)" if args.profile else ""))
    print(f"{'engine':<10} {'RTO s':>18} {'CLI wall s':>18} {'skipped':>8} {'re-read':>8} {'MM2 re-read':>12} "
          f"{'failed runs':>11} {'load':>10}")
    for engine in engines:
        mine = [r for r in runs if r.engine == engine]
        ok = [r for r in mine if r.exit_code == 0 and r.rto_s is not None]
        mm2 = [r.totals.get("mm2Reread", 0) for r in ok]
        print(f"{engine:<10} {spread([r.rto_s for r in ok]):>18} {spread([r.wall_s for r in ok]):>18} "
              f"{max((r.totals.get('skipped', 0) for r in ok), default='-'):>8} "
              f"{max((r.totals.get('reread', 0) for r in ok), default='-'):>8} "
              f"{statistics.median(mm2) if mm2 else '-':>12} {len(mine) - len(ok):>11} "
              f"{min(min(r.load) for r in mine):.1f}-{max(max(r.load) for r in mine):.1f}")
    phases = list(dict.fromkeys(p for r in runs for p in by_phase(r)))
    print("\nRTO by phase (median seconds; 'after RTO' is not in the RTO)")
    print(f"{'phase':<12} " + " ".join(f"{e:>10}" for e in engines))
    for phase in phases:
        cells = []
        for engine in engines:
            values = [by_phase(r)[phase] for r in runs if r.engine == engine and phase in by_phase(r)]
            cells.append(f"{statistics.median(values):>10.2f}" if values else f"{'-':>10}")
        print(f"{phase:<12} " + " ".join(cells))
    print("\nEvery round (seconds)")
    print(f"{'engine':<10} {'round':>5} {'RTO':>7} {'wall':>7} " + " ".join(f"{p[:10]:>10}" for p in phases)
          + f" {'skipped':>8} {'re-read':>8} {'load':>9}  exit")
    for run in runs:
        split = by_phase(run)
        print(f"{run.engine:<10} {run.round:>5} {run.rto_s if run.rto_s is not None else '-':>7} {run.wall_s:>7} "
              + " ".join(f"{split[p]:>10.2f}" if p in split else f"{'-':>10}" for p in phases)
              + f" {run.totals.get('skipped', '-'):>8} {run.totals.get('reread', '-'):>8} "
              f"{min(run.load):>4.1f}-{max(run.load):<4.1f}  {run.exit_code}" + ("" if exact(run) else "  NOT EXACT"))
    print("\nTasks (median seconds)")
    tasks = list(dict.fromkeys(t for r in runs for t in r.phases))
    print(f"{'task':<60} " + " ".join(f"{e:>10}" for e in engines))
    for task in tasks:
        cells = []
        for engine in engines:
            values = [r.phases[task] for r in runs if r.engine == engine and task in r.phases]
            cells.append(f"{statistics.median(values):>10.2f}" if values else f"{'-':>10}")
        print(f"{task[:60]:<60} " + " ".join(cells))
    print(f"\nload average now {load_average()} (1 min); {os.cpu_count()} cores")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", "--engines", dest="engines", action="append",
                        help="comma-separated, repeatable: " + ", ".join(ENGINES) + " (default: all, in that order)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1000, help="records per partition before the first round")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s of the live producer")
    parser.add_argument("--offset-lag-max", type=int, default=100, help="the flow's offsetLagMax (MM2's default 100)")
    parser.add_argument("--master", default="local[2]", help="the Spark job's master")
    parser.add_argument("--dev", action="store_true",
                        help="use the running `mm2spec dev up` clusters (PLAINTEXT) instead of starting a pair")
    parser.add_argument("--profile", metavar="DIR", help="run each failover under cProfile, its stats in DIR")
    parser.add_argument("--workdir")
    parser.add_argument("--json", help="write every run to this file")
    args = parser.parse_args()
    args.engines = list(dict.fromkeys(ALIASES.get(e.strip(), e.strip()) for value in args.engines or [",".join(ENGINES)]
                                      for e in value.split(",") if e.strip()))
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"--engines: unknown {', '.join(sorted(unknown))} (known: {', '.join(ENGINES)})")
    return args


def clusters(args, workdir: Path) -> tuple[DevState, DevStack | None]:
    """The running dev environment (--dev), or a pair started here on free ports (stopped at the end)."""
    if args.dev:
        dev = DevStack(DEFAULT_ROOT).status()
        if dev is None:
            raise SystemExit("--dev: no dev environment is running (mm2spec dev up)")
        if dev.secure:
            raise SystemExit("--dev: the running dev environment is secured; this benchmark speaks PLAINTEXT "
                             "(run it without --dev: it starts its own clusters)")
        return dev, None
    stack = DevStack(workdir / "dev", ports=DevPorts.free(), tie_to_parent=True, echo=lambda _line: None)
    return stack.up(with_connect=False, timeout=START_TIMEOUT_S), stack


def main() -> int:
    args = parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mm2spec-bench-failover-"))
    log(f"clusters ({'dev' if args.dev else 'own, in ' + str(workdir)}); load average {load_average()}")
    dev, stack = clusters(args, workdir)
    runs: list[Run] = []
    try:
        for engine in args.engines:
            try:
                runs += bench_engine(engine, dev, args, workdir)
            except (RuntimeError, Mm2specError) as exc:  # the other engines' figures still count
                log(f"{engine}: gave up: {exc}")
    finally:
        if stack is not None:
            stack.down()
        if args.json:
            Path(args.json).write_text(json.dumps([vars(r) for r in runs], indent=1))
    print_tables(runs, args, args.engines)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: `mm2spec plan` over 1,000 (or 10,000) mirrored topics and their ACL bindings on real clusters.

Starts its own secured dev pair (SASL/SCRAM + StandardAuthorizer) on free ports, creates 1,000
source topics, applies the spec once (target topics and every ACL binding the spec derives, ~9,000),
then times `mm2spec plan` (in process and as the CLI) with nothing to change, and again after
drift (one topic config changed, 10 ACLs removed). Prints figures; asserts nothing.

Each topic the spec names literally gets its own 9 ACL bindings (3 on the source, 6 on the
target); ``--literal-topics N`` names only the first N so, and selects the others by one prefix
pattern (a few PREFIXED bindings): the plan still resolves, reads and compares every topic.

``--root DIR`` keeps the pair in DIR and leaves it running: a later run with the same DIR and
sizes reuses it, topics, ACLs and all (setting up 10,000 topics takes minutes); ``--stop`` stops
it at the end. ``--wire-connections 1,4`` times the in-process plan with each number of
connections per cluster for DescribeConfigs (``mm2spec.live.kafka.WIRE_CONNECTIONS``), rounds
alternating. ``--baseline DIR`` also times the CLI of another checkout of mm2spec (e.g.
``git archive HEAD | tar -x -C DIR``), rounds alternating with this one's. ``--timeline`` shows
when each cluster read of one in-process plan started and ended, with the CPU seconds of this
process and of each broker over the plan.

    .venv/bin/python benchmarks/plan_1000_topics.py [--topics 1000] [--partitions 3]
    .venv/bin/python benchmarks/plan_1000_topics.py --topics 10000 --literal-topics 3330 --partitions 1 --repeat 2
        # the scale target: 10,000 topics, ~30,000 ACL bindings (one partition each: a loaded
        # two-core broker creates a few dozen partitions a second)
    .venv/bin/python benchmarks/plan_1000_topics.py --topics 10000 --literal-topics 3330 --partitions 1 \\
        --root /tmp/plan-10k --timeline --wire-connections 1,4 --baseline /tmp/mm2spec-head --repeat 3
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mm2spec.spec.load import load_desired_state  # noqa: E402
from mm2spec.plan.desired import desired_resources, snapshot_sources  # noqa: E402
from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD  # noqa: E402
from mm2spec.dev.process import CLOCK_TICKS  # noqa: E402
from benchmarks.specs import secured_spec  # noqa: E402
from mm2spec.live import kafka  # noqa: E402
from mm2spec.live.kafka import KafkaAdmin  # noqa: E402
from mm2spec.plan import build  # noqa: E402
from mm2spec.plan.build import build_plan  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402


#: What the topics the spec does not name literally start with: the spec selects them by this prefix.
BULK_PREFIX = "bench-bulk-"
#: The reads of a plan the timeline shows: KafkaAdmin methods.
TIMED_READS = ("broker_version", "ping", "authorizer_enabled", "default_replication_factor", "topics", "topic_configs",
               "_describe_topics", "_answered_topic_configs", "acls", "groups")
#: The plan's own steps between and after the reads (functions ``mm2spec.plan.build`` calls), timed alike.
TIMED_STEPS = ("read_flow_states", "mirrored_by_flow", "topics_needing_configs", "desired_resources", "desired_acls",
               "with_configs", "_topic_changes", "_acl_changes")


def topic_names(total: int, literal: int) -> tuple[list[str], list[str]]:
    """The source topics, and what the spec lists: the literal names, then one prefix for the rest."""
    literal = min(literal, total)
    names = [f"bench-topic-{i:05d}" for i in range(literal)] + [f"{BULK_PREFIX}{i:05d}" for i in range(total - literal)]
    return names, names[:literal] + ([f"{BULK_PREFIX}.*"] if total > literal else [])


def spec_for(state, topics: list[str]) -> dict:
    return secured_spec(state, topics, "bench-plan")


def timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def alternating(series: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Each of ``series`` timed ``repeat`` times, rounds alternating (the order rotated each round),
    so a change in the machine's load falls on all of them alike."""
    times: dict[str, list[float]] = {label: [] for label in series}
    labels = list(series)
    for round_ in range(repeat):
        for label in labels[round_ % len(labels):] + labels[:round_ % len(labels)]:
            start = time.perf_counter()
            series[label]()
            times[label].append(time.perf_counter() - start)
    return times


def set_up(args, state, names: list[str], desired, root: Path) -> int:
    """The spec's topics and ACL bindings on the pair (once per ``--root``); the ACL bindings' count."""
    admins = {c.alias: KafkaAdmin(c, timeout=60) for c in desired.clusters}
    marker = root / f"bench-plan-{args.topics}-{args.literal_topics}-{args.partitions}.done"
    start = time.perf_counter()
    if not marker.exists():
        for alias in ("primary", "dr"):  # chunked CreateTopics (mm2spec.mm2.retry): 10,000 x 3 partitions fit
            admins[alias].create_topics([NewTopic(n, args.partitions, -1) for n in names], exist_ok=True)
    resources = desired_resources(desired, snapshot_sources(desired, admins.__getitem__))
    if not marker.exists():
        for alias, admin in admins.items():
            missing = [t for t in resources.topics if t.cluster == alias and t.kind == "internal"]
            for t in missing:
                admin.create_topic(t.name, t.partitions, -1, dict(t.configs), exist_ok=True)
            admin.create_acls([b for b in resources.acls if b.cluster == alias])
        marker.write_text("set up\n")
        print(f"setup: {args.topics} topics x {args.partitions} partitions on each cluster, {len(resources.acls)} ACL "
              f"bindings applied in {time.perf_counter() - start:.1f}s", flush=True)
    else:
        print(f"reusing the pair's {args.topics} topics and {len(resources.acls)} ACL bindings ({marker})", flush=True)
    return len(resources.acls)


def broker_cpu(state) -> dict[str, float]:
    """CPU seconds each broker has used so far (utime + stime from /proc)."""
    seconds = {}
    for proc in state.processes:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        seconds[proc.name] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return seconds


def timeline(plan, state, with_profile: bool = False) -> None:
    """One plan with each cluster read's start and end (seconds from the plan's start), its thread's
    CPU seconds over the call, and the CPU seconds of this process and of each broker; ``with_profile``:
    and the main thread's profile (which slows the plan down)."""
    events: list[tuple[float, float, float, str]] = []
    lock = threading.Lock()
    originals = {(KafkaAdmin, name): getattr(KafkaAdmin, name) for name in TIMED_READS}
    originals |= {(build, name): getattr(build, name) for name in TIMED_STEPS if hasattr(build, name)}

    def wrap(name, fn, method: bool):
        @functools.wraps(fn)
        def timed_call(*a, **kw):
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                what = f"{a[0].cluster.alias} {name}" if method else f"(Python) {name}"
                with lock:
                    events.append((start, time.perf_counter(), time.thread_time() - cpu, what))
        return timed_call

    for (owner, name), fn in originals.items():
        setattr(owner, name, wrap(name, fn, owner is KafkaAdmin))
    brokers, mine, begin = broker_cpu(state), os.times(), time.perf_counter()
    profile = cProfile.Profile() if with_profile else None
    try:
        if profile is not None:
            profile.enable()  # the main thread only: desired resources, the diff, what the reads hand back
        plan()
        if profile is not None:
            profile.disable()
    finally:
        for (owner, name), fn in originals.items():
            setattr(owner, name, fn)
    wall, after, brokers_after = time.perf_counter() - begin, os.times(), broker_cpu(state)
    print(f"\ntimeline of one in-process plan{' under cProfile' if with_profile else ''} ({wall:.2f} s; "
          f"nested calls show inside their callers):")
    print("| start s | end s | seconds | thread CPU s | read |")
    print("|---|---|---|---|---|")
    for start, end, cpu, what in sorted(events):
        print(f"| {start - begin:.2f} | {end - begin:.2f} | {end - start:.2f} | {cpu:.2f} | {what} |")
    client = after.user + after.system - mine.user - mine.system
    print(f"\nCPU over the plan: this process {client:.2f} s, "
          + ", ".join(f"broker {name} {brokers_after[name] - brokers[name]:.2f} s" for name in brokers))
    if profile is not None:
        print("\nthe main thread's own work (cProfile, by own time, top 25):")
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--literal-topics", type=int, help="name only this many topics literally (default: all)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of each topic")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--root", type=Path, help="keep the dev pair in this folder and leave it running (reused)")
    parser.add_argument("--stop", action="store_true", help="with --root: stop the pair at the end")
    parser.add_argument("--wire-connections", help="comma-separated connection counts to time side by side, e.g. 1,4")
    parser.add_argument("--baseline", type=Path, help="another checkout of mm2spec whose CLI to time alongside")
    parser.add_argument("--timeline", action="store_true", help="show when each read of one plan ran")
    parser.add_argument("--profile", action="store_true", help="and profile the main thread of another such plan")
    parser.add_argument("--no-drift", action="store_true", help="skip the plans after drift")
    args = parser.parse_args()
    args.literal_topics = args.topics if args.literal_topics is None else args.literal_topics
    os.environ.update(BENCH_MM2_PASSWORD=MM2_PASSWORD, BENCH_ADMIN_PASSWORD=ADMIN_PASSWORD)
    root = args.root.resolve() if args.root else Path(tempfile.mkdtemp(prefix="mm2spec-bench-plan-"))
    root.mkdir(parents=True, exist_ok=True)
    keep = args.root is not None and not args.stop
    stack = DevStack(root, ports=DevPorts.free(), secure=True, tie_to_parent=not keep, echo=lambda _l: None)
    print(f"starting (or reusing) a secured dev pair in {root} ...", flush=True)
    state = stack.up(with_connect=False, timeout=180)
    try:
        names, selected = topic_names(args.topics, args.literal_topics)
        spec = root / "spec.yaml"
        spec.write_text(yaml.safe_dump(spec_for(state, selected), sort_keys=False))
        desired = load_desired_state(spec, None)
        acl_count = set_up(args, state, names, desired, root)

        def plan_in_process():
            return build_plan(desired, lambda alias: KafkaAdmin(desired.cluster(alias), timeout=60))

        def cli(tree: Path, *extra: str):
            """`mm2spec plan` as a command, run from the mm2spec of ``tree`` (this checkout or ``--baseline``)."""
            env = {**os.environ, "PYTHONPATH": str(tree)}
            command = [sys.executable, "-c", "import sys; from mm2spec.cli import main; sys.exit(main())",
                       "plan", str(spec), *extra]
            return lambda: subprocess.run(command, check=True, capture_output=True, env=env, cwd=root)

        first = plan_in_process()
        print(f"no-op plan finds {sum(1 for c in first.changes if c.action != 'no-op')} changes "
              f"over {sum(1 for c in first.changes if c.kind == 'topic')} topics", flush=True)
        if args.timeline:
            timeline(plan_in_process, state)
        if args.profile:
            timeline(plan_in_process, state, with_profile=True)
        rows: list[tuple[str, list[float]]] = []
        if args.wire_connections:
            default = kafka.WIRE_CONNECTIONS

            def with_connections(count: int):
                def run():
                    kafka.WIRE_CONNECTIONS = count
                    try:
                        plan_in_process()
                    finally:
                        kafka.WIRE_CONNECTIONS = default
                return run

            counts = [int(c) for c in args.wire_connections.split(",")]
            for label, series in alternating({f"build_plan (in process), no changes, {c} connection(s) a cluster":
                                              with_connections(c) for c in counts}, args.repeat).items():
                rows.append((label, series))
        else:
            rows.append(("build_plan (in process), no changes", timed(plan_in_process, args.repeat)))
        clis = {"`mm2spec plan --format json` (CLI), no changes": cli(ROOT, "--format", "json")}
        if args.baseline:
            clis[f"the same, CLI of {args.baseline}"] = cli(args.baseline.resolve(), "--format", "json")
        rows += alternating(clis, args.repeat).items()
        if not args.no_drift:
            admins = {c.alias: KafkaAdmin(c, timeout=60) for c in desired.clusters}
            removed = [b for b in desired_resources(desired, snapshot_sources(desired, admins.__getitem__)).acls
                       if b.cluster == "primary"][:10]
            admins["dr"].alter_topic_configs(names[0], {"retention.ms": "1000"})
            admins["primary"].delete_acls(removed)
            try:
                drift = plan_in_process()
                drift_changes = sum(1 for c in drift.changes if c.action != "no-op")
                drifted = {f"`mm2spec plan` (CLI), after drift ({drift_changes} changes)": cli(ROOT)}
                if args.baseline:
                    drifted[f"the same, CLI of {args.baseline}"] = cli(args.baseline.resolve())
                rows += alternating(drifted, args.repeat).items()
            finally:  # as it was, for the next run on a kept pair
                admins["dr"].alter_topic_configs(names[0], {}, delete=["retention.ms"])
                admins["primary"].create_acls(removed)
        print()
        print(f"| plan over {args.topics} topics and {acl_count} ACL bindings | median | min | max |")
        print("|---|---|---|---|")
        for label, series in rows:
            print(f"| {label} | {statistics.median(series):.2f} s | {min(series):.2f} s | {max(series):.2f} s |")
        print(f"\nmachine: {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        if not keep:
            stack.down()


if __name__ == "__main__":
    main()

"""Benchmark: `mm2spec plan` over 1,000 (or 10,000) mirrored topics and their ACL bindings on real clusters.

Starts its own secured dev pair (SASL/SCRAM + StandardAuthorizer) on free ports, creates 1,000
source topics, applies the spec once (target topics and every ACL binding the spec derives, ~9,000),
then times `mm2spec plan` (in process and as the CLI) with nothing to change, and again after
drift (one topic config changed, 10 ACLs removed). Prints figures; asserts nothing.

Each topic the spec names literally gets its own 9 ACL bindings (3 on the source, 6 on the
target); ``--literal-topics N`` names only the first N so, and selects the others by one prefix
pattern (a few PREFIXED bindings): the plan still resolves, reads and compares every topic.

    .venv/bin/python benchmarks/plan_1000_topics.py [--topics 1000] [--partitions 3]
    .venv/bin/python benchmarks/plan_1000_topics.py --topics 10000 --literal-topics 3330 --partitions 1 --repeat 2
        # the scale target: 10,000 topics, ~30,000 ACL bindings (one partition each: a loaded
        # two-core broker creates a few dozen partitions a second)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mm2spec.spec.load import load_desired_state  # noqa: E402
from mm2spec.plan.desired import desired_resources, snapshot_sources  # noqa: E402
from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD  # noqa: E402
from benchmarks.specs import secured_spec  # noqa: E402
from mm2spec.live.kafka import KafkaAdmin  # noqa: E402
from mm2spec.plan.build import build_plan  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402


#: What the topics the spec does not name literally start with: the spec selects them by this prefix.
BULK_PREFIX = "bench-bulk-"


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--literal-topics", type=int, help="name only this many topics literally (default: all)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of each topic")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.update(BENCH_MM2_PASSWORD=MM2_PASSWORD, BENCH_ADMIN_PASSWORD=ADMIN_PASSWORD)
    root = Path(tempfile.mkdtemp(prefix="mm2spec-bench-plan-"))
    stack = DevStack(root, ports=DevPorts.free(), secure=True, tie_to_parent=True, echo=lambda _l: None)
    print(f"starting a secured dev pair in {root} ...", flush=True)
    state = stack.up(with_connect=False, timeout=180)
    try:
        names, selected = topic_names(args.topics, args.topics if args.literal_topics is None else args.literal_topics)
        spec = root / "spec.yaml"
        spec.write_text(yaml.safe_dump(spec_for(state, selected), sort_keys=False))
        desired = load_desired_state(spec, None)
        admins = {c.alias: KafkaAdmin(c, timeout=60) for c in desired.clusters}
        start = time.perf_counter()
        for alias in ("primary", "dr"):  # chunked CreateTopics (mm2spec.mm2.retry): 10,000 x 3 partitions fit
            admins[alias].create_topics([NewTopic(n, args.partitions, -1) for n in names])
        resources = desired_resources(desired, snapshot_sources(desired, admins.__getitem__))
        for alias, admin in admins.items():
            missing = [t for t in resources.topics if t.cluster == alias and t.kind == "internal"]
            for t in missing:
                admin.create_topic(t.name, t.partitions, -1, dict(t.configs), exist_ok=True)
            admin.create_acls([b for b in resources.acls if b.cluster == alias])
        setup = time.perf_counter() - start
        acl_count = len(resources.acls)
        print(f"setup: {args.topics} topics x {args.partitions} partitions on each cluster, {acl_count} ACL bindings "
              f"applied in {setup:.1f}s", flush=True)

        def plan_in_process():
            plan = build_plan(desired, lambda alias: KafkaAdmin(desired.cluster(alias), timeout=60))
            return plan

        first = plan_in_process()
        print(f"no-op plan finds {sum(1 for c in first.changes if c.action != 'no-op')} changes "
              f"over {sum(1 for c in first.changes if c.kind == 'topic')} topics", flush=True)
        in_process = timed(plan_in_process, args.repeat)
        cli = timed(lambda: subprocess.run([str(ROOT / ".venv/bin/mm2spec"), "plan", str(spec), "--format", "json"],
                                           check=True, capture_output=True), args.repeat)
        admins["dr"].alter_topic_configs(names[0], {"retention.ms": "1000"})
        admins["primary"].delete_acls([b for b in resources.acls if b.cluster == "primary"][:10])
        drift = plan_in_process()
        drift_changes = sum(1 for c in drift.changes if c.action != "no-op")
        drift_cli = timed(lambda: subprocess.run([str(ROOT / ".venv/bin/mm2spec"), "plan", str(spec)],
                                                 capture_output=True), args.repeat)
        print()
        print(f"| plan over {args.topics} topics and {acl_count} ACL bindings | median | min | max |")
        print("|---|---|---|---|")
        for label, series in (("build_plan (in process), no changes", in_process),
                              ("`mm2spec plan --format json` (CLI), no changes", cli),
                              (f"`mm2spec plan` (CLI), after drift ({drift_changes} changes)", drift_cli)):
            print(f"| {label} | {statistics.median(series):.2f} s | {min(series):.2f} s | {max(series):.2f} s |")
        print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    finally:
        stack.down()


if __name__ == "__main__":
    main()

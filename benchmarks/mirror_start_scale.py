"""Benchmark: the Spark mirror starting on 10,000 source topics (issue 14, item 7).

Starts its own plain dev pair on free ports, creates N one-partition source topics (chunked
CreateTopics, mm2spec.mm2.retry), writes one record to each, starts the Spark job on the pattern
that selects them, and prints: the job's start until RUNNING, until its first batch, until every
target topic exists on the dr cluster, and until every record is there. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/mirror_start_scale.py [--topics 10000] [--heap 2g]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.live.kafka import KafkaAdmin  # noqa: E402
from mm2spec.runtime import deployment as mirror  # noqa: E402
from mm2spec.spec.model import Cluster  # noqa: E402

PREFIX = "scale-"
POLL_S = 1.0
"""Progress is sampled once a second: the phases measured take tens of seconds to minutes."""
PHASE_TIMEOUT_S = 3600.0
"""Give up on a phase after an hour: on two loaded cores 10,000 topics take minutes, not hours."""
RUNNING_TIMEOUT_S = 900.0
"""Spark's own start-up (JVM, session, first metadata) on a loaded 2-core machine."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def until(what: str, check, start: float) -> float:
    """Seconds from ``start`` until ``check()`` holds (sampled every POLL_S)."""
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not reached within {PHASE_TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)
    elapsed = time.monotonic() - start
    log(f"{what}: {elapsed:.1f} s")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--heap", default="2g")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mm2spec-bench-start-"))
    stack = DevStack(root, ports=DevPorts.free(), tie_to_parent=True, echo=lambda _l: None)
    log(f"starting a dev pair in {root}")
    state = stack.up(with_connect=False, timeout=300)
    deployment = None
    try:
        source = KafkaAdmin(Cluster("primary", (state.primary.bootstrap,)), timeout=120)
        target = KafkaAdmin(Cluster("dr", (state.dr.bootstrap,)), timeout=120)
        names = [f"{PREFIX}{i:05d}" for i in range(args.topics)]
        began = time.monotonic()
        source.create_topics([NewTopic(n, 1, -1) for n in names])
        log(f"created {len(names)} source topics in {time.monotonic() - began:.1f} s")
        producer = Producer({"bootstrap.servers": state.primary.bootstrap, "linger.ms": 50})
        for name in names:
            producer.produce(name, key=b"k", value=name.encode())
            producer.poll(0)
        assert producer.flush(300) == 0, "records were not delivered"

        job = {
            "apiVersion": "mm2spec/v1", "name": "bench-start", "environment": "bench",
            "spark": {"master": "local[2]", "driver.memory": args.heap,
                      "checkpoint.location": str(root / "checkpoints")},
            "flows": [{
                "name": "primary-to-dr", "source.cluster.alias": "primary", "target.cluster.alias": "dr",
                "source.cluster.bootstrap.servers": state.primary.bootstrap,
                "target.cluster.bootstrap.servers": state.dr.bootstrap,
                "topics": f"{PREFIX}.*", "groups": "none",
                "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
                "offset-syncs.topic.location": "target", "emit.checkpoints.enabled": "false",
                "sync.group.offsets.enabled": "false",
            }],
        }
        start = time.monotonic()
        deployment = mirror.start(job, state_dir=root / "state", wait_running=RUNNING_TIMEOUT_S)
        running = time.monotonic() - start
        log(f"job RUNNING: {running:.1f} s")

        def batches() -> int:
            return sum(int(f.get("batches") or 0) for f in (mirror.status(deployment).flows or {}).values())

        remote = {f"primary.{n}" for n in names}
        first = until("first batch", lambda: batches() >= 1, start)
        created = until("every target topic exists",
                        lambda: remote <= set(target.topics(with_configs=False)), start)

        def mirrored() -> bool:
            topics = target.topics(list(remote), with_configs=False)
            return len(topics) == len(remote) and all(target.end_offsets(t, 1)[0] >= 1 for t in sorted(remote)[::97])

        records = until("records mirrored (every 97th topic checked)", mirrored, start)
        print(f"\n| Spark mirror start on {args.topics} source topics (1 partition, 1 record each) | seconds |")
        print("|---|---|")
        for label, value in (("job RUNNING", running), ("first batch", first),
                             ("every target topic created", created), ("records mirrored (sampled)", records)):
            print(f"| {label} | {value:.1f} |")
        print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    finally:
        if deployment is not None:
            mirror.stop(deployment)
        stack.down()


if __name__ == "__main__":
    main()

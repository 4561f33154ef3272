"""MM2's names and formats as mm2spec writes them, checked with MirrorMaker 2's own Java classes.

``spark_mm2_check/Mm2Check.java`` is compiled here against the installed Kafka jars
(connect-mirror, connect-mirror-client). It names topics with the real replication policies, to
check ``mm2spec.mm2`` (the rules the plan, the Pulumi program and the Spark job all use), and
decodes what the Spark job's Python wrote with ``OffsetSync.deserializeRecord`` /
``Checkpoint.deserializeRecord``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from required import missing_component
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.components import components
from mm2spec.errors import ComponentMissing
from mm2spec.mm2 import policy
from mm2spec.mm2.policy import DEFAULT_POLICY as DEFAULT
from mm2spec.mm2.policy import IDENTITY_POLICY as IDENTITY

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spark.config import parse_job_config
from mm2spark.records import Checkpoint, OffsetSync
from mm2spark.topics import topic_filter

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HARNESS = Path(__file__).resolve().parent / "spark_mm2_check" / "Mm2Check.java"


missing = missing_component


class Mm2Check:
    """Runs the compiled harness: ``check("syncs", bootstrap, topic)`` -> output lines."""

    def __init__(self, classes: Path, libs: Path, java: str):
        self.classpath = f"{classes}{os.pathsep}{libs}/*"
        self.java = java

    def __call__(self, *args: str) -> list[str]:
        result = subprocess.run([self.java, "-cp", self.classpath, "Mm2Check", *args], capture_output=True,
                                text=True, timeout=180)
        if result.returncode != 0:
            raise AssertionError(f"Mm2Check {' '.join(args)} failed:\n{result.stderr[-3000:]}")
        return [line for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def mm2_check(tmp_path_factory) -> Mm2Check:
    try:
        libs = components().kafka_libs
        java = components().java()
    except ComponentMissing as exc:
        missing(str(exc))
    if not any(libs.glob("connect-mirror-client-*.jar")) or not any(libs.glob("connect-mirror-[0-9]*.jar")):
        missing(f"connect-mirror jars are not in {libs}; run scripts/install-kafka.sh")
    javac = shutil.which("javac") or str(Path(java).with_name("javac"))
    if not Path(javac).exists():
        missing("javac (a JDK) is needed to compile the MM2 check harness")
    classes = tmp_path_factory.mktemp("mm2check")
    subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", f"{libs}/*", str(HARNESS)], check=True,
                   capture_output=True, timeout=180)
    return Mm2Check(classes, libs, java)


def flow(**overrides):
    data = {"name": "f", "source.cluster.alias": "primary", "target.cluster.alias": "dr",
            "source.cluster.bootstrap.servers": "x:1", "target.cluster.bootstrap.servers": "y:1",
            "topics": ".*", "topics.exclude": "", "replication.policy.class": DEFAULT}
    data.update(overrides)
    return parse_job_config({"apiVersion": "mm2spec/v1", "name": "j", "flows": [data]}, environ={}).flows[0]


NAMES = ["orders", "__consumer_offsets", ".hidden", "a-internal", "b.internal", "heartbeats",
         "mm2-offset-syncs.primary.internal", "mm2-offset-syncs.zz.internal", "primary.checkpoints.internal",
         "x.checkpoints.internal", "mm2-configs.dr.internal", "mm2-status.dr.internal", "connect-offsets"]


def test_policy_names_and_internal_topics_match_mm2(mm2_check):
    """mm2spec.mm2's naming and internal-topic rules against the real policies (separator ".")."""
    java = {tuple(line.split(" ", 1)) for line in mm2_check("names", DEFAULT, "primary", "dr", *NAMES)}
    # offsetSyncsTopic(alias) names the topic after the cluster it is not on: on the target, the source
    assert ("offsetSyncsTopic", policy.offset_syncs_topic("primary", "dr", "target")) in java
    assert ("checkpointsTopic", policy.checkpoints_topic("primary")) in java
    internal_patterns = policy.internal_topic_patterns()
    accept = topic_filter(flow())  # the Spark job's decision, built from the same rules
    for name in NAMES:
        assert ("remote", f"{name} {policy.target_topic('primary', name, identity=False)}") in java
        internal = ("internal", f"{name} true") in java
        assert any(re.fullmatch(p, name) for p in internal_patterns) == internal, name
        # MM2 never mirrors an internal topic; everything else here passes topics=.*
        assert accept(name) == (not internal), name
    identity = {tuple(line.split(" ", 1)) for line in mm2_check("names", IDENTITY, "primary", "dr", *NAMES)}
    assert ("remote", "orders orders") in identity
    for name in NAMES:
        if not name.endswith("heartbeats"):  # MM2 still prefixes heartbeats topics; not modelled
            assert ("remote", f"{name} {policy.target_topic('primary', name, identity=True)}") in identity, name


def test_records_written_by_python_decode_with_mm2_classes(kafka_pair, mm2_check):
    bootstrap = kafka_pair.dr.bootstrap
    suffix = uuid.uuid4().hex[:8]
    syncs_topic, checkpoints_topic = f"mm2-offset-syncs.it{suffix}.internal", f"it{suffix}.checkpoints.internal"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(syncs_topic, 1, -1), NewTopic(checkpoints_topic, 1, -1)]).values():
        future.result(30)
    syncs = [OffsetSync("orders", 0, 0, 0), OffsetSync("orders-é", 7, 123456789012, 42), OffsetSync("x", 2**31 - 1, 5, 6)]
    checkpoints = [Checkpoint("billing-eu", "primary.orders", 3, 1000, 990, ""),
                   Checkpoint("g", "orders", 0, 5, 5, "meta")]
    producer = Producer({"bootstrap.servers": bootstrap})
    for s in syncs:
        producer.produce(syncs_topic, key=s.record_key(), value=s.record_value())
    for c in checkpoints:
        producer.produce(checkpoints_topic, key=c.record_key(), value=c.record_value())
    assert producer.flush(30) == 0
    decoded = mm2_check("syncs", bootstrap, syncs_topic)
    assert decoded == [f"sync {s.topic} {s.partition} {s.upstream_offset} {s.downstream_offset}" for s in syncs]
    decoded = mm2_check("checkpoints", bootstrap, checkpoints_topic)
    assert decoded == [f"checkpoint {c.group} {c.topic} {c.partition} {c.upstream_offset} {c.downstream_offset}"
                       for c in checkpoints]

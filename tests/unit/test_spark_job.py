"""Unit tests of the Spark mirroring job's pure parts (no Spark session, no network)."""

from __future__ import annotations

import json
import re
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mm2spec import errors
from mm2spec.mm2 import defaults, selection
from mm2spec.mm2.policy import DEFAULT_POLICY as DEFAULT
from mm2spec.mm2.policy import IDENTITY_POLICY as IDENTITY

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "spark"))

from mm2spark.config import JobConfigError, parse_job_config, resolve_env, trigger_seconds  # noqa: E402
from mm2spark.eos import EosWriterSettings  # noqa: E402
from mm2spark.offsets import OffsetSyncEmitter, OffsetSyncStore, Run  # noqa: E402
from mm2spark.records import Checkpoint, OffsetSync  # noqa: E402
from mm2spark.topics import (  # noqa: E402
    ReplicationPolicy,
    checkpoints_topic,
    group_filter,
    offset_syncs_topic,
    subscribe_pattern,
    topic_filter,
    topic_pattern,
)


def job(**flow_overrides) -> dict:
    """The shape ``mm2spec render`` writes (spark-mirror.json)."""
    flow = {
        "name": "primary-to-dr",
        "source.cluster.alias": "primary", "target.cluster.alias": "dr",
        "source.cluster.bootstrap.servers": "127.0.0.1:19092", "target.cluster.bootstrap.servers": "127.0.0.1:29092",
        "source.cluster.security.protocol": "PLAINTEXT", "target.cluster.security.protocol": "PLAINTEXT",
        "topics": "orders,payments,invoices-.*", "topics.exclude": "mm2.*\\.internal,.*\\.replica,__.*",
        "groups": "orders-service,billing-.*", "groups.exclude": "console-consumer-.*,connect-.*,__.*",
        "replication.policy.class": IDENTITY, "replication.policy.separator": ".",
        "offset-syncs.topic.location": "target", "offset.lag.max": "100",
        "emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": "30",
        "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "30",
        "refresh.topics.interval.seconds": "30", "refresh.groups.interval.seconds": "30",
        "exactly.once.source.support": "enabled", "sync.topic.configs.enabled": "true",
        "producer.override.compression.type": "zstd", "producer.override.batch.size": "1048576",
    }
    flow.update(flow_overrides)
    return {"apiVersion": "mm2spec/v1", "name": "payments-dr", "environment": "dev",
            "spark": {"master": "local[2]", "trigger.interval": "1 second", "max.offsets.per.trigger": 1000000,
                      "checkpoint.location": "./.mm2spec/checkpoints/payments-dr",
                      "executor.instances": 3, "executor.cores": 2, "executor.memory": "4g"},
            "flows": [flow]}


# ------------------------------------------------------------------------------- config

def test_render_shape_parses_with_mm2_key_names():
    config = parse_job_config(job(), environ={})
    flow = config.flows[0]
    assert config.name == "payments-dr" and config.spark.max_offsets_per_trigger == 1000000
    assert flow.source.bootstrap_servers == "127.0.0.1:19092" and flow.target_alias == "dr"
    assert flow.topics == ("orders", "payments", "invoices-.*")
    assert flow.exactly_once and flow.identity and flow.sync_group_offsets
    assert dict(flow.producer_overrides) == {"compression.type": "zstd", "batch.size": "1048576"}
    assert flow.emit_checkpoints_interval_s == 30


def test_sasl_password_comes_from_the_environment_and_never_shows():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="mm2" password="${env:PRIMARY_MM2_PASSWORD}";')
    data = job(**{"source.cluster.security.protocol": "SASL_PLAINTEXT", "source.cluster.sasl.mechanism": "SCRAM-SHA-512",
                  "source.cluster.sasl.jaas.config": jaas})
    flow = parse_job_config(data, environ={"PRIMARY_MM2_PASSWORD": "s3cr3t-value"}).flows[0]
    assert flow.source.librdkafka()["sasl.password"] == "s3cr3t-value"
    assert flow.source.librdkafka()["sasl.username"] == "mm2"
    assert 'password="s3cr3t-value"' in flow.source.java_properties()["sasl.jaas.config"]
    assert "s3cr3t" not in repr(flow)
    with pytest.raises(JobConfigError) as missing:
        parse_job_config(data, environ={})
    assert "PRIMARY_MM2_PASSWORD is not set" in str(missing.value)


def test_env_references_resolve_everywhere_and_missing_ones_are_named():
    assert resolve_env("a ${env:X} b ${env:Y}", {"X": "1", "Y": "2"}) == "a 1 b 2"
    with pytest.raises(JobConfigError, match="Z is not set"):
        resolve_env("${env:Z}", {})


@pytest.mark.parametrize("key,value,message", [
    ("exactly.once.source.support", "maybe", "exactly.once.source.support"),
    ("replication.policy.class", "com.example.MyPolicy", "not supported by the Spark engine"),
    ("offset.lag.max", "lots", "offset.lag.max"),
    ("sync.group.offsets.enabled", "perhaps", "sync.group.offsets.enabled"),
])
def test_bad_values_are_reported_by_key(key, value, message):
    with pytest.raises(JobConfigError, match=message):
        parse_job_config(job(**{key: value}), environ={})


def test_job_config_errors_are_mm2specs():
    assert JobConfigError is errors.JobConfigError  # mirror_job.py and the CLI catch the same class
    assert issubclass(JobConfigError, errors.MirrorError) and issubclass(JobConfigError, ValueError)


def test_settings_left_out_take_mm2s_defaults():
    minimal = {"name": "f", "source.cluster.alias": "primary", "target.cluster.alias": "dr",
               "source.cluster.bootstrap.servers": "p:9092", "target.cluster.bootstrap.servers": "d:9092"}
    flow = parse_job_config({"apiVersion": "mm2spec/v1", "flows": [minimal]}, environ={}).flows[0]
    # MirrorClientConfig.REPLICATION_POLICY_CLASS_DEFAULT: the job once assumed the identity policy here
    assert flow.replication_policy_class == DEFAULT and not flow.identity
    assert flow.replication_policy_separator == "."
    assert flow.topics == (".*",) and flow.groups == (".*",)
    assert flow.topics_exclude == (r"mm2.*\.internal", r".*\.replica", r"__.*") == selection.TOPICS_EXCLUDE_DEFAULT
    assert flow.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*") == selection.GROUPS_EXCLUDE_DEFAULT
    assert flow.offset_syncs_topic_location == "source" == defaults.OFFSET_SYNCS_TOPIC_LOCATION_DEFAULT
    assert offset_syncs_topic(flow) == ("source", "mm2-offset-syncs.dr.internal")
    assert flow.offset_lag_max == 100
    assert (flow.emit_checkpoints, flow.emit_checkpoints_interval_s) == (True, 60)
    assert (flow.sync_group_offsets, flow.sync_group_offsets_interval_s) == (False, 60)
    assert (flow.refresh_topics_interval_s, flow.refresh_groups_interval_s) == (600, 600)
    assert flow.sync_topic_configs and not flow.exactly_once
    # the dataclass's own defaults are the same
    from mm2spark.config import MirrorFlowConfig

    assert MirrorFlowConfig(flow.name, flow.source, flow.target, flow.topics, flow.topics_exclude, flow.groups,
                            flow.groups_exclude) == flow
    # an explicit empty list replaces MM2's default, as in MM2
    explicit = parse_job_config({"apiVersion": "mm2spec/v1", "flows": [{**minimal, "topics.exclude": ""}]},
                                environ={}).flows[0]
    assert explicit.topics_exclude == ()


def test_trigger_interval_text():
    assert trigger_seconds("1 second") == 1
    assert trigger_seconds("500 milliseconds") == 0.5
    assert trigger_seconds("2 minutes") == 120


# ------------------------------------------------------------------------------- topics

def test_topic_filter_is_mm2s_decision():
    flow = parse_job_config(job(), environ={}).flows[0]
    accept = topic_filter(flow)
    assert accept("orders") and accept("payments") and accept("invoices-2024")
    assert not accept("orders-archive")          # whole-name match, like Java's matches()
    assert not accept("invoices-x.replica")      # topics.exclude
    assert not accept("__consumer_offsets")


def test_spark_subscribes_exactly_the_topics_mm2_mirrors():
    """Spark's source takes a topic when the pattern is *found* in its name (re.search, as Java's
    find()); anchored, that is MM2's whole-name decision. Unanchored it took pre-orders and
    orders-tail (tests/integration/test_spark_mirror.py), and with an include of .* it skipped the
    internal-topic and cycle excludes by matching from the second character."""
    names = ["orders", "pre-orders", "orders-tail", "payments", "invoices-2024", "invoices-x.replica",
             "__consumer_offsets", "heartbeats", "dr.orders", "x.dr.orders", "mm2-offset-syncs.primary.internal",
             "primary.checkpoints.internal", "adr.orders", ".hidden"]
    for overrides in ({}, {"topics": ".*", "topics.exclude": "", "replication.policy.class": DEFAULT}):
        flow = parse_job_config(job(**overrides), environ={}).flows[0]
        found = re.compile(subscribe_pattern(flow))
        assert [n for n in names if found.search(n)] == [n for n in names if topic_filter(flow)(n)], overrides
        unanchored = re.compile(topic_pattern(flow))
        assert any(unanchored.search(n) and not topic_filter(flow)(n) for n in names)  # what the anchors prevent


def test_internal_topics_are_never_mirrored_even_when_included():
    flow = parse_job_config(job(topics=".*", **{"topics.exclude": ""}), environ={}).flows[0]
    accept = topic_filter(flow)
    for internal in ("__consumer_offsets", ".hidden", "mm2-offset-syncs.primary.internal",
                     "primary.checkpoints.internal", "mm2-configs.dr.internal"):
        assert not accept(internal), internal
    assert accept("a-internal") and accept("heartbeats")


def test_internal_topics_follow_a_custom_separator():
    flow = parse_job_config(job(topics=".*", **{"topics.exclude": "", "replication.policy.class": DEFAULT,
                                                "replication.policy.separator": "_"}), environ={}).flows[0]
    accept = topic_filter(flow)
    assert not accept("mm2-offset-syncs_dr_internal") and not accept("primary_checkpoints_internal")
    assert not accept("dr_orders") and accept("dr.orders")  # the cycle rule splits on "_" too
    assert accept("primary.checkpoints.internal")  # not MM2's with this separator (Java-checked)
    assert ReplicationPolicy.of(flow).target_topic("primary", "orders") == "primary_orders"
    assert checkpoints_topic(flow) == "primary_checkpoints_internal"


def test_default_policy_names_and_cycle_detection():
    flow = parse_job_config(job(topics=".*", **{"replication.policy.class": DEFAULT}), environ={}).flows[0]
    policy = ReplicationPolicy.of(flow)
    assert policy.target_topic("primary", "orders") == "primary.orders"
    accept = topic_filter(flow)
    assert not accept("dr.orders") and not accept("x.dr.orders")  # came from the target: a cycle
    assert accept("orders") and accept("adr.orders")


def test_internal_topic_names_follow_the_offset_syncs_location():
    flow = parse_job_config(job(), environ={}).flows[0]
    assert offset_syncs_topic(flow) == ("target", "mm2-offset-syncs.primary.internal")
    assert checkpoints_topic(flow) == "primary.checkpoints.internal"
    source_side = parse_job_config(job(**{"offset-syncs.topic.location": "source"}), environ={}).flows[0]
    assert offset_syncs_topic(source_side) == ("source", "mm2-offset-syncs.dr.internal")


def test_group_filter():
    flow = parse_job_config(job(), environ={}).flows[0]
    accept = group_filter(flow)
    assert accept("orders-service") and accept("billing-eu")
    assert not accept("console-consumer-1") and not accept("other")


# ------------------------------------------------------------------------------- records

def test_offset_sync_layout():
    sync = OffsetSync("orders", 3, 1234, 567)
    assert sync.record_key() == struct.pack(">h", 6) + b"orders" + struct.pack(">i", 3)
    assert sync.record_value() == struct.pack(">qq", 1234, 567)
    assert OffsetSync.from_record(sync.record_key(), sync.record_value()) == sync


def test_checkpoint_layout():
    cp = Checkpoint("orders-service", "primary.orders", 2, 100, 90, "")
    assert cp.record_key() == (struct.pack(">h", 14) + b"orders-service" + struct.pack(">h", 14) + b"primary.orders"
                               + struct.pack(">i", 2))
    assert cp.record_value() == struct.pack(">hqqh", 0, 100, 90, 0)
    assert Checkpoint.from_record(cp.record_key(), cp.record_value()) == cp


# ------------------------------------------------------------------------------- offsets

def test_emitter_follows_offset_lag_max():
    emitter = OffsetSyncEmitter(offset_lag_max=100)
    syncs = emitter.on_run(Run("t", 0, 0, 0, 350))
    # the first record, then every time the downstream moved 100 past the last sync's translation
    assert [s.upstream_offset for s in syncs] == [0, 101, 202, 303]
    assert emitter.delayed("t", 0) == OffsetSync("t", 0, 349, 349)
    assert emitter.delayed("t", 0) is None  # written once
    # an upstream gap (compaction, transaction markers) forces a sync
    gap = emitter.on_run(Run("t", 0, 360, 350, 10))
    assert gap[0] == OffsetSync("t", 0, 360, 350)


def test_emitter_zero_lag_syncs_every_record():
    emitter = OffsetSyncEmitter(offset_lag_max=0)
    assert len(emitter.on_run(Run("t", 1, 10, 20, 5))) == 5


def test_emitter_batch_adds_delayed_sync_per_partition():
    emitter = OffsetSyncEmitter(offset_lag_max=100)
    syncs = emitter.on_batch([Run("t", 0, 0, 0, 10), Run("t", 1, 5, 0, 3)])
    assert OffsetSync("t", 0, 9, 9) in syncs and OffsetSync("t", 1, 7, 2) in syncs


def test_translation_is_mm2s():
    store = OffsetSyncStore()
    store.add_all([OffsetSync("t", 0, 0, 10), OffsetSync("t", 0, 100, 110), OffsetSync("t", 0, 199, 209)])
    assert store.translate("t", 0, 100) == 110        # exact hit
    assert store.translate("t", 0, 150) == 111        # past a sync: one past its downstream offset
    assert store.translate("t", 0, 200) == 210        # consumed everything mirrored
    assert store.translate("t", 1, 5) is None         # no syncs: no checkpoint
    store.add(OffsetSync("t", 0, 5, 0))              # upstream went backwards: recreated topic
    assert store.translate("t", 0, 100) == 1


def test_eos_settings_name_per_partition_transactions():
    settings = EosWriterSettings(job="payments-dr", flow="primary-to-dr",
                                 producer_overrides=(("transaction.timeout.ms", "60000"),))
    assert settings.transactional_id("orders", 3) == "mm2spec-mirror.payments-dr.primary-to-dr.orders.3"
    conf = settings.writer_settings()
    assert conf["transactional.id.prefix"] + "orders.3" == settings.transactional_id("orders", 3)
    assert conf["progress.group"] == "mm2spec-mirror.payments-dr.primary-to-dr"
    # the transaction's waits stay inside transaction.timeout.ms (the broker aborts past it)
    assert conf["producer.transaction.timeout.ms"] == "60000"
    assert int(conf["producer.delivery.timeout.ms"]) + 2 * int(conf["producer.max.block.ms"]) <= 60000
    assert int(conf["producer.request.timeout.ms"]) + 5 <= int(conf["producer.delivery.timeout.ms"])
    with pytest.raises(errors.JobConfigError, match="transaction.timeout.ms"):
        EosWriterSettings(job="j", flow="f", producer_overrides=(("transaction.timeout.ms", "soon"),))


def test_writer_settings_target_names_credentials_and_overrides():
    from mm2spark.writer import writer_settings

    flow = parse_job_config(job(**{"replication.policy.class": DEFAULT, "producer.override.batch.size": "65536",
                                   "producer.override.interceptor.classes": "x.Y",
                                   "exactly.once.source.support": "enabled"})).flows[0]
    settings = writer_settings("payments-dr", flow)
    assert settings["target.prefix"] == "primary."
    assert settings["connection.bootstrap.servers"] == "127.0.0.1:29092"
    assert settings["producer.batch.size"] == "65536" and "producer.interceptor.classes" not in settings
    assert settings["producer.acks"] == "all" and settings["producer.enable.idempotence"] == "true"
    assert settings["mode"] == "exactly-once" and settings["progress.group"] == "mm2spec-mirror.payments-dr.primary-to-dr"
    identity = writer_settings("j", parse_job_config(job(**{"exactly.once.source.support": "disabled"})).flows[0])
    assert identity["target.prefix"] == "" and identity["mode"] == "at-least-once"


def test_writer_results_become_runs_and_per_topic_figures():
    from mm2spark.pipeline import producer_profile, topic_batches
    from mm2spark.writer import BatchWritten

    lines = ['{"kind":"partition","topic":"orders","partition":0,"targetTopic":"orders","records":3,"bytes":30,'
             '"skipped":0,"timestampMin":100,"timestampSum":330,"runs":[[5,0,2],[9,2,1]]}',
             '{"kind":"partition","topic":"orders","partition":1,"targetTopic":"orders","records":1,"bytes":10,'
             '"skipped":2,"timestampMin":50,"timestampSum":50,"runs":[]}',
             '{"kind":"task","records":4,"writeMs":12,"producer":{"records-per-request-avg":4.0,"io-wait-ratio":null}}',
             '{"kind":"task","records":0,"writeMs":1,"producer":{"records-per-request-avg":2.0}}']
    written = BatchWritten.parse(lines)
    assert written.runs == [Run("orders", 0, 5, 0, 2), Run("orders", 0, 9, 2, 1)]
    assert written.skipped == 2
    orders = topic_batches(written)["orders"]
    assert (orders.records, orders.bytes, orders.timestamp_min, orders.timestamp_sum) == (4, 40, 50, 380)
    assert producer_profile(written) == {"records-per-request-avg": 3.0}


def test_admin_failures_are_mm2spec_errors():
    from confluent_kafka import KafkaError, KafkaException

    from mm2spark import kafka

    class Failed:
        def result(self, timeout=None):
            raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"))

    class Unreachable:
        def list_topics(self, timeout=None):
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "connection refused"))

    with pytest.raises(errors.KafkaOperationFailed, match="describe configs of topic orders: .*denied"):
        kafka._result(Failed(), "describe configs of topic orders")
    with pytest.raises(errors.ClusterUnreachable, match="connection refused"):
        kafka.partition_counts(Unreachable())


# ------------------------------------------------------------------------------- shipping

def test_executors_get_the_package_and_mm2s_rules_in_one_zip(tmp_path):
    from mm2spark.pipeline import package_zip

    archive = package_zip(tmp_path)
    names = set(zipfile.ZipFile(archive).namelist())
    assert {f"mm2spark/{p.name}" for p in (ROOT / "spark" / "mm2spark").glob("*.py")} <= names
    # mm2spec's stdlib-only parts, nothing else of it (the rest needs third-party libraries)
    assert {n for n in names if n.startswith("mm2spec/")} == (
        {"mm2spec/__init__.py", "mm2spec/errors.py"} | {f"mm2spec/mm2/{p.name}" for p in (ROOT / "mm2spec" / "mm2").glob("*.py")})
    # A fresh interpreter with nothing but the zip (no site-packages, no repository) imports them.
    empty = tmp_path / "cwd"
    empty.mkdir()
    check = ("import mm2spark.config, mm2spark.topics, mm2spec.errors, sys; "
             "mods = [mm2spark.config, mm2spark.topics, mm2spec.errors, sys.modules['mm2spec.mm2.selection']]; "
             "assert all(m.__file__.startswith(sys.argv[1]) for m in mods), [m.__file__ for m in mods]; "
             "print(mm2spark.topics.topic_pattern(mm2spark.config.parse_job_config({'apiVersion': 'mm2spec/v1', "
             "'flows': [{'source.cluster.alias': 'a', 'target.cluster.alias': 'b', "
             "'source.cluster.bootstrap.servers': 'x:1', 'target.cluster.bootstrap.servers': 'y:1'}]}, {}).flows[0]))")
    result = subprocess.run([sys.executable, "-S", "-c", check, archive], cwd=empty, capture_output=True, text=True,
                            env={"PYTHONPATH": archive, "PATH": os.environ.get("PATH", "")}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "(?:.*\\.)?b\\..*" in result.stdout  # the default policy's cycle rule, from mm2spec.mm2


def test_offset_log_reads_sparks_offsets_file(tmp_path):
    from mm2spark.pipeline import OffsetLog

    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "4").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n'
                                            '{"orders":{"0":10,"1":20},"payments":{"0":5}}\n')
    (tmp_path / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"orders":{"0":7,"1":20}}\n')
    log = OffsetLog(spark=None, checkpoint=str(tmp_path))
    assert log.end(4) == {("orders", 0): 10, ("orders", 1): 20, ("payments", 0): 5}
    assert log.start(4) == {("orders", 0): 7, ("orders", 1): 20}


# ------------------------------------------------------------------------------- the writer jar

class _Spark:
    """Just what check_writer reads of a SparkSession: the version and the JVM gateway."""

    def __init__(self, version: str, built_for):
        self.version = version

        def built():
            if isinstance(built_for, Exception):
                raise built_for
            return built_for

        writer = type("MirrorWriter", (), {"builtFor": staticmethod(built)})
        jvm = type("Jvm", (), {"mm2spec": type("P", (), {"spark": type("P", (), {"MirrorWriter": writer})})})
        self.sparkContext = type("Context", (), {"_jvm": jvm})


@pytest.mark.parametrize(("jars", "built_for", "message"), [
    (["/j/spark-sql-kafka.jar"], "4.0.1", "mm2spec-spark-writer.jar.* is missing"),
    (["/j/mm2spec-spark-writer.jar"], "3.5.1", "built for Spark 3.5.1 but this job runs Spark 4.0.1"),
    (["/j/mm2spec-spark-writer.jar"], "no-class", "cannot be loaded"),
])
def test_a_missing_or_foreign_writer_jar_stops_the_job_naming_the_install_script(jars, built_for, message):
    from py4j.protocol import Py4JError

    from mm2spark.writer import check_writer

    spark = _Spark("4.0.1", Py4JError("no class") if built_for == "no-class" else built_for)
    with pytest.raises(errors.ComponentMissing, match=message) as stopped:
        check_writer(spark, jars)
    assert "scripts/install-spark.sh" in str(stopped.value)
    check_writer(_Spark("4.0.1", "4.0.1"), ["/j/mm2spec-spark-writer.jar"])  # the right jar passes


class _GroupsCluster:
    """The calls GroupOffsetMirror makes (mm2spark.kafka), on a source whose groups come and go."""

    def __init__(self):
        self.groups: list[str] = []
        self.written = 0

    def install(self, monkeypatch) -> None:
        from mm2spark import groups

        for name, fn in {"admin": lambda conn: object(), "internal_producer": lambda conn: object(),
                         "ensure_internal_topic": lambda client, topic: None,
                         "list_groups": lambda client: list(self.groups),
                         "group_offsets": lambda client, group: {("orders", 0): 50},
                         "produce_all": self.produce_all}.items():
            monkeypatch.setattr(groups.kafka, name, fn)

    def produce_all(self, producer, topic, records) -> int:
        count = sum(1 for _ in records)
        self.written += count
        return count


def test_checkpoint_memory_holds_only_the_groups_listed_now(monkeypatch):
    from mm2spark.groups import GroupOffsetMirror

    flow = parse_job_config(job(**{"refresh.groups.interval.seconds": "0", "sync.group.offsets.enabled": "false"}),
                            environ={}).flows[0]
    cluster = _GroupsCluster()
    cluster.install(monkeypatch)
    store = OffsetSyncStore()
    store.add(OffsetSync("orders", 0, 40, 400))
    mirror = GroupOffsetMirror(flow, store)
    for round_ in range(1000):  # a long-lived group, and a new short-lived one each round
        cluster.groups = ["orders-service", f"billing-run-{round_}"]
        mirror.run_once()
    assert cluster.written == 1 + 1000  # orders-service's unchanged checkpoint is written once
    assert sorted(mirror._last) == ["billing-run-999", "orders-service"]  # not 1,001 groups


def test_source_topic_configs_are_described_in_bounded_requests():
    """The job's first batch on 10,000 source topics described them all in one request, and the
    512 MB source broker ran out of heap answering it (benchmarks/mirror_start_scale.py)."""
    from concurrent.futures import Future

    from confluent_kafka.admin import ConfigEntry, ConfigSource

    from mm2spark import kafka as job_kafka
    from mm2spec.mm2.retry import MAX_RESOURCES_PER_DESCRIBE

    class Admin:
        def __init__(self):
            self.requests: list[int] = []

        def describe_configs(self, resources, request_timeout=None):
            self.requests.append(len(resources))
            out = {}
            for resource in resources:
                future = Future()
                # confluent-kafka's C layer gives the source as the enum's int value
                future.set_result({"retention.ms": ConfigEntry("retention.ms", "1000",
                                                               source=ConfigSource.DYNAMIC_TOPIC_CONFIG.value)})
                out[resource] = future
            return out

    admin = Admin()
    names = [f"t{i}" for i in range(2 * MAX_RESOURCES_PER_DESCRIBE + 1)]
    configs = job_kafka.dynamic_topic_configs(admin, names)
    assert admin.requests == [MAX_RESOURCES_PER_DESCRIBE, MAX_RESOURCES_PER_DESCRIBE, 1]
    assert configs == {n: {"retention.ms": "1000"} for n in names}


def test_new_target_topics_are_awaited_while_they_keep_appearing(monkeypatch):
    """10,000 new target topics take minutes to appear in metadata: the wait gives up only when none
    appeared for TIMEOUT, and then names a few, not all of them."""
    from types import SimpleNamespace

    from mm2spark import kafka as job_kafka
    from mm2spec.errors import KafkaOperationFailed

    clock = [0.0]
    monkeypatch.setattr(job_kafka.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(job_kafka.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))

    class Client:
        def __init__(self, per_second: float, stop_after: int):
            self.per_second, self.stop_after = per_second, stop_after

        def list_topics(self, timeout=None):
            shown = min(int(clock[0] * self.per_second), self.stop_after)
            topics = {f"t{i:05d}": SimpleNamespace(error=None, partitions={0: None}) for i in range(shown)}
            return SimpleNamespace(topics=topics)

    wanted = {f"t{i:05d}": 1 for i in range(2_000)}
    job_kafka._await_metadata(Client(per_second=10, stop_after=2_000), wanted)  # 200 s, never stalled
    assert clock[0] > 3 * job_kafka.TIMEOUT

    clock[0] = 0.0
    with pytest.raises(KafkaOperationFailed) as failed:
        job_kafka._await_metadata(Client(per_second=10, stop_after=1_800), wanted)
    message = str(failed.value)
    assert message.startswith("200 new topic(s)") and "t01800, t01801, t01802 and 197 more" in message
    assert clock[0] < 180 + 2 * job_kafka.TIMEOUT  # stalled at 180 s: given up one TIMEOUT later


def test_a_batch_interrupted_by_the_stop_is_not_an_error():
    """stop() interrupts a running write (InterruptedException from the writer): that batch runs
    again at the next start, so it must not show as an error; a failure while running must."""
    from types import SimpleNamespace

    from mm2spark.metrics import MirrorMetrics
    from mm2spark.pipeline import FlowPipeline

    def failing(batch_df, batch_id):
        raise RuntimeError("java.lang.InterruptedException")

    pipeline = object.__new__(FlowPipeline)
    pipeline.flow = SimpleNamespace(name="primary-to-dr")
    pipeline.metrics = MirrorMetrics("payments-dr", None)
    pipeline._process_batch = failing
    pipeline.stopping = False
    with pytest.raises(RuntimeError):
        pipeline.process_batch(None, 7)
    assert pipeline.metrics.flow("primary-to-dr").errors == 1
    assert "batch 7" in pipeline.metrics.flow("primary-to-dr").last_error
    pipeline.stopping = True
    with pytest.raises(RuntimeError):  # Spark still sees the batch fail: nothing is committed
        pipeline.process_batch(None, 8)
    assert pipeline.metrics.flow("primary-to-dr").errors == 1


def test_the_spark_defaults_agree_in_schema_spec_and_job():
    """A setting left out of the spec gets the same default whether the schema documents it, the
    spec compiler fills it in, or the job reads a config without it."""
    from mm2spark.config import MAX_OFFSETS_PER_TRIGGER_DEFAULT, TRIGGER_INTERVAL_DEFAULT

    from mm2spec.spec.compile import compile_spec
    from mm2spec.spec.document import parse
    from mm2spec.spec.schema import SCHEMA_PATH
    from mm2spec.spec.validate import resolve

    spark = json.loads(Path(SCHEMA_PATH).read_text())["$defs"]["spark"]["properties"]
    assert spark["maxOffsetsPerTrigger"]["default"] == MAX_OFFSETS_PER_TRIGGER_DEFAULT
    assert spark["triggerInterval"]["default"] == TRIGGER_INTERVAL_DEFAULT
    text = (ROOT / "examples" / "dr-spec.example.yaml").read_text()
    text = text.replace("  triggerInterval: 1 second\n", "").replace("  maxOffsetsPerTrigger: 1000000\n", "")
    assert "triggerInterval" not in text and "maxOffsetsPerTrigger" not in text
    compiled = compile_spec(resolve(parse(text, "ex.yaml"), "prod"), "prod").spark
    assert compiled.max_offsets_per_trigger == MAX_OFFSETS_PER_TRIGGER_DEFAULT
    assert compiled.trigger_interval == TRIGGER_INTERVAL_DEFAULT
    bare = parse_job_config({k: v for k, v in job().items() if k != "spark"} | {"spark": {"master": "local[2]"}})
    assert bare.spark.max_offsets_per_trigger == MAX_OFFSETS_PER_TRIGGER_DEFAULT
    assert bare.spark.trigger_interval == TRIGGER_INTERVAL_DEFAULT


class _WedgingClient:
    """confluent-kafka's Producer as far as ``InternalProducer`` uses it; ``wedge`` makes it hold
    every record from then on (a full queue after ``room`` of them) and log librdkafka's lost-leader
    line at its ``log_at``-th poll after."""

    made: list = []

    def __init__(self, config: dict):
        self.logger, self.room = config["logger"], 3
        self.held: list = []
        self.wedged, self.purged, self.polls, self.log_at = False, False, 0, 0
        _WedgingClient.made.append(self)

    def wedge(self, log_at: int) -> None:
        self.wedged, self.polls, self.log_at = True, 0, log_at

    def produce(self, topic, key, value, partition, on_delivery) -> None:
        if self.wedged and len(self.held) >= self.room:
            raise BufferError("Local: Queue full")
        self.held.append(on_delivery)

    def poll(self, _timeout: float = 0) -> int:
        self.polls += 1
        if self.wedged and self.polls == self.log_at:
            self.logger.log(30, "%s [%s] %s", "METADATAUPDATE", "rdkafka#producer-1",
                            "[thrd:main]: Partition mm2-offset-syncs.dr.internal(x)[0]: new leader-1 not found in cache")
        if not self.wedged:
            for delivered in self.held:
                delivered(None, None)
            self.held = []
        return 0

    def purge(self, in_queue: bool, in_flight: bool) -> None:
        self.purged = in_queue and in_flight
        for delivered in self.held:
            delivered("Local: Purged in queue", None)
        self.held = []

    def flush(self, _timeout: float) -> int:
        self.poll()
        return len(self.held)

    def __len__(self) -> int:
        return len(self.held)


def test_an_internal_producer_whose_client_lost_a_leader_for_good_is_replaced(monkeypatch):
    """librdkafka never sends to a partition again once it saw its leader as -1 (issue 5430): the
    offset syncs would queue for good. The client is replaced when its log says so, what it held is
    reported failed and counted, and a full queue on the wedged client does not hang the sender."""
    from mm2spark import kafka

    monkeypatch.setattr(kafka, "Producer", _WedgingClient)
    _WedgingClient.made = []
    conn = type("Conn", (), {"alias": "dr", "librdkafka": lambda self: {"bootstrap.servers": "dr:9092"}})()
    producer = kafka.internal_producer(conn)
    failed = []
    kafka.produce_nowait(producer, "syncs", b"k", b"v", failed.append)
    assert producer.flush(1) == 0 and failed == [] and producer.replaced == 0

    first = _WedgingClient.made[0]
    first.wedge(log_at=5)  # the lost-leader line comes while the sender waits on the full queue
    for n in range(5):
        kafka.produce_nowait(producer, "syncs", b"k%d" % n, b"v", failed.append)
    assert producer.replaced == 1 and first.purged, "the wedged client must be replaced, not waited on"
    assert len(_WedgingClient.made) == 2 and producer.client() is _WedgingClient.made[1]
    assert failed == ["Local: Purged in queue"] * 3 and producer.dropped == 3
    assert producer.flush(1) == 0 and len(failed) == 3, "what came after went through the new client"

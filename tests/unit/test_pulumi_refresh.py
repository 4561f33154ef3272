"""``pulumi refresh`` (each provider's ``read``) and healthy-or-failed applies, with fakes (no network).

Each kind of drift made behind the stack is read back into the outputs in the shape the diff
compares, so the preview after a refresh makes the change ``mm2spec plan`` makes; a resource that
is gone reads back gone; nothing drifted reads back the record unchanged (the CI drift check).
A connector is healthy when it and its tasks run, failed with its task's error, or timed out
naming its state; a Spark job is healthy once every query has finished a micro-batch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mm2spec.errors import ClusterUnreachable, ProvisionFailed
from mm2spec.live.types import LiveTopic
from mm2spec.mm2.defaults import CONNECT_READY_TIMEOUT_SECONDS_DEFAULT
from mm2spec.plan.diff import diff_connector, diff_topic
from mm2spec.provision import acl, connection, connector, reads, spark_deployment, topic, worker_config
from mm2spec.runtime.deployment import MirrorStatus
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import AclBinding
from tests.kit.connect_fake import ConnectFake

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def topic_props(**changes):
    options = {"replicationFactor": -1, "allowReplacement": False, "kind": "mirror", "purpose": "p",
               "sourceTopic": "orders"}
    props = {"cluster": "dr", "connection": {"bootstrapServers": "127.0.0.1:9092", "securityProtocol": "PLAINTEXT"},
             "name": "orders", "partitions": 6, "configs": {"retention.ms": "1000"}, "options": options,
             "password": "pw", "adopted": False, "__provider": "x"}
    props.update(changes)
    return props


class TopicAdmin:
    """A fake admin client whose cluster holds ``live`` (None: the topic is gone); counts its reads."""

    def __init__(self, live: LiveTopic | None):
        self.live, self.reads = live, 0

    def topics(self, names, with_configs: bool = True) -> dict:
        self.reads += 1
        return {n: self.live for n in names if self.live is not None and self.live.name == n}


def read_topic(monkeypatch, live: LiveTopic | None, props=None):
    fake = TopicAdmin(live)
    monkeypatch.setattr(connection, "admin", lambda props, prefer_current=False: fake)
    result = topic.TopicProvider().read("dr/orders", props or topic_props())
    assert fake.reads == 1, "one admin read per resource"
    return result


def without_provider(props: dict) -> dict:
    return {k: v for k, v in props.items() if k != "__provider"}


def test_a_topic_that_did_not_drift_reads_back_its_record_unchanged(monkeypatch):
    result = read_topic(monkeypatch, LiveTopic("orders", 6, 3, {"retention.ms": "1000"}))
    assert result.id == "dr/orders" and result.outs == without_provider(topic_props())


def test_a_topic_config_altered_behind_the_stack_shows_and_the_preview_agrees_with_the_plan(monkeypatch):
    live = LiveTopic("orders", 6, 3, {"retention.ms": "5000", "cleanup.policy": "delete"})
    refreshed = read_topic(monkeypatch, live).outs
    assert refreshed["configs"] == {"retention.ms": "5000", "cleanup.policy": "delete"}
    news = topic_props()
    assert topic.TopicProvider().diff("dr/orders", refreshed, news).changes is True
    # The provider's view after refresh is the plan's view of the live topic: one diff.
    plan = diff_topic("orders", 6, {"retention.ms": "1000"}, live)
    assert topic.topic_change(news, topic.recorded_topic(refreshed)) == plan
    assert [c.field for c in plan.changes] == ["config.retention.ms", "config.cleanup.policy"]


def test_a_partition_added_behind_the_stack_is_refused_as_in_the_plan(monkeypatch):
    refreshed = read_topic(monkeypatch, LiveTopic("orders", 8, 3, {"retention.ms": "1000"})).outs
    assert refreshed["partitions"] == 8
    with pytest.raises(ProvisionFailed, match="topic orders has 8 partitions; Kafka cannot remove partitions"):
        topic.TopicProvider().diff("dr/orders", refreshed, topic_props())
    replace = topic.TopicProvider().diff("dr/orders", refreshed, topic_props(
        options={**topic_props()["options"], "allowReplacement": True}))
    assert replace.replaces == ["partitions"]


def test_a_named_replication_factor_is_read_back_and_minus_one_is_not(monkeypatch):
    named = topic_props(options={**topic_props()["options"], "replicationFactor": 3})
    assert read_topic(monkeypatch, LiveTopic("orders", 6, 2, {"retention.ms": "1000"}), named
                      ).outs["options"]["replicationFactor"] == 2
    assert read_topic(monkeypatch, LiveTopic("orders", 6, 2, {"retention.ms": "1000"})
                      ).outs["options"]["replicationFactor"] == -1


def test_a_topic_deleted_behind_the_stack_reads_back_gone(monkeypatch):
    result = read_topic(monkeypatch, None)
    assert result.id == "" and result.outs == {}


def test_an_unreachable_cluster_fails_the_refresh_naming_it(monkeypatch):
    def unreachable(props, prefer_current=False):
        raise ClusterUnreachable(f'cluster "{props["cluster"]}" (127.0.0.1:9092) is unreachable: timed out')

    monkeypatch.setattr(connection, "admin", unreachable)
    with pytest.raises(ClusterUnreachable, match='cluster "dr"'):  # not "gone": the state keeps the topic
        topic.TopicProvider().read("dr/orders", topic_props())


def acl_props(resources=None):
    binding = {"principal": "User:mm2", "resourceType": "TOPIC", "patternType": "LITERAL", "permission": "ALLOW",
               "host": "*"}
    return {"cluster": "dr", "connection": {"bootstrapServers": "h:1"}, "binding": binding,
            "resources": resources or {"orders": ["READ", "WRITE"], "payments": ["READ"]}, "reasons": ["r"],
            "password": "pw", "preexisting": {}, "__provider": "x"}


class AclAdmin:
    def __init__(self, live: set[AclBinding]):
        self.live, self.queries = live, []

    def acls(self, principal, resource_type=None, resource_name=None, pattern_type=None) -> set[AclBinding]:
        self.queries.append((principal, resource_type, resource_name, pattern_type))
        return {b for b in self.live if b.principal == principal and resource_type in (None, b.resource_type)
                and pattern_type in (None, b.pattern_type)}


def binding(name, op, principal="User:mm2", host="*", permission="ALLOW"):
    return AclBinding("dr", principal, "TOPIC", name, "LITERAL", op, permission, host)


def read_acl(monkeypatch, live):
    fake = AclAdmin(live)
    monkeypatch.setattr(connection, "admin", lambda props, prefer_current=False: fake)
    reads.forget()  # what an earlier test's run read
    result = acl.AclProvider().read("dr/User:mm2/TOPIC/LITERAL/matching", acl_props())
    # One DescribeAcls of the principal, which every ACL resource of the run shares (provision.reads).
    assert fake.queries == [("User:mm2", None, None, None)]
    return result


def test_acl_bindings_that_did_not_drift_read_back_unchanged_whatever_else_is_on_the_cluster(monkeypatch):
    others = {binding("audit", "READ"), binding("orders", "READ", host="10.0.0.1"),
              binding("orders", "WRITE", permission="DENY"), binding("orders", "READ", principal="User:app")}
    result = read_acl(monkeypatch, {binding("orders", "READ"), binding("orders", "WRITE"),
                                    binding("payments", "READ")} | others)
    assert result.outs == without_provider(acl_props())


def test_an_acl_binding_deleted_behind_the_stack_shows_and_the_preview_creates_it_again(monkeypatch):
    refreshed = read_acl(monkeypatch, {binding("orders", "READ"), binding("payments", "READ")}).outs
    assert refreshed["resources"] == {"orders": ["READ"], "payments": ["READ"]}
    assert acl.AclProvider().diff("id", refreshed, acl_props()).changes is True


def test_acl_bindings_all_deleted_read_back_gone(monkeypatch):
    assert read_acl(monkeypatch, {binding("audit", "READ")}).id == ""


def connector_props(**changes):
    props = {"connectUrl": "http://c:8083", "name": "a-MirrorSourceConnector",
             "config": {"connector.class": "X", "tasks.max": "2"}, "readyTimeoutSeconds": 60, "adopted": False,
             "__provider": "x"}
    props.update(changes)
    return props


def test_a_connector_config_edited_behind_the_stack_shows_and_the_preview_agrees_with_the_plan(monkeypatch):
    live = {"connector.class": "X", "tasks.max": "5", "name": "a-MirrorSourceConnector"}
    monkeypatch.setattr(connector, "ConnectClient", lambda url: ConnectFake(live))
    refreshed = connector.ConnectorProvider().read("id", connector_props()).outs
    assert refreshed["config"] == {"connector.class": "X", "tasks.max": "5"}  # Connect's "name" left out
    assert connector.ConnectorProvider().diff("id", refreshed, connector_props()).changes is True
    assert diff_connector(connector_props()["config"], live).action == "update"

    unchanged = {**connector_props()["config"], "name": "a-MirrorSourceConnector"}
    monkeypatch.setattr(connector, "ConnectClient", lambda url: ConnectFake(unchanged))
    assert connector.ConnectorProvider().read("id", connector_props()).outs == without_provider(connector_props())
    monkeypatch.setattr(connector, "ConnectClient", lambda url: ConnectFake(None))
    assert connector.ConnectorProvider().read("id", connector_props()).id == ""


def test_a_file_edited_or_removed_behind_the_stack(tmp_path):
    provider = worker_config.WorkerConfigProvider()
    created = provider.create({"path": "w.properties", "root": str(tmp_path), "content": "a=1\n"})
    assert provider.read(created.id, created.outs).outs == created.outs
    Path(created.outs["file"]).write_text("a=2\n")
    edited = provider.read(created.id, created.outs).outs
    assert edited["content"] == "a=2\n" and edited["sha256"] == created.outs["sha256"]  # destroy keeps the edit
    Path(created.outs["file"]).unlink()
    assert provider.read(created.id, created.outs).id == ""


def test_a_spark_job_stopped_behind_the_stack_reads_back_not_running(tmp_path, monkeypatch):
    from mm2spec.runtime import deployment

    provider = spark_deployment.SparkDeploymentProvider()
    path = tmp_path / "spark-mirror.json"
    path.write_text('{"name": "j"}\n')
    outs = {"path": str(path), "root": str(tmp_path), "content": '{"name": "j"}\n', "run": True, "stateDir": "job",
            "kubernetes": None, "file": str(path), "sha256": "s", "pid": 123, "configHash": "h"}
    monkeypatch.setattr(deployment, "status", lambda _d: MirrorStatus(True, 123, "running"))
    assert provider.read("id", outs).outs == outs
    monkeypatch.setattr(deployment, "status", lambda _d: MirrorStatus(False, 123, "failed"))
    stopped = provider.read("id", outs).outs
    assert (stopped["run"], stopped["pid"]) == (False, None)
    assert provider.diff("id", stopped, {k: outs[k] for k in ("path", "root", "content", "run", "stateDir",
                                                              "kubernetes")}).changes is True


# ------------------------------------------------------------------------------ healthy or failed

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def status(state="RUNNING", *tasks):
    return {"name": "c", "connector": {"state": state, "worker_id": "w:8083"},
            "tasks": [{"id": i, "state": s, "worker_id": "w:8083", **({"trace": t} if t else {})}
                      for i, (s, t) in enumerate(tasks)]}


def wait(fake: ConnectFake, timeout: float = 60) -> tuple[str, Clock]:
    clock = Clock()
    return connector.wait_healthy(fake, "c", timeout, clock=clock, sleep=clock.sleep), clock


def test_a_connector_is_healthy_once_it_and_every_task_run_for_the_settle_time():
    fake = ConnectFake(statuses=[None, status("UNASSIGNED"), status("RUNNING"), status("RUNNING", ("RUNNING", None)),
                                 status("RUNNING", ("RUNNING", None), ("UNASSIGNED", None)),
                                 status("RUNNING", ("RUNNING", None), ("RUNNING", None))])
    words, clock = wait(fake)
    assert words == "connector RUNNING, task 0 RUNNING, task 1 RUNNING"
    assert clock.now >= connector.HEALTH_SETTLE_S + 5 * connector.HEALTH_POLL_S  # held, not one lucky look


def test_a_failed_task_fails_with_the_first_line_of_its_trace():
    trace = ("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment\n"
             "\tat org.apache.kafka.clients.admin.KafkaAdminClient...\n")
    fake = ConnectFake(statuses=[status("RUNNING", ("RUNNING", None), ("FAILED", trace))])
    with pytest.raises(ProvisionFailed) as raised:
        wait(fake)
    message = str(raised.value)
    assert message.startswith("connector c: task 1 FAILED on worker w:8083: org.apache.kafka.common.errors."
                              "TimeoutException: Timed out waiting for a node assignment. ")
    assert "KafkaAdminClient" not in message and "run pulumi up again" in message
    failed = ConnectFake(statuses=[{"connector": {"state": "FAILED", "trace": "\nConfigException: bad.\n\tat x"},
                                    "tasks": []}])
    with pytest.raises(ProvisionFailed, match="^connector c FAILED: ConfigException: bad. "):
        wait(failed)


def test_a_connector_not_running_in_time_fails_naming_its_state():
    fake = ConnectFake(statuses=[status("RUNNING", ("UNASSIGNED", None))])
    with pytest.raises(ProvisionFailed) as raised:
        wait(fake, timeout=10)
    assert str(raised.value).startswith(
        "connector c is not running after 10 s (connector RUNNING, task 0 UNASSIGNED): check the Connect worker's log")
    assert "connect.readyTimeoutSeconds" in str(raised.value)


def test_a_stopped_connector_is_not_waited_for():
    assert wait(ConnectFake(statuses=[status("STOPPED")]))[0] == "connector STOPPED, no task"


def test_create_waits_and_a_failed_create_removes_the_connector_it_registered(monkeypatch):
    failing = ConnectFake(None, [status("RUNNING", ("FAILED", "java.lang.RuntimeException: boom"))])
    monkeypatch.setattr(connector, "ConnectClient", lambda url: failing)
    with pytest.raises(ProvisionFailed, match="task 0 FAILED.*boom.*the connector was removed again"):
        connector.ConnectorProvider().create(connector_props())
    assert failing.puts and failing.deleted == ["a-MirrorSourceConnector"]

    # One that was registered before the stack stays; an update keeps its new config.
    before = ConnectFake({"connector.class": "X"}, [status("FAILED")])
    monkeypatch.setattr(connector, "ConnectClient", lambda url: before)
    with pytest.raises(ProvisionFailed, match="connector a-MirrorSourceConnector FAILED"):
        connector.ConnectorProvider().create(connector_props())
    with pytest.raises(ProvisionFailed):
        connector.ConnectorProvider().update("id", connector_props(), connector_props())
    assert not before.deleted and len(before.puts) == 2

    # readyTimeoutSeconds 0: nothing waited for.
    quiet = ConnectFake(None, [])
    monkeypatch.setattr(connector, "ConnectClient", lambda url: quiet)
    assert connector.ConnectorProvider().create(connector_props(readyTimeoutSeconds=0)).outs["adopted"] is False
    assert quiet.status_calls == 0


def test_the_spec_sets_how_long_up_waits_for_connectors(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE.read_text().replace("engine: spark ", "engine: connect"))
    assert load_desired_state(spec, "staging").connect.ready_timeout_seconds == CONNECT_READY_TIMEOUT_SECONDS_DEFAULT
    text, found = re.subn(r"(?m)^connect:.*$", "connect:\n  readyTimeoutSeconds: 5", spec.read_text(), count=1)
    assert found == 1
    spec.write_text(text)
    state = load_desired_state(spec, "staging")
    assert state.connect.ready_timeout_seconds == 5
    rendered = {"name": "n", "config": {"connector.class": "X"}}
    assert connector.connector_inputs("http://c:8083", rendered, 5)["readyTimeoutSeconds"] == 5


def job_status(state="running", running=True, **flows):
    return MirrorStatus(running, 1, state, {name: dict(f) for name, f in flows.items()})


def test_a_spark_job_is_healthy_once_every_flow_finished_a_micro_batch():
    answers = iter([job_status("starting"), job_status(a={"state": "running", "batches": 0}),
                    job_status(a={"state": "running", "batches": 1}, b={"state": "starting"}),
                    job_status(a={"state": "running", "batches": 2}, b={"state": "running", "batches": 1})])
    clock = Clock()
    assert spark_deployment.wait_progress(Path("job"), 60, status=lambda _d: next(answers), clock=clock,
                                          sleep=clock.sleep) == "2 flow(s) running"


def test_a_spark_job_that_exits_or_makes_no_progress_fails_naming_its_log():
    clock = Clock()
    with pytest.raises(ProvisionFailed, match=r"the mirroring job is failed: see job/driver.log"):
        spark_deployment.wait_progress(Path("job"), 60, status=lambda _d: job_status("failed", running=False),
                                       clock=clock, sleep=clock.sleep)
    stuck = job_status(a={"state": "running", "batches": 0, "lastError": "KafkaException: no leader\n at x"})
    with pytest.raises(ProvisionFailed) as raised:
        spark_deployment.wait_progress(Path("job"), 30, status=lambda _d: stuck, clock=clock, sleep=clock.sleep)
    assert str(raised.value) == ("the Spark mirroring job made no progress in 30 s (job running; no micro-batch yet "
                                 "in a; last errors: a: KafkaException: no leader): see job/driver.log")
    assert json.dumps(stuck.flows)  # plain data, as the status file holds it

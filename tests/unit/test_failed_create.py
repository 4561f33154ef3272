"""A create or update that fails after it started something (a Spark job, a connector) leaves
nothing the stack does not know, with fakes (no Spark, no Connect, no engine).

Through the plugin it comes back as a ``FailedAfterStart`` that the plugin answers as Pulumi's
partial create (``ErrorResourceInitFailed`` with the ID and outputs), so ``destroy`` finds what was
started; as a dynamic provider (which cannot record it) the create undoes it first and says so.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from pulumi.runtime.proto import provider_pb2, status_pb2

from mm2spec.errors import ProvisionFailed
from mm2spec.provision import connector, plugin, spark_deployment
from mm2spec.provision.base import FailedAfterStart
from mm2spec.provision.kinds import KINDS
from mm2spec.runtime import deployment
from mm2spec.runtime.deployment import MirrorDeployment, MirrorStatus
from tests.kit.connect_fake import ConnectFake

#: Connect's status of a connector whose task failed.
FAILED_TASK = {"connector": {"state": "RUNNING"},
               "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w", "trace": "RuntimeException: boom"}]}

CONNECTOR_URN = ("urn:pulumi:it::mm2spec::mm2spec:index:DisasterRecovery$mm2spec:index:Connector::"
                 "a-MirrorSourceConnector")


class FakeJob:
    """``mm2spec.runtime.deployment`` for one job that starts and then never finishes a micro-batch."""

    def __init__(self, monkeypatch, pid: int = 4242):
        self.pid, self.running, self.started, self.stopped = pid, False, [], []
        monkeypatch.setattr(deployment, "start", self.start)
        monkeypatch.setattr(deployment, "status", self.status)
        monkeypatch.setattr(deployment, "stop", self.stop)
        monkeypatch.setattr(spark_deployment, "PROGRESS_POLL_S", 0.01)
        monkeypatch.setenv(spark_deployment.START_TIMEOUT_ENV, "0.05")

    def start(self, job, *, state_dir, env, wait_running):
        self.running = True
        self.started.append(Path(state_dir))
        return MirrorDeployment(job["name"], str(state_dir), self.pid, "local[1]", "hash")

    def status(self, state_dir):
        flows = {"f": {"state": "running", "batches": 0}} if self.running else {}
        return MirrorStatus(self.running, self.pid, "running" if self.running else "stopped", flows)

    def stop(self, state_dir):
        self.stopped.append(Path(state_dir))
        was, self.running = self.running, False
        return was


def spark_inputs(tmp_path: Path, state_dir: str = "job") -> dict:
    content = json.dumps({"name": "j", "spark": {"master": "local[1]"}, "flows": []})
    return {"path": "out/spark-mirror.json", "root": str(tmp_path), "content": content, "run": True,
            "stateDir": state_dir, "kubernetes": None}


def test_a_spark_job_without_progress_is_recorded_with_what_destroy_needs_to_stop_it(tmp_path, monkeypatch):
    job = FakeJob(monkeypatch)
    provider = spark_deployment.SparkDeploymentProvider()
    failed = provider.apply_create(spark_inputs(tmp_path))
    assert isinstance(failed, FailedAfterStart)
    file = tmp_path / "out" / "spark-mirror.json"
    assert failed.id == str(file) and file.exists() and job.running and not job.stopped
    assert failed.outputs["pid"] == job.pid and failed.outputs["run"] is True and failed.outputs["stateDir"] == "job"
    assert failed.recorded_message.startswith("the Spark mirroring job made no progress in 0 s")
    assert f"see {tmp_path / 'job' / 'driver.log'}" in failed.reason and "`pulumi destroy` stops it" in failed.kept

    provider.delete(failed.id, failed.outputs)  # what destroy does with the recorded outputs
    assert job.stopped == [tmp_path / "job"] and not job.running and not file.exists()


def test_a_dynamic_create_stops_the_job_it_started_and_says_so(tmp_path, monkeypatch):
    job = FakeJob(monkeypatch)
    with pytest.raises(ProvisionFailed) as raised:
        spark_deployment.SparkDeploymentProvider().create(spark_inputs(tmp_path))
    assert str(raised.value).endswith(f"(the job was stopped; see {tmp_path / 'job' / 'driver.log'})")
    assert job.stopped == [tmp_path / "job"] and not job.running
    assert not (tmp_path / "out" / "spark-mirror.json").exists()


def test_a_failed_update_is_recorded_and_a_dynamic_one_stops_a_job_the_old_record_cannot_find(tmp_path, monkeypatch):
    job = FakeJob(monkeypatch)
    provider = spark_deployment.SparkDeploymentProvider()
    olds = {**spark_inputs(tmp_path), "run": False}
    failed = provider.apply_update("the-id", olds, spark_inputs(tmp_path))
    assert isinstance(failed, FailedAfterStart) and failed.id == "the-id" and failed.outputs["pid"] == job.pid
    assert job.running and not job.stopped

    with pytest.raises(ProvisionFailed, match=r"\(the job was stopped; see "):
        provider.update("the-id", olds, spark_inputs(tmp_path))  # recorded run: false, destroy would not stop it
    assert job.stopped == [tmp_path / "job"]
    ran = spark_inputs(tmp_path)
    with pytest.raises(ProvisionFailed, match=r"\(the job keeps running, recorded in the stack"):
        provider.update("the-id", ran, spark_inputs(tmp_path))  # the old record's folder: destroy finds it
    assert job.stopped == [tmp_path / "job"] and job.running


def test_a_wrong_start_timeout_setting_fails_before_anything_is_written(tmp_path, monkeypatch):
    job = FakeJob(monkeypatch)
    monkeypatch.setenv(spark_deployment.START_TIMEOUT_ENV, "soon")
    with pytest.raises(ProvisionFailed, match="MM2SPEC_SPARK_START_TIMEOUT='soon': give the seconds .* positive number"):
        spark_deployment.SparkDeploymentProvider().apply_create(spark_inputs(tmp_path))
    assert not job.started and not (tmp_path / "out").exists()


def connector_inputs() -> dict:
    return {"connectUrl": "http://c:8083", "name": "a-MirrorSourceConnector",
            "config": {"connector.class": "X", "tasks.max": "1"}, "readyTimeoutSeconds": 60}


def test_a_failed_connector_stays_registered_and_recorded_so_destroy_removes_it(monkeypatch):
    fake = ConnectFake(statuses=[FAILED_TASK])
    monkeypatch.setattr(connector, "ConnectClient", lambda url: fake)
    provider = connector.ConnectorProvider()
    failed = provider.apply_create(connector_inputs())
    assert isinstance(failed, FailedAfterStart) and not fake.deleted
    assert failed.id == "http://c:8083/connectors/a-MirrorSourceConnector"
    assert failed.outputs == {**connector_inputs(), "adopted": False}
    assert "task 0 FAILED" in failed.reason and "`pulumi destroy` removes it" in failed.kept
    provider.delete(failed.id, failed.outputs)
    assert fake.deleted == ["a-MirrorSourceConnector"]

    adopted = ConnectFake({"connector.class": "X"}, [FAILED_TASK])  # registered before the stack: recorded as adopted, left
    monkeypatch.setattr(connector, "ConnectClient", lambda url: adopted)
    failed = provider.apply_create(connector_inputs())
    assert failed.outputs["adopted"] is True
    provider.delete(failed.id, failed.outputs)
    assert not adopted.deleted

    updated = provider.apply_update(failed.id, failed.outputs, connector_inputs())
    assert isinstance(updated, FailedAfterStart) and updated.outputs["adopted"] is True and len(adopted.puts) == 2


class Aborted(Exception):
    pass


class Context:
    async def abort(self, code, details, trailing_metadata=()):
        raise Aborted(code, details, dict(trailing_metadata))


def test_the_plugin_answers_a_failed_create_as_a_partial_create_with_the_id_and_outputs(monkeypatch):
    fake = ConnectFake(statuses=[FAILED_TASK])
    monkeypatch.setattr(connector, "ConnectClient", lambda url: fake)
    monkeypatch.setitem(plugin.TOKENS, KINDS["Connector"].token, connector.ConnectorProvider())
    servicer = plugin._Servicer([], "0", plugin.Mm2specProvider(), engine_address="")
    request = provider_pb2.CreateRequest(urn=CONNECTOR_URN, properties=plugin.wire_map(connector_inputs()))
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(Aborted) as raised:
            loop.run_until_complete(servicer.Create(request, Context()))
    finally:
        loop.close()
    code, details, trailer = raised.value.args
    assert code == grpc.StatusCode.UNKNOWN and "task 0 FAILED" in details and "recorded in the stack" in details
    status = status_pb2.Status.FromString(trailer["grpc-status-details-bin"])
    assert status.code == grpc.StatusCode.UNKNOWN.value[0] and status.message == details
    init = provider_pb2.ErrorResourceInitFailed()
    assert status.details[0].Unpack(init)
    assert init.id == "http://c:8083/connectors/a-MirrorSourceConnector" and list(init.reasons) == [details]
    assert plugin.wire_plain_map(init.properties) == {**connector_inputs(), "adopted": False}
    assert not fake.deleted  # recorded, not removed: destroy removes it

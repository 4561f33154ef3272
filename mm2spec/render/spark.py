"""The Spark mirroring job's config (``spark-mirror.json``), in MM2's key names wherever MM2 has one."""

from __future__ import annotations

import json
from pathlib import Path

from mm2spec.mm2 import spark_modes
from mm2spec.render.properties import client_properties, kafka_bool
from mm2spec.spec.model import DesiredState

JOB_FILE = "spark-mirror.json"
"""The job config's file name, wherever it is written (render, Pulumi, the Kubernetes ConfigMap)."""


def spark_job_config(state: DesiredState) -> dict:
    """The Spark mirroring job's config: MM2 key names wherever MM2 has one (see spark/README.md)."""
    spark = state.spark
    spark_conf: dict = {
        "master": spark.master,
        "trigger.interval": spark.trigger_interval,
        "checkpoint.location": spark.checkpoint_location,
        "driver.memory": spark.driver_memory,
        "source": spark.source,
        "metrics.port": spark.metrics_port,
        "mode": spark.mode,
    }
    if spark.mode == spark_modes.REALTIME:
        spark_conf["realtime.batch.duration"] = spark.realtime_batch_duration
    optional = {"max.offsets.per.trigger": spark.max_offsets_per_trigger,
                "executor.instances": spark.executor_instances,
                "executor.cores": spark.executor_cores,
                "executor.memory": spark.executor_memory}
    spark_conf.update({k: v for k, v in optional.items() if v is not None})
    if spark.config:
        spark_conf["conf"] = dict(spark.config)
    flows = []
    for flow in state.mirrors:
        source, target = state.cluster(flow.source), state.cluster(flow.target)
        entry = {
            "name": flow.name,
            "source.cluster.alias": flow.source,
            "target.cluster.alias": flow.target,
            "source.cluster.bootstrap.servers": source.bootstrap,
            "target.cluster.bootstrap.servers": target.bootstrap,
            "source.cluster.security.protocol": source.security.protocol,
            "target.cluster.security.protocol": target.security.protocol,
        }
        for prefix, cluster in (("source.cluster.", source), ("target.cluster.", target)):
            entry.update({prefix + k: v for k, v in client_properties(cluster) if k != "security.protocol"})
        entry.update({
            "topics": ",".join(flow.topic_selection),
            "topics.exclude": ",".join(flow.topics_exclude_all),
            "groups": ",".join(flow.group_selection),
            "groups.exclude": ",".join(flow.groups_exclude_all),
            "replication.policy.class": flow.policy_class,
            "replication.policy.separator": flow.separator,
            "offset-syncs.topic.location": flow.offset_syncs_topic_location,
            "offset.lag.max": str(flow.offset_lag_max),
            "tasks.max": str(flow.tasks_max),
            "emit.checkpoints.enabled": kafka_bool(bool(flow.groups)),
            "emit.checkpoints.interval.seconds": str(flow.emit_checkpoints_interval_seconds),
            "sync.group.offsets.enabled": kafka_bool(flow.sync_group_offsets),
            "sync.group.offsets.interval.seconds": str(flow.sync_group_offsets_interval_seconds),
            "refresh.topics.interval.seconds": str(flow.refresh_topics_interval_seconds),
            "refresh.groups.interval.seconds": str(flow.refresh_groups_interval_seconds),
            "exactly.once.source.support": "enabled" if flow.exactly_once else "disabled",
            "sync.topic.configs.enabled": kafka_bool(flow.sync_topic_configs),
        })
        entry.update({f"producer.override.{k}": v for k, v in flow.producer_overrides})
        entry.update({f"consumer.{k}": v for k, v in flow.consumer_overrides})
        flows.append(entry)
    return {"apiVersion": "mm2spec/v1", "name": state.name, "environment": state.environment,
            "spark": spark_conf, "flows": flows}


def anchor_checkpoint(job: dict, root: str | Path) -> dict:
    """The job config with a relative local ``checkpoint.location`` made absolute against ``root``.

    A relative location means "relative to the project root"; whoever starts the job (or compares a
    running job with the spec) anchors it the same way, so the two never differ by spelling alone.
    """
    spark = job.get("spark") or {}
    location = spark.get("checkpoint.location")
    if not location or "://" in location or Path(location).is_absolute():
        return job
    return {**job, "spark": {**spark, "checkpoint.location": str(Path(root) / location)}}


def job_config_text(state: DesiredState) -> str:
    """``spark_job_config`` as the file ``JOB_FILE`` holds it."""
    return json.dumps(spark_job_config(state), indent=2) + "\n"

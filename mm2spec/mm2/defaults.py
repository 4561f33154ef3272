"""Defaults of MM2's connector settings, other than the policy's (``policy``) and the filters' (``selection``),
and of the Spark job's micro-batches (``SPARK_*``: the spec compiler and the job share them).

What MM2 does when a setting is absent; the Spark job reads its config with the same defaults.
"""

from __future__ import annotations

OFFSET_SYNCS_TOPIC_LOCATION_DEFAULT = "source"
"""``offset-syncs.topic.location``: the offset-syncs topic lives on the source cluster
(``MirrorConnectorConfig.OFFSET_SYNCS_TOPIC_LOCATION_DEFAULT``; mm2spec's specs default to target)."""

OFFSET_LAG_MAX_DEFAULT = 100
"""``offset.lag.max``: how far the target may move past the last offset sync before a new one
(``MirrorSourceConfig.OFFSET_LAG_MAX_DEFAULT``)."""

EMIT_CHECKPOINTS_ENABLED_DEFAULT = True
"""``emit.checkpoints.enabled`` (``MirrorCheckpointConfig.EMIT_CHECKPOINTS_ENABLED_DEFAULT``)."""

EMIT_CHECKPOINTS_INTERVAL_SECONDS_DEFAULT = 60
"""``emit.checkpoints.interval.seconds`` (``MirrorCheckpointConfig.EMIT_CHECKPOINTS_INTERVAL_SECONDS_DEFAULT``)."""

SYNC_GROUP_OFFSETS_ENABLED_DEFAULT = False
"""``sync.group.offsets.enabled`` (``MirrorCheckpointConfig.SYNC_GROUP_OFFSETS_ENABLED_DEFAULT``)."""

SYNC_GROUP_OFFSETS_INTERVAL_SECONDS_DEFAULT = 60
"""``sync.group.offsets.interval.seconds`` (``MirrorCheckpointConfig.SYNC_GROUP_OFFSETS_INTERVAL_SECONDS_DEFAULT``)."""

REFRESH_TOPICS_INTERVAL_SECONDS_DEFAULT = 600
"""``refresh.topics.interval.seconds`` (``MirrorSourceConfig.REFRESH_TOPICS_INTERVAL_SECONDS_DEFAULT``)."""

REFRESH_GROUPS_INTERVAL_SECONDS_DEFAULT = 600
"""``refresh.groups.interval.seconds`` (``MirrorCheckpointConfig.REFRESH_GROUPS_INTERVAL_SECONDS_DEFAULT``)."""

SYNC_TOPIC_CONFIGS_ENABLED_DEFAULT = True
"""``sync.topic.configs.enabled`` (``MirrorSourceConfig.SYNC_TOPIC_CONFIGS_ENABLED_DEFAULT``)."""

EXACTLY_ONCE_SOURCE_SUPPORT_DEFAULT = "disabled"
"""``exactly.once.source.support``, a Connect worker setting (``DistributedConfig``): at-least-once."""

SPARK_TRIGGER_INTERVAL_DEFAULT = "500 milliseconds"
"""The micro-batch trigger when the config sets none. A record waits up to one interval for its
batch, then for the batch; on the 2-core benchmark machine shorter intervals did not lower the
latency (the batches ran late and the driver's per-batch work took a core; spark/README.md,
Latency). An idle flow costs two ListOffsets a second."""

SPARK_MAX_OFFSETS_PER_TRIGGER_DEFAULT = 1_000_000
"""Most records per micro-batch when the config sets none. Without a cap a backlog (a new flow, a
restart after an outage) runs as one batch: nothing reaches the target's consumers, no offset
sync is written and no progress is checkpointed until all of it is copied. A batch's fixed cost
(checkpoint logs, ListOffsets, planning, scheduling) is paid per batch, so the cap sets the
catch-up rate: a tenth of this held Spark below MM2's rate at 100 B, this one puts it above MM2's
at both record sizes, in catch-up batches of seconds (spark/README.md, Configuration and
Benchmark)."""

SPARK_SOURCE_DEFAULT = "mirror"
"""The Spark job's Kafka source when the config names none: ``mirror``, mm2spec's own (a bounded
number of tasks per batch, the flow's ``tasks.max``, each with a long-lived consumer for a slice of
the partitions, as MM2's tasks), or ``kafka``, Spark's (one task per partition with new data).
At 1,000 partitions Spark's spends most of each batch waiting in its per-partition tasks
(spark/README.md, Profile)."""
SPARK_SOURCES = ("mirror", "kafka")

CONNECT_READY_TIMEOUT_SECONDS_DEFAULT = 60
"""``connect.readyTimeoutSeconds``: how long ``pulumi up`` waits for a registered connector and its
tasks to be RUNNING (mm2spec's own setting, not MM2's: a connector whose tasks have not started
within a minute on a healthy worker is stuck, e.g. on a cluster it cannot reach)."""
SPARK_MODE_DEFAULT = "microbatch"
"""How the Spark job runs each flow's query when the config names no mode: ``microbatch`` (Spark's
micro-batches: a record waits for its trigger and its batch) or ``realtime`` (Spark's Real-time
Mode: long-running tasks hand each record to the writer as it is fetched, MM2's model; one task
slot per task of every flow, for ever). The rules of each are in ``mm2.spark_modes``. Real-time
Mode is the measured choice (spark/README.md, "Which mode"): MM2's lag and latency where
micro-batch mode lags tens of times more, so a new spec says it (``SPARK_MODE_FOR_NEW_SPECS``).
A spec that names no mode keeps micro-batch: on upgrade a running flow must not change how it
runs without its spec saying so, and a spec written for micro-batch (``maxOffsetsPerTrigger``, fewer
task slots than tasks, as the contract example has) would no longer be valid."""
SPARK_MODE_FOR_NEW_SPECS = "realtime"
"""What ``mm2spec init`` writes as ``spark.mode`` (see ``SPARK_MODE_DEFAULT``)."""
SPARK_MODES = ("microbatch", "realtime")
SPARK_REALTIME_BATCH_DURATION_DEFAULT = "60 seconds"
"""How long one Real-time batch runs before its source offsets are committed to the checkpoint (the
tasks write offset syncs as they go, not per batch). A crash replays at most this much
(at-least-once duplicates), as MM2 replays up to Connect's ``offset.flush.interval.ms`` (60 s by
default); a graceful stop ends the batch first and replays nothing. Each boundary pauses the flow
(all tasks end, the checkpoint is written, the next batch is planned and started), so short batches
raise the p99 latency (spark/README.md, Real-time Mode)."""

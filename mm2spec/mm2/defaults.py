"""Defaults of MM2's connector settings, other than the policy's (``policy``) and the filters' (``selection``).

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

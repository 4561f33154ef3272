"""MM2's binary record layouts, so MM2's own tools (RemoteClusterUtils, MirrorClient,
MirrorCheckpointConnector) read what this job writes.

Both use Kafka's protocol types: STRING is a big-endian int16 length then UTF-8 bytes, INT32/INT64
are big-endian. Layouts as defined by org.apache.kafka.connect.mirror.OffsetSync and .Checkpoint
(the integration tests decode our bytes with those very classes):

  OffsetSync  key   = topic STRING, partition INT32
              value = upstreamOffset INT64, offset INT64
  Checkpoint  key   = group STRING, topic STRING, partition INT32
              value = version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

CHECKPOINT_VERSION = 0


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string too long for Kafka's STRING type ({len(raw)} bytes)")
    return struct.pack(">h", len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if length < 0:
        raise ValueError("null STRING where a value is required")
    return buf[pos:pos + length].decode("utf-8"), pos + length


@dataclass(frozen=True)
class OffsetSync:
    """Upstream offset ``upstream_offset`` of ``topic``/``partition`` (source names) was written at
    ``downstream_offset`` of the mirrored partition."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def record_key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def record_value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> "OffsetSync":
        topic, pos = _read_string(key, 0)
        (partition,) = struct.unpack_from(">i", key, pos)
        upstream, downstream = struct.unpack_from(">qq", value, 0)
        return cls(topic, partition, upstream, downstream)


@dataclass(frozen=True)
class Checkpoint:
    """Consumer group ``group`` had committed ``upstream_offset`` upstream; on the target the same
    position is ``downstream_offset`` of ``topic`` (the *target* topic name) / ``partition``."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def record_key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def record_value(self) -> bytes:
        return (struct.pack(">hqq", CHECKPOINT_VERSION, self.upstream_offset, self.downstream_offset)
                + _string(self.metadata))

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> "Checkpoint":
        group, pos = _read_string(key, 0)
        topic, pos = _read_string(key, pos)
        (partition,) = struct.unpack_from(">i", key, pos)
        version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"unsupported checkpoint version {version}")
        metadata, _ = _read_string(value, 2 + 8 + 8)
        return cls(group, topic, partition, upstream, downstream, metadata)

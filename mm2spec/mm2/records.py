"""MM2's binary record layouts, so MM2's own tools (RemoteClusterUtils, MirrorClient,
MirrorCheckpointConnector) read what this job writes.

Both use Kafka's protocol types: STRING is a big-endian int16 length then UTF-8 bytes, INT32/INT64
are big-endian. Layouts as defined by org.apache.kafka.connect.mirror.OffsetSync and .Checkpoint
(the integration tests decode our bytes with those very classes):

  OffsetSync  key   = topic STRING, partition INT32
              value = upstreamOffset INT64, offset INT64
  Checkpoint  key   = group STRING, topic STRING, partition INT32
              value = version INT16 (0), upstreamOffset INT64, offset INT64, metadata STRING

A record that does not decode (truncated, a null or non-UTF-8 STRING, another checkpoint version)
raises ``RecordMalformed`` naming the record type and the field; so does a name too long to encode.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from mm2spec.errors import RecordMalformed

CHECKPOINT_VERSION = 0
STRING_MAX_BYTES = 0x7FFF
"""Kafka's STRING has an int16 length."""


def _string(text: str, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > STRING_MAX_BYTES:
        raise RecordMalformed(f"{what} is too long for Kafka's STRING type ({len(raw)} bytes, at most "
                              f"{STRING_MAX_BYTES}): {text[:80]!r}...")
    return struct.pack(">h", len(raw)) + raw


def _read_string(buf: bytes, pos: int, what: str) -> tuple[str, int]:
    (length,) = _unpack(">h", buf, pos, what)
    pos += 2
    if length < 0:
        raise RecordMalformed(f"{what}: null STRING where a value is required")
    if pos + length > len(buf):
        raise RecordMalformed(f"{what}: STRING of {length} bytes, but only {len(buf) - pos} follow")
    try:
        return buf[pos:pos + length].decode("utf-8"), pos + length
    except UnicodeDecodeError as exc:
        raise RecordMalformed(f"{what}: STRING is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _unpack(layout: str, buf: bytes, pos: int, what: str) -> tuple:
    try:
        return struct.unpack_from(layout, buf, pos)
    except (struct.error, TypeError):  # too short, or no bytes at all (a null key or value)
        if buf is None:
            raise RecordMalformed(f"{what}: missing (null)") from None
        raise RecordMalformed(f"{what}: too short ({len(buf)} bytes, {pos + struct.calcsize(layout)} needed)") from None


@dataclass(frozen=True)
class OffsetSync:
    """Upstream offset ``upstream_offset`` of ``topic``/``partition`` (source names) was written at
    ``downstream_offset`` of the mirrored partition."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def record_key(self) -> bytes:
        return _string(self.topic, "OffsetSync topic") + struct.pack(">i", self.partition)

    def record_value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> "OffsetSync":
        """Decode an offset-syncs record; RecordMalformed if it is not an OffsetSync."""
        topic, pos = _read_string(key, 0, "OffsetSync key (topic)")
        (partition,) = _unpack(">i", key, pos, "OffsetSync key (partition)")
        upstream, downstream = _unpack(">qq", value, 0, "OffsetSync value (upstream and downstream offsets)")
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
        return (_string(self.group, "Checkpoint group") + _string(self.topic, "Checkpoint topic")
                + struct.pack(">i", self.partition))

    def record_value(self) -> bytes:
        return (struct.pack(">hqq", CHECKPOINT_VERSION, self.upstream_offset, self.downstream_offset)
                + _string(self.metadata, "Checkpoint metadata"))

    @classmethod
    def from_record(cls, key: bytes, value: bytes) -> "Checkpoint":
        """Decode a checkpoints record; RecordMalformed if it is not a version-0 Checkpoint."""
        group, pos = _read_string(key, 0, "Checkpoint key (group)")
        topic, pos = _read_string(key, pos, "Checkpoint key (topic)")
        (partition,) = _unpack(">i", key, pos, "Checkpoint key (partition)")
        (version,) = _unpack(">h", value, 0, "Checkpoint value (version)")
        if version != CHECKPOINT_VERSION:
            raise RecordMalformed(f"Checkpoint value: unsupported version {version} (MM2 writes {CHECKPOINT_VERSION})")
        upstream, downstream = _unpack(">qq", value, 2, "Checkpoint value (upstream and downstream offsets)")
        metadata, _ = _read_string(value, 2 + 8 + 8, "Checkpoint value (metadata)")
        return cls(group, topic, partition, upstream, downstream, metadata)

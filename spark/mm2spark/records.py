"""MM2's binary record layouts (OffsetSync, Checkpoint): defined once in ``mm2spec.mm2.records``,
which the failover playbooks read with too; re-exported here for the job's modules."""

from mm2spec.mm2.records import CHECKPOINT_VERSION, STRING_MAX_BYTES, Checkpoint, OffsetSync

__all__ = ["CHECKPOINT_VERSION", "STRING_MAX_BYTES", "Checkpoint", "OffsetSync"]

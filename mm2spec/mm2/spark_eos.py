"""The Spark mirror's exactly-once names on the target cluster: its progress group and the prefix
of its transactional ids.

Not MM2's own rule but one just like them: the Spark job (``spark/mm2spark/eos.py``) uses these
names and ``compile.derive_acls`` grants the mirror's principal access to them, so both read this
one definition and cannot drift apart (a granted name the job does not use would leave the job
refused, and an ACL wider than the names would grant more than it needs).
"""

from __future__ import annotations

NAME_PREFIX = "mm2spec-mirror"
"""What every name the Spark job owns on the target starts with."""


def progress_group(job: str, flow: str) -> str:
    """The consumer group holding each target partition's progress, committed in the same
    transaction as the records (``<NAME_PREFIX>.<job>.<flow>``)."""
    return f"{NAME_PREFIX}.{job}.{flow}"


def transactional_id_prefix(job: str, flow: str) -> str:
    """What each source partition's ``transactional.id`` starts with: it ends ``<topic>.<partition>``."""
    return f"{progress_group(job, flow)}."


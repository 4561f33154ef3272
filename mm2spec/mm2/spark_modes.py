"""What each Spark run mode (``spark.mode``) needs of a config, checked by the spec's rules
(located errors before anything runs) and again by the Spark job at start (with the slots its
session really has): one rule book, so the two cannot disagree.

Real-time Mode runs every task of every flow for the whole batch, so it needs a task slot for each
(``tasksMax`` summed over the flows); with fewer, Spark starts the rest only when the first ones end
and their partitions never advance, without an error. It reads with mm2spec's mirror source (Spark's
Kafka source would need a slot per partition) and has no per-batch record cap (a batch reads until
its deadline).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REALTIME = "realtime"


@dataclass(frozen=True)
class ModeProblem:
    """One thing a config must change to run in its mode. ``where``: ``source``,
    ``maxOffsetsPerTrigger``, ``slots`` or ``batchDuration``."""

    where: str
    message: str


def local_slots(master: str) -> int | None:
    """Task slots of a ``local``/``local[N]`` master; None for ``local[*]`` (the machine's cores)
    and for cluster masters (their executors decide)."""
    if master == "local":
        return 1
    match = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", master)
    return int(match.group(1)) if match else None


def duration_seconds(text: str) -> float | None:
    """``"30 seconds"``, ``"500 ms"``, ``"2 minutes"`` in seconds; None when unreadable."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    scale = {"": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1, "ms": 0.001, "millisecond": 0.001,
             "milliseconds": 0.001, "m": 60, "min": 60, "minute": 60, "minutes": 60}
    if not match or match.group(2) not in scale:
        return None
    return float(match.group(1)) * scale[match.group(2)]


#: The shortest Real-time batch: each boundary pauses every flow's tasks and writes the checkpoint.
MIN_REALTIME_BATCH_SECONDS = 1.0


def mode_problems(mode: str, *, source: str, max_offsets_per_trigger: int | None, batch_duration: str,
                  flows: list[tuple[str, int]], slots: int | None) -> list[ModeProblem]:
    """What stops the config from running in ``mode``. ``flows``: (name, tasksMax); ``slots``: the
    task slots the job has, None when unknown."""
    if mode != REALTIME:
        return []
    problems = []
    if source != "mirror":
        problems.append(ModeProblem("source", f"spark.mode realtime reads with mm2spec's mirror source; source {source!r} "
                                              "would need a task slot per partition: set spark.source to mirror"))
    if max_offsets_per_trigger is not None:
        problems.append(ModeProblem("maxOffsetsPerTrigger", "spark.mode realtime has no per-batch record cap (a batch reads "
                                                            "until its deadline): remove spark.maxOffsetsPerTrigger"))
    seconds = duration_seconds(batch_duration)
    if seconds is None or seconds < MIN_REALTIME_BATCH_SECONDS:
        problems.append(ModeProblem("batchDuration", f"the Real-time batch duration must be at least "
                                                     f"{MIN_REALTIME_BATCH_SECONDS:g} second, got {batch_duration!r}"))
    needed = sum(tasks for _name, tasks in flows)
    if slots is not None and slots < needed:
        problems.append(ModeProblem("slots", f"spark.mode realtime runs every task for the whole batch: the flows' tasksMax "
                                             f"add up to {needed} but the job has {slots} task slot(s); give it at least "
                                             f"{needed} (e.g. master local[{needed}]) or lower tasksMax"))
    return problems

"""MM2's offset-sync rule is written twice, because two writers need it: the Python driver's
(``mm2spark.offsets.OffsetSyncEmitter``, micro-batch mode) and the executors' (``mm2spec.spark.SyncEmitter``,
Real-time Mode, whose tasks write their own syncs). This runs both on the same random runs and
requires every sync to be the same. Needs the writer jar (scripts/install-spark.sh), no cluster."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from mm2spec.components import components
from mm2spec.errors import ComponentMissing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mm2spark.offsets import OffsetSyncEmitter, Run
from required import missing_component

pytestmark = pytest.mark.integration


def _cases(seed: int, count: int) -> list[tuple[int, list[tuple]]]:
    """(offset.lag.max, steps): runs that continue, skip upstream (compaction, markers), go back
    downstream (a recreated target), and delayed-sync requests."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        lag = rng.choice([0, 1, 3, 10, 100])
        upstream, downstream, steps = rng.randrange(0, 50), rng.randrange(0, 50), []
        for _ in range(rng.randrange(1, 30)):
            kind = rng.random()
            if kind < 0.15:
                steps.append(("delayed",))
                continue
            if kind < 0.3:
                upstream += rng.randrange(2, 20)  # a gap upstream
            elif kind < 0.35:
                downstream = max(0, downstream - rng.randrange(1, 40))  # the target went back
            length = rng.randrange(1, 400)
            steps.append(("run", upstream, downstream, length))
            upstream, downstream = upstream + length, downstream + length
        cases.append((lag, steps))
    return cases


def _python(lag: int, steps: list[tuple]) -> list[list[tuple[int, int]]]:
    emitter, out = OffsetSyncEmitter(lag), []
    for step in steps:
        if step[0] == "run":
            out.append([(s.upstream_offset, s.downstream_offset) for s in emitter.on_run(Run("t", 0, *step[1:]))])
        else:
            sync = emitter.delayed("t", 0)
            out.append([(sync.upstream_offset, sync.downstream_offset)] if sync else [])
    return out


def _java(jar: Path, cases: list[tuple[int, list[tuple]]]) -> list[list[list[tuple[int, int]]]]:
    lines = []
    for lag, steps in cases:
        lines.append(f"lag {lag}")
        lines.extend(" ".join(str(x) for x in step) for step in steps)
    done = subprocess.run([components().java(), "-cp", str(jar), "mm2spec.spark.SyncEmitter"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, check=True)
    answers, current = [], []
    for line in done.stdout.splitlines():
        if line == "end":
            answers.append(current)
            current = []
        else:
            upstream, downstream = line.split()
            current.append((int(upstream), int(downstream)))
    out, index = [], 0
    for _lag, steps in cases:
        index += 1  # the "lag" line's own "end"
        out.append(answers[index:index + len(steps)])
        index += len(steps)
    return out


def test_the_executors_sync_rule_answers_as_the_drivers():
    try:
        jar = next(j for j in components().spark_kafka_jars if j.name == "mm2spec-spark-writer.jar")
    except (ComponentMissing, StopIteration):
        missing_component("the mm2spec writer jar is not installed: run scripts/install-spark.sh")
    cases = _cases(seed=24, count=300)
    java = _java(jar, cases)
    assert sum(len(step) for case in java for step in case) > 1000  # the cases emit many syncs
    for (lag, steps), from_java in zip(cases, java):
        assert from_java == _python(lag, steps), (lag, steps)

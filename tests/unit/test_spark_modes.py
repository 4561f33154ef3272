"""Spark's run modes (``spark.mode``): one rule book (``mm2spec.mm2.spark_modes``) read by the spec's
validation (located errors, tests/unit/invalid/realtime_mode.yaml) and by the Spark job at start."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mm2spec.mm2 import spark_modes
from mm2spec.spec.load import load_desired_state
from mm2spec.render.spark import spark_job_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))

from mm2spark.config import JobConfigError, check_mode, parse_job_config
from test_spark_job import job

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dr-spec.example.yaml"


def _realtime(**spark) -> dict:
    data = job(**{"exactly.once.source.support": "disabled", "tasks.max": "2"})
    data["spark"].pop("max.offsets.per.trigger")
    data["spark"].update({"mode": "realtime", **spark})
    return data


@pytest.mark.parametrize("master,slots", [("local", 1), ("local[4]", 4), ("local[3,2]", 3), ("local[*]", None),
                                          ("spark://h:7077", None)])
def test_local_masters_give_their_slots(master, slots):
    assert spark_modes.local_slots(master) == slots


def test_micro_batch_mode_has_no_extra_rules():
    assert spark_modes.mode_problems("microbatch", source="kafka", max_offsets_per_trigger=5, batch_duration="x",
                                     flows=[("f", 99)], slots=1) == []


def test_realtime_needs_a_slot_per_task_of_every_flow():
    flows = [("a", 2), ("b", 3)]
    assert spark_modes.mode_problems("realtime", source="mirror", max_offsets_per_trigger=None, batch_duration="5 s",
                                     flows=flows, slots=5) == []
    [problem] = spark_modes.mode_problems("realtime", source="mirror", max_offsets_per_trigger=None,
                                          batch_duration="5 s", flows=flows, slots=4)
    assert problem.where == "slots" and "add up to 5" in problem.message and "local[5]" in problem.message
    # unknown slots (local[*], a cluster): the job checks at start with its session's parallelism
    assert spark_modes.mode_problems("realtime", source="mirror", max_offsets_per_trigger=None, batch_duration="5 s",
                                     flows=flows, slots=None) == []


def test_the_job_config_refuses_what_realtime_cannot_run():
    assert parse_job_config(_realtime(), environ={}).spark.max_offsets_per_trigger is None
    assert parse_job_config(_realtime() | {"flows": [job(**{"tasks.max": "2"})["flows"][0]]}, environ={}).flows[0].exactly_once
    with pytest.raises(JobConfigError, match="remove spark.maxOffsetsPerTrigger"):
        parse_job_config(_realtime(**{"max.offsets.per.trigger": 10}), environ={})
    with pytest.raises(JobConfigError, match="mirror source"):
        parse_job_config(_realtime(source="kafka"), environ={})
    with pytest.raises(JobConfigError, match="1 task slot"):
        parse_job_config(_realtime(master="local"), environ={})
    with pytest.raises(JobConfigError, match="spark.mode must be one of"):
        parse_job_config(_realtime(mode="continuous"), environ={})


def test_the_job_checks_the_slots_its_session_has():
    config = parse_job_config(_realtime(master="local[*]"), environ={})
    check_mode(config, slots=2)
    with pytest.raises(JobConfigError, match="add up to 2 but the job has 1"):
        check_mode(config, slots=1)


def test_a_realtime_spec_renders_the_mode_and_no_record_cap(tmp_path):
    spec = tmp_path / "rt.yaml"
    spec.write_text(
        "apiVersion: mm2spec/v1\nkind: DisasterRecovery\nmetadata: {name: demo}\nengine: spark\n"
        "clusters:\n  primary: {bootstrapServers: [\"p-1:9092\"]}\n  dr: {bootstrapServers: [\"d-1:9092\"]}\n"
        "mirrors:\n  - {source: primary, target: dr, topics: [orders], tasksMax: 2}\n"
        "spark: {master: \"local[2]\", mode: realtime, realTimeBatchDuration: 10 seconds}\n")
    rendered = spark_job_config(load_desired_state(spec, None))["spark"]
    assert rendered["mode"] == "realtime" and rendered["realtime.batch.duration"] == "10 seconds"
    assert "max.offsets.per.trigger" not in rendered
    assert spark_job_config(load_desired_state(EXAMPLE, "dev"))["spark"]["mode"] == "microbatch"


def test_realtime_latency_is_the_writers_not_the_batch_end():
    """Real-time results reach the driver at the batch's end (a minute after the writes): the figure
    is what the writer measured at each acknowledgement, and the record age equals it."""
    from mm2spark.prometheus import LATENCY, LATENCY_MAX, RECORD_AGE, PartitionBatch, PartitionFigures

    figures = PartitionFigures(started_at=0.0)
    written_at_ms = 1_000_000
    batch = PartitionBatch("dr.orders", 0, 10, 1000, written_at_ms - 50, 10 * (written_at_ms - 20),
                           latency_sum_ms=200, latency_max_ms=45)
    figures.record("primary", "dr", [batch], read_at=None, now=written_at_ms / 1000 + 60)  # results a minute later
    [(labels, values)] = figures.samples(now=written_at_ms / 1000 + 60)
    assert labels == {"source": "primary", "target": "dr", "topic": "dr.orders", "partition": "0"}
    assert values[LATENCY] == 20 and values[RECORD_AGE] == 20 and values[LATENCY_MAX] == 45

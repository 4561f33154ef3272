"""``mm2spec drill`` on a spec that is both active-active and fan-in, on real clusters with one
Spark job: ``alpha`` and ``beta`` (``kafka_pair``) mirror each other (DefaultReplicationPolicy),
and ``gamma`` (``secure_kafka_pair``'s primary, SASL/SCRAM) mirrors into ``beta`` too.

Without ``--limit`` the drill refuses, naming the topology (exit 1, nothing written). Drilling
``alpha-to-beta`` fails that one direction over and back on its own probe topic while
``beta-to-alpha`` (the other direction) and ``gamma-to-beta`` (the other source) keep mirroring; a
group on alpha reading its local ``dt-orders`` and the remote ``beta.dt-orders`` resumes at the
exact next record of both after each switch, and the report names the flow, its probe topic on
each cluster and each group's local and remote topics. Drilling ``gamma-to-beta`` (one source of
the fan-in) leaves both directions between alpha and beta mirroring. No cluster is started for
this test: the pairs are the session's; the spec builders are those of test_fan_in and specs.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import yaml

from mm2spec.dev import ADMIN_PASSWORD
from mm2spec.live.dr_state import read_states
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.live.records import RecordReader
from mm2spec.render import spark_job_config
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_fan_in
from specs import ADMIN_SECRET, spec_for
from test_failback import PARTITIONS, _commit, _produce
from test_failover import _run, _wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0
CATCH_UP_TIMEOUT = 180.0
NAME = "it-drill-topologies"
TOPIC = "dt-orders"
GROUP = "dt-app"
SEED = 60
# Aliases of their own: MM2's internal topics are named after them, apart from other tests'.
ALPHA, BETA, GAMMA = "alpha", "beta", "gamma"
FLOW = {**test_fan_in.FLOW, "topics": [TOPIC], "groups": ["dt-.*"]}
DRILL = ("--duration", "1", "--rate", "20", "--verify-timeout", "120", "--settle-timeout", "120", "--quiet")


def _spec(tmp: Path, pair, secure_pair) -> Path:
    spec = spec_for(pair, [TOPIC], name=NAME, aliases=(ALPHA, BETA), mirror={"name": "alpha-to-beta", **FLOW})
    # The secure source exactly as the fan-in test writes it (its super user, by secret name).
    fan_in = yaml.safe_load(test_fan_in._spec(tmp, pair, secure_pair).read_text())
    spec["clusters"][GAMMA] = fan_in["clusters"]["south"]
    spec["mirrors"] += [{"name": "beta-to-alpha", "source": BETA, "target": ALPHA, **FLOW},
                        {"name": "gamma-to-beta", "source": GAMMA, "target": BETA, **FLOW}]
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint")}
    path = tmp / "topologies.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _held(state, alias: str, topic: str, count: int) -> list[str]:
    """What ``alias`` still lacks of ``count`` records in ``topic``."""
    if not KafkaAdmin(state.cluster(alias)).topics([topic], with_configs=False):
        return [f"{topic} not on {alias} yet"]
    with RecordReader(state.cluster(alias)) as reader:
        found = sum(reader.watermarks(topic, p)[1] for p in range(PARTITIONS))
    return [] if found >= count else [f"{topic} on {alias}: {found} of {count}"]


def _drill(capsys, spec: Path, tmp: Path, flow: str) -> dict:
    out = tmp / f"drill-{flow}"
    code, printed = _run(capsys, "drill", str(spec), "--state-dir", str(tmp / "spark"), "--out", str(out),
                         "--limit", f"flow={flow}", *DRILL)
    data = json.loads((out / "drill.json").read_text())
    assert code == 0 and data["passed"], f"{printed[-3000:]}\n{json.dumps(data['phases'], indent=1)[-4000:]}"
    return data


def test_the_drill_runs_one_direction_and_one_source_at_a_time(kafka_pair, secure_kafka_pair, tmp_path, capsys,
                                                             monkeypatch):
    monkeypatch.setenv(ADMIN_SECRET, ADMIN_PASSWORD)  # the CLI's runs read gamma's password from it
    spec = _spec(tmp_path, kafka_pair, secure_kafka_pair)
    state = load_desired_state(spec, None)
    for alias in (ALPHA, BETA):
        KafkaAdmin(state.cluster(alias)).create_topic(TOPIC, PARTITIONS, -1, {}, exist_ok=True)
        _produce(state.cluster(alias).bootstrap, TOPIC, 0, SEED, alias)

    # Both directions and both sources at once: refused before anything is written.
    code, printed = _run(capsys, "drill", str(spec), "--out", str(tmp_path / "refused"), *DRILL)
    assert code == 1 and "active-active" in printed and "--limit flow=alpha-to-beta" in printed, printed
    assert not (tmp_path / "refused").exists() and "Traceback" not in printed

    job = mirror.start(spark_job_config(state), state_dir=tmp_path / "spark", env={ADMIN_SECRET: ADMIN_PASSWORD},
                       wait_running=START_TIMEOUT)
    try:
        _wait(lambda: _held(state, ALPHA, f"{BETA}.{TOPIC}", SEED) + _held(state, BETA, f"{ALPHA}.{TOPIC}", SEED),
              CATCH_UP_TIMEOUT, "both directions to mirror the seed records", job)
        rng = random.Random(27)
        _commit(kafka_pair, "primary", TOPIC, GROUP, {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)})
        _commit(kafka_pair, "primary", f"{BETA}.{TOPIC}", GROUP,
                {p: rng.randrange(2, SEED // PARTITIONS) for p in range(PARTITIONS)})

        data = _drill(capsys, spec, tmp_path, "alpha-to-beta")
        assert (data["source"], data["target"]) == (ALPHA, BETA)
        assert data["flows"] == [{"flow": "alpha-to-beta", "source": ALPHA, "target": BETA,
                                  "probeTopics": ["mm2spec-probe-alpha-to-beta"],
                                  "targetTopics": ["alpha.mm2spec-probe-alpha-to-beta"]}]
        # The application group's local and remote topics, each exact after both switches.
        moved = {(r["switch"], r["topic"], r["targetTopic"], r.get("remote")) for r in data["probes"] if r["group"] == GROUP}
        assert moved == {("failover", TOPIC, f"{ALPHA}.{TOPIC}", None), ("failover", f"{BETA}.{TOPIC}", TOPIC, "beta-to-alpha"),
                         ("failback", f"{ALPHA}.{TOPIC}", TOPIC, None), ("failback", TOPIC, f"{BETA}.{TOPIC}", "beta-to-alpha")}
        assert all(r["result"] == "exact" for r in data["probes"]), data["probes"]
        assert data["headline"]["rpoRecords"] == 0 and data["headline"]["unknown"] == 0
        # The other direction and the other source mirrored through both switches, in the same job.
        assert {o["flow"]: o["relation"] for o in data["otherFlows"]} == {
            "beta-to-alpha": "active-active", "gamma-to-beta": "fan-in"}
        assert all(o["running"] for s in data["switches"] for o in s["otherFlows"]), data["switches"]
        assert mirror.status(tmp_path / "spark").pid == job.pid
        assert read_states(state.cluster(BETA), NAME) == {} and read_states(state.cluster(ALPHA), NAME) == {}
        report = (tmp_path / "drill-alpha-to-beta" / "report.md").read_text()
        assert f"{BETA}.{TOPIC} -> {TOPIC} (remote, beta-to-alpha)" in report, report

        data = _drill(capsys, spec, tmp_path, "gamma-to-beta")
        assert (data["source"], data["target"]) == (GAMMA, BETA)
        assert {o["flow"]: o["relation"] for o in data["otherFlows"]} == {"alpha-to-beta": "fan-in", "beta-to-alpha": "chain"}
        assert all(o["running"] for s in data["switches"] for o in s["otherFlows"]), data["switches"]
        assert {name: f.get("state") for name, f in mirror.status(tmp_path / "spark").flows.items()} == {
            "alpha-to-beta": "running", "beta-to-alpha": "running", "gamma-to-beta": "running"}
    finally:
        mirror.stop(tmp_path / "spark")

"""A failed ``pulumi up`` leaves nothing running that the stack does not know (issue 39, item 5).

The real CLI, plugin and Spark job on the dev clusters: a Spark deployment (``sparkRun``) whose
job starts but cannot finish a micro-batch (its ``spark.master`` is a standalone master at a closed
port, so no executor ever runs a task; the clusters themselves answer, as the program needs them
to). ``up`` fails within the short ``MM2SPEC_SPARK_START_TIMEOUT`` naming the job's log; the job,
still running, is recorded in the stack (a partial create), so the next preview updates it and
``destroy`` stops it: no driver of that stack is left afterwards.
"""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from mm2spec.dev.process import pick_free_ports
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.runtime import deployment as mirror
from mm2spec.runtime.process import pid_alive
from mm2spec.spec.model import Cluster
from specs import spec_for
from test_pulumi_stack import project_stack, pulumi_bin  # noqa: F401 - pytest fixture
from test_spark_mirror import spark_ready  # noqa: F401 - pytest fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: Seconds ``up`` waits for the first micro-batch: enough for the driver to be up, far from the default.
START_TIMEOUT_S = "20"


def test_a_spark_job_that_makes_no_progress_is_recorded_and_destroy_stops_it(pulumi_bin, kafka_pair,  # noqa: F811
                                                                            spark_ready, tmp_path):  # noqa: F811
    run_id = uuid.uuid4().hex[:6]
    src, dst, topic, name = f"src{run_id}", f"dst{run_id}", f"stuck-{run_id}", f"it-{run_id}"
    KafkaAdmin(Cluster(src, (kafka_pair.primary.bootstrap,))).create_topic(topic, 1, -1, {})
    spec = spec_for(kafka_pair, [topic], name=name, aliases=(src, dst))
    spec["spark"]["master"] = f"spark://127.0.0.1:{pick_free_ports(1)[0]}"  # nothing listens: no executor ever
    stack = project_stack(tmp_path, env={"MM2SPEC_SPARK_START_TIMEOUT": START_TIMEOUT_S})
    (stack.project / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    job_dir = stack.project / ".mm2spec" / "spark" / name
    stack.run("login")
    stack.run("stack", "init", "it")
    for key, value in (("spec", "spec.yaml"), ("outDir", "out"), ("sparkRun", "true")):
        stack.run("config", "set", f"mm2spec:{key}", value)
    driver = None
    try:
        failed = stack.run("up", "--yes", check=False)
        shown = failed.stdout + failed.stderr
        assert failed.returncode != 0 and "Traceback" not in shown, shown
        assert f"made no progress in {START_TIMEOUT_S} s" in shown or "did not start" in shown, shown
        assert f"{job_dir / 'driver.log'}" in shown and "`pulumi destroy` stops it" in shown, shown
        driver = mirror.status(job_dir)
        assert driver.running, "the job still runs (it retries): the case where it must be recorded"

        resources = json.loads(stack.run("stack", "export").stdout)["deployment"]["resources"]
        recorded = next((r for r in resources if r["type"].endswith("SparkDeployment")), None)
        assert recorded is not None, "a failed create that left a job running must be in the stack"
        assert recorded["outputs"]["pid"] == driver.pid and recorded.get("initErrors"), recorded
        assert stack.preview_steps().get("spark-mirror") == "update"  # the next up tries again
    finally:
        stack.run("destroy", "--yes", check=False)
    assert not mirror.status(job_dir).running and not pid_alive(driver and driver.pid), "destroy must stop the job"
    assert not (stack.project / "out" / "spark-mirror.json").exists()

"""The Spark Operator manifests and the job image's Dockerfile that ``render`` writes for a k8s:// master.

Server-side validation against the operator's CRD is in tests/integration/test_kubernetes.py; here:
what the manifests say, that secrets appear only by name, and that other masters get none of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mm2spec import __version__
from mm2spec.cli import main
from mm2spec.components import versions
from mm2spec.render import render_files
from mm2spec.render.kubernetes import CONFIG_MOUNT, dockerfile, manifests
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
K8S_EXAMPLE = ROOT / "examples" / "spark-on-kubernetes.dr.yaml"


def test_spark_application_runs_in_cluster_mode_restarted_with_backoff():
    config_map, app = manifests(load_desired_state(K8S_EXAMPLE, "dev"))
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    assert app["metadata"] == {"name": "payments-dr-mirror", "namespace": "kafka-dr-dev",
                               "labels": config_map["metadata"]["labels"]}
    spec = app["spec"]
    assert (spec["mode"], spec["type"], spec["image"]) == ("cluster", "Python", "registry.example.com/mm2spec-mirror:0.1.0")
    assert spec["restartPolicy"] == {"type": "Always", "onFailureRetryInterval": 30,
                                     "onSubmissionFailureRetryInterval": 30}
    assert {key: spec["executor"][key] for key in ("instances", "cores", "memory")} == \
        {"instances": 2, "cores": 1, "memory": "2g"}
    assert spec["driver"]["serviceAccount"] == "spark-operator-spark"


def test_job_config_comes_from_the_config_map_mounted_into_the_driver():
    state = load_desired_state(K8S_EXAMPLE, "dev")
    config_map, app = manifests(state)
    assert app["spec"]["driver"]["configMaps"] == [{"name": config_map["metadata"]["name"], "path": CONFIG_MOUNT}]
    assert app["spec"]["arguments"] == ["--config", f"{CONFIG_MOUNT}/spark-mirror.json"]
    job = json.loads(config_map["data"]["spark-mirror.json"])
    assert job == json.loads(render_files(state)["spark-mirror.json"])
    assert job["spark"]["checkpoint.location"].startswith("s3a://")


def test_secrets_come_from_the_kubernetes_secret_by_name_never_inline(monkeypatch):
    monkeypatch.setenv("PRIMARY_MM2_PASSWORD", "primary-hunter2")
    monkeypatch.setenv("DR_MM2_PASSWORD", "dr-hunter2")
    state = load_desired_state(K8S_EXAMPLE, "prod")
    text = render_files(state)["kubernetes.yaml"]
    assert "hunter2" not in text
    app = list(yaml.safe_load_all(text))[1]
    for pod in ("driver", "executor"):
        assert app["spec"][pod]["env"] == [
            {"name": name, "valueFrom": {"secretKeyRef": {"name": "payments-dr-kafka-credentials", "key": name}}}
            for name in ("DR_MM2_PASSWORD", "PRIMARY_MM2_PASSWORD")]


def test_render_writes_manifest_and_dockerfile_only_for_a_k8s_master(tmp_path):
    assert main(["render", str(K8S_EXAMPLE), "--env", "dev", "--out", str(tmp_path / "k8s")]) == 0
    assert {"kubernetes.yaml", "Dockerfile", "spark-mirror.json"} <= {p.name for p in (tmp_path / "k8s").iterdir()}
    assert main(["render", str(ROOT / "examples" / "dr-spec.example.yaml"), "--env", "dev",
                 "--out", str(tmp_path / "local")]) == 0
    assert not {"kubernetes.yaml", "Dockerfile"} & {p.name for p in (tmp_path / "local").iterdir()}


def test_dockerfile_builds_on_spark_image_with_mm2spec_and_the_jars():
    text = dockerfile(load_desired_state(K8S_EXAMPLE, "dev"))
    spark = versions()["SPARK_VERSION"]
    assert f"FROM apache/spark:{spark}-" in text
    assert f"mm2spec-{__version__}-py3-none-any.whl" in text
    assert f"'/tmp/mm2spec-{__version__}-py3-none-any.whl[spark]'" in text  # the job imports pyspark: its extra
    assert f"/opt/mm2spec/cache/spark-kafka-{spark}/jars/" in text
    assert "/opt/mm2spec/mirror_job.py" in text  # the SparkApplication's mainApplicationFile


def test_pulumi_inputs_carry_the_manifests_and_only_their_change_is_a_change():
    from mm2spec.provision.spark_deployment import SparkDeploymentProvider, spark_deployment_inputs

    dev = load_desired_state(K8S_EXAMPLE, "dev")
    here = spark_deployment_inputs(dev, "out", "/project", kubeconfig="/home/a/.kube/config")
    elsewhere = spark_deployment_inputs(dev, "out", "/project", kubeconfig="/home/b/.kube/config")
    assert here["kubernetes"]["manifests"] == manifests(dev)
    provider = SparkDeploymentProvider()
    assert provider.diff("id", here, elsewhere).changes is False  # the same cluster seen from elsewhere
    prod = spark_deployment_inputs(load_desired_state(K8S_EXAMPLE, "prod"), "out", "/project")
    assert provider.diff("id", here, prod).changes is True  # another namespace
    local = load_desired_state(ROOT / "examples" / "dr-spec.example.yaml", "dev")
    assert spark_deployment_inputs(local, "out", "/project")["kubernetes"] is None

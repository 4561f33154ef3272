"""The Spark job on Kubernetes: a Kubeflow Spark Operator ``SparkApplication`` and the job's image.

With ``spark.master: k8s://...`` the job runs the way Spark users run long-lived jobs there: the
operator submits it in cluster mode and restarts it (restart policy ``Always``, with a back-off)
whenever the driver fails. ``kubernetes.yaml`` holds two objects, applied together:

- a ConfigMap with the rendered ``spark-mirror.json``, mounted into the driver at ``CONFIG_MOUNT``;
- the SparkApplication: image, namespace, service account, driver and executor resources, and every
  secret the job config references (``${env:NAME}``) as an environment variable read from the
  Kubernetes Secret ``spark.kubernetes.secretName`` by key ``NAME``: a name, never a value.

``Dockerfile`` builds the image: Spark's own image (which has the entrypoint the operator calls)
with Python 3.11, mm2spec installed from its wheel, and the Kafka connector jars.

Pure: DesiredState in, data and text out; ``mm2spec.live.kubernetes`` talks to the API server.
"""

from __future__ import annotations

import hashlib
import json
import re

import yaml

from mm2spec import __version__
from mm2spec.components import versions
from mm2spec.render.spark import JOB_FILE, job_config_text, spark_job_config
from mm2spec.spec.model import DesiredState, KubernetesDeployment

#: The operator's API group/version that these manifests are written against.
API_VERSION = "sparkoperator.k8s.io/v1beta2"
KIND = "SparkApplication"
#: Folder in the driver pod where the ConfigMap with the job config is mounted.
CONFIG_MOUNT = "/etc/mm2spec"
#: Where the image keeps the job's entry point, its venv and the connector jars (see ``dockerfile``).
IMAGE_HOME = "/opt/mm2spec"
MANIFEST_FILE = "kubernetes.yaml"
DOCKERFILE = "Dockerfile"
#: Label that marks the objects mm2spec manages, so an operator can list them.
MANAGED_BY = {"app.kubernetes.io/managed-by": "mm2spec"}
#: Driver annotation with the job config's digest (see ``spark_application``).
CONFIG_DIGEST = "mm2spec/job-config-sha256"
_ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def on_kubernetes(state: DesiredState) -> bool:
    """Whether the spec runs the Spark job through the Spark Operator (``spark.master: k8s://...``)."""
    return state.spark.kubernetes is not None


def _settings(state: DesiredState) -> KubernetesDeployment:
    if state.spark.kubernetes is None:
        raise ValueError(f"spec {state.name} has no k8s:// Spark master")  # callers check on_kubernetes
    return state.spark.kubernetes


def resource_names(state: DesiredState) -> dict[str, str]:
    """The names of the objects mm2spec owns in the namespace (the SparkApplication, its ConfigMap)."""
    app = f"{state.name}-mirror"
    return {"application": app, "configMap": f"{app}-config"}


def _labels(state: DesiredState) -> dict[str, str]:
    return {**MANAGED_BY, "mm2spec/spec": state.name, "mm2spec/environment": state.environment or "base"}


def secret_names(job: dict) -> list[str]:
    """The secrets a job config references through ``${env:NAME}``, sorted."""
    return sorted(set(_ENV_REFERENCE.findall(json.dumps(job))))


def config_map(state: DesiredState) -> dict:
    """The ConfigMap that carries ``spark-mirror.json`` (secrets only as ``${env:NAME}``)."""
    k8s = _settings(state)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": resource_names(state)["configMap"], "namespace": k8s.namespace,
                     "labels": _labels(state)},
        "data": {JOB_FILE: job_config_text(state)},
    }


def _secret_env(k8s: KubernetesDeployment, names: list[str]) -> list[dict]:
    """Each secret as an environment variable read from the Kubernetes Secret by key: names only."""
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": k8s.secret_name, "key": name}}}
            for name in names]


def spark_application(state: DesiredState) -> dict:
    """The SparkApplication that runs the mirroring job in cluster mode, restarted with a back-off."""
    k8s = _settings(state)
    spark = state.spark
    names = resource_names(state)
    job = spark_job_config(state)
    secrets = secret_names(job)

    def pod() -> dict:  # a fresh dict each time: shared ones would be written as YAML anchors
        return {"labels": _labels(state), "env": _secret_env(k8s, secrets)}

    # The operator resubmits an application whose spec changed, not one whose ConfigMap did: the
    # config's digest in the driver's annotations makes a new job config a new spec.
    digest = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]
    driver = {**pod(), "annotations": {CONFIG_DIGEST: digest},
              "cores": k8s.driver_cores, "memory": k8s.driver_memory,
              "serviceAccount": k8s.service_account,
              "configMaps": [{"name": names["configMap"], "path": CONFIG_MOUNT}]}
    executor = {**pod(), "instances": spark.executor_instances or 1, "cores": spark.executor_cores or 1,
                "memory": spark.executor_memory or "1g"}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": names["application"], "namespace": k8s.namespace, "labels": _labels(state)},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": k8s.image,
            "imagePullPolicy": k8s.image_pull_policy,
            "mainApplicationFile": f"local://{IMAGE_HOME}/mirror_job.py",
            "arguments": ["--config", f"{CONFIG_MOUNT}/{JOB_FILE}"],
            "sparkVersion": versions()["SPARK_VERSION"],
            "sparkConf": dict(spark.config),
            "restartPolicy": {
                "type": "Always",
                "onFailureRetryInterval": k8s.restart_backoff_seconds,
                "onSubmissionFailureRetryInterval": k8s.restart_backoff_seconds,
            },
            "driver": driver,
            "executor": executor,
        },
    }


def manifests(state: DesiredState) -> list[dict]:
    """The objects to apply, in order: the ConfigMap first, since the driver mounts it."""
    return [config_map(state), spark_application(state)]


def manifest_text(state: DesiredState) -> str:
    """``kubernetes.yaml``: the manifests as one YAML stream, for ``kubectl apply -f``."""
    header = (f"# Rendered by mm2spec from {state.source_file.rsplit('/', 1)[-1]} "
              f"(environment: {state.environment or 'base'}). Do not edit: change the DR spec and render again.\n"
              f"# Needs the Kubeflow Spark Operator ({API_VERSION}) and the Secret "
              f"{_settings(state).secret_name} in namespace {_settings(state).namespace}.\n")
    return header + yaml.dump_all(manifests(state), Dumper=_BlockDumper, sort_keys=False)


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (the job config in the ConfigMap) as readable ``|`` blocks."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_block)


def dockerfile(state: DesiredState) -> str:
    """The job's image: Spark's image (entrypoint the operator calls), Python 3.11, mm2spec, the jars.

    Spark's image runs Ubuntu 22.04, whose default Python is older than mm2spec needs; the job runs
    on a Python 3.11 virtualenv that PYSPARK_PYTHON names. The connector jars go where
    ``mm2spec.components`` looks for them (``MM2SPEC_CACHE``), so the job finds them as on a host.
    """
    pinned = versions()
    spark = pinned["SPARK_VERSION"]
    cache = f"{IMAGE_HOME}/cache"
    return f"""\
# The Spark mirroring job's image for {state.name}, used by {MANIFEST_FILE} (Kubeflow Spark Operator).
# Build context: a folder holding the mm2spec wheel (python -m build) and jars/ with Spark's Kafka
# connector jars ($MM2SPEC_CACHE/spark-kafka-{spark}/jars after scripts/setup):
#   docker build -t {_settings(state).image} .
FROM apache/spark:{spark}-scala2.13-java17-python3-ubuntu
USER root
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv \\
 && rm -rf /var/lib/apt/lists/*
COPY mm2spec-{__version__}-py3-none-any.whl /tmp/
RUN python3.11 -m venv {IMAGE_HOME}/venv \\
 && {IMAGE_HOME}/venv/bin/pip install --no-cache-dir '/tmp/mm2spec-{__version__}-py3-none-any.whl[spark]' \\
 && ln -s "$({IMAGE_HOME}/venv/bin/python -c 'from mm2spec.resources import spark_job_script; print(spark_job_script())')" \\
          {IMAGE_HOME}/mirror_job.py \\
 && rm /tmp/mm2spec-{__version__}-py3-none-any.whl
COPY jars/ {cache}/spark-kafka-{spark}/jars/
ENV MM2SPEC_CACHE={cache} \\
    PYSPARK_PYTHON={IMAGE_HOME}/venv/bin/python \\
    PYSPARK_DRIVER_PYTHON={IMAGE_HOME}/venv/bin/python
# Spark's image runs as user spark (uid 185).
USER 185
"""


def kubernetes_files(state: DesiredState) -> dict[str, str]:
    """The files ``render`` adds for a ``k8s://`` master; none otherwise."""
    if not on_kubernetes(state):
        return {}
    return {MANIFEST_FILE: manifest_text(state), DOCKERFILE: dockerfile(state)}


def spark_engine_files(state: DesiredState) -> dict[str, str]:
    """Engine spark's deployment (its ``EngineFacts.renderer``): the job's config and, with a
    ``k8s://`` master, the manifests and the job image's Dockerfile."""
    return {JOB_FILE: job_config_text(state), **kubernetes_files(state)}

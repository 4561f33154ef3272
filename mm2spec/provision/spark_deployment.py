"""The Spark mirroring deployment as a resource (engine ``spark``).

Inputs: ``path``, ``root`` and ``content``: the Spark job's config (``spark-mirror.json``, from
``mm2spec.render.spark_job_config``; MM2 key names, passwords only as ``${env:NAME}``). Replaced
when the path changes; rewritten in place when the content does (see ``files``). The job reads
the file when it starts, so a changed config takes effect at the job's next start.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from mm2spec.model import DesiredState
from mm2spec.provision.files import RenderedFileProvider, file_inputs
from mm2spec.render import spark_job_config

FILE_NAME = "spark-mirror.json"


def spark_deployment_inputs(state: DesiredState, out_dir: str, root: str) -> dict[str, Any]:
    content = json.dumps(spark_job_config(state), indent=2) + "\n"
    return file_inputs(f"{out_dir.rstrip('/')}/{FILE_NAME}", root, content)


class SparkDeploymentProvider(RenderedFileProvider):
    """Writes the Spark job config; holds nothing."""


PROVIDER = SparkDeploymentProvider()


class SparkDeployment(Resource, module="spark", name="Deployment"):
    """The Spark mirroring deployment (type ``pulumi-python:dynamic/spark:Deployment``)."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(PROVIDER, name, props, opts)

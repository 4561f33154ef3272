"""The Kafka Connect worker's ``connect-distributed.properties`` as a resource (engine ``connect``).

Inputs: ``path``, ``root``, ``content`` (``mm2spec.render.worker_properties``; passwords appear only
as ``${env:NAME}`` references). Replaced when the path changes; rewritten in place when the content
does. See ``files`` for the shared behaviour. The stack writes the file; starting or restarting the
worker with it is the operator's (or ``mm2spec dev``'s) job.
"""

from __future__ import annotations

from typing import Any

from mm2spec.provision.base import ProvisionedResource, ResourceKind
from mm2spec.provision.files import RenderedFileProvider, file_inputs
from mm2spec.render import properties_text, worker_properties
from mm2spec.render.connect import WORKER_FILE
from mm2spec.spec.model import DesiredState


def worker_config_inputs(state: DesiredState, out_dir: str, root: str) -> dict[str, Any]:
    header = (f"Rendered by mm2spec (Pulumi) from the DR spec {state.name} (environment: {state.environment or 'base'}).\n"
              "Do not edit: change the spec and run pulumi up. Secrets are read from the environment (${env:NAME}).")
    return file_inputs(f"{out_dir.rstrip('/')}/{WORKER_FILE}", root, properties_text(worker_properties(state), header))


class WorkerConfigProvider(RenderedFileProvider):
    """Writes the worker config file; holds nothing."""


class WorkerConfig(ProvisionedResource, module="connect", name="WorkerConfig", provider=WorkerConfigProvider()):
    """The Connect worker config file (type ``pulumi-python:dynamic/connect:WorkerConfig``)."""


KIND = ResourceKind(
    "WorkerConfig", WorkerConfig, "The Connect worker's connect-distributed.properties file.",
    deployment_inputs=lambda state, _resource, settings: worker_config_inputs(state, settings.out_dir, settings.root),
    output="worker_config")
"""The worker config kind (``kinds.KINDS``); ``DisasterRecovery.worker_config`` is its ID."""

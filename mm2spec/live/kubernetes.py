"""The one place mm2spec talks to a Kubernetes API server: applying, reading and deleting the Spark
Operator manifests that ``mm2spec.render.kubernetes`` renders.

It drives ``kubectl`` rather than a client library: kubectl reads the user's kubeconfig with every
authentication plugin (cloud IAM, OIDC, exec) the way they already use it, and server-side apply
gives create-or-update with field ownership (``--field-manager=mm2spec``) in one call.

Nothing is applied before the cluster is known to serve the operator's API: a missing CRD is one
clear error naming the Kubeflow Spark Operator, never a ConfigMap left behind without its
SparkApplication. Manifests hold secret *names* only, so nothing here ever carries a secret.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from mm2spec.components import components
from mm2spec.errors import KubernetesError, SparkOperatorMissing

#: How long one kubectl call may take. Discovery, an apply or a delete answers in well under a
#: second on a healthy API server; a minute covers a loaded control plane and a slow auth plugin.
KUBECTL_TIMEOUT = 60.0
FIELD_MANAGER = "mm2spec"
OPERATOR_GROUP = "sparkoperator.k8s.io"
OPERATOR_RESOURCE = f"sparkapplications.{OPERATOR_GROUP}"
OPERATOR_HINT = ("install the Kubeflow Spark Operator (it provides SparkApplication "
                 f"{OPERATOR_GROUP}/v1beta2), e.g. helm install spark-operator "
                 "spark-operator/spark-operator --namespace spark-operator --create-namespace")


@dataclass(frozen=True)
class KubernetesCluster:
    """A cluster as kubectl reaches it: ``kubeconfig`` and ``context`` default to kubectl's own."""

    kubeconfig: str | None = None
    context: str | None = None

    def _kubectl(self, *args: str, stdin: str | None = None) -> str:
        command = [str(components().kubectl)]
        if self.kubeconfig:
            command += ["--kubeconfig", self.kubeconfig]
        if self.context:
            command += ["--context", self.context]
        command += list(args)
        try:
            done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise KubernetesError(f"kubectl {args[0]} did not answer within {KUBECTL_TIMEOUT:.0f}s: "
                                  "check that the API server in your kubeconfig is reachable") from None
        if done.returncode != 0:
            raise KubernetesError(f"kubectl {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def require_spark_operator(self) -> None:
        """SparkOperatorMissing unless the API server serves the operator's SparkApplication."""
        served = self._kubectl("api-resources", f"--api-group={OPERATOR_GROUP}", "-o", "name").split()
        if OPERATOR_RESOURCE not in served:
            raise SparkOperatorMissing(f"the cluster has no {OPERATOR_RESOURCE} resource: {OPERATOR_HINT}")

    def apply(self, manifests: list[dict], *, dry_run: bool = False) -> list[dict]:
        """Create or update the objects (server-side apply, in order); the objects as the server has them.

        ``dry_run`` asks the server to validate and default them (CRD schema included) without
        storing anything."""
        self.require_spark_operator()
        args = ["apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--force-conflicts",
                "-o", "json", "-f", "-"]
        if dry_run:
            args.append("--dry-run=server")
        return _items(json.loads(self._kubectl(*args, stdin=_as_list(manifests))))

    def get(self, manifest: dict) -> dict | None:
        """The object a manifest names as the server has it, None if it does not exist."""
        found = json.loads(self._kubectl("get", "--ignore-not-found", "-o", "json", "-f", "-",
                                         stdin=_as_list([manifest])) or '{"items": []}')
        items = _items(found)
        return items[0] if items else None

    def delete(self, manifests: list[dict]) -> None:
        """Delete the objects, the last applied first; objects already gone are fine."""
        self._kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-",
                      stdin=_as_list(list(reversed(manifests))))


def _as_list(manifests: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})


def _items(document: dict[str, Any]) -> list[dict]:
    return document.get("items", [document]) if document.get("kind") == "List" else [document]



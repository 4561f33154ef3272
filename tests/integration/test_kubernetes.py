"""The Spark job on Kubernetes against a real API server: kube-apiserver (built from Go modules by
scripts/install-kubernetes.sh) on etcd, with the Kubeflow Spark Operator's SparkApplication CRD
(tools/kubernetes/crds, vendored from the operator's release) installed.

The API server validates each manifest against the CRD's OpenAPI schema and stores it, as on any
cluster; nothing runs it: there is no kubelet, scheduler or operator here, so no driver pod ever
starts. What the tests prove is what mm2spec owns: the manifests are valid for the operator, and
the Pulumi resource creates, updates and deletes them.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from required import missing_component

from mm2spec.cli import main
from mm2spec.components import Components, components
from mm2spec.dev import process
from mm2spec.errors import ComponentMissing, ProvisionFailed, SparkOperatorMissing
from mm2spec.live.kubernetes import KubernetesCluster
from mm2spec.provision.spark_deployment import SparkDeploymentProvider, spark_deployment_inputs
from mm2spec.render.kubernetes import CONFIG_DIGEST
from mm2spec.runtime.process import tail, wait_until
from mm2spec.spec.load import load_desired_state

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "tools" / "kubernetes" / "crds" / "sparkoperator.k8s.io_sparkapplications.yaml"
CRD_NAME = "sparkapplications.sparkoperator.k8s.io"
EXAMPLE = ROOT / "examples" / "spark-on-kubernetes.dr.yaml"
#: How long etcd plus the API server may take to serve /readyz. Seconds on an idle machine (the
#: server installs its built-in API groups and RBAC roles first); minutes on two busy cores.
READY_TIMEOUT = 240.0
#: How long a CRD may take to become Established (served) or to be gone after its deletion.
CRD_TIMEOUT = 120.0
TOKEN = uuid.uuid4().hex


@dataclass(frozen=True)
class ApiServer:
    kubeconfig: Path

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(components().kubectl), "--kubeconfig", str(self.kubeconfig), *args],
                              input=stdin, capture_output=True, text=True, timeout=120)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def namespace(self) -> str:
        name = f"mm2spec-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        return name


def _serving_keys(folder: Path) -> tuple[Path, Path]:
    """The key pair the API server signs and checks service-account tokens with (it requires one)."""
    key, public = folder / "sa.key", folder / "sa.pub"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(public)], check=True, capture_output=True)
    return key, public


def _kubeconfig(folder: Path, port: int) -> Path:
    """Admin access by a static token (group system:masters); TLS unchecked: the server's
    self-signed certificate is made at start and this test reaches it on loopback only."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
              "clusters": [{"name": "test", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                        "insecure-skip-tls-verify": True}}],
              "users": [{"name": "admin", "user": {"token": TOKEN}}],
              "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}]}
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _start(folder: Path, found: Components) -> tuple[list, ApiServer]:
    client, peer, secure = process.pick_free_ports(3)
    etcd = process.start("etcd", [str(found.etcd()), "--name", "test", "--data-dir", str(folder / "etcd"),
                                  "--listen-client-urls", f"http://127.0.0.1:{client}",
                                  "--advertise-client-urls", f"http://127.0.0.1:{client}",
                                  "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                                  "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                                  "--initial-cluster", f"test=http://127.0.0.1:{peer}"],
                         token=str(folder / "etcd"), log=folder / "etcd.log", ports=(client, peer), tie_to_parent=True)
    key, public = _serving_keys(folder)
    (folder / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
    apiserver = process.start("kube-apiserver", [
        str(found.kube_apiserver), "--etcd-servers", f"http://127.0.0.1:{client}",
        "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(secure),
        "--cert-dir", str(folder / "certs"), "--token-auth-file", str(folder / "tokens.csv"),
        "--authorization-mode", "RBAC", "--service-cluster-ip-range", "10.96.0.0/24",
        # No kubernetes Service endpoints to keep: this server advertises loopback, which they refuse.
        "--endpoint-reconciler-type", "none",
        "--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", str(public),
        "--service-account-signing-key-file", str(key)],
        token=str(folder / "certs"), log=folder / "kube-apiserver.log", ports=(secure,), tie_to_parent=True)
    server = ApiServer(_kubeconfig(folder, secure))

    def ready() -> bool:
        for started in (etcd, apiserver):
            assert started.alive(), f"{started.name} exited: {tail(started.log)}"
        return server.kubectl("get", "--raw", "/readyz", check=False).returncode == 0

    wait_until(ready, READY_TIMEOUT, lambda: AssertionError(
        f"the API server was not ready in {READY_TIMEOUT:.0f}s: {tail(folder / 'kube-apiserver.log')}"))
    return [apiserver, etcd], server


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    try:
        found = components()
        found.kube_apiserver, found.etcd(), found.kubectl  # ComponentMissing names the fix
    except ComponentMissing as exc:
        missing_component(exc)
    started, server = _start(tmp_path_factory.mktemp("kube-apiserver"), found)
    yield server
    for running in started:
        process.stop(running)


def _crd_served(server: ApiServer) -> bool:
    return CRD_NAME in server.kubectl("api-resources", "--api-group=sparkoperator.k8s.io", "-o", "name").stdout.split()


@pytest.fixture
def spark_operator_crd(api_server: ApiServer) -> ApiServer:
    """The operator's CRD installed and served (server-side apply: it is too large for client-side)."""
    api_server.kubectl("apply", "--server-side", "-f", str(CRD))
    # Polled through discovery, as mm2spec checks it (kubectl wait fails on a CRD without status yet).
    wait_until(lambda: _crd_served(api_server), CRD_TIMEOUT, lambda: AssertionError("the CRD is not served"))
    return api_server


def render_for(namespace: str, out: Path, image: str = "registry.example.com/mm2spec-mirror:0.1.0") -> Path:
    """The Kubernetes example retargeted to ``namespace``, rendered into ``out``; the spec's path."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["spark"]["kubernetes"].update(namespace=namespace, image=image)
    path = out / "payments.dr.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(["render", str(path), "--out", str(out / "rendered")]) == 0
    return path


def test_rendered_manifest_passes_server_side_validation(spark_operator_crd, tmp_path):
    namespace = spark_operator_crd.namespace()
    render_for(namespace, tmp_path)
    manifest = tmp_path / "rendered" / "kubernetes.yaml"
    done = spark_operator_crd.kubectl("apply", "--dry-run=server", "-f", str(manifest))
    assert "sparkapplication.sparkoperator.k8s.io/payments-dr-mirror created (server dry run)" in done.stdout
    assert spark_operator_crd.kubectl("get", "sparkapplications", "-n", namespace, "-o", "name").stdout == ""

    # The server does check the operator's schema: a restart policy it does not know is refused.
    broken = manifest.read_text().replace("type: Always", "type: Sometimes")
    refused = spark_operator_crd.kubectl("apply", "--dry-run=server", "-f", "-", stdin=broken, check=False)
    assert refused.returncode != 0 and "spec.restartPolicy.type" in refused.stderr, refused.stderr


def _live(server: ApiServer, kind: str, namespace: str, name: str) -> dict | None:
    done = server.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
    return json.loads(done.stdout) if done.stdout.strip() else None


def test_pulumi_resource_creates_updates_and_deletes_the_application(spark_operator_crd, tmp_path, monkeypatch):
    server = spark_operator_crd
    namespace, moved_to = server.namespace(), server.namespace()
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig))
    provider = SparkDeploymentProvider()

    def inputs(ns: str, image: str) -> dict:
        state = load_desired_state(render_for(ns, tmp_path / ns / image.rsplit(":", 1)[-1], image), None)
        return spark_deployment_inputs(state, "out", str(tmp_path), run=True)

    first = inputs(namespace, "mirror:1")
    created = provider.create(first)
    app = _live(server, "sparkapplication", namespace, "payments-dr-mirror")
    assert app["spec"]["image"] == "mirror:1" and app["spec"]["restartPolicy"]["type"] == "Always"
    assert app["spec"]["driver"]["annotations"][CONFIG_DIGEST]  # the config digest the operator restarts on
    config = _live(server, "configmap", namespace, "payments-dr-mirror-config")
    assert json.loads(config["data"]["spark-mirror.json"]) == json.loads(first["content"])
    assert not (tmp_path / ".mm2spec").exists()  # `run` starts no local driver: the operator runs the job
    assert provider.diff("id", created.outs, first).changes is False

    # A new image is an update in place; the same objects, newer spec.
    second = inputs(namespace, "mirror:2")
    assert provider.diff("id", created.outs, second).changes is True
    updated = provider.update("id", created.outs, second).outs
    assert _live(server, "sparkapplication", namespace, "payments-dr-mirror")["spec"]["image"] == "mirror:2"

    # Another namespace: the objects move, none is left behind.
    third = inputs(moved_to, "mirror:2")
    moved = provider.update("id", updated, third).outs
    assert _live(server, "sparkapplication", moved_to, "payments-dr-mirror") is not None
    assert _live(server, "sparkapplication", namespace, "payments-dr-mirror") is None
    assert _live(server, "configmap", namespace, "payments-dr-mirror-config") is None

    provider.delete("id", moved)
    assert _live(server, "sparkapplication", moved_to, "payments-dr-mirror") is None
    assert _live(server, "configmap", moved_to, "payments-dr-mirror-config") is None
    assert not (tmp_path / "out" / "spark-mirror.json").exists()


def test_missing_operator_is_a_clear_error_and_applies_nothing(api_server, tmp_path, monkeypatch):
    api_server.kubectl("delete", "--ignore-not-found", "-f", str(CRD))
    wait_until(lambda: not _crd_served(api_server), CRD_TIMEOUT, lambda: AssertionError("the CRD is still served"))
    namespace = api_server.namespace()
    state = load_desired_state(render_for(namespace, tmp_path), None)
    cluster = KubernetesCluster(str(api_server.kubeconfig))
    with pytest.raises(SparkOperatorMissing, match="install the Kubeflow Spark Operator"):
        cluster.apply([])

    monkeypatch.setenv("KUBECONFIG", str(api_server.kubeconfig))
    with pytest.raises(ProvisionFailed, match="Kubeflow Spark Operator"):
        SparkDeploymentProvider().create(spark_deployment_inputs(state, "out", str(tmp_path)))
    assert _live(api_server, "configmap", namespace, "payments-dr-mirror-config") is None  # nothing half-applied
    assert not (tmp_path / "out").exists()

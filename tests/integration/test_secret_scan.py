"""Secret-leak scan, end to end: secrets enter everywhere they can, and come out nowhere.

Canaries:
- the secured dev pair's real passwords, given the way a user gives them: the mm2 password and the
  dr admin password as environment variables, the primary admin password as Pulumi secret config;
- ``CANARY`` written inline in a spec (refused), in a promote baseline, and in a connector's config
  on the live Connect worker (a connector someone configured by hand, with its password in clear).

Every command runs (validate, render, plan in its three formats, promote, ``pulumi preview``, ``up``
and ``stack export``), and every line they print and every file they write in the test's folder
(rendered files, the Pulumi program's output folder, the stack state) is searched for each canary:
0 hits. The Spark job's own log, job file and status file are scanned for the password it resolves
from the environment by test_spark_mirror.py::test_sasl_scram_with_the_password_from_the_environment.
"""

from __future__ import annotations

import contextlib
import io
import uuid
from pathlib import Path

import pytest
import yaml

from mm2spec.cli import main
from mm2spec.dev import ADMIN_PASSWORD, MM2_PASSWORD
from mm2spec.live.connect import ConnectClient
from mm2spec.render import connectors
from mm2spec.spec.load import load_desired_state
from specs import ADMIN_SECRET, MM2_SECRET, spec_for
from test_pulumi_stack import pulumi_bin, project_stack  # noqa: F401 - pulumi_bin is a fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

CANARY = "c4n4ry-Secr3t-zq"
"""Never a password of the dev clusters, so it can only come out of where the test put it."""
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="{CANARY}";'
SCANNED_FILE_LIMIT = 50 * 2**20
"""Files larger than this (the Pulumi CLI's plugin binaries in its home) hold no output of ours."""


class Transcript:
    """Everything the commands printed, and the files the test wrote itself (not scanned)."""

    def __init__(self):
        self.outputs: list[tuple[str, str]] = []
        self.inputs: set[Path] = set()

    def cli(self, *argv: str) -> int:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        self.outputs.append((f"mm2spec {' '.join(argv)}", out.getvalue() + err.getvalue()))
        assert "internal error" not in out.getvalue() + err.getvalue(), err.getvalue()
        return code

    def write_input(self, path: Path, data: dict) -> Path:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        self.inputs.add(path)
        return path

    def hits(self, secret: str, folder: Path) -> list[str]:
        found = [what for what, text in self.outputs if secret in text]
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and path not in self.inputs \
                    and path.stat().st_size < SCANNED_FILE_LIMIT and secret.encode() in path.read_bytes():
                found.append(str(path.relative_to(folder)))
        return found


def _baseline(spec: dict) -> dict:
    """A promote baseline with the canary under every key that holds a secret."""
    base = yaml.safe_load(yaml.safe_dump(spec))
    base["clusters"]["dr"]["config"] = {"ssl.truststore.password": CANARY, "ssl.key.password": CANARY,
                                        "sasl.jaas.config": JAAS, "ssl.keystore.key": f"-----BEGIN PRIVATE KEY-----\n{CANARY}\n"
                                        "-----END PRIVATE KEY-----",
                                        "sasl.oauthbearer.client.credentials.client.secret": CANARY}
    base["spark"] = {"config": {"spark.ssl.keyStorePassword": CANARY}}
    base["connect"]["restUrl"] = f"http://admin:{CANARY}@127.0.0.1:1"
    return base


def test_no_secret_in_any_output_or_file(secure_kafka_pair, connect_worker, pulumi_bin, tmp_path, monkeypatch):  # noqa: F811
    run = Transcript()
    run_id = uuid.uuid4().hex[:6]
    dr_admin_secret = f"IT_DR_ADMIN_{run_id.upper()}"
    monkeypatch.setenv(MM2_SECRET, MM2_PASSWORD)
    monkeypatch.setenv(ADMIN_SECRET, ADMIN_PASSWORD)
    monkeypatch.setenv(dr_admin_secret, ADMIN_PASSWORD)
    worker = connect_worker(cluster=secure_kafka_pair.dr, env={MM2_SECRET: MM2_PASSWORD})

    topic = f"scan-{run_id}"
    data = spec_for(secure_kafka_pair, [topic], [f"g-{run_id}"], secure=True, engine="connect", rest_url=worker.url,
                    manage_acls=True, name=f"scan-{run_id}", connect={"groupId": f"it-scan-{run_id}"})
    data["clusters"]["dr"]["security"]["admin"]["passwordSecret"] = dr_admin_secret
    data["environments"] = {"dev": {}, "prod": {}}
    spec = run.write_input(tmp_path / "spec.yaml", data)

    # A connector configured by hand on the live worker, its password in clear: plan shows the drift.
    connector = connectors(load_desired_state(spec, None))[0]
    live = {**connector["config"], "source.cluster.sasl.jaas.config": JAAS, "target.cluster.sasl.jaas.config": JAAS}
    ConnectClient(worker.url).put_connector_config(connector["name"], live)

    assert run.cli("validate", str(spec)) == 0
    assert run.cli("validate", str(spec), "--format", "json") == 0
    assert run.cli("render", str(spec), "--out", str(tmp_path / "rendered")) == 0
    for fmt in ("text", "markdown", "json"):
        assert run.cli("plan", str(spec), "--format", fmt) == 0
    plan_text = run.outputs[-3][1]
    assert connector["name"] in plan_text, "the hand-configured connector must show as drift"

    baseline = run.write_input(tmp_path / "baseline.yaml", _baseline(data))
    for fmt in ("text", "json"):
        assert run.cli("promote", str(spec), "--from", "dev", "--to", "prod", "--baseline", str(baseline),
                       "--format", fmt) in (0, 1)

    inline = yaml.safe_load(yaml.safe_dump(data))
    inline["clusters"]["dr"]["config"] = {"sasl.jaas.config": JAAS, "ssl.truststore.password": CANARY}
    inline["clusters"]["primary"]["security"]["password"] = {"nested": CANARY}
    inline_spec = run.write_input(tmp_path / "inline.yaml", inline)
    for argv in (["validate", str(inline_spec)], ["validate", str(inline_spec), "--format", "json"],
                 ["render", str(inline_spec), "--out", str(tmp_path / "refused")], ["plan", str(inline_spec)]):
        assert run.cli(*argv) == 1, f"an inline secret must be refused: {argv}"
    assert not (tmp_path / "refused").exists()

    _pulumi(run, tmp_path, spec, run_id)

    leaks = {name: run.hits(secret, tmp_path) for name, secret in
             (("canary", CANARY), ("mm2 password (env)", MM2_PASSWORD), ("admin password (env, Pulumi secret)", ADMIN_PASSWORD))}
    assert leaks == {name: [] for name in leaks}, leaks


def _pulumi(run: Transcript, tmp_path: Path, spec: Path, run_id: str) -> None:
    """preview, up and stack export of the project's program on ``spec``: the primary admin password
    as Pulumi secret config, the others from the environment."""
    stack = project_stack(tmp_path / "pulumi")
    stack.env.pop(ADMIN_SECRET, None)
    (stack.project / "spec.yaml").symlink_to(spec)
    stack.run("login")
    stack.run("stack", "init", f"scan{run_id}")
    stack.run("config", "set", "mm2spec:spec", "spec.yaml")
    stack.run("config", "set", "mm2spec:outDir", "out")
    stack.run("config", "set", "--secret", ADMIN_SECRET, ADMIN_PASSWORD)
    stack.run("preview", "--diff")
    stack.run("up", "--yes", "--diff")
    stack.run("stack", "export", "--file", str(stack.root / "export.json"))
    stack.run("stack", "export", "--show-secrets=false")
    assert (stack.root / "export.json").stat().st_size > 0
    run.outputs += [(f"pulumi #{i}", text) for i, text in enumerate(stack.transcript)]
    stack.run("destroy", "--yes")

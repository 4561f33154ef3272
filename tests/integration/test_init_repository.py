"""``mm2spec init``'s repository with a Pulumi CLI as a user runs it, on the dev clusters.

The repository is written by ``mm2spec init`` from flags (the pair's addresses, one topic) into a
temporary folder and used as it is: its ``Pulumi.yaml``, stack file and ``__main__.py``, no file of
this checkout, the CLI binary itself (not scripts/pulumi) with a local file backend. The project's
``.venv`` is this checkout's virtualenv (mm2spec installed with the pulumi extra), linked in where
a user's ``requirements.txt`` would have created one. preview shows the target topic to create,
``up`` creates it, a second preview has no changes, ``destroy`` deletes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from mm2spec.cli import main
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.spec.model import Cluster
from test_pulumi_stack import PROJECT_ROOT, pulumi_bin  # noqa: F401 - pulumi_bin is a fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_init_repository_previews_applies_and_destroys(pulumi_bin, kafka_pair, tmp_path, capsys):  # noqa: F811
    run_id = uuid.uuid4().hex[:6]
    src, dst, topic, name = f"src{run_id}", f"dst{run_id}", f"orders-{run_id}", f"init-{run_id}"
    KafkaAdmin(Cluster(src, (kafka_pair.primary.bootstrap,))).create_topic(topic, 2, -1, {})
    repo = tmp_path / "repo"
    assert main(["init", str(repo), "--name", name, "--source", f"{src}={kafka_pair.primary.bootstrap}",
                 "--target", f"{dst}={kafka_pair.dr.bootstrap}", "--topic", topic, "--environments", "dev,prod"]) == 0
    capsys.readouterr()
    (repo / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    env = {**os.environ, "PATH": f"{pulumi_bin}{os.pathsep}{os.environ.get('PATH', '')}",
           "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_HOME": str(tmp_path / "home"),
           "PULUMI_CONFIG_PASSPHRASE": "it-passphrase", "PULUMI_SKIP_UPDATE_CHECK": "1",
           "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "1", "NO_COLOR": "1"}
    env.pop("PULUMI_CONFIG_PASSPHRASE_FILE", None)
    (tmp_path / "state").mkdir()

    def pulumi(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(pulumi_bin / "pulumi"), *args, "--non-interactive"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}", pytrace=False)
        return done

    pulumi("login")
    pulumi("stack", "init", "dev")
    steps = json.loads(pulumi("preview", "--stack", "dev", "--json").stdout)["steps"]
    creates = {s["urn"].split("::")[-1] for s in steps if s["op"] == "create"}
    assert f"{dst}/{topic}" in creates, sorted(creates)

    pulumi("up", "--stack", "dev", "--yes", "--skip-preview")
    dr = KafkaAdmin(Cluster(dst, (kafka_pair.dr.bootstrap,)))
    assert dr.topics([topic], with_configs=False)[topic].partitions == 2
    pulumi("preview", "--stack", "dev", "--expect-no-changes")
    pulumi("destroy", "--stack", "dev", "--yes", "--skip-preview")
    assert dr.topics([topic], with_configs=False) == {}
    assert not list(Path(repo).glob(".mm2spec-render-*"))

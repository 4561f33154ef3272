"""Benchmark: `pulumi preview` / `pulumi up` of the mm2spec program for 1,000 target topics and their ACLs.

Starts its own secured dev pair (SASL/SCRAM + StandardAuthorizer) on free ports, creates 1,000
source topics on ``primary`` (each with a topic config to sync), and runs the project's Pulumi
program through scripts/pulumi in a temporary project (the repository's Pulumi.yaml and program
folder; its own file backend). Times, in this order: preview (everything to create), up (create),
a no-op ``up`` (with its preview, as ``pulumi up --yes`` runs by default, and with
``--skip-preview`` as CI runs it after a reviewed preview), a no-op ``preview
--expect-no-changes``, and destroy. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/pulumi_1000_topics.py [--topics 1000] [--acls regex|literal]
                                                      [--checkpoints]

``--acls regex`` (default) selects the topics with one regular expression, so their ACLs are one
resource per cluster (the names the regex matches); ``--acls literal`` lists every topic in the
spec, so each gets ACL resources of its own on both clusters (three resources per topic).
Without ``--checkpoints``, ``PULUMI_SKIP_CHECKPOINTS=true`` is set: with the file backend Pulumi
otherwise rewrites the whole state after every resource operation, which grows with the square of
the number of resources (see pulumi/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD  # noqa: E402
from benchmarks.specs import secured_spec  # noqa: E402
from mm2spec.live.kafka import KafkaAdmin  # noqa: E402
from mm2spec.spec.model import Cluster, Security  # noqa: E402

WRAPPER = ROOT / "scripts" / "pulumi"


def spec_for(state, topics: list[str]) -> dict:
    return secured_spec(state, topics, "bench-pulumi")


class Project:
    """A temporary Pulumi project running the repository's program, with its own backend."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.dir = root / "project"
        self.dir.mkdir()
        (root / "state").mkdir()
        (self.dir / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text().replace(
            "virtualenv: .venv", f"virtualenv: {ROOT / '.venv'}"))
        (self.dir / "pulumi").symlink_to(ROOT / "pulumi")
        self.env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{root / 'state'}", "PULUMI_HOME": str(root / "home"),
                    "PULUMI_CONFIG_PASSPHRASE": "bench", "NO_COLOR": "1", **env}

    def run(self, *args: str) -> tuple[float, subprocess.CompletedProcess]:
        start = time.perf_counter()
        done = subprocess.run([str(WRAPPER), *args, "--non-interactive"], cwd=self.dir, env=self.env,
                              capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"pulumi {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return elapsed, done


def summary(done: subprocess.CompletedProcess) -> str:
    lines = [line.strip() for line in done.stdout.splitlines()]
    start = next((i for i, line in enumerate(lines) if line == "Resources:"), None)
    if start is None:
        return ""
    picked = []
    for line in lines[start + 1:]:
        if not line or line.startswith("Duration"):
            break
        picked.append(line)
    return ", ".join(picked)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--acls", choices=["regex", "literal"], default="regex")
    parser.add_argument("--checkpoints", action="store_true", help="let Pulumi write the state after every step")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mm2spec-bench-pulumi-"))
    stack = DevStack(root / "dev", ports=DevPorts.free(), secure=True, tie_to_parent=True, echo=lambda _l: None)
    print(f"starting a secured dev pair in {root} ...", flush=True)
    state = stack.up(with_connect=False, timeout=180)
    try:
        names = [f"bench-{i:04d}" for i in range(args.topics)]
        admin = KafkaAdmin(Cluster("primary", (state.primary.bootstrap,),
                                   Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "BENCH_ADMIN_PASSWORD")),
                           secrets=lambda _n: ADMIN_PASSWORD, timeout=120)
        from confluent_kafka.admin import NewTopic
        futures = admin._client.create_topics(  # setup only: one CreateTopics for all
            [NewTopic(n, 3, -1, config={"retention.ms": "86400000"}) for n in names], operation_timeout=120)
        for future in futures.values():
            future.result()
        time.sleep(2)
        selectors = ["bench-[0-9]+"] if args.acls == "regex" else names
        env = {"BENCH_MM2_PASSWORD": MM2_PASSWORD, "BENCH_ADMIN_PASSWORD": ADMIN_PASSWORD}
        if not args.checkpoints:
            env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        project = Project(root, env)
        (project.dir / "spec.yaml").write_text(yaml.safe_dump(spec_for(state, selectors), sort_keys=False))
        project.run("login")
        project.run("stack", "init", "bench")
        project.run("config", "set", "mm2spec:spec", "spec.yaml")

        rows = []
        for label, command in (
            ("preview (all to create)", ("preview",)),
            ("up --skip-preview (create)", ("up", "--yes", "--skip-preview")),
            ("up, no changes (preview + update)", ("up", "--yes")),
            ("up --skip-preview, no changes", ("up", "--yes", "--skip-preview")),
            ("preview --expect-no-changes", ("preview", "--expect-no-changes")),
            ("destroy --skip-preview", ("destroy", "--yes", "--skip-preview")),
        ):
            elapsed, done = project.run(*command, "--suppress-outputs", "--suppress-progress")
            rows.append((label, elapsed, summary(done)))
            print(f"{label}: {elapsed:.1f} s  ({summary(done)})", flush=True)
            if command[0] == "up" and label.endswith("(create)"):
                exported = json.loads(project.run("stack", "export")[1].stdout)
                counts: dict[str, int] = {}
                for resource in exported["deployment"]["resources"]:
                    counts[resource["type"]] = counts.get(resource["type"], 0) + 1
                size = len(json.dumps(exported)) / 1e6
                print(f"  state: {', '.join(f'{n} {t}' for t, n in sorted(counts.items()))}; {size:.1f} MB", flush=True)

        print()
        print(f"| {args.topics} target topics, ACLs per {args.acls}, checkpoints "
              f"{'on' if args.checkpoints else 'skipped'} | seconds | resources |")
        print("|---|---|---|")
        for label, elapsed, what in rows:
            print(f"| `pulumi {label}` | {elapsed:.1f} | {what} |")
        print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    finally:
        stack.down()


if __name__ == "__main__":
    main()

"""Benchmark: the project's Pulumi program at 1,000 or 10,000 mirrored topics, every phase of a stack's life.

Starts its own secured dev pair (SASL/SCRAM + StandardAuthorizer) on free ports, creates the source
topics on ``primary`` (one partition each by default, through ``KafkaAdmin.create_topics``, which
chunks its CreateTopics: one request for 10,000 topics is refused with POLICY_VIOLATION), and runs
the repository's Pulumi program through scripts/pulumi in a temporary project (its own file
backend, ``PULUMI_SKIP_CHECKPOINTS=true`` unless ``--checkpoints``). Times, in this order:

1. ``preview`` (everything to create);
2. ``up --skip-preview`` (create);
3. ``up --yes``, no changes (its preview, then the update, as ``pulumi up --yes`` runs by default);
4. ``preview --expect-no-changes``, no changes;
5. ``refresh --preview-only --expect-no-changes``, no drift (every resource's ``read``: the CI drift check);
6. ``destroy --skip-preview``; should it fail, it is run once more (a destroy stopped half-way must
   finish when run again) and both rows are shown.

Prints a table with the seconds of each phase and the load average at its end; asserts nothing.

    .venv/bin/python benchmarks/pulumi_scale.py [--topics 1000|10000] [--acls regex|literal]
                                                [--partitions 1] [--checkpoints] [--providers plugin|dynamic]
                                                [--phases noop-up,preview,refresh,destroy] [--repeat N]
                                                [--broker-heap 2g]

``--acls regex`` (default) selects the topics with one regular expression, so their ACLs are one
resource per cluster and statement (the names the regex matches); ``--acls literal`` lists every
topic in the spec, so each gets ACL resources of its own on both clusters (three resources per topic).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.specs import secured_spec  # noqa: E402
from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD  # noqa: E402
from mm2spec.live.kafka import KafkaAdmin  # noqa: E402
from mm2spec.spec.model import Cluster, Security  # noqa: E402

WRAPPER = ROOT / "scripts" / "pulumi"


def spec_for(state, topics: list[str]) -> dict:
    return secured_spec(state, topics, "bench-pulumi")


class CpuSampler(threading.Thread):
    """The CPU seconds (user + system) of a process tree, by kind: ``engine`` (the pulumi CLI),
    ``program`` (the Python program), ``plugin`` (pulumi-resource-mm2spec or the dynamic-provider
    host), ``other``. Read from /proc every 0.2 s; a process's last sample counts (so up to 0.2 s
    of a process's end is missed)."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.seen, self.done = root, {}, threading.Event()

    @staticmethod
    def kind(cmdline: str) -> str:
        if "pulumi-resource-mm2spec" in cmdline or "mm2spec.provision.plugin" in cmdline or "pulumi.dynamic" in cmdline:
            return "plugin"
        if "pulumi-language-python" in cmdline:  # the language host and the program it runs
            return "program"
        if cmdline.split(" ")[0].endswith("/pulumi"):
            return "engine"
        return "other"

    def sample(self) -> None:
        ticks = os.sysconf("SC_CLK_TCK")
        parents: dict[int, int] = {}
        stats: dict[int, tuple[float, str]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/cmdline") as f:
                    cmdline = f.read()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            stats[int(entry)] = ((int(fields[11]) + int(fields[12])) / ticks, cmdline)
        for pid, (cpu, cmdline) in stats.items():
            ancestor = pid
            while ancestor not in (0, 1, self.root):
                ancestor = parents.get(ancestor, 0)
            if ancestor == self.root:  # a process that has exited (a zombie) has no cmdline: keep its kind
                kind = self.seen[pid][1] if pid in self.seen and not cmdline else self.kind(cmdline.replace("\0", " "))
                self.seen[pid] = (cpu, kind)

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.sample()

    def stop(self) -> None:
        self.done.set()
        self.join()

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for cpu, kind in self.seen.values():
            out[kind] = out.get(kind, 0.0) + cpu
        return out


class Project:
    """A temporary Pulumi project running the repository's program, with its own backend."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.dir = root / "project"
        self.dir.mkdir()
        (root / "state").mkdir()
        (self.dir / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text().replace(
            "virtualenv: .venv", f"virtualenv: {ROOT / '.venv'}").replace("path: .venv/bin", f"path: {ROOT / '.venv/bin'}"))
        (self.dir / "pulumi").symlink_to(ROOT / "pulumi")
        self.env = {**os.environ, "PULUMI_BACKEND_URL": f"file://{root / 'state'}", "PULUMI_HOME": str(root / "home"),
                    "PULUMI_CONFIG_PASSPHRASE": "bench", "NO_COLOR": "1",
                    "MM2SPEC_PULUMI_LOGS": "0", **env}  # as in the project's own PULUMI_HOME (scripts/pulumi)

    def attempt(self, *args: str) -> tuple[float, subprocess.CompletedProcess]:
        """Run ``pulumi ARGS``; the seconds it took and how it ended. ``self.cpu`` is then the CPU
        seconds of each kind of process it ran (see ``CpuSampler``)."""
        start = time.perf_counter()
        with subprocess.Popen([str(WRAPPER), *args, "--non-interactive"], cwd=self.dir, env=self.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
            sampler = CpuSampler(process.pid)
            sampler.start()
            stdout, stderr = process.communicate()
            sampler.stop()
        self.cpu = sampler.totals()
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        return time.perf_counter() - start, done

    def run(self, *args: str) -> tuple[float, subprocess.CompletedProcess]:
        """``attempt``, exiting with Pulumi's output if the command fails."""
        elapsed, done = self.attempt(*args)
        if done.returncode != 0:
            sys.exit(f"pulumi {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return elapsed, done


def summary(done: subprocess.CompletedProcess) -> str:
    """Pulumi's resource counts (``Resources:`` block), on one line."""
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


def failure(done: subprocess.CompletedProcess) -> str:
    """The first error line Pulumi printed, shortened for a table cell."""
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if "error:" in line:
            return line.strip()[:160].replace("|", "/")
    return f"exit {done.returncode}"


def state_size(project: Project) -> str:
    exported = json.loads(project.run("stack", "export")[1].stdout)
    counts: dict[str, int] = {}
    for resource in exported["deployment"]["resources"]:
        counts[resource["type"]] = counts.get(resource["type"], 0) + 1
    return f"{', '.join(f'{n} {t}' for t, n in sorted(counts.items()))}; {len(json.dumps(exported)) / 1e6:.1f} MB"


PHASES = (
    ("preview (all to create)", ("preview",)),
    ("up --skip-preview (create)", ("up", "--yes", "--skip-preview")),
    ("up --yes, no changes (preview + update)", ("up", "--yes")),
    ("preview --expect-no-changes", ("preview", "--expect-no-changes")),
    ("refresh --preview-only --expect-no-changes", ("refresh", "--preview-only", "--expect-no-changes")),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=1000, help="source topics to mirror (1000, 10000)")
    parser.add_argument("--acls", choices=["regex", "literal"], default="regex")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of each source topic")
    parser.add_argument("--checkpoints", action="store_true", help="let Pulumi write the state after every step")
    parser.add_argument("--phases", default="all",
                        help="comma-separated phases to time after the create: noop-up, preview, refresh, destroy "
                             "(default all; the first preview and the create always run)")
    parser.add_argument("--broker-heap", default="2g",
                        help="the most heap each dev broker may take (default 2g: 10,000 topics and 60,000 ACL "
                             "bindings fill the dev pair's default 1g)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the no-op preview and the refresh this many times each, and print their medians "
                             "(a single run's time varies by a fifth on a two-core machine)")
    parser.add_argument("--providers", choices=["plugin", "dynamic"], default="plugin",
                        help="the provider plugin pulumi-resource-mm2spec (default) or the dynamic providers "
                             "(stack config mm2spec:plugin false)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be 1 or more")
    root = Path(tempfile.mkdtemp(prefix="mm2spec-bench-pulumi-"))
    stack = DevStack(root / "dev", ports=DevPorts.free(), secure=True, tie_to_parent=True, echo=lambda _l: None,
                     broker_heap=args.broker_heap)
    print(f"starting a secured dev pair in {root} ...", flush=True)
    state = stack.up(with_connect=False, timeout=180)
    try:
        from confluent_kafka.admin import NewTopic

        names = [f"bench-{i:05d}" for i in range(args.topics)]
        admin = KafkaAdmin(Cluster("primary", (state.primary.bootstrap,),
                                   Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "BENCH_ADMIN_PASSWORD")),
                           secrets=lambda _n: ADMIN_PASSWORD, timeout=120)
        start = time.perf_counter()
        admin.create_topics([NewTopic(n, args.partitions, -1, config={"retention.ms": "86400000"}) for n in names])
        print(f"setup: {args.topics} source topics x {args.partitions} partition(s) in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        selectors = ["bench-[0-9]+"] if args.acls == "regex" else names
        env = {"BENCH_MM2_PASSWORD": MM2_PASSWORD, "BENCH_ADMIN_PASSWORD": ADMIN_PASSWORD}
        if not args.checkpoints:
            env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        project = Project(root, env)
        (project.dir / "spec.yaml").write_text(yaml.safe_dump(spec_for(state, selectors), sort_keys=False))
        project.run("login")
        project.run("stack", "init", "bench")
        project.run("config", "set", "mm2spec:spec", "spec.yaml")
        project.run("config", "set", "mm2spec:plugin", "true" if args.providers == "plugin" else "false")

        rows: list[tuple[str, str, str, float]] = []

        def phase(label: str, command: tuple[str, ...], must_pass: bool = True) -> bool:
            elapsed, done = (project.run if must_pass else project.attempt)(*command, "--suppress-outputs",
                                                                             "--suppress-progress")
            what = summary(done) if done.returncode == 0 else f"failed: {failure(done)}"
            load = os.getloadavg()[0]
            cpu = " / ".join(f"{project.cpu.get(k, 0.0):.1f}" for k in ("engine", "program", "plugin"))
            rows.append((label, f"{elapsed:.1f}", what, load, cpu))
            print(f"{label}: {elapsed:.1f} s, load {load:.1f}, CPU s engine / program / providers {cpu} ({what})",
                  flush=True)
            return done.returncode == 0

        wanted = set(args.phases.split(",")) if args.phases != "all" else {"noop-up", "preview", "refresh", "destroy"}
        for (label, command), key in zip(PHASES, ("", "", "noop-up", "preview", "refresh")):
            if key and key not in wanted:
                continue
            runs = args.repeat if key in ("preview", "refresh") else 1
            for run in range(1, runs + 1):
                phase(label if runs == 1 else f"{label}, run {run} of {runs}", command)
            if runs > 1:
                times = sorted(float(row[1]) for row in rows[-runs:])
                print(f"{label}: median {statistics.median(times):.1f} s of {runs} runs "
                      f"({' / '.join(f'{t:.1f}' for t in times)})", flush=True)
            if label.endswith("(create)"):
                print(f"  state: {state_size(project)}", flush=True)
        if "destroy" in wanted and not phase("destroy --skip-preview", ("destroy", "--yes", "--skip-preview"),
                                             must_pass=False):
            phase("destroy --skip-preview, run again", ("destroy", "--yes", "--skip-preview"), must_pass=False)

        print()
        print(f"| {args.topics} source topics, ACLs per {args.acls}, {args.providers} providers, checkpoints "
              f"{'on' if args.checkpoints else 'skipped'} | seconds | CPU s: engine / program / providers "
              "| load average | resources |")
        print("|---|---|---|---|---|")
        for label, elapsed, what, load, cpu in rows:
            print(f"| `pulumi {label}` | {elapsed} | {cpu} | {load:.1f} | {what} |")
        print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    finally:
        stack.down()


if __name__ == "__main__":
    main()

"""The fault matrix: what the mirror and the provisioning lose when things go wrong. Prints tables.

    .venv/bin/python benchmarks/fault_matrix.py [--kills 20] [--cut-seconds 30] [--rate 1000]
                                               [--cases kills,restarts,cuts,pulumi] [--modes alo,eos]
                                               [--pulumi-topics 200]

Mirror rows (``tests.kit.faults``; the fast subset is tests/integration/test_faults.py): the
Spark job mirrors one 4-partition topic from ``primary`` to ``dr`` through Toxiproxy proxies while
a producer writes ``--rate`` records/s straight to primary (idempotent, acks=all, keys =
partition:sequence, values derived from the keys) and a ledger reads dr (read_committed for
exactly-once). Faults: kill -9 of the driver's process group ``--kills`` times at random points
(then an immediate restart from the checkpoint), each broker stopped and started again, the link
between the mirror and each cluster cut for ``--cut-seconds`` (Toxiproxy disables the proxy: open
connections closed, new ones refused). lost = records primary acknowledged that never reached dr;
recovery = seconds from the fault's end (the kill, the broker ready, the link back) until dr held
every record acknowledged by then; restarts = failed queries the job restarted by itself.

Pulumi rows: ``pulumi up`` of the project's program (secured dev pair, ``--pulumi-topics`` target
topics plus ACLs) killed -9 when half of the topics exist, with Pulumi's checkpoints on (the
default) and off (``PULUMI_SKIP_CHECKPOINTS=true``, the advice for large stacks). Only the
``pulumi`` process is killed, as a runner's timeout would; its plugins are counted, then stopped.
Then the recovery a user would run: ``up`` again; on "the stack is currently locked", ``pulumi
cancel`` and ``up``. Judged: pending operations left in the state, duplicate resources, topics on
dr the state does not know (orphaned), ``preview --expect-no-changes``, and what ``destroy`` leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.pulumi_scale import WRAPPER, Project  # noqa: E402
from benchmarks.specs import secured_spec  # noqa: E402
from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD  # noqa: E402
from tests.kit.faults import FaultRun, FaultRunResult, cut_link, kill_driver, restart_broker  # noqa: E402
from tests.kit.toxiproxy import ProxiedPair  # noqa: E402

CLUSTERS = ("primary", "dr")
#: Dev clusters start in seconds on an idle machine, minutes on a busy one.
CLUSTER_START_TIMEOUT_S = 300.0
#: One pulumi command of a few hundred resources: about a minute here; generous for a busy machine.
PULUMI_TIMEOUT_S = 900.0
PULUMI_TOPIC_PREFIX = "fm-"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------- mirror


MIRROR_HEADER = (f"{'fault':<28} {'delivery':<14} {'n':>3} {'acked':>9} {'lost':>5} {'dups':>7} {'altered':>7} "
                 f"{'recovery s (median / max)':>26} {'restarts':>8}")


def mirror_row(result: FaultRunResult) -> str:
    recovery = sorted(result.recovery_s)
    figures = f"{recovery[len(recovery) // 2]:.1f} / {recovery[-1]:.1f}" if recovery else "-"
    return (f"{result.case:<28} {result.delivery:<14} {result.faults:>3} {result.acknowledged:>9,} {result.lost:>5,} "
            f"{result.duplicates:>7,} {result.altered:>7,} {figures:>26} {result.job_restarts:>8}")


def mirror_cases(args, work: Path) -> None:
    pair = ProxiedPair.on_free_ports(work / "pair", tie_to_parent=True).up(CLUSTER_START_TIMEOUT_S)
    rng = random.Random(args.seed)
    print(MIRROR_HEADER, flush=True)
    try:
        for mode in args.modes:
            exactly_once = mode == "eos"

            def drill(name: str) -> FaultRun:
                return FaultRun(pair, work, f"{name}-{mode}", exactly_once=exactly_once, rate=args.rate)

            if "kills" in args.cases:
                with drill("kills") as running:
                    times = []
                    for n in range(args.kills):
                        times.append(kill_driver(running, rng))
                        log(f"{mode} kill {n + 1}/{args.kills}: caught up {times[-1]:.1f} s after")
                    print(mirror_row(running.finish("kill -9 driver", times)), flush=True)
            for case, fault in (("restarts", _restart), ("cuts", _cut(args.cut_seconds))):
                if case in args.cases:
                    for cluster in CLUSTERS:
                        with drill(f"{case}-{cluster}") as running:
                            label, seconds = fault(running, cluster)
                            print(mirror_row(running.finish(label, [seconds])), flush=True)
    finally:
        pair.down()


def _restart(running: FaultRun, cluster: str) -> tuple[str, float]:
    return f"{cluster} broker restart", restart_broker(running, cluster)


def _cut(seconds: float):
    def cut(running: FaultRun, cluster: str) -> tuple[str, float]:
        return f"{seconds:.0f} s cut mirror<->{cluster}", cut_link(running, cluster, seconds)
    return cut


# ------------------------------------------------------------------------------------- pulumi


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, stack = [], list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, []))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class PulumiRun:
    """The project's program on a secured dev pair, in a throwaway project with its own backend."""

    def __init__(self, work: Path, topics: int, skip_checkpoints: bool):
        self.work, self.topics = work, [f"{PULUMI_TOPIC_PREFIX}{i:04d}" for i in range(topics)]
        work.mkdir(parents=True, exist_ok=True)
        self.stack = DevStack(work / "dev", ports=DevPorts.free(), secure=True, tie_to_parent=True,
                              echo=lambda _line: None)
        self.state = self.stack.up(with_connect=False, timeout=CLUSTER_START_TIMEOUT_S)
        env = {"BENCH_MM2_PASSWORD": MM2_PASSWORD, "BENCH_ADMIN_PASSWORD": ADMIN_PASSWORD}
        if skip_checkpoints:
            env["PULUMI_SKIP_CHECKPOINTS"] = "true"
        self.project = Project(work, env)

    def prepare(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self.state.client_config("primary"))
        for future in admin.create_topics([NewTopic(t, 1, -1) for t in self.topics]).values():
            future.result(120)
        spec = secured_spec(self.state, [f"{PULUMI_TOPIC_PREFIX}[0-9]+"], "fault-matrix")
        (self.project.dir / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        for command in (("login",), ("stack", "init", "fm"), ("config", "set", "mm2spec:spec", "spec.yaml")):
            self.pulumi(*command, check=True)

    def pulumi(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        done = subprocess.run([str(WRAPPER), *args, "--non-interactive"], cwd=self.project.dir, env=self.project.env,
                              capture_output=True, text=True, timeout=PULUMI_TIMEOUT_S)
        if check and done.returncode != 0:
            raise RuntimeError(f"pulumi {' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return done

    def dr_topics(self) -> set[str]:
        from confluent_kafka.admin import AdminClient

        names = AdminClient(self.state.client_config("dr")).list_topics(timeout=30).topics
        return {n for n in names if n.startswith(PULUMI_TOPIC_PREFIX)}

    def up_killed_half_way(self) -> tuple[int, int]:
        """``pulumi up`` killed -9 once half the topics exist on dr: (topics then, plugins that outlived it)."""
        log_file = self.work / "killed-up.log"
        with open(log_file, "w") as out:
            cli = subprocess.Popen([str(WRAPPER), "up", "--yes", "--skip-preview", "--non-interactive"],
                                   cwd=self.project.dir, env=self.project.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + PULUMI_TIMEOUT_S
        while len(self.dr_topics()) < len(self.topics) // 2:
            if cli.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pulumi up ended before it was half-way; see {log_file}")
            time.sleep(0.2)
        plugins = _descendants(cli.pid)
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        created = len(self.dr_topics())
        survivors = [pid for pid in plugins if _alive(pid)]
        for pid in survivors:  # cleanup: they would otherwise linger, holding the backend's files open
            os.kill(pid, signal.SIGKILL)
        return created, len(survivors)

    def export(self) -> dict:
        return json.loads(self.pulumi("stack", "export", check=True).stdout)["deployment"]

    def close(self) -> None:
        self.stack.down()


def _first_error(done: subprocess.CompletedProcess) -> str:
    for line in (done.stdout + done.stderr).splitlines():
        if line.strip().startswith("error:"):
            return line.strip()[:110]
    return f"exit {done.returncode}"


def pulumi_case(work: Path, topics: int, skip_checkpoints: bool) -> dict:
    run = PulumiRun(work, topics, skip_checkpoints)
    try:
        run.prepare()
        created, plugins_left = run.up_killed_half_way()
        after_kill = run.export()
        first = retry = run.pulumi("up", "--yes", "--skip-preview")
        steps = ["up"]
        if retry.returncode != 0 and "locked" in retry.stdout + retry.stderr:
            run.pulumi("cancel", "--yes", check=True)
            retry = run.pulumi("up", "--yes", "--skip-preview")
            steps += ["cancel", "up"]
        final = run.export()
        urns = [r["urn"] for r in final.get("resources", [])]
        managed = {r["outputs"]["name"] for r in final.get("resources", [])
                   if r["type"].endswith("kafka:Topic") and r.get("outputs", {}).get("cluster") == "dr"}
        on_dr = run.dr_topics()
        adopted = sum(1 for r in final.get("resources", []) if (r.get("outputs") or {}).get("adopted"))
        noop = run.pulumi("preview", "--expect-no-changes")
        run.pulumi("destroy", "--yes", "--skip-preview", check=True)
        return {
            "checkpoints": "skipped" if skip_checkpoints else "on", "topics": topics, "created_at_kill": created,
            "plugins_left": plugins_left, "state_after_kill": len(after_kill.get("resources", [])),
            "pending_after_kill": len(after_kill.get("pending_operations") or []),
            "first_retry": "ok" if first.returncode == 0 else _first_error(first),
            "recovery": " -> ".join(steps), "converged": retry.returncode == 0 and noop.returncode == 0,
            "pending_after": len(final.get("pending_operations") or []), "duplicate_urns": len(urns) - len(set(urns)),
            "orphaned_on_dr": len(on_dr - managed), "adopted": adopted, "left_by_destroy": len(run.dr_topics()),
        }
    finally:
        run.close()


def print_pulumi(rows: list[dict]) -> None:
    print()
    print(f"{'checkpoints':<12} {'topics':>6} {'at kill':>7} {'plugins left':>12} {'state/pending after kill':>24} "
          f"{'recovery':<18} {'converged':>9} {'pending':>7} {'dup URNs':>8} {'orphaned':>8} {'adopted':>7} "
          f"{'left by destroy':>15}")
    for r in rows:
        print(f"{r['checkpoints']:<12} {r['topics']:>6} {r['created_at_kill']:>7} {r['plugins_left']:>12} "
              f"{r['state_after_kill']:>14} / {r['pending_after_kill']:<7} {r['recovery']:<18} "
              f"{'yes' if r['converged'] else 'NO':>9} {r['pending_after']:>7} {r['duplicate_urns']:>8} "
              f"{r['orphaned_on_dr']:>8} {r['adopted']:>7} {r['left_by_destroy']:>15}")
    for r in rows:
        print(f"checkpoints {r['checkpoints']}: the first `up` after the kill: {r['first_retry']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cut-seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="records/s of the live producer")
    parser.add_argument("--cases", default="kills,restarts,cuts,pulumi")
    parser.add_argument("--pulumi-topics", type=int, default=200)
    parser.add_argument("--modes", default="alo,eos", help="delivery modes of the mirror rows: alo, eos")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    args.cases = set(args.cases.split(","))
    args.modes = args.modes.split(",")
    work = Path(tempfile.mkdtemp(prefix="mm2spec-faults-"))
    log(f"working in {work}; load average {os.getloadavg()[0]:.1f}")
    if args.cases & {"kills", "restarts", "cuts"}:
        mirror_cases(args, work)
    if "pulumi" in args.cases:
        rows = [pulumi_case(work / f"pulumi-{mode}", args.pulumi_topics, mode == "skip") for mode in ("on", "skip")]
        print_pulumi(rows)
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

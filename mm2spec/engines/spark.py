"""The Spark engine: the PySpark mirroring job, one driver on this machine for every flow of the
spec (``mm2spec.runtime.deployment``), its progress in a checkpoint folder per flow.

Starting from given offsets is checkpoint surgery: the job is stopped (never reset a checkpoint
under a running query), each flow's checkpoint folder is set aside, a start-offsets file is left
beside it (``mm2spec.mm2.spark_checkpoint``), and with exactly-once the writer's progress group
forgets those partitions; the job then starts those flows from the file.

Stopping some of the job's flows (one direction of an active-active pair, one source of a fan-in)
pauses them in the running job (``deployment.pause_flows``: its control loop stops their queries)
while the others mirror on; ``start_from`` resets a paused flow's checkpoint and resumes it, with no
job restart. With a ``k8s://`` master the control file is not where the driver runs: the job
stops and starts whole there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mm2spec.engines import (
    START_TIMEOUT_S,
    Action,
    DeploymentResource,
    DeploymentResources,
    Engine,
    EngineDescriptor,
    MetricsSource,
    Running,
    StartOffsets,
)
from mm2spec.errors import OperationRefused
from mm2spec.live.records import GroupOffsets
from mm2spec.mm2 import spark_eos
from mm2spec.mm2.engine_facts import engine_facts
from mm2spec.mm2.spark_checkpoint import start_offsets_file, start_offsets_json
from mm2spec.plan.diff import FieldChange
from mm2spec.plan.model import ResourceChange
from mm2spec.render import anchor_checkpoint, engine_files, spark_job_config
from mm2spec.runtime import deployment
from mm2spec.runtime.deployment import deployed_job, state_dir_of
from mm2spec.spec.model import DesiredState, MirrorFlow

LOCAL = "local"
"""The recap's name for this machine, where the Spark job's driver runs."""
DEPLOYMENT = "spark-mirror"
"""The Pulumi name of the job's deployment resource."""


class SparkEngine(Engine):
    """The Spark mirroring job of one spec, in its state folder."""

    facts = engine_facts("spark")
    emits_heartbeats = False
    start_hint = "start it: mm2spec mirror SPEC --env ENV --detach (or pulumi up with sparkRun)"
    shared_by_flows = True

    @classmethod
    def create(cls, spec: DesiredState, *, state_dir: str | None = None, connect_url: str | None = None,
               **options) -> "SparkEngine":
        return cls(spec, state_dir=state_dir, **options)

    def __init__(self, spec: DesiredState, *, state_dir: str | None = None, **options):
        super().__init__(spec, **options)
        self.state_dir = state_dir_of(spec.name, state_dir)
        """The job's state folder: job.json, driver.pid, driver.log, status.json."""

    def location(self, flow: MirrorFlow) -> str:
        return LOCAL

    def deployment_files(self) -> dict[str, str]:
        return engine_files(self.spec, self.name)

    def deployment_resources(self) -> DeploymentResources:
        return DeploymentResources((DeploymentResource("SparkDeployment", DEPLOYMENT),))

    def plan_changes(self, stopped_on_purpose: bool) -> tuple[list[ResourceChange], list[str]]:
        return deployment_changes(self.spec, deployed_job(self.spec.name, self.state_dir), stopped_on_purpose), []

    @property
    def pauses_flows(self) -> bool:
        """Whether a flow can stop alone (the control file is beside the driver); not on Kubernetes."""
        return not self.spec.spark.master.startswith("k8s://")

    def running(self, flow: MirrorFlow) -> Running:
        status = deployment.status(self.state_dir)
        seen = f"Spark job {status.state}" + (f" (pid {status.pid})" if status.pid else "")
        if status.running and self.pauses_flows and self._paused(flow.name, status):
            return Running(False, f"{seen}, {flow.name} paused")
        return Running(status.running, seen)

    @staticmethod
    def _paused(name: str, status: deployment.MirrorStatus) -> bool:
        """What the job says (a flow the control file names may not have stopped yet)."""
        return (status.flows.get(name) or {}).get("state") == "paused"

    def stop(self, flows: Sequence[MirrorFlow], *, check: bool, timeout: float) -> list[Action]:
        """Every flow of the spec (or the rest paused already), or any on Kubernetes: the job stops whole
        (SIGTERM, then SIGKILL after its grace period). Some: they pause in the running job, the others
        mirror on."""
        status = deployment.status(self.state_dir)
        seen = f"Spark job {status.state}" + (f" (pid {status.pid})" if status.pid else "")
        if not status.running:
            return [Action(LOCAL, f"already stopped ({seen})", changed=False)]
        names = {f.name for f in flows}
        everything = {f.name for f in self.spec.mirrors}
        paused = deployment.paused_flows(self.state_dir) if self.pauses_flows else set()
        if not self.pauses_flows or names | paused >= everything:
            if not check:
                self.progress("stopping the Spark job (SIGTERM, then SIGKILL after the grace period)")
                deployment.stop(self.state_dir)
            return [Action(LOCAL, f"{'would stop' if check else 'stopped'} the Spark job "
                           f"({', '.join(f.name for f in flows)})", diff=(("Spark job", "running", "stopped"),),
                           stops_every_flow=True)]
        todo = sorted(n for n in names if not self._paused(n, status))
        if not todo:
            return [Action(LOCAL, f"already paused in the Spark job ({', '.join(sorted(names))})", changed=False)]
        if not check:
            self.progress(f"pausing {', '.join(todo)} in the Spark job (the other flows mirror on)")
            deployment.pause_flows(self.state_dir, todo)
            deployment.wait_flows(self.state_dir, todo, "paused", timeout)
        return [Action(LOCAL, f"{'would pause' if check else 'paused'} {', '.join(todo)} in the Spark job "
                       f"(pid {status.pid}); its other flows mirror on",
                       diff=tuple((f"{n} query", "running", "paused") for n in todo))]

    def start_from(self, flows: Sequence[MirrorFlow], offsets: StartOffsets, *,
                   others_failed_over: Sequence[str] = (), timeout: float = START_TIMEOUT_S) -> list[Action]:
        job = spark_job_config(self.spec)
        root = checkpoint_root(job)
        diff = tuple((f"{f.name} {t}-{p}", "stopped", f"from {o}") for f in flows
                     for (t, p), o in sorted(offsets[f.name].items())[:20])
        if self.pauses_flows:
            return self._resume_from(flows, offsets, job, root, others_failed_over, timeout, diff)
        deployment.stop(self.state_dir)  # never reset a checkpoint under a running query
        for flow in flows:
            self._reset_flow(flow, str(job.get("name") or "mirror"), root, offsets[flow.name])
        if others_failed_over:
            return [Action(LOCAL, f"reset {', '.join(f.name for f in flows)} to start from the source's end; not "
                           f"started: {', '.join(others_failed_over)} still failed over and the Spark job runs every "
                           "flow (fail those back, or start it with mm2spec mirror)", diff=diff)]
        started = deployment.start(job, state_dir=self.state_dir, wait_running=timeout)
        return [Action(LOCAL, f"restarted the Spark job from the source's end (pid {started.pid})", diff=diff)]

    def _resume_from(self, flows, offsets, job, root, others_failed_over, timeout, diff) -> list[Action]:
        """Reset each flow's checkpoint while its query is paused (never under a running query), then
        resume it: in the running job, or by starting the job with the flows still failed over paused."""
        names = [f.name for f in flows]
        running = deployment.status(self.state_dir).running
        if running:
            todo = [n for n in names if not self._paused(n, deployment.status(self.state_dir))]
            if todo:
                deployment.pause_flows(self.state_dir, todo)
                deployment.wait_flows(self.state_dir, todo, "paused", timeout)
        else:
            deployment.pause_flows(self.state_dir, others_failed_over)
        for flow in flows:
            self._reset_flow(flow, str(job.get("name") or "mirror"), root, offsets[flow.name])
        deployment.resume_flows(self.state_dir, names)
        if running:
            deployment.wait_flows(self.state_dir, names, "running", timeout)
            return [Action(LOCAL, f"resumed {', '.join(names)} in the running Spark job from the source's end", diff=diff)]
        started = deployment.start(job, state_dir=self.state_dir, wait_running=timeout)
        still = sorted(set(others_failed_over))
        return [Action(LOCAL, f"started the Spark job from the source's end (pid {started.pid})"
                       + (f"; {', '.join(still)} stay paused (still failed over)" if still else ""), diff=diff)]

    def _reset_flow(self, flow: MirrorFlow, job_name: str, root: Path, start: Mapping[tuple[str, int], int]) -> None:
        """Set the flow's query aside and leave it a start position: the job reads the start-offsets
        file when the flow has no checkpoint of its own."""
        folder = root / flow.name
        if folder.exists():
            folder.rename(root / f"{flow.name}.before-failback-{int(self.clock())}")
        root.mkdir(parents=True, exist_ok=True)
        target = start_offsets_file(folder)
        target.with_suffix(".tmp").write_text(start_offsets_json(start))
        target.with_suffix(".tmp").replace(target)
        if flow.exactly_once:
            # The writer resumes each target partition from its progress group: forget the old
            # query's positions there, or the new query would skip to them.
            group = spark_eos.progress_group(job_name, flow.name)
            self.client(GroupOffsets, flow.target).delete_offsets(group, [(flow.target_topic(t), p) for t, p in start])

    def metrics_source(self) -> MetricsSource:
        return MetricsSource("status-file", str(self.state_dir / "status.json"))


def checkpoint_root(job: Mapping) -> Path:
    """The local folder holding every flow's checkpoint folder; OperationRefused when the
    checkpoints are not on this machine (this engine cannot move them aside)."""
    location = str((job.get("spark") or {}).get("checkpoint.location", ""))
    if "://" in location and not location.startswith("file://"):
        raise OperationRefused(f"the Spark checkpoint location {location} is not a local folder: move each failed-back "
                               "flow's checkpoint folder aside yourself, then re-run")
    return Path(location.removeprefix("file://")).resolve()


def deployment_changes(spec: DesiredState, deployed: dict | None, stopped_on_purpose: bool = False) -> list[ResourceChange]:
    """The job's part of a plan: the rendered config against ``deployed`` (the running job's
    ``job.json``, None when none runs)."""
    # A running job has its checkpoint location anchored at the project root (where mm2spec runs).
    desired = anchor_checkpoint(spark_job_config(spec), Path.cwd())
    if deployed is not None:
        deployed = anchor_checkpoint(deployed, Path.cwd())
    flat_new, flat_old = _flatten(desired), _flatten(deployed or {})
    if deployed is None and stopped_on_purpose:
        return [ResourceChange("spark", "spark-deployment", spec.name, "no-op",
                               detail="stopped by a failover (see the notes)")]
    if deployed is None:
        return [ResourceChange("spark", "spark-deployment", spec.name, "create",
                               detail=f"Spark mirroring job on {spec.spark.master} (not running)")]
    fields = tuple(FieldChange(k, flat_old.get(k), flat_new.get(k)) for k in sorted(set(flat_new) | set(flat_old))
                   if flat_old.get(k) != flat_new.get(k))
    return [ResourceChange("spark", "spark-deployment", spec.name, "update" if fields else "no-op", fields,
                           detail="the job restarts from its checkpoint" if fields else "")]


def _flatten(value, prefix: str = "") -> dict[str, object]:
    """Nested config as dotted keys; list items of named mappings are keyed by their name."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = [(v.get("name", i) if isinstance(v, dict) else i, v) for i, v in enumerate(value)]
    else:
        return {prefix: value}
    out: dict[str, object] = {}
    for key, item in items:
        out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


DESCRIPTOR = EngineDescriptor(SparkEngine.facts, SparkEngine, resource_kinds=("SparkDeployment",))
"""Engine spark, as ``engines.descriptor`` finds it."""

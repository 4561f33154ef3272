"""The Spark mirroring deployment as a resource (engine ``spark``).

Inputs: ``path``, ``root`` and ``content``: the Spark job's config (``spark-mirror.json``, from
``mm2spec.render.spark_job_config``; MM2 key names, passwords only as ``${env:NAME}``); ``run``
(stack config ``mm2spec:sparkRun``, default false): whether the stack also runs the job, through
``mm2spec.runtime.deployment.start``/``stop`` (the driver on this machine, executors where ``spark.master``
says); ``stateDir``: the job's folder (``job.json``, ``driver.pid``, ``driver.log``,
``status.json``), by default ``.mm2spec/spark/<job name>`` as for ``mm2spec mirror``. Outputs add
``file``, ``sha256`` and, when it runs, ``pid`` and ``configHash``.

Replaced when the path changes. In place: new content is written (and a running job restarted
with it: ``start`` replaces a job whose config differs), ``run`` starts or stops the job.
``destroy`` stops the job and removes the file. Secrets the job config names are handed to the
job's environment from the stack's secret config or this process's environment, never written.

On Kubernetes (``spark.master: k8s://...``) the input ``kubernetes`` holds the rendered manifests
(``mm2spec.render.kubernetes``: the ConfigMap with the job config and the Spark Operator's
SparkApplication) and the kubeconfig / context to reach the cluster (default: ``KUBECONFIG`` and
its current context). Create and update apply them through ``mm2spec.live.kubernetes`` (the
operator then runs and restarts the job; ``run`` starts nothing on this machine), objects an
update no longer renders (a new namespace or name) are deleted, and ``destroy`` deletes them.
Their Secret is the cluster's: only its name is in the manifests, never a value.

Healthy or failed: with ``run``, ``up`` returns once every flow's query runs *and* has finished a
micro-batch (``wait_progress`` on ``mm2spec.runtime.deployment.status``), within ``START_TIMEOUT``
(``MM2SPEC_SPARK_START_TIMEOUT`` seconds in the environment of ``pulumi up`` sets another); a job
that exits or records a failure fails the resource naming its log. A job that fails so may still
run (a driver retrying a cluster it cannot reach): through the plugin the resource is recorded all
the same, as a partial create or update (``FailedAfterStart``), so ``destroy`` stops the job and
the next ``up`` updates it; as a dynamic resource (nothing of a failed create can be recorded) the
job is stopped and the file removed before the error, which says so.

``pulumi refresh`` (``read_deployment``): the file's content as it is on disk; with ``run`` on this
machine, a job no longer running reads back as ``run: false`` (so the next preview shows the
update that starts it again); on Kubernetes, the manifests whose object is gone are left out (the
next ``up`` applies them again). A removed job config file reads back gone.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, UpdateResult

from mm2spec.errors import Mm2specError, ProvisionFailed
from mm2spec.provision import connection
from mm2spec.provision.base import FailedAfterStart, ProvisionedResource, ResourceKind, undone
from mm2spec.provision.files import RenderedFileProvider, file_inputs, read_file
from mm2spec.render import anchor_checkpoint, manifests, on_kubernetes
from mm2spec.render.spark import JOB_FILE, job_config_text
from mm2spec.render.kubernetes import secret_names
from mm2spec.spec.model import DesiredState

#: How long ``up`` waits for a started job's first micro-batch before calling the start failed.
#: A cold driver (JVM, Spark session, the Kafka connector's jars, then the first micro-batch) needs
#: tens of seconds, more on a loaded machine; three minutes leaves room for that. A job that cannot
#: start does not use it up: it exits, and the wait fails at once naming its log.
START_TIMEOUT = 180.0
#: The environment variable that sets another ``START_TIMEOUT`` (seconds), read by the provider.
START_TIMEOUT_ENV = "MM2SPEC_SPARK_START_TIMEOUT"
#: Between two looks at the job's status file while waiting for its first micro-batch.
PROGRESS_POLL_S = 1.0


def spark_deployment_inputs(state: DesiredState, out_dir: str, root: str, run: bool = False,
                            state_dir: str | None = None, kubeconfig: str | None = None,
                            context: str | None = None) -> dict[str, Any]:
    props = file_inputs(f"{out_dir.rstrip('/')}/{JOB_FILE}", root, job_config_text(state))
    props["run"] = run
    props["stateDir"] = state_dir or f".mm2spec/spark/{state.name}"
    props["kubernetes"] = None
    if on_kubernetes(state):
        props["kubernetes"] = {"manifests": manifests(state), "context": context,
                               "kubeconfig": kubeconfig or os.environ.get("KUBECONFIG")}
    return props


def _cluster(props: Mapping[str, Any]):
    """The Kubernetes cluster the recorded or new inputs name (None: the job does not run there)."""
    from mm2spec.live.kubernetes import KubernetesCluster

    k8s = props.get("kubernetes")
    return KubernetesCluster(k8s.get("kubeconfig"), k8s.get("context")) if k8s else None


def _manifests(props: Mapping[str, Any]) -> list[dict]:
    return list((props.get("kubernetes") or {}).get("manifests") or [])


def _identity(manifest: Mapping[str, Any]) -> tuple:
    metadata = manifest.get("metadata") or {}
    return manifest.get("apiVersion"), manifest.get("kind"), metadata.get("namespace"), metadata.get("name")


def _state_dir(props: Mapping[str, Any]) -> Path:
    folder = Path(props.get("stateDir") or f".mm2spec/spark/{json.loads(props['content']).get('name', 'mirror')}")
    return folder if folder.is_absolute() else Path(props["root"]) / folder


def job_environment(content: str) -> dict[str, str]:
    """The secrets the job config references (``${env:NAME}``), from stack config or environment."""
    names = secret_names(json.loads(content))
    return {name: value for name in names if (value := connection.current_secret(name)) is not None}


def job_progress(current) -> tuple[str, str]:
    """``(verdict, words)`` for a ``MirrorStatus``: ``running`` (every flow's query active with a
    micro-batch done), ``failed`` (the job exited or recorded a failure) or ``pending``."""
    if not current.running or current.state == "failed":
        return "failed", f"the mirroring job is {current.state if current.state != 'running' else 'gone'}"
    flows = current.flows or {}
    waiting = sorted(name for name, f in flows.items() if f.get("state") != "running" or not f.get("batches"))
    if current.state == "running" and flows and not waiting:
        return "running", f"{len(flows)} flow(s) running"
    errors = [f"{name}: {f['lastError'].splitlines()[0]}" for name, f in sorted(flows.items()) if f.get("lastError")]
    words = f"job {current.state}; " + (f"no micro-batch yet in {', '.join(waiting)}" if waiting else "no flow yet")
    return "pending", words + (f"; last errors: {'; '.join(errors)}" if errors else "")


def wait_progress(state_dir: Path, timeout: float, *, status: Callable[[Path], Any] | None = None,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> str:
    """Wait until every flow of the job in ``state_dir`` has finished a micro-batch; ProvisionFailed
    when the job fails or after ``timeout`` seconds, naming its log."""
    if status is None:
        from mm2spec.runtime.deployment import status
    deadline = clock() + timeout
    while True:
        verdict, words = job_progress(status(state_dir))
        if verdict == "running":
            return words
        if verdict == "failed":
            raise ProvisionFailed(f"{words}: see {Path(state_dir) / 'driver.log'}")
        if clock() >= deadline:
            raise ProvisionFailed(f"the Spark mirroring job made no progress in {timeout:.0f} s ({words}): "
                                  f"see {Path(state_dir) / 'driver.log'}")
        sleep(PROGRESS_POLL_S)


def start_timeout() -> float:
    """How long ``up`` waits for a started job's first micro-batch: ``START_TIMEOUT_ENV`` or ``START_TIMEOUT``."""
    value = os.environ.get(START_TIMEOUT_ENV, "").strip()
    if not value:
        return START_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ProvisionFailed(f"{START_TIMEOUT_ENV}={value!r}: give the seconds to wait for the Spark mirroring job's "
                              f"first micro-batch as a positive number (default {START_TIMEOUT:.0f})")
    return seconds


def read_deployment(props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The recorded outputs the live deployment changes: ``content`` (the file), ``run`` and ``pid``
    (a job that no longer runs here reads ``run: false``), the Kubernetes manifests still there;
    None when the job config file is gone."""
    read = read_file(props)
    if read is None:
        return None
    cluster = _cluster(props)
    if cluster is not None:
        kept = [m for m in _manifests(props) if cluster.get(m) is not None]
        read["kubernetes"] = {**props["kubernetes"], "manifests": kept}
    elif props.get("run"):
        from mm2spec.runtime import deployment as mirror

        current = mirror.status(_state_dir(props))
        if not current.running:
            read.update(run=False, pid=None)
    return read


class SparkDeploymentProvider(RenderedFileProvider):
    """Writes the job config and, with ``run``, runs the job; holds nothing."""

    input_keys = RenderedFileProvider.input_keys + ("run", "stateDir", "kubernetes")

    def diff_properties(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        # The manifests, not where the kubeconfig is: the same cluster from another machine is no change.
        changed = self.changed_inputs(olds, news, ("content", "run", "stateDir"))
        return DiffResult(changes=bool(changed) or _manifests(olds) != _manifests(news))

    @staticmethod
    def _apply(props: Mapping[str, Any]) -> dict[str, Any]:
        """Apply the manifests; the outputs naming what the cluster now holds."""
        cluster = _cluster(props)
        if cluster is None:
            return {}
        try:
            applied = cluster.apply(_manifests(props))
        except Mm2specError as exc:
            raise ProvisionFailed(f"the Spark Operator manifests were not applied: {exc}") from None
        return {"applied": [f"{m['kind']}/{m['metadata']['namespace']}/{m['metadata']['name']}" for m in applied]}

    @staticmethod
    def _delete_manifests(props: Mapping[str, Any], keep: list[dict] = ()) -> None:
        """Delete the objects ``props`` applied, except those ``keep`` still renders."""
        cluster = _cluster(props)
        kept = {_identity(m) for m in keep}
        gone = [m for m in _manifests(props) if _identity(m) not in kept]
        if cluster is None or not gone:
            return
        try:
            cluster.delete(gone)
        except Mm2specError as exc:
            raise ProvisionFailed(f"the Spark Operator manifests were not deleted: {exc}") from None

    def _start(self, props: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        from mm2spec.runtime import deployment as mirror

        # Relative to the project root, as for `mm2spec mirror` run there (not to this process's cwd).
        job = anchor_checkpoint(json.loads(props["content"]), props["root"])
        began = time.monotonic()
        try:
            deployment = mirror.start(job, state_dir=_state_dir(props),
                                      env=job_environment(props["content"]), wait_running=timeout)
        except Mm2specError as exc:
            raise ProvisionFailed(f"the Spark mirroring job did not start: {exc}") from None
        # Running is not enough: healthy is every query active with a micro-batch done.
        wait_progress(_state_dir(props), max(timeout - (time.monotonic() - began), PROGRESS_POLL_S))
        return {"pid": deployment.pid, "configHash": deployment.config_hash}

    @staticmethod
    def _stop(props: Mapping[str, Any]) -> bool:
        from mm2spec.runtime import deployment as mirror

        if not mirror.stop(_state_dir(props)):
            return False
        pulumi.log.info(f"stopped the Spark mirroring job in {_state_dir(props)}")
        return True

    def _failed_start(self, id_: str, outs: dict[str, Any], props: Mapping[str, Any], reason: str,
                      undo: Callable[[], bool] | None) -> FailedAfterStart:
        """A job that did not start or progress: recorded with what runs now (its driver may live on,
        retrying), or stopped by ``undo`` (True: it stopped a running job) where it cannot be recorded;
        ``undo`` None: the outputs recorded before find the job."""
        from mm2spec.runtime import deployment as mirror

        current = mirror.status(_state_dir(props))
        log = _state_dir(props) / "driver.log"
        kept = ("the job keeps running, recorded in the stack: `pulumi destroy` stops it, the next `pulumi up` "
                "tries again" if current.running else "the job is not running; the next `pulumi up` starts it again")

        def stop() -> str:
            if undo is None:
                return kept
            return f"the job was stopped; see {log}" if undo() else ""

        return FailedAfterStart(id_, {**outs, "pid": current.pid if current.running else None, "configHash": None},
                                reason, kept, stop)

    def _undo_create(self, outs: dict[str, Any]) -> bool:
        """Stop the job a failed create started and remove its file; whether a job was running."""
        stopped = self._stop(outs)
        RenderedFileProvider.delete(self, outs["file"], outs)
        return stopped

    def read_live(self, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return read_deployment(props)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return undone(self.apply_create(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return undone(self.apply_update(_id, olds, news))

    def apply_create(self, props: dict[str, Any]) -> CreateResult | FailedAfterStart:
        timeout = start_timeout()  # a wrong setting fails before anything is written or started
        applied = self._apply(props)  # first: a cluster that refuses leaves no file behind either
        outs = {**self.write(props), **applied}
        if props.get("run") and not _cluster(props):
            try:
                outs.update(self._start(props, timeout))
            except ProvisionFailed as exc:
                return self._failed_start(outs["file"], outs, props, str(exc), undo=lambda: self._undo_create(outs))
        return CreateResult(outs["file"], outs)

    def apply_update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult | FailedAfterStart:
        timeout = start_timeout()
        applied = self._apply(news)
        outs = {**self.write(news), **applied}
        self._delete_manifests(olds, keep=_manifests(news))
        ran_here, runs_here = olds.get("run") and not _cluster(olds), news.get("run") and not _cluster(news)
        if ran_here and (not runs_here or _state_dir(olds) != _state_dir(news)):
            self._stop(olds)
        if runs_here:
            try:
                outs.update(self._start(news, timeout))
            except ProvisionFailed as exc:
                # Unrecorded, the old outputs stay: they find the job only if it ran in the same folder.
                found = ran_here and _state_dir(olds) == _state_dir(news)
                return self._failed_start(_id, outs, news, str(exc), undo=None if found else (lambda: self._stop(news)))
        return UpdateResult(outs)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self._delete_manifests(props)
        if props.get("run") and not _cluster(props):
            self._stop(props)
        super().delete(_id, props)


class SparkDeployment(ProvisionedResource, module="spark", name="Deployment", provider=SparkDeploymentProvider()):
    """The Spark mirroring deployment (type ``pulumi-python:dynamic/spark:Deployment``)."""


KIND = ResourceKind(
    "SparkDeployment", SparkDeployment, "The Spark mirroring job's config (and, with run, the running job).",
    deployment_inputs=lambda state, _resource, settings: spark_deployment_inputs(
        state, settings.out_dir, settings.root, settings.spark_run),
    output="spark_deployment")
"""The Spark deployment kind (``kinds.KINDS``); ``DisasterRecovery.spark_deployment`` is its ID."""

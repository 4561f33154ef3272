"""Fault drills: the Spark mirror on a :class:`~tests.kit.toxiproxy.ProxiedPair` under a live
producer, while its driver is killed, a broker restarts or a network link is cut, or, on a Spark
standalone cluster (:mod:`mm2spec.dev.spark`), an executor or a whole worker is killed; afterwards
every record the source acknowledged is accounted for on the target (:mod:`tests.kit.ledger`).

The job is driven only through its public interface (a job config as ``render`` writes it and
:mod:`mm2spec.runtime.deployment`), so the drills hold for whichever writer the job has. The
fault-matrix benchmark prints their results; the fault tests assert on them.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.kit.ledger import Ledger, SequencedProducer, ledger_job
from tests.kit.toxiproxy import ProxiedPair
from mm2spec.dev.spark import StandaloneCluster
from mm2spec.errors import DevError
from mm2spec.runtime import deployment as mirror
from mm2spec.runtime.process import POLL_SECONDS

#: The job's JVM start and first batch on a busy 2-core machine: minutes, not seconds.
JOB_START_TIMEOUT_S = 600.0
#: How long the mirror may take to hold every record acknowledged when a fault ended. Generous:
#: a restarted job backs off before it retries a failed query, and the machine is shared.
RECOVERY_TIMEOUT_S = 600.0
#: A killed driver's process group is gone within a second; this bounds a stuck /proc.
KILL_WAIT_S = 30.0
#: Records the mirror must deliver before the next fault, so every fault hits a running mirror.
PROGRESS_RECORDS = 500
#: A broker's restart, like its first start, is a JVM start on a shared machine.
BROKER_READY_TIMEOUT_S = 300.0
PARTITIONS = 4
VALUE_SIZE = 200
FLOW = "primary-to-dr"
#: Real-time Mode batches in the drills: shorter than the default (60 s), so that an exactly-once
#: run's transactions, which last a batch, end often enough for short drills.
REALTIME_BATCH = "20 seconds"
#: A worker's JVM start and registration with the master again, on a busy machine.
WORKER_START_TIMEOUT_S = 300.0


@dataclass
class FaultRunResult:
    """One row of the fault matrix."""

    case: str
    """What was done, e.g. ``kill -9 driver``."""
    delivery: str
    """at-least-once | exactly-once (judged with read_committed)."""
    faults: int
    """How many times the fault was applied."""
    acknowledged: int = 0
    """Records the source broker acknowledged to the producer."""
    unique: int = 0
    """Distinct records on the target."""
    lost: int = 0
    """Acknowledged records never seen on the target."""
    duplicates: int = 0
    """Records seen again on the target (read_committed when judging exactly-once)."""
    altered: int = 0
    """Records on the target with a foreign key, on another partition or with other content."""
    recovery_s: list[float] = field(default_factory=list)
    """Per fault: seconds from the fault's end until the target held every record acknowledged then."""
    job_restarts: int = 0
    """Failed queries the running job restarted by itself (from its status file)."""
    rereads: int = 0
    """Records the live ledger read again that the target does not hold twice: the consumer's own
    re-reads (e.g. across the target broker's restart), not the mirror's."""
    duplicate_examples: list = field(default_factory=list)
    """The first records the target holds twice: (partition, sequence, target offset)."""
    source_duplicates: int = 0
    """Records the source itself holds twice (the test producer's own retries, e.g. across a broker
    restart): a faithful mirror copies those twice too, so the mirror's own repeats are
    ``duplicates - source_duplicates``."""


class FaultRun:
    """One ledger topic mirrored from ``pair``'s primary to dr through the proxies, under a
    producer writing ``rate`` records/s directly to primary; a ledger reads dr directly."""

    def __init__(self, pair: ProxiedPair, work: Path, name: str, *, exactly_once: bool, rate: float,
                 cluster: StandaloneCluster | None = None, mode: str = "microbatch"):
        """``cluster``: run the job on that standalone cluster (driver here, one 1-core executor on
        each worker) instead of ``local[2]``; ``mode``: ``microbatch`` or ``realtime``."""
        self.pair, self.work, self.name = pair, Path(work), name
        self.topic = f"{name}-{os.urandom(3).hex()}"
        self.exactly_once = exactly_once
        self.rate = rate
        self.cluster, self.mode = cluster, mode
        state = pair.state
        self.source, self.target = state.client_config("primary"), state.client_config("dr")
        self.job = ledger_job(name, pair.specs["primary"].proxied_bootstrap, pair.specs["dr"].proxied_bootstrap,
                              self.topic, str(self.work / name / "checkpoints"), exactly_once=exactly_once,
                              master=cluster.master_url if cluster else "local[2]")
        spark = self.job["spark"]
        slots = 2
        if cluster is not None:
            slots = len(cluster.worker_dirs)
            spark.update({"executor.instances": slots, "executor.cores": 1})
        if mode == "realtime":
            # Real-time Mode reads without a per-trigger cap, and each task holds a core for the
            # whole batch: no more tasks than the executors' cores.
            del spark["max.offsets.per.trigger"]
            spark.update({"mode": "realtime", "realtime.batch.duration": REALTIME_BATCH})
            self.job["flows"][0]["tasks.max"] = str(slots)
        elif mode != "microbatch":
            raise ValueError(f"mode is microbatch or realtime, not {mode!r}")
        self.producer = SequencedProducer(self.source, self.topic, PARTITIONS, rate=rate, value_size=VALUE_SIZE)
        isolation = "read_committed" if exactly_once else "read_uncommitted"
        self.ledger = Ledger(self.target, self.topic, PARTITIONS, isolation=isolation, value_size=VALUE_SIZE)
        self.deployment = None
        self.restarts_before = 0

    @property
    def delivery(self) -> str:
        return "exactly-once" if self.exactly_once else "at-least-once"

    def __enter__(self) -> FaultRun:
        from confluent_kafka.admin import AdminClient, NewTopic  # imported late: the CLI should start fast

        admin = AdminClient(self.source)
        for future in admin.create_topics([NewTopic(self.topic, PARTITIONS, -1)]).values():
            future.result(60)
        self.producer.start()
        self.start_job()
        self._wait(lambda: self._target_exists(), JOB_START_TIMEOUT_S, "the target topic")
        self.progress()
        return self

    def __exit__(self, *_exc) -> None:
        self.ledger.close()
        if self.deployment is not None:
            mirror.stop(self.deployment)
        if not self.producer.done():
            self.producer.stop()

    # ----------------------------------------------------------------- the job

    def start_job(self) -> None:
        self.deployment = mirror.start(self.job, state_dir=self.work / self.name / "state",
                                       wait_running=JOB_START_TIMEOUT_S)

    def kill_driver(self) -> None:
        """kill -9 of the driver's whole process group (its Python process, JVM and workers)."""
        self.restarts_before += self.job_restarts()
        os.killpg(self.deployment.pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S
        while mirror.status(self.deployment).running:
            if time.monotonic() > deadline:
                raise DevError(f"the driver (pid {self.deployment.pid}) outlived kill -9 by {KILL_WAIT_S:.0f}s")
            time.sleep(POLL_SECONDS)

    def job_restarts(self) -> int:
        flows = mirror.status(self.deployment).flows if self.deployment else {}
        return int((flows.get(FLOW) or {}).get("restarts") or 0)

    # ----------------------------------------------------------------- progress

    def progress(self, records: int = PROGRESS_RECORDS) -> None:
        """Wait until ``records`` more records have reached the target."""
        wanted = self.ledger.unique() + records
        self._wait(lambda: self.ledger.read(1.0) >= 0 and self.ledger.unique() >= wanted, RECOVERY_TIMEOUT_S,
                   f"{records} more records on the target")

    def recovery(self) -> float:
        """Seconds until the target holds every record acknowledged now (call it as a fault ends)."""
        began = time.monotonic()
        wanted = self.producer.snapshot()
        self._wait(lambda: self.ledger.read(1.0) >= 0 and self.ledger.missing(wanted) == 0, RECOVERY_TIMEOUT_S,
                   "the target to hold every record acknowledged when the fault ended")
        return time.monotonic() - began

    def finish(self, case: str, recovery_s: list[float]) -> FaultRunResult:
        """Stop the producer, let the target catch up, count; one fault per ``recovery_s`` entry."""
        self.producer.stop()
        live = self.ledger.catch_up(self.producer, RECOVERY_TIMEOUT_S, alive=lambda: self._running())
        # The count is of what the target holds, read afresh to its end: the live ledger's consumer
        # rode out the faults too, and a re-read of its own would pass for a mirrored duplicate.
        held = self._read_whole(self.target, "read_committed" if self.exactly_once else "read_uncommitted")
        on_source = self._read_whole(self.source, "read_uncommitted")
        return FaultRunResult(case, self.delivery, len(recovery_s), self.producer.acknowledged, held.unique,
                              held.lost, held.duplicates, held.corrupt, recovery_s,
                              self.restarts_before + self.job_restarts(),
                              rereads=max(0, live.duplicates - held.duplicates),
                              duplicate_examples=held.extra.get("examples", []), source_duplicates=on_source.duplicates)

    def _read_whole(self, conf: dict, isolation: str):
        ledger = Ledger(conf, self.topic, PARTITIONS, isolation=isolation, value_size=VALUE_SIZE)
        try:
            count = ledger.read_all(self.producer, RECOVERY_TIMEOUT_S)
            count.extra["examples"] = list(ledger.duplicate_examples)
            return count
        finally:
            ledger.close()

    def _running(self) -> bool:
        return mirror.status(self.deployment).running

    def _target_exists(self) -> bool:
        from confluent_kafka.admin import AdminClient

        topics = AdminClient(self.target).list_topics(timeout=10).topics
        return self.topic in topics and not topics[self.topic].error

    def _wait(self, check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if self.deployment is not None and not self._running():
                raise DevError(f"the mirroring job died while waiting for {what}; see {self.deployment.log_file}")
            if time.monotonic() > deadline:
                raise DevError(f"timed out after {timeout:.0f}s waiting for {what}; see {self.deployment.log_file}")
            time.sleep(POLL_SECONDS)


# ------------------------------------------------------------------------------------- faults
# Each applies one fault to a running drill and returns the seconds from the fault's end until the
# target held every record the source had acknowledged by then.


def kill_driver(drill: FaultRun, rng: random.Random, *, max_delay_s: float = 8.0) -> float:
    """Let the mirror deliver, wait a random 0..``max_delay_s`` s (mid-batch, between batches,
    while committing), kill -9 the driver and start the job again at once."""
    drill.progress()
    time.sleep(rng.uniform(0, max_delay_s))  # the random point of the kill, not a wait for a state
    drill.kill_driver()
    drill.start_job()
    return drill.recovery()


def restart_broker(drill: FaultRun, cluster: str) -> float:
    """Stop ``cluster``'s broker mid-stream and start it again (same storage)."""
    drill.progress()
    drill.pair.restart(cluster, BROKER_READY_TIMEOUT_S)
    return drill.recovery()


def cut_link(drill: FaultRun, cluster: str, seconds: float) -> float:
    """Cut the link between the mirror and ``cluster`` for ``seconds``: open connections closed,
    new ones refused."""
    drill.progress()
    drill.pair.cut(cluster)
    try:
        time.sleep(seconds)  # the length of the outage itself
    finally:
        drill.pair.heal(cluster)
    return drill.recovery()


# ------------------------------------------------------------------- faults on a Spark cluster
# These need a drill run with ``cluster=``; the driver's kill (``kill_driver``) works there too.


def kill_executor(drill: FaultRun, rng: random.Random, *, max_delay_s: float = 8.0) -> float:
    """Let the mirror deliver, wait a random 0..``max_delay_s`` s, kill -9 one executor JVM (of
    either worker). Nothing else is done: the worker reports it gone, the master starts another
    and the job must carry on by itself (a task retried or its query restarted)."""
    drill.progress()
    time.sleep(rng.uniform(0, max_delay_s))  # the random point of the kill, not a wait for a state
    executors = drill.cluster.executor_pids()
    if not executors:
        raise DevError(f"no executor is running on the cluster {drill.cluster.master_url}")
    os.kill(rng.choice(executors), signal.SIGKILL)
    return drill.recovery()


def kill_worker(drill: FaultRun, rng: random.Random, *, down_s: float = 10.0, max_delay_s: float = 8.0) -> float:
    """kill -9 of a whole worker (its JVM and its executors), started again ``down_s`` later with
    the same work dir and ports; recovery counts from its registration with the master."""
    drill.progress()
    time.sleep(rng.uniform(0, max_delay_s))  # the random point of the kill, not a wait for a state
    number = rng.randint(1, len(drill.cluster.worker_dirs))
    drill.cluster.kill_worker(number)
    time.sleep(down_s)  # the outage itself
    drill.cluster.restart_worker(number, WORKER_START_TIMEOUT_S)
    return drill.recovery()

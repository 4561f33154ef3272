"""A DR drill on the live setup: verify -> failover -> probe the groups on DR -> failback -> probe
them on the source -> verify, under synthetic load, measured every second.

The load goes to probe topics only (each flow's own, ``mm2spec-probe-<flow>``, which its mirror
always carries, provisioned with the internal topics and created by the drill if absent; names
given instead are checked against the flows' patterns before anything is written), from a rate-limited producer
that writes to whichever cluster is active, and probe consumer groups that consume and commit
there. A switch is planned, as an operator runs it: the groups stop, the writes pause (every
record sent acknowledged), the playbook runs, the drill counts the records the new active cluster
lacks (the RPO) and probes every translated group, then the writes and the groups resume there.

The result is data (``Drill.to_json``, ``schemas/drill-report.schema.json``); ``report``
renders it. Nothing here prints: phases and playbook tasks are reported to the caller's listeners.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from mm2spec.errors import Mm2specError, OperationRefused
from mm2spec.live.kafka import KafkaAdmin, SecretLookup, env_secrets
from mm2spec.live.records import GroupOffsets, RecordReader
from mm2spec.live.traffic import DRILL_HEADER, ProbeGroup, ProbeLoad, drill_seq
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.ops.drill.checks import Move, drill_records, duplicates, missing, probe_moves
from mm2spec.ops.modules.catalogue import CATALOGUE
from mm2spec.ops.modules.sections import TRANSLATIONS, totals
from mm2spec.ops.modules.topology import reverse_flows
from mm2spec.ops.playbooks.playbook import load_playbook
from mm2spec.ops.playbooks.report import RunReport
from mm2spec.ops.playbooks.runner import Listener, run
from mm2spec.spec.model import DesiredState, MirrorFlow

DRILL_FORMAT_VERSION = 1
SAMPLE_S = 1.0
"""How often the throughput and the lag are sampled."""
POLL_S = 1.0
"""How often a wait (probe topics mirrored, final catch-up) re-reads the clusters."""
VERIFY_RETRY_S = 5.0
"""Pause between two verify runs while DR is not healthy yet: a new probe topic is mirrored and
checkpointed only at the mirror's next refresh."""

PhaseListener = Callable[[str, dict], None]
"""Called with ("start", phase) and ("end", phase): the CLI's progress lines."""


@dataclass(frozen=True)
class DrillSettings:
    """What the drill writes and how long it waits."""

    rate: float = 100.0
    """Records per second the probe producer writes (to the active cluster)."""
    record_bytes: int = 200
    duration: float = 20.0
    """Seconds of load on each side: before the failover, between failover and failback, after it."""
    probe_topics: tuple[str, ...] = ()
    """Empty: each flow's own probe topic (``MirrorFlow.probe_topic``, ``mm2spec-probe-<flow>``)."""
    probe_groups: tuple[str, ...] = ()
    """Empty: each flow's own probe group (``MirrorFlow.probe_group``), for flows that checkpoint groups."""
    probe_partitions: int = 3
    settle_timeout: float = 300.0
    """Longest wait for the probe topics to be mirrored (the mirror's topic refresh) and, at the
    end, for every record to be on both clusters."""
    verify_timeout: float = 180.0
    """How long verify is retried until DR is healthy (checkpoints follow the mirror's interval)."""
    allow_existing_topics: bool = False
    """Write into probe topics that already hold records the drill did not write."""


@dataclass(frozen=True)
class DrillPlan:
    """Who takes part: one source and one target cluster, the flows, the probe names, and the
    spec's other flows on those clusters, which the drill leaves mirroring."""

    source: str
    target: str
    flows: tuple[MirrorFlow, ...]
    topics: dict[str, tuple[str, ...]]
    """Per flow: the probe topics it mirrors (source names)."""
    groups: dict[str, tuple[str, ...]]
    """Per probe group: the probe topics it consumes (those of the flows that checkpoint it)."""
    others: tuple[tuple[MirrorFlow, str], ...] = ()
    """The spec's other flows into or out of the source or the target, each with its ``relation``
    to the drilled pair (the other direction of an active-active pair, another source of a fan-in):
    they are not failed over and keep mirroring."""

    def names_on(self, alias: str) -> dict[str, str]:
        """Probe topic -> its name on ``alias`` (the replication policy's name on the target)."""
        names = {}
        for flow in self.flows:
            for topic in self.topics[flow.name]:
                names[topic] = flow.target_topic(topic) if alias == self.target else topic
        return names


ACTIVE_ACTIVE, FAN_IN, FAN_OUT, CHAIN = "active-active", "fan-in", "fan-out", "chain"
_WHY = {
    ACTIVE_ACTIVE: "a switch moves consumers one way; both directions at once would stop both mirrors and move the "
                   "groups both ways",
    FAN_IN: "each source fails over and back on its own while the others keep mirroring into the target",
    FAN_OUT: "a source fails over to one target at a time",
    CHAIN: "one cluster would be both the one failed over and the one failed over to",
    None: "a drill switches one pair of clusters",
}


def relation(pair: tuple[str, str], source: str, target: str) -> str | None:
    """How flows from ``pair[0]`` to ``pair[1]`` stand to a drill of ``source`` -> ``target``:
    ``active-active`` (the other direction), ``fan-in`` (another source into the target), ``fan-out``
    (the source into another cluster), ``chain`` (into the source, or out of the target elsewhere);
    None for the drilled pair itself or flows that touch neither cluster."""
    if pair == (target, source):
        return ACTIVE_ACTIVE
    if pair[1] == target and pair[0] != source:
        return FAN_IN
    if pair[0] == source and pair[1] != target:
        return FAN_OUT
    if pair[0] == target or pair[1] == source:
        return CHAIN
    return None


def _refuse_pairs(flows: list[MirrorFlow], pairs: list[tuple[str, str]]) -> None:
    """Flows over more than one pair of clusters: refused, naming the topology, why, and the flows
    that ``--limit flow=`` can pick one at a time."""
    found = {relation(b, *a) for a in pairs for b in pairs if a < b}
    kind = next((k for k in (ACTIVE_ACTIVE, FAN_IN, FAN_OUT, CHAIN) if k in found), None)
    shown = kind or "flows between different clusters"
    raise OperationRefused(
        f"a drill fails one source cluster over to one target and back, and the selected flows go "
        f"{', '.join(f'{s} -> {t}' for s, t in pairs)} ({shown}: {_WHY[kind]}). Drill one pair at a time, "
        f"with one of {', '.join(f'--limit flow={f.name} ({f.source} -> {f.target})' for f in flows)} "
        "(repeated for several flows of one pair); nothing was changed")


def plan_drill(state: DesiredState, options: Options, settings: DrillSettings) -> DrillPlan:
    """Check the drill can run on these flows and name its probe topics and groups (offline)."""
    flows = Context(state, options).flows
    pairs = sorted({(f.source, f.target) for f in flows})
    if len(pairs) != 1:
        _refuse_pairs(flows, pairs)
    source, target = pairs[0]
    topics = {f.name: _probe_names(f, "topic", settings.probe_topics) for f in flows}
    groups: dict[str, set[str]] = {}
    for flow in (f for f in flows if f.groups):
        for group in _probe_names(flow, "group", settings.probe_groups):
            groups.setdefault(group, set()).update(topics[flow.name])
    others = tuple((f, kind) for f in state.mirrors if f not in flows
                   and (kind := relation((f.source, f.target), source, target)) is not None)
    return DrillPlan(source, target, tuple(flows), topics, {g: tuple(sorted(t)) for g, t in groups.items()}, others)


def _probe_names(flow: MirrorFlow, kind: str, given: tuple[str, ...]) -> tuple[str, ...]:
    """The probe ``kind`` ("topic" or "group") names for a flow: those given that it mirrors (or
    checkpoints), else its own probe topic or group, which it always does; refused, naming the
    option, when none of those given fits."""
    topics = kind == "topic"
    patterns, select = (flow.topics, flow.mirrored_topics) if topics else (flow.groups, flow.mirrored_groups)
    verb, shown = ("mirror" if topics else "checkpoint"), ", ".join(p.text for p in patterns)
    if not given:
        return (flow.probe_topic if topics else flow.probe_group,)
    chosen = tuple(select(list(given)))
    if not chosen:
        raise OperationRefused(f"flow {flow.name} does not {verb} the probe {kind} {', '.join(given)} (its {kind}s: "
                               f"{shown}, minus its excludes): pick one it {verb}s with --probe-{kind} NAME")
    return chosen


def _elapsed(t0: float) -> float:
    return round(time.monotonic() - t0, 3)


class Sampler:
    """Every SAMPLE_S: records acknowledged, and per flow the drill's records on each cluster and
    how far the passive cluster is behind the active one (records, seconds), from the sequence
    and timestamp of each probe partition's last record."""

    def __init__(self, drill: Drill):
        self.drill = drill
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        drill = self.drill
        readers = {alias: RecordReader(drill.spec.cluster(alias), drill.secrets)
                   for alias in (drill.plan.source, drill.plan.target)}
        try:
            while True:
                try:
                    self.samples.append(self._sample(readers))
                except Mm2specError:
                    pass  # a cluster busy or restarting: a gap in the plot, not a failed drill
                if self._stop.wait(SAMPLE_S):
                    break
        finally:
            for reader in readers.values():
                reader.close()

    def _last(self, readers: dict[str, RecordReader]) -> dict[str, dict[tuple[str, int], int]]:
        """Per cluster and probe partition: the sequence number of its last drill record, -1 if none."""
        drill, found = self.drill, {}
        for alias, reader in readers.items():
            names = drill.plan.names_on(alias)
            live = drill.admin(alias).topics(list(names.values()), with_configs=False)
            found[alias] = {}
            for topic, partition in drill.partitions:
                record = reader.last_record(names[topic], partition) if names[topic] in live else None
                seq = drill_seq(record, drill.id) if record else None
                found[alias][(topic, partition)] = -1 if seq is None else seq
        return found

    def _age(self, tp: tuple[str, int], seq: int) -> float:
        """Seconds since record ``seq`` of a partition was written: for the first record the passive
        cluster lacks, the lag in time (the RPO if the active cluster died now)."""
        stamps = self.drill.load.stamps.get(tp, [])
        return max(0.0, time.time() - stamps[seq] / 1000) if seq < len(stamps) else 0.0

    def _sample(self, readers: dict[str, RecordReader]) -> dict:
        drill = self.drill
        last = self._last(readers)
        active = drill.active
        passive = drill.plan.target if active == drill.plan.source else drill.plan.source
        sample = {"at": _elapsed(drill.t0), "active": active, "produced": drill.load.acknowledged if drill.load else 0,
                  "flows": []}
        previous = self.samples[-1] if self.samples else None
        dt = sample["at"] - previous["at"] if previous else 0.0
        sample["producedPerSecond"] = round((sample["produced"] - previous["produced"]) / dt, 1) if dt > 0 else None
        for index, flow in enumerate(drill.plan.flows):
            parts = [tp for tp in drill.partitions if tp[0] in drill.plan.topics[flow.name]]
            records = {alias: sum(last[alias][tp] + 1 for tp in parts) for alias in last}
            behind = [(tp, last[active][tp], last[passive][tp]) for tp in parts if last[active][tp] > last[passive][tp]]
            entry = {"flow": flow.name, "records": records,
                     "lagRecords": sum(a - p for _tp, a, p in behind),
                     "lagSeconds": round(max((self._age(tp, p + 1) for tp, _a, p in behind), default=0.0), 3),
                     "mirroredPerSecond": None}
            if previous and dt > 0 and previous["active"] == active:
                entry["mirroredPerSecond"] = round((records[passive] - previous["flows"][index]["records"][passive]) / dt, 1)
            sample["flows"].append(entry)
        return sample


@dataclass
class Phase:
    name: str
    title: str
    start: float
    status: str = "running"
    seconds: float = 0.0
    message: str = ""
    rto_seconds: float | None = None
    tasks: list[dict] = field(default_factory=list)
    playbook: dict | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        data["rtoSeconds"] = data.pop("rto_seconds")
        return data


class Drill:
    """One drill run; ``run()`` returns True when every phase passed."""

    def __init__(self, spec: DesiredState, options: Options, settings: DrillSettings, plan: DrillPlan,
                 on_phase: PhaseListener = lambda *_: None, listener: Listener = lambda *_: None,
                 progress: Callable[[str], None] = lambda _text: None, secrets: SecretLookup = env_secrets):
        self.spec, self.options, self.settings, self.plan = spec, options, settings, plan
        self.on_phase, self.listener, self.progress, self.secrets = on_phase, listener, progress, secrets
        self.id = uuid.uuid4().hex[:12]
        self.started_at = time.time()
        self.t0 = time.monotonic()
        self.phases: list[Phase] = []
        self.events: list[dict] = []
        self.switches: list[dict] = []
        self.probes: list[dict] = []
        self.records: dict | None = None
        self.partitions: list[tuple[str, int]] = []
        self.active = plan.source
        self.load: ProbeLoad | None = None
        self.groups = [ProbeGroup(g, secrets) for g in plan.groups]
        self.sampler = Sampler(self)
        self.reports: dict[str, RunReport] = {}
        self.others_before: dict[str, bool] = {}
        """Whether each of the spec's other flows (``DrillPlan.others``) mirrored when the drill began."""
        self._admins: dict[str, KafkaAdmin] = {}

    def admin(self, alias: str) -> KafkaAdmin:
        if alias not in self._admins:
            self._admins[alias] = KafkaAdmin(self.spec.cluster(alias), self.secrets)
        return self._admins[alias]

    # --------------------------------------------------------------------------------- phases
    def run(self) -> bool:
        source, target = self.plan.source, self.plan.target
        steps = [
            ("prepare", f"Probe topics on {source}, load started, mirrored to {target}", self._prepare),
            ("verify", "Verify: DR is healthy", self._verify),
            ("failover", f"Failover {source} -> {target}", lambda: self._switch("failover", source, target)),
            (f"probe-{target}", f"Probe every group on {target}", lambda: self._probe("failover", source, target)),
            ("failback", f"Failback {target} -> {source}", lambda: self._switch("failback", target, source)),
            (f"probe-{source}", f"Probe every group on {source}", lambda: self._probe("failback", target, source)),
            ("verify-after", "Verify: DR is healthy again", self._verify),
            ("records", "Every record written is on both clusters", self._records),
        ]
        try:
            for name, title, step in steps:
                if not self._phase(name, title, step):
                    break
        finally:
            self._shutdown()
        for name, title, _step in steps[len(self.phases):]:
            self.phases.append(Phase(name, title, _elapsed(self.t0), status="not run", message="an earlier phase failed"))
        return self.passed

    @property
    def passed(self) -> bool:
        return bool(self.phases) and all(p.status == "passed" for p in self.phases)

    def _phase(self, name: str, title: str, step: Callable[[], str]) -> bool:
        phase = Phase(name, title, _elapsed(self.t0))
        self.phases.append(phase)
        self.on_phase("start", phase.to_json())
        try:
            phase.message = step()
            phase.status = "passed"
        except Mm2specError as exc:
            phase.status, phase.message = "failed", str(exc) + self._where_left()
        report = self.reports.get(name)
        if report is not None:
            phase.playbook, phase.rto_seconds = report.to_json(), _rounded(report.rto_seconds())
            phase.tasks = _task_times(report, phase.start)
        phase.seconds = round(_elapsed(self.t0) - phase.start, 3)
        self.on_phase("end", phase.to_json())
        return phase.status == "passed"

    def _where_left(self) -> str:
        """What a failure leaves behind when the flows are failed over, and the way back."""
        done = {p.name for p in self.phases if p.status == "passed"}
        if "failover" not in done or "failback" in done:
            return ""
        return (f" (the flows stay failed over to {self.plan.target}; the drill's writes and groups are stopped: "
                "fix the cause, then come back with mm2spec failback SPEC --env ENV)")

    def _event(self, name: str) -> None:
        self.events.append({"name": name, "at": _elapsed(self.t0)})

    def _shutdown(self) -> None:
        """Stop every thread the drill started, whatever happened (their errors are not the news)."""
        for group in self.groups:
            try:
                group.stop()
            except Mm2specError:
                pass
        if self.load is not None:
            try:
                self.load.stop()
            except Mm2specError:
                pass
        if self.sampler._thread.is_alive():
            self.sampler.stop()

    # ------------------------------------------------------------------------------- prepare
    def _prepare(self) -> str:
        states = Context(self.spec, self.options, self.secrets).failover_states()
        # Active-active: the other direction failed over would have the failover refused (both mirrors
        # stopped, groups both ways) only after the load had started; another fan-in source may be.
        reverse = tuple(f.name for f, kind in self.plan.others if kind == ACTIVE_ACTIVE)
        if reverse:
            states |= Context(self.spec, Options(limit_flows=reverse), self.secrets).failover_states()
        if states:
            raise OperationRefused(f"{', '.join(f'{n} is {s.phase}' for n, s in states.items())}: a drill starts from "
                                   "a healthy setup; finish that first (mm2spec failover to converge, or fail back)")
        self.others_before = {o["flow"]: o["running"] for o in self._others()}
        names = sorted({t for topics in self.plan.topics.values() for t in topics})
        self.partitions = [(t, p) for t in names for p in range(self._create(t))]
        self.load = ProbeLoad(self.id, self.partitions, self.settings.rate, self.settings.record_bytes, self.secrets)
        self.sampler.start()
        self._start_apps(self.plan.source)
        began = time.monotonic()
        self._wait(self._unmirrored, self.settings.settle_timeout, f"the probe topics to be mirrored to {self.plan.target}")
        mirrored = time.monotonic() - began
        self._hold()
        return (f"{len(self.partitions)} probe partitions ({', '.join(names)}), {len(self.groups)} probe groups; "
                f"first records on {self.plan.target} after {mirrored:.1f}s" + "".join(
                    f"; {f.name} ({kind}, {f.source} -> {f.target}) "
                    f"{'mirroring' if self.others_before.get(f.name) else 'not mirroring'}, left as it is"
                    for f, kind in self.plan.others))

    def _create(self, topic: str) -> int:
        """Create a probe topic on the source if absent; its partition count. An existing one that
        holds records no drill wrote is refused: it looks like a production topic."""
        admin = self.admin(self.plan.source)
        live = admin.topics([topic], with_configs=False).get(topic)
        if live is None:
            admin.create_topic(topic, self.settings.probe_partitions, -1, {})
            return self.settings.probe_partitions
        if not self.settings.allow_existing_topics:
            with RecordReader(self.spec.cluster(self.plan.source), self.secrets) as reader:
                for partition in range(live.partitions):
                    last = reader.last_record(topic, partition)
                    if last is not None and DRILL_HEADER not in dict(last.headers):
                        raise OperationRefused(f"topic {topic} on {self.plan.source} holds records no drill wrote "
                                               f"({topic}-{partition}@{last.offset}): pick an unused --probe-topic, "
                                               "or pass --allow-existing-topics to write drill records into it")
        return live.partitions

    def _unmirrored(self) -> list[str]:
        names = self.plan.names_on(self.plan.target)
        live = self.admin(self.plan.target).topics(list(names.values()), with_configs=False)
        lacking = [f"{names[t]}-{p}" for t, p in self.partitions if names[t] not in live]
        if lacking:
            return lacking
        with RecordReader(self.spec.cluster(self.plan.target), self.secrets) as reader:
            return [f"{names[t]}-{p}" for t, p in self.partitions
                    if (last := reader.last_record(names[t], p)) is None or drill_seq(last, self.id) is None]

    def _wait(self, problems: Callable[[], list[str]], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while found := problems():
            if time.monotonic() > deadline:
                raise OperationRefused(f"timed out after {timeout:.0f}s waiting for {what}: {', '.join(found[:5])}")
            self.progress(f"waiting for {what}: {len(found)} left (e.g. {found[0]})")
            time.sleep(POLL_S)

    def _hold(self) -> None:
        """Keep the load running for ``duration`` seconds (the sampler records it)."""
        end = time.monotonic() + self.settings.duration
        while (left := end - time.monotonic()) > 0:
            self.progress(f"load on {self.active}: {self.load.acknowledged} records written, {left:.0f}s left")
            time.sleep(min(POLL_S, left))

    def _start_apps(self, alias: str) -> None:
        cluster, names = self.spec.cluster(alias), self.plan.names_on(alias)
        self.active = alias
        self.load.resume(cluster, names)
        for group in self.groups:
            group.start(cluster, [names[t] for t in self.plan.groups[group.group]])
        self._event(f"writes on {alias}")

    def _stop_apps(self) -> None:
        """As before a planned switch: the consumers stop first (their last commits land mid-stream),
        then the writes pause with every record acknowledged."""
        for group in self.groups:
            group.stop()
        self.load.pause()
        self._event("writes paused")

    # ------------------------------------------------------------------------------ verify
    def _verify(self) -> str:
        """Run the verify playbook until it passes or ``verify_timeout`` passes; the probe groups are
        left out (the mirror lists new groups only every refreshGroupsIntervalSeconds; the drill
        probes them itself after each switch)."""
        deadline, attempts = time.monotonic() + self.settings.verify_timeout, 0
        while True:
            attempts += 1
            events: list = []
            report = self._playbook("verify", self._options(exclude_probe_groups=True), lambda *e: events.append(e))
            if not report.failed or time.monotonic() > deadline:
                break
            failing = [t.name for t in report.tasks if t.status == "failed"]
            self.progress(f"verify attempt {attempts}: not healthy yet ({'; '.join(failing)}); retrying")
            time.sleep(VERIFY_RETRY_S)
        for event in events:
            self.listener(*event)
        self.reports[self.phases[-1].name] = report
        if report.failed:
            raise OperationRefused(f"verify failed after {attempts} attempts: " + "; ".join(
                f"{t.name}: {o.message}" for t in report.tasks if t.status == "failed" for o in t.outcomes if o.message))
        return f"healthy (attempt {attempts})"

    def _options(self, exclude_probe_groups: bool = False) -> Options:
        """The user's options for a playbook run; the probe groups are always in or always out."""
        probe = "|".join(re.escape(g) for g in self.plan.groups)
        limit = self.options.limit_groups
        if probe and exclude_probe_groups:
            limit = f"(?!(?:{probe})$)(?:{limit or '.*'})"
        elif probe and limit:
            limit = f"(?:{limit})|(?:{probe})"
        return Options(limit_flows=tuple(f.name for f in self.plan.flows), limit_groups=limit,
                       state_dir=self.options.state_dir, connect_url=self.options.connect_url)

    def _playbook(self, name: str, options: Options, listener: Listener | None = None) -> RunReport:
        ctx = Context(self.spec, options, self.secrets, progress=self.progress)
        return run(load_playbook(name, CATALOGUE), ctx, listener=listener or self.listener)

    # ------------------------------------------------------------------------------ switches
    def _switch(self, name: str, old: str, new: str) -> str:
        self._stop_apps()
        self._event(f"{name} started")
        report = self._playbook(name, self._options())
        self.reports[name] = report
        self._event(f"{name} ended")
        if report.failed:
            failed = next(t for t in report.tasks if t.status == "failed")
            raise OperationRefused(f"{name} failed at [{failed.name}]: "
                                   + ("; ".join(o.message for o in failed.outcomes if o.message) or failed.reason))
        lost, seconds = self._lost(old, new)
        others = self._others()
        self.switches.append({"name": name, "from": old, "to": new, "lostRecords": lost, "rpoSeconds": seconds,
                              "rtoSeconds": _rounded(report.rto_seconds()), "playbookSeconds": round(report.seconds, 3),
                              "otherFlows": others})
        if lost:
            raise OperationRefused(f"{lost} records acknowledged on {old} are not on {new} after the {name} "
                                   f"(RPO {seconds:.1f}s): a planned switch must lose nothing")
        translated = totals(report.section(TRANSLATIONS) or [])
        return (f"{translated['groups']} groups, {translated['partitions']} partitions translated; "
                f"{self.load.written.get(old).count if old in self.load.written else 0} records written on {old} "
                f"all on {new} (RPO 0)" + _others_text(others))

    def _lost(self, old: str, new: str) -> tuple[int, float]:
        """Records acknowledged on ``old`` that ``new`` lacks, and the seconds of writes they span
        (the RPO: from the first lost record's write to the last write acknowledged there)."""
        written = self.load.written.get(old)
        if written is None:
            return 0, 0.0
        names = self.plan.names_on(new)
        with RecordReader(self.spec.cluster(new), self.secrets) as reader:
            found = drill_records(reader, [(names[t], p) for t, p in self.partitions], self.id)
        lost, stamps = missing(written, found, names.get)
        seconds = (written.last_timestamp_ms - min(stamps)) / 1000 if stamps else 0.0
        return lost, round(seconds, 3)

    def _moves(self, old: str, forward: bool) -> list[Move]:
        """Every selected group's committed partitions on the cluster it leaves, on topics a flow
        mirrors, and (active-active) on the reverse flows' copies on the source, which move to their
        originals on the target and back: read from the cluster, not taken from the playbook's
        report. On the way back only the groups the failover moved leave the target's own topics
        (the failback moves no other group there)."""
        ctx = Context(self.spec, self._options(), self.secrets)
        offsets = GroupOffsets(self.spec.cluster(old), self.secrets)
        names, moves = offsets.groups(), []
        moved_over = {r["group"] for r in self.probes if r["switch"] == "failover"}
        for flow in self.plan.flows:
            chosen = [g for g in flow.mirrored_groups(names) if ctx.group_selected(g)]
            backs = reverse_flows(ctx, flow)
            for group, state in sorted(offsets.describe(chosen).items()):
                for topic, partition in sorted(state.offsets):
                    moved = _moved_name(flow, topic, forward)
                    if moved is not None:
                        moves.append(Move(group, topic, moved, partition))
                        continue
                    # A copy the reverse flow made on the source moves to its original: that flow, the other way.
                    remote = next(((back, name) for back in backs
                                   if (name := _moved_name(back, topic, not forward))), None)
                    if remote and (forward or group in moved_over):
                        moves.append(Move(group, topic, remote[1], partition, remote=remote[0].name))
        return moves

    def _others(self) -> list[dict]:
        """Whether each of the spec's other flows on the drilled clusters mirrors now (the engine's view)."""
        if not self.plan.others:
            return []
        ctx = Context(self.spec, Options(limit_flows=tuple(f.name for f, _ in self.plan.others),
                                         state_dir=self.options.state_dir, connect_url=self.options.connect_url),
                      self.secrets)
        found = []
        try:
            for flow, _relation in self.plan.others:
                try:
                    seen = ctx.engine.running(flow)
                    found.append({"flow": flow.name, "running": seen.up, "seen": seen.seen})
                except Mm2specError as exc:  # what the drill reports, not a reason to stop it
                    found.append({"flow": flow.name, "running": False, "seen": f"not known: {exc}"})
        finally:
            ctx.close()
        return found

    def _probe(self, switch: str, old: str, new: str) -> str:
        moves = self._moves(old, forward=switch == "failover")
        old_cluster, new_cluster = self.spec.cluster(old), self.spec.cluster(new)
        with RecordReader(old_cluster, self.secrets) as old_reader, RecordReader(new_cluster, self.secrets) as new_reader:
            rows = probe_moves(old_reader, new_reader, GroupOffsets(old_cluster, self.secrets),
                               GroupOffsets(new_cluster, self.secrets), moves, self.id)
        for row in rows:
            row.update(switch=switch, onCluster=new)
        self.probes += rows
        wrong = [r for r in rows if r["result"] != "exact"]
        if wrong:
            raise OperationRefused(f"{len(wrong)} of {len(rows)} group partitions do not resume at the next record on "
                                   f"{new}: " + "; ".join(_probe_text(r) for r in wrong[:5]))
        self._start_apps(new)
        self._hold()
        return (f"{len({r['group'] for r in rows})} groups, {len(rows)} partitions: each resumes at the record "
                "right after its last consumed one (0 skipped, 0 re-read)")

    # ------------------------------------------------------------------------------- records
    def _records(self) -> str:
        self._stop_apps()
        counts: dict[str, dict] = {}

        def lacking() -> list[str]:
            counts.update(self._record_counts())
            return [f"{alias}: {c['missing']} missing" for alias, c in counts.items() if c["missing"]]
        self._wait(lacking, self.settings.settle_timeout, "every record on both clusters")
        written = {alias: w.count for alias, w in self.load.written.items()}
        self.records = {"written": written, "total": sum(written.values()), "clusters": counts}
        return (f"{self.records['total']} records written (" + ", ".join(f"{n} on {a}" for a, n in written.items())
                + "); all on " + " and ".join(counts) + "".join(
                    f"; {c['duplicates']} duplicates on {a}" for a, c in counts.items() if c["duplicates"]))

    def _record_counts(self) -> dict[str, dict]:
        counts = {}
        for alias in (self.plan.source, self.plan.target):
            names = self.plan.names_on(alias)
            with RecordReader(self.spec.cluster(alias), self.secrets) as reader:
                found = drill_records(reader, [(names[t], p) for t, p in self.partitions], self.id)
            lost = sum(missing(w, found, names.get)[0] for w in self.load.written.values())
            total = sum(w.count for w in self.load.written.values())
            counts[alias] = {"found": total - lost, "missing": lost, "duplicates": duplicates(found)}
        return counts

    # -------------------------------------------------------------------------------- report
    def to_json(self) -> dict[str, Any]:
        stopped = next((p.name for p in self.phases if p.status == "failed"), None)
        settings = asdict(self.settings)
        settings["probeTopics"], settings["probeGroups"] = settings.pop("probe_topics"), settings.pop("probe_groups")
        data = {
            "formatVersion": DRILL_FORMAT_VERSION, "id": self.id, "spec": self.spec.name,
            "environment": self.spec.environment, "engine": self.spec.engine,
            "source": self.plan.source, "target": self.plan.target,
            "flows": [{"flow": f.name, "source": f.source, "target": f.target,
                       "probeTopics": list(self.plan.topics[f.name]),
                       "targetTopics": [f.target_topic(t) for t in self.plan.topics[f.name]]} for f in self.plan.flows],
            "otherFlows": [{"flow": f.name, "source": f.source, "target": f.target, "relation": kind,
                            "runningBefore": self.others_before.get(f.name)} for f, kind in self.plan.others],
            "probeGroups": sorted(self.plan.groups),
            "startedAt": datetime.fromtimestamp(self.started_at, timezone.utc).isoformat(timespec="seconds"),
            "seconds": _elapsed(self.t0), "passed": self.passed, "stoppedAt": stopped, "exitCode": 0 if self.passed else 1,
            "settings": {_camel(k): list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
            "phases": [p.to_json() for p in self.phases], "events": self.events, "samples": self.sampler.samples,
            "switches": self.switches, "probes": self.probes, "records": self.records,
        }
        data["headline"] = headline(data)
        return data


def _moved_name(flow: MirrorFlow, topic: str, forward: bool) -> str | None:
    """A mirrored topic's name on the other cluster (forward: source -> target), None if not mirrored."""
    source = topic if forward else flow.source_topic(topic)
    if source is None or not flow.mirrored_topics([source]):
        return None
    return flow.target_topic(source) if forward else source


def _others_text(others: list[dict]) -> str:
    """The other flows' state after a switch, for the phase's message."""
    running = [o["flow"] for o in others if o["running"]]
    stopped = [f"{o['flow']} ({o['seen']})" for o in others if not o["running"]]
    return ((f"; kept mirroring: {', '.join(running)}" if running else "")
            + (f"; not mirroring: {', '.join(stopped)}" if stopped else ""))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _task_times(report: RunReport, start: float) -> list[dict]:
    """Each task that ran, with its start on the drill's clock (tasks run one after the other)."""
    out, at = [], start
    for task in report.tasks:
        if task.status in ("skipped", "not run"):
            continue
        out.append({"task": task.name, "module": task.module, "status": task.status, "start": round(at, 3),
                    "seconds": round(task.seconds, 3)})
        at += task.seconds
    return out


def _probe_text(row: dict) -> str:
    what = {"skipped": f"skips {row['skipped']}", "re-read": f"re-reads {row['reread']}"}.get(row["result"], "unknown")
    return (f"{row['group']} {row['targetTopic']}-{row['partition']} at {row['resumeAt']}: {what}"
            + (f" ({row['note']})" if row.get("note") else ""))


def headline(data: dict) -> dict:
    """The figures a reader looks for first, all derived from the rest of the document."""
    switches = {s["name"]: s for s in data["switches"]}
    rto = {name: (switches[name]["rtoSeconds"] if name in switches else None) for name in ("failover", "failback")}
    known = [v for v in rto.values() if v is not None]
    groups: dict[tuple[str, str], dict] = {}
    for row in data["probes"]:
        entry = groups.setdefault((row["switch"], row["group"]), {"switch": row["switch"], "group": row["group"],
                                                                  "partitions": 0, "skipped": 0, "reread": 0, "unknown": 0})
        entry["partitions"] += 1
        if row["skipped"] is None:
            entry["unknown"] += 1
        else:
            entry["skipped"] += row["skipped"]
            entry["reread"] += row["reread"]
    records = data["records"] or {}
    return {
        "passed": data["passed"],
        "rpoRecords": sum(s["lostRecords"] for s in data["switches"]),
        "rpoSeconds": max((s["rpoSeconds"] for s in data["switches"]), default=0.0),
        "rtoSeconds": {**rto, "total": round(sum(known), 3) if known else None},
        "writePauseSeconds": _pauses(data["events"]),
        "skipped": sum(g["skipped"] for g in groups.values()),
        "reread": sum(g["reread"] for g in groups.values()),
        "unknown": sum(g["unknown"] for g in groups.values()),
        "groups": list(groups.values()),
        "recordsWritten": records.get("total"),
        "recordsFound": {a: c["found"] for a, c in (records.get("clusters") or {}).items()},
    }


def _pauses(events: list[dict]) -> list[float]:
    """Seconds from each "writes paused" to the next resumption."""
    out, paused = [], None
    for event in events:
        if event["name"] == "writes paused":
            paused = event["at"]
        elif event["name"].startswith("writes on") and paused is not None:
            out.append(round(event["at"] - paused, 3))
            paused = None
    return out

"""What every task of a run sees: the compiled spec, the options, the selected flows, shared facts,
and the clients (made once per cluster, closed at the end); and the variables ``when`` conditions
see (``WHEN_VARIABLES``: each one's name, meaning and value in one row).

Tasks hand results to later tasks through ``facts`` (``offsets.translate`` leaves the translations
for ``offsets.commit``), as Ansible's ``register`` does.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from mm2spec.engines import Engine, engine_for
from mm2spec.errors import ClusterUnreachable, OperationRefused
from mm2spec.live.kafka import KafkaAdmin, SecretLookup, env_secrets
from mm2spec.live.lease import KafkaLeaseStore, LeaseStore
from mm2spec.live.types import FailoverState
from mm2spec.mm2.engine_facts import engine_names
from mm2spec.spec.model import DesiredState, MirrorFlow

# How long a wait task (drain, stop) waits unless its ``timeout`` argument says otherwise.
DEFAULT_WAIT_S = 300.0


@dataclass(frozen=True)
class Options:
    """The command line's choices for one run."""

    check: bool = False
    diff: bool = False
    source_unreachable: bool = False
    allow_rewind: bool = False
    skip_active: bool = False
    limit_flows: tuple[str, ...] = ()
    limit_groups: str | None = None
    state_dir: str | None = None
    """The Spark job's state folder (default ``.mm2spec/spark/<spec name>``)."""
    connect_url: str | None = None
    """Overrides the spec's ``connect.restUrl``."""
    stranded: str | None = None
    """Failback: what to do with records stranded on the source (``keep``, ``rebuild``; None refuses)."""
    break_lease: bool = False
    """Take over a DR pair's lease another run holds although it has not expired (that run is dead)."""


def parse_limit(values: list[str] | None) -> tuple[tuple[str, ...], str | None]:
    """``--limit flow=NAME,group=REGEX`` (repeatable) -> (flow names, group regex)."""
    flows: list[str] = []
    groups: list[str] = []
    for value in values or ():
        for part in value.split(","):
            key, sep, text = part.partition("=")
            if not sep or key.strip() not in ("flow", "group") or not text.strip():
                raise OperationRefused(f"--limit {value!r}: use flow=NAME and/or group=REGEX, comma-separated")
            (flows if key.strip() == "flow" else groups).append(text.strip())
    regex = "|".join(f"(?:{g})" for g in groups) or None
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as exc:
            raise OperationRefused(f"--limit group=...: not a regular expression ({exc})") from None
    return tuple(flows), regex


def failure_text(options: Options, exc: Exception) -> str:
    """A failed task's message: the error's, with the way out when a cluster did not answer."""
    if isinstance(exc, ClusterUnreachable) and not options.source_unreachable:
        return f"{exc} (if that is the source and it is gone, fail over with --source-unreachable)"
    return str(exc)


class Context:
    """One run's shared state; ``progress`` reports a wait's state (the CLI shows a spinner)."""

    def __init__(self, spec: DesiredState, options: Options, secrets: SecretLookup = env_secrets,
                 progress: Callable[[str], None] = lambda _text: None, clock: Callable[[], float] = time.time):
        self.spec = spec
        self.options = options
        self.secrets = secrets
        self.progress = progress
        self.clock = clock
        self.facts: dict[str, Any] = {}
        self.flows: list[MirrorFlow] = self._select_flows()
        self._admins: dict[str, KafkaAdmin] = {}
        self._clients: dict[tuple, Any] = {}
        self._states: dict[str, FailoverState] | None = None
        self.engine: Engine = engine_for(spec, state_dir=options.state_dir, connect_url=options.connect_url,
                                         client_for=self.client, progress=lambda text: self.progress(text),
                                         clock=lambda: self.clock())
        """The engine the spec names, with this run's clients, progress and clock."""

    def _select_flows(self) -> list[MirrorFlow]:
        names = [f.name for f in self.spec.mirrors]
        unknown = [n for n in self.options.limit_flows if n not in names]
        if unknown:
            raise OperationRefused(f"--limit flow={', '.join(unknown)}: no such flow in the spec (flows: {', '.join(names)})")
        return [f for f in self.spec.mirrors if not self.options.limit_flows or f.name in self.options.limit_flows]

    def group_selected(self, group: str) -> bool:
        return self.options.limit_groups is None or re.fullmatch(self.options.limit_groups, group) is not None

    # ------------------------------------------------------------------------------- clients
    def admin(self, alias: str) -> KafkaAdmin:
        if alias not in self._admins:
            self._admins[alias] = KafkaAdmin(self.spec.cluster(alias), self.secrets)
        return self._admins[alias]

    def client(self, kind: type, alias: str, **options) -> Any:
        """One client of ``kind`` (``RecordReader``, ``GroupOffsets``) per cluster and options."""
        key = (kind, alias, tuple(sorted(options.items())))
        if key not in self._clients:
            self._clients[key] = kind(self.spec.cluster(alias), self.secrets, **options)
        return self._clients[key]

    def close(self) -> None:
        for client in self._clients.values():
            close = getattr(client, "close", None)
            if close:
                close()
        self._clients.clear()

    def lease_store(self, source: str, target: str) -> LeaseStore:
        """Where the lease of the DR pair ``source`` -> ``target`` is kept (on ``target``)."""
        return KafkaLeaseStore(self.spec.cluster(target), self.spec.name, source, self.secrets)

    # -------------------------------------------------------------------------- DR state
    def failover_states(self, refresh: bool = False) -> dict[str, FailoverState]:
        """The recorded failover state of the selected flows (read from each target cluster)."""
        from mm2spec.live.dr_state import read_flow_states

        if self._states is None or refresh:
            self._states = read_flow_states(self.spec, self.flows, self.secrets)
        return self._states

    def variables(self) -> dict[str, Any]:
        """The values ``when`` conditions see: each of ``WHEN_VARIABLES``."""
        states = self.failover_states()
        return {variable.name: variable.value(self, states) for variable in WHEN_VARIABLES}


@dataclass(frozen=True)
class WhenVariable:
    """One name a playbook's ``when`` condition may use: what it means and how a run computes it."""

    name: str
    description: str
    """What it means, for ``mm2spec playbook modules`` and the playbook schema."""
    value: Callable[[Context, dict[str, FailoverState]], Any]
    """Its value in a run, from the context and the selected flows' recorded failover states."""


def _all_failed_over(ctx: Context, states: dict[str, FailoverState]) -> bool:
    return bool(ctx.flows) and all(states.get(f.name) is not None and states[f.name].phase == "failed-over"
                                   for f in ctx.flows)


WHEN_VARIABLES = (
    WhenVariable("check", "running with --check", lambda ctx, _states: ctx.options.check),
    WhenVariable("planned", "the source answers (no --source-unreachable)",
                 lambda ctx, _states: not ctx.options.source_unreachable),
    WhenVariable("source_unreachable", "--source-unreachable was given",
                 lambda ctx, _states: ctx.options.source_unreachable),
    WhenVariable("failed_over", "every selected flow is recorded as failed over on DR", _all_failed_over),
    WhenVariable("resuming", "a failover of a selected flow was started before (its state is on DR)",
                 lambda ctx, states: any(f.name in states for f in ctx.flows)),
    WhenVariable("failing_back", "a failback of a selected flow was started before (phase failing-back on DR)",
                 lambda _ctx, states: any(s.phase == "failing-back" for s in states.values())),
    WhenVariable("engine", "the spec's engine: " + engine_names(quote="'"), lambda ctx, _states: ctx.spec.engine),
    WhenVariable("fence", "the spec's failover.fence (and client principals are listed)",
                 lambda ctx, _states: ctx.spec.failover.fence and bool(ctx.spec.failover.clients)),
    WhenVariable("clients", "the spec lists client principals under failover.clients",
                 lambda ctx, _states: bool(ctx.spec.failover.clients)),
    WhenVariable("exactly_once", "some selected flow mirrors with exactly-once",
                 lambda ctx, _states: any(f.exactly_once for f in ctx.flows)),
    WhenVariable("heartbeats", "some selected flow emits heartbeats",
                 lambda ctx, _states: any(f.heartbeats for f in ctx.flows)),
)
"""Every variable of ``when`` conditions, in the order ``mm2spec playbook modules`` lists them: the one
table both the checks of a playbook (``playbook.VARIABLES``) and a run's values come from."""

"""engines: what moves the data, behind one seam: each engine renders its deployment, starts
(optionally from given source offsets), stops and reports on itself.

- ``__init__``: the interface every engine implements (``Engine``), the plain data it returns,
  the descriptor each engine module exports (``EngineDescriptor``: its facts, ``Engine`` class and
  the Pulumi resource kinds it registers), found by name (``descriptor``), and ``engine_for``
- ``spark``: the PySpark job, its driver on this machine (``runtime.deployment``); its checkpoint
  folders and start-offsets files
- ``connect``: MirrorMaker 2's connectors on a Kafka Connect cluster (its REST API)

The rest of mm2spec asks the engine a spec names and never branches on an engine's name; what the
offline layers must know is in ``mm2spec.mm2.engine_facts``, whose entry names the module here.
Engines return plain data or raise mm2spec errors: the ops modules turn results into outcomes, the
CLI prints.

May import ``plan`` (its diff and model, for an engine's part of a plan), ``runtime``, ``render``,
``live``, ``spec``, ``mm2``, ``errors``, ``components``, ``resources``; never ``ops``,
``provision``, ``dev`` or ``cli``; never prints.
"""

from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mm2spec.errors import MirrorError, Mm2specError
from mm2spec.mm2.engine_facts import ENGINE_FACTS, EngineFacts, engine_names
from mm2spec.plan.model import ResourceChange
from mm2spec.spec.model import DesiredState, MirrorFlow

# How often a wait re-reads what it waits for: a drain of a few hundred records takes about a
# second, and each poll reads one record per partition on each side.
POLL_S = 0.5
START_TIMEOUT_S = 300.0
"""How long a start waits for the mirror to run unless told otherwise."""

Progress = Callable[[str], None]
ClientFactory = Callable[..., Any]
"""``(kind, cluster alias, **options) -> client``: one client per cluster, as ``Context.client``."""
StartOffsets = Mapping[str, Mapping[tuple[str, int], int]]
"""Per flow name: per source (topic, partition), the offset of the first record to mirror."""


@dataclass(frozen=True)
class Running:
    """Whether a flow's mirror runs, and what was seen."""

    up: bool
    seen: str
    """What the engine reports, e.g. ``Spark job running (pid 42)`` or ``<connector> RUNNING, ...``."""


@dataclass(frozen=True)
class Action:
    """What an engine did to its deployment (or, in check mode, would do): plain data that the
    ops modules report."""

    where: str
    """The recap's location (``Engine.location``)."""
    summary: str
    changed: bool = True
    """False when nothing needed doing (already stopped)."""
    diff: tuple[tuple[str, str, str], ...] = ()
    """(what, before, after) lines."""
    flow: str = ""
    """The flow it concerns, or empty for a deployment every flow shares."""
    stops_every_flow: bool = False
    """It stopped (would stop) a deployment every flow of the spec shares, not only the flows asked for."""


@dataclass(frozen=True)
class DeploymentResource:
    """One resource provisioning registers to run the engine, as data: its kind is the name of a
    Pulumi resource kind of ``mm2spec.provision`` (``provision.kinds``), which turns ``item`` into
    the resource's inputs."""

    kind: str
    """The resource kind's name (``WorkerConfig``, ``Connector``, ``SparkDeployment``)."""
    name: str
    """Its Pulumi name (``connect-worker``, a connector's name, ``spark-mirror``)."""
    item: Mapping[str, Any] = field(default_factory=dict)
    """What its kind builds the inputs from (a connector: the rendered connector and ``connectUrl``)."""
    after: tuple[str, ...] = ()
    """Names of the engine's other resources it waits for (a connector: its worker's config)."""
    after_cluster_resources: bool = True
    """It waits for the stack's topics and ACLs (a file the mirror only reads later need not)."""


@dataclass(frozen=True)
class DeploymentResources:
    """What provisioning registers to run the engine: the Pulumi program registers each, in order."""

    resources: tuple[DeploymentResource, ...] = ()

    def names(self, kind: str) -> list[str]:
        """The names of the resources of ``kind``, in order."""
        return [r.name for r in self.resources if r.kind == kind]


@dataclass(frozen=True)
class MetricsSource:
    """Where an engine's figures come from."""

    kind: str
    """``status-file`` (the Spark job's StreamingQueryListener figures) or ``connect-rest``."""
    location: str
    """The file's path, or the Connect REST API's URL."""


class Engine(ABC):
    """One mirroring engine for one compiled spec: the only code that knows how it runs."""

    facts: EngineFacts
    """Its entry in ``mm2.engine_facts``: the name and title below come from there."""
    emits_heartbeats: bool = False
    """Whether it writes MM2's ``heartbeats`` topic on the target."""
    start_hint: str = ""
    """What to do when the mirror does not run (verify's fix)."""
    shared_by_flows: bool = False
    """One deployment runs every flow of the spec: starting it starts them all."""

    @property
    def name(self) -> str:
        """The spec's ``engine`` value."""
        return self.facts.name

    @property
    def title(self) -> str:
        """How messages name it (``Spark``, ``Connect``)."""
        return self.facts.title

    def __init__(self, spec: DesiredState, *, client_for: ClientFactory | None = None,
                 progress: Progress = lambda _text: None, clock: Callable[[], float] = time.time):
        self.spec = spec
        self.progress = progress
        self.clock = clock
        self._client_for = client_for

    @classmethod
    def create(cls, spec: DesiredState, *, state_dir: str | None = None, connect_url: str | None = None,
               **options: Any) -> "Engine":
        """The engine for ``spec`` from ``engine_for``'s options: an engine takes the ones it uses
        (``state_dir``: a Spark job's state folder; ``connect_url``: the Connect REST API)."""
        return cls(spec, **options)

    def client(self, kind: type, alias: str, **options) -> Any:
        """A client of ``kind`` (``GroupOffsets``, ...) for cluster ``alias``: the given factory's
        (the playbook run's shared clients), else a new one with the environment's secrets."""
        if self._client_for is not None:
            return self._client_for(kind, alias, **options)
        return kind(self.spec.cluster(alias), **options)

    @abstractmethod
    def location(self, flow: MirrorFlow) -> str:
        """Where the flow's mirror runs, as a run's recap names it."""

    @abstractmethod
    def deployment_files(self) -> dict[str, str]:
        """The rendered files this engine deploys (a subset of what ``mm2spec render`` writes)."""

    @abstractmethod
    def deployment_resources(self) -> DeploymentResources:
        """What provisioning registers for it; a Mm2specError when the spec cannot be provisioned."""

    @abstractmethod
    def plan_changes(self, stopped_on_purpose: bool) -> tuple[list[ResourceChange], list[str]]:
        """Its part of a plan: the changes to its deployment, and notes. ``stopped_on_purpose``: a
        flow is failed over, so a stopped mirror is meant to be."""

    def worker_version(self) -> str | None:
        """The version of the Kafka Connect workers the mirror runs on (``GET /``), for the version
        rules (``mm2spec.mm2.versions``); None when it runs on none, or no URL is known."""
        return None

    @abstractmethod
    def running(self, flow: MirrorFlow) -> Running:
        """Whether the flow's mirror runs."""

    @abstractmethod
    def stop(self, flows: Sequence[MirrorFlow], *, check: bool, timeout: float) -> list[Action]:
        """Stop the flows' mirror and wait until it stopped (or, with ``check``, say what would
        stop); idempotent: a stopped mirror is an unchanged action."""

    @abstractmethod
    def start_from(self, flows: Sequence[MirrorFlow], offsets: StartOffsets, *,
                   others_failed_over: Sequence[str] = (), timeout: float = START_TIMEOUT_S) -> list[Action]:
        """Start the flows' mirror from ``offsets`` and wait until it runs. With a deployment
        ``shared_by_flows``, ``others_failed_over`` names flows that must not start yet: the
        flows are set to start from their offsets, and the deployment is left stopped."""

    @abstractmethod
    def metrics_source(self) -> MetricsSource:
        """Where its figures (throughput, latency, errors) are read."""


def wait_for(done: Callable[[], bool], timeout: float, describe: Callable[[], str], failure: str,
             progress: Progress) -> None:
    """Poll ``done`` until it holds, reporting ``describe()`` with the time waited; MirrorError
    naming ``failure`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    start = time.monotonic()
    while not done():
        if time.monotonic() > deadline:
            raise MirrorError(f"{failure} within {timeout:.0f}s")
        progress(f"{describe()} ({time.monotonic() - start:.0f}s)")
        time.sleep(POLL_S)


@dataclass(frozen=True)
class EngineDescriptor:
    """Everything mm2spec knows of one engine, found by its name (``descriptor``): each engine
    module's ``DESCRIPTOR``. Its offline facts (``mm2.engine_facts``: title, spec section, renderer)
    are the part the layers below this one read."""

    facts: EngineFacts
    engine: type[Engine]
    """Its ``Engine``: running, stopping and starting its deployment, its part of a plan."""
    resource_kinds: tuple[str, ...]
    """The Pulumi resource kinds (``provision.kinds`` names) its ``deployment_resources`` registers."""

    @property
    def name(self) -> str:
        return self.facts.name


def descriptor(name: str) -> EngineDescriptor:
    """The descriptor of engine ``name``: the ``DESCRIPTOR`` of the module its facts name;
    Mm2specError naming the engines there are when none is called so."""
    facts = ENGINE_FACTS.get(name)
    if facts is None:
        raise Mm2specError(f"engine {name!r} is not one mm2spec runs: use {engine_names()}")
    found = importlib.import_module(facts.module).DESCRIPTOR
    assert found.facts is facts, f"{facts.module}.DESCRIPTOR describes engine {found.name}, not {name}"
    return found


def descriptors() -> list[EngineDescriptor]:
    """Every engine's descriptor, in ``ENGINE_FACTS``'s order."""
    return [descriptor(name) for name in ENGINE_FACTS]


def engine_for(spec: DesiredState, *, state_dir: str | None = None, connect_url: str | None = None,
               client_for: ClientFactory | None = None, progress: Progress = lambda _text: None,
               clock: Callable[[], float] = time.time) -> Engine:
    """The engine ``spec`` names. ``state_dir``: the Spark job's state folder (default
    ``.mm2spec/spark/<spec name>``); ``connect_url``: overrides the spec's ``connect.restUrl``;
    ``client_for``: the Kafka clients to share; ``progress`` reports waits."""
    return descriptor(spec.engine).engine.create(spec, state_dir=state_dir, connect_url=connect_url,
                                                 client_for=client_for, progress=progress, clock=clock)

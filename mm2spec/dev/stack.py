"""The dev environment: clusters ``primary`` and ``dr``, a Connect worker, optionally MM2 dedicated.

``DevStack.up`` starts them and records pids, ports and folders in ``<root>/state.json``, so
``status`` and ``down`` work from another process (another shell, a test session, CI's cleanup).
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mm2spec.components import Components

from mm2spec.dev import process
from mm2spec.dev.certs import CLIENT_NAMES, ClusterCerts, ensure_certs
from mm2spec.dev.config import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    MM2_PASSWORD,
    MM2_USER,
    BrokerSpec,
    client_config,
    connect_worker_properties,
    secure_env,
    spec_fragment,
    tls_env,
)
from mm2spec.dev.connect import ConnectWorker, MirrorMaker
from mm2spec.dev.kafka import BROKER_HEAP, KafkaCluster, broker_ready
from mm2spec.dev.process import wait_all_ready
from mm2spec.dev.process import JavaProcess
from mm2spec.errors import DevError

#: Where ``mm2spec dev`` keeps data, logs and state unless told otherwise (git-ignored), relative
#: to the directory it runs in (the project root for scripts/demo), as the installed package has
#: no checkout to anchor it to.
DEFAULT_ROOT = Path(".mm2spec") / "dev"

#: How long each step of ``up`` (brokers, Connect, MM2) may take to become ready. A JVM that boots
#: in seconds on an idle machine takes minutes on two cores shared with builds and other JVMs;
#: the CLI's ``dev up --timeout`` has the same default.
READY_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class DevPorts:
    """Loopback ports of a dev environment; the defaults match the example spec's ``dev`` overlay."""

    primary: int = 19092
    primary_controller: int = 19093
    dr: int = 29092
    dr_controller: int = 29093
    connect: int = 8083
    primary_sasl_ssl: int = 19094
    """The SASL_SSL listener of ``primary`` (``--tls`` only; its SSL listener is ``primary``)."""
    dr_sasl_ssl: int = 29094

    @classmethod
    def free(cls) -> DevPorts:
        """Currently free ports away from the defaults (tests, parallel sessions)."""
        defaults = vars(cls())
        return cls(*process.pick_free_ports(len(defaults), avoid=tuple(defaults.values())))


@dataclass(frozen=True)
class DevState:
    """What runs, read back from the state file: enough to connect to it or to stop it."""

    root: Path
    secure: bool
    clusters: dict[str, BrokerSpec]
    processes: list[JavaProcess] = field(default_factory=list)
    connect_url: str | None = None
    tls: bool = False
    """Started with ``--tls``: each cluster's ``BrokerSpec`` has its SASL_SSL port and certificates."""

    @property
    def primary(self) -> BrokerSpec:
        return self.clusters["primary"]

    @property
    def dr(self) -> BrokerSpec:
        return self.clusters["dr"]

    def client_config(self, cluster: str, user: str = ADMIN_USER, listener: str | None = None) -> dict[str, str]:
        """confluent_kafka settings for ``cluster`` (``primary``/``dr``) as ``user``; on a TLS pair
        ``listener="sasl_ssl"`` picks SCRAM over TLS instead of mTLS (``config.client_config``)."""
        return client_config(self.clusters[cluster], user, listener)

    def certs(self, cluster: str) -> ClusterCerts:
        """The certificates of ``cluster`` (DevError unless the pair runs with TLS)."""
        return self.clusters[cluster].certs

    def spec_fragment(self, cluster: str, shape: str = "mtls") -> dict:
        """``cluster``'s entry for a spec, ``mtls`` or ``sasl_ssl`` (``config.spec_fragment``)."""
        return spec_fragment(self.clusters[cluster], shape)

    def process(self, name: str) -> JavaProcess | None:
        return next((p for p in self.processes if p.name == name), None)

    def to_json(self) -> dict:
        return {
            "root": str(self.root),
            "secure": self.secure,
            "clusters": {name: vars(spec) for name, spec in self.clusters.items()},
            "processes": [p.to_json() for p in self.processes],
            "connect_url": self.connect_url,
            "tls": self.tls,
            # For people and scripts reading the file; read back from each cluster's certs_dir.
            "certs": {name: spec.certs.to_json() for name, spec in self.clusters.items() if spec.tls},
        }

    @classmethod
    def from_json(cls, data: dict) -> DevState:
        return cls(
            root=Path(data["root"]),
            secure=data["secure"],
            clusters={name: BrokerSpec(**spec) for name, spec in data["clusters"].items()},
            processes=[JavaProcess.from_json(p) for p in data["processes"]],
            connect_url=data.get("connect_url"),
            tls=data.get("tls", False),
        )


class DevStack:
    """Start, inspect and stop the dev environment kept in ``root``.

    ``tie_to_parent=True`` makes the started processes die with the Python process that started
    them (pytest fixtures); the CLI leaves them running until ``dev down``. ``broker_heap``: the most
    heap each broker may take (``BROKER_HEAP``; a benchmark of 10,000 topics gives them more).
    """

    def __init__(
        self,
        root: Path | None = None,
        *,
        ports: DevPorts = DevPorts(),
        secure: bool = False,
        tls: bool = False,
        found: Components | None = None,
        tie_to_parent: bool = False,
        echo: Callable[[str], None] = print,
        broker_heap: str = BROKER_HEAP,
    ):
        self.root = Path(root or os.environ.get("MM2SPEC_DEV_DIR") or DEFAULT_ROOT).resolve()
        self.broker_heap = broker_heap
        self.ports = ports
        if secure and tls:
            raise DevError("--secure (SASL_PLAINTEXT) and --tls are two modes; choose one")
        self.secure = secure
        self.tls = tls
        self.found = found
        self.tie_to_parent = tie_to_parent
        self.echo = echo

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def certs_root(self) -> Path:
        """Where ``--tls`` keeps each cluster's CA and certificates (``certs/<cluster>``)."""
        return self.root / "certs"

    def specs(self) -> dict[str, BrokerSpec]:
        p = self.ports
        if self.tls:
            return {
                name: BrokerSpec(name, port, controller, tls=True, sasl_ssl_port=sasl_ssl,
                                 certs_dir=str(self.certs_root / name))
                for name, port, controller, sasl_ssl in (("primary", p.primary, p.primary_controller, p.primary_sasl_ssl),
                                                         ("dr", p.dr, p.dr_controller, p.dr_sasl_ssl))
            }
        return {
            "primary": BrokerSpec("primary", p.primary, p.primary_controller, self.secure),
            "dr": BrokerSpec("dr", p.dr, p.dr_controller, self.secure),
        }

    def up(
        self,
        *,
        with_connect: bool = True,
        connect_config: Path | None = None,
        mm2_config: Path | None = None,
        timeout: float = READY_TIMEOUT_S,
    ) -> DevState:
        """Start everything and wait until it is ready; on any failure stop what was started.

        Idempotent: when the environment asked for already runs from ``root``, nothing is started
        and its state is returned."""
        current = self.read_state()
        if current and any(p.alive() for p in current.processes):
            return self._already_running(current, with_connect=with_connect, with_mm2=mm2_config is not None)
        self.state_file.unlink(missing_ok=True)  # stale: everything in it has exited

        specs = self.specs()
        clusters = [KafkaCluster(spec, self.root, found=self.found, heap=self.broker_heap) for spec in specs.values()]
        worker = None
        if with_connect:
            config = Path(connect_config) if connect_config else self._default_connect_config(specs["dr"])
            worker = ConnectWorker(config, self.root, found=self.found, env=self._secret_env())
        mirrormaker = MirrorMaker(mm2_config, self.root, found=self.found, env=self._secret_env()) if mm2_config else None

        wanted = {port: f"{spec.name} {what}" for spec in specs.values() for port, what in spec.port_roles().items()}
        if worker:
            wanted[worker.rest_port] = "Connect REST"
        process.check_ports_free(wanted)

        state = DevState(self.root, self.secure, specs, tls=self.tls)
        try:
            if self.tls:
                ensure_certs(self.certs_root, tuple(specs), found=self.found)
            with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
                formatted = [c.spec.name for c, fresh in zip(clusters, pool.map(KafkaCluster.format, clusters)) if fresh]
            if formatted:
                self.echo(f"formatted new storage for {', '.join(formatted)} in {_short(self.root)}")
            self.echo(f"starting Kafka clusters {', '.join(specs)} (deadline {timeout:.0f}s)")
            # Started from this thread: a pdeathsig child dies with the thread that forked it.
            for cluster in clusters:
                state.processes.append(cluster.start(tie_to_parent=self.tie_to_parent))
                self._write_state(state)
            wait_all_ready({proc: _broker_check(spec) for proc, spec in zip(state.processes, specs.values())}, timeout=timeout)
            if worker:
                self.echo(f"starting Kafka Connect with {_short(worker.config)}")
                proc = worker.start(tie_to_parent=self.tie_to_parent)
                state.processes.append(proc)
                state = DevState(self.root, self.secure, specs, state.processes, worker.url, self.tls)
                self._write_state(state)
                wait_all_ready({proc: worker.ready}, timeout=timeout)
            if mirrormaker:
                self.echo(f"starting MirrorMaker 2 (dedicated mode) with {_short(mirrormaker.config)}")
                proc = mirrormaker.start(tie_to_parent=self.tie_to_parent)
                state.processes.append(proc)
                self._write_state(state)
                wait_all_ready({proc: mirrormaker.ready}, timeout=timeout)
        except BaseException:
            # Nothing half-started may outlive a failed `up` (KeyboardInterrupt included).
            process.stop_all(state.processes)
            self.state_file.unlink(missing_ok=True)
            raise
        if self.secure or self.tls:
            self._write_secure_env()
        self.echo(self.describe(state))
        return state

    def _already_running(self, current: DevState, *, with_connect: bool, with_mm2: bool) -> DevState:
        """The running environment, if it is the one asked for (every process alive, same security,
        Connect and MirrorMaker 2 as asked); otherwise a DevError that says what differs. Ports are not
        compared: the CLI always asks for the default ones."""
        wanted = set(current.clusters) | ({"connect"} if with_connect else set()) | ({"mirrormaker"} if with_mm2 else set())
        alive = {p.name for p in current.processes if p.alive()}
        differences = []
        if alive != wanted:
            differences.append(f"running: {', '.join(sorted(alive))}; asked for: {', '.join(sorted(wanted))}")
        if current.secure != self.secure:
            differences.append("it runs " + ("with" if current.secure else "without") + " --secure")
        if current.tls != self.tls:
            differences.append("it runs " + ("with" if current.tls else "without") + " --tls")
        if differences:
            raise DevError(f"a different dev environment is already running from {self.root} ({'; '.join(differences)}): "
                           "run `mm2spec dev down` first")
        self.echo(f"the dev environment is already running; nothing started\n{self.describe(current)}")
        return current

    def read_state(self) -> DevState | None:
        try:
            return DevState.from_json(json.loads(self.state_file.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as bad:
            raise DevError(f"{self.state_file} is damaged ({bad}); stop its processes by hand and delete it") from None

    def status(self) -> DevState | None:
        """The recorded state (None when nothing was started); ``describe`` says what still runs."""
        return self.read_state()

    def down(self, *, wipe: bool = False) -> list[str]:
        """Stop every recorded process (only those, by pid and command line); idempotent.

        Returns the names of the processes that were still running. ``wipe`` also deletes the
        clusters' data, logs and generated configs.
        """
        state = self.read_state()
        stopped: list[str] = []
        if state:
            # Connect and MM2 first, so they shut down cleanly while their brokers still answer.
            workers = [p for p in state.processes if p.name not in state.clusters]
            brokers = [p for p in state.processes if p.name in state.clusters]
            stopped = [p.name for p in state.processes if p.alive()]
            process.stop_all(workers)
            process.stop_all(brokers)
            self.state_file.unlink(missing_ok=True)
        process.reap_exited()  # ours may have been stopped by another process's `down`
        if wipe:
            for name in ("primary", "dr", "logs", "connect", "certs", "log4j2.properties", "secure.env"):
                target = self.root / name
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
        return stopped

    def describe(self, state: DevState | None) -> str:
        """Human-readable lines: what runs where, with pid and log."""
        if state is None:
            return f"no dev environment recorded in {self.root}"
        lines = []
        for proc in state.processes:
            spec = state.clusters.get(proc.name)
            if spec:
                where = f"{spec.bootstrap} ({spec.security_protocol})"
            else:
                where = state.connect_url if proc.name == "connect" else _short(proc.token)
            running = "running" if proc.alive() else "STOPPED"
            lines.append(f"  {proc.name:<12} {where:<32} pid {proc.pid:<7} {running:<8} log {_short(proc.log)}")
        if state.secure:
            lines.append(f"  users: {ADMIN_USER}/{ADMIN_PASSWORD} (super user), "
                         f"{MM2_USER}/{MM2_PASSWORD} (no ACLs), SCRAM-SHA-512")
            lines.append(f"  secrets for the spec: source {_short(self.root / 'secure.env')}")
        if state.tls:
            lines += _describe_tls(state, self.root / "secure.env")
        return "\n".join([f"dev environment in {_short(self.root)}:", *lines])

    def _default_connect_config(self, dr: BrokerSpec) -> Path:
        path = self.root / "connect" / "connect-distributed.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(connect_worker_properties(dr, rest_port=self.ports.connect))
        return path

    def _secret_env(self) -> dict[str, str]:
        # Rendered configs refer to passwords by env var name (EnvVarConfigProvider).
        if self.tls:
            return tls_env()
        return secure_env() if self.secure else {}

    def _write_secure_env(self) -> None:
        lines = [f"export {name}={value}\n" for name, value in self._secret_env().items()]
        (self.root / "secure.env").write_text("# dev-only passwords (fixed, documented)\n" + "".join(lines))

    def _write_state(self, state: DevState) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        scratch = self.state_file.with_suffix(".tmp")
        scratch.write_text(json.dumps(state.to_json(), indent=2))
        scratch.replace(self.state_file)


def _describe_tls(state: DevState, secrets: Path) -> list[str]:
    lines = []
    for name, spec in state.clusters.items():
        certs = spec.certs
        lines.append(f"  {name}: mTLS (SSL) {spec.bootstrap}, SASL_SSL {spec.sasl_ssl_bootstrap}; "
                     f"CA {_short(certs.ca)}")
        lines.append(f"  {'':<{len(name)}}  client certificates {_short(certs.folder)}/<user>.pem + <user>.key "
                     f"(CN=<user>: {', '.join(CLIENT_NAMES)})")
    lines.append(f"  users: CN={ADMIN_USER} and {ADMIN_USER}/{ADMIN_PASSWORD} (super user); CN={MM2_USER} and "
                 f"{MM2_USER}/{MM2_PASSWORD} (no ACLs); CN=intruder (no ACLs, ever); SCRAM-SHA-512 on SASL_SSL")
    lines.append(f"  secrets for the spec: source {_short(secrets)}")
    return lines


def _broker_check(spec: BrokerSpec) -> Callable[[], bool]:
    return lambda: broker_ready(spec)


def _short(path: str | Path) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)

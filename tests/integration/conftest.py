"""Session fixtures that start real Kafka clusters and Connect workers (no Docker, no mocks).

Every fixture uses its own temporary folder and free ports away from the ``mm2spec dev`` defaults,
so tests never collide with a running ``dev up`` or another test session. Processes are tied to
the pytest process: if it is killed, they go too.

A missing component (Java, the Kafka jars) fails the test when ``CI`` is set and skips it with
the install hint otherwise.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from mm2spec.errors import ComponentMissing
from mm2spec.dev import BrokerSpec, ConnectWorker, DevPorts, DevStack, DevState, JavaProcess, connect_worker_properties
from mm2spec.dev import process as dev_process
from mm2spec.dev.config import read_properties
from tests.kit.toxiproxy import ProxiedPair

from required import missing_component


def _start_pair(root: Path, *, secure: bool = False, tls: bool = False) -> tuple[DevStack, DevState]:
    stack = DevStack(root, ports=DevPorts.free(), secure=secure, tls=tls, tie_to_parent=True, echo=lambda _line: None)
    try:
        return stack, stack.up(with_connect=False, timeout=300)
    except ComponentMissing as exc:
        missing_component(exc)
        raise  # not reached: fail/skip raise


@pytest.fixture(scope="session")
def kafka_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevState]:
    """Clusters ``primary`` and ``dr`` (PLAINTEXT). ``kafka_pair.primary.bootstrap`` is the
    address; ``kafka_pair.client_config("dr")`` gives confluent_kafka settings."""
    stack, state = _start_pair(tmp_path_factory.mktemp("kafka-pair"), secure=False)
    yield state
    stack.down()


@pytest.fixture(scope="session")
def proxied_kafka_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedPair]:
    """Its own clusters ``primary`` and ``dr`` (PLAINTEXT), each also reachable through a Toxiproxy
    proxy (``specs[name].proxied_bootstrap``): tests may cut the proxies and restart the brokers."""
    try:
        pair = ProxiedPair.on_free_ports(tmp_path_factory.mktemp("proxied-pair"), tie_to_parent=True).up(timeout=300)
    except ComponentMissing as exc:
        missing_component(exc)
        raise  # not reached: fail/skip raise
    yield pair
    pair.down()


@pytest.fixture(scope="session")
def secure_kafka_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevState]:
    """Clusters ``primary`` and ``dr`` with SASL_PLAINTEXT/SCRAM-SHA-512 and the StandardAuthorizer;
    users ``admin`` (super user) and ``mm2`` (no ACLs): ``client_config("dr", "mm2")``."""
    stack, state = _start_pair(tmp_path_factory.mktemp("secure-kafka-pair"), secure=True)
    yield state
    stack.down()


@pytest.fixture(scope="session")
def tls_kafka_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevState]:
    """Clusters ``primary`` and ``dr`` with TLS, each with its own CA (``certs("dr")``): mTLS on the
    client port (``client_config("dr", "mm2")``: users admin, a super user, mm2 and intruder, no ACLs)
    and SCRAM-SHA-512 on SASL_SSL (``client_config("dr", "mm2", "sasl_ssl")``); the StandardAuthorizer.
    A missing openssl or keytool is a missing component, like Java."""
    stack, state = _start_pair(tmp_path_factory.mktemp("tls-kafka-pair"), tls=True)
    yield state
    stack.down()


@dataclass(frozen=True)
class RunningWorker:
    """A Connect worker started by the ``connect_worker`` fixture."""

    url: str
    """The REST base URL, e.g. ``http://127.0.0.1:23456``."""
    config: Path
    """The properties file it runs (a copy, when overrides were given)."""
    process: JavaProcess
    metrics_url: str | None = None
    """With ``metrics=``: the JMX exporter agent's ``http://127.0.0.1:<port>/metrics``."""


class ConnectWorkers:
    """Starts distributed Connect workers from properties files; each lives for the whole session
    and is shared by every test that asks for the same file and overrides."""

    def __init__(self, root: Path, request: pytest.FixtureRequest):
        self.root = root
        self._request = request
        self._running: dict[tuple, RunningWorker] = {}

    def __call__(
        self,
        config: Path | None = None,
        *,
        cluster: BrokerSpec | None = None,
        overrides: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        metrics: tuple[int, Path] | None = None,
        timeout: float = 300,
    ) -> RunningWorker:
        """Start (or reuse) a worker running ``config``, with ``overrides`` replacing keys of it.

        Without ``config``: a minimal worker (as admin, if secure) on ``cluster``, by default
        ``kafka_pair``'s dr cluster, on a free port. A
        rendered config's ``listeners``/``bootstrap.servers`` name the dev ports, so tests pass
        e.g. ``overrides={"bootstrap.servers": kafka_pair.dr.bootstrap, "listeners": "http://127.0.0.1:0"}``;
        a port of 0 is replaced by a free one. ``metrics=(port, jmx-exporter.yml)`` starts it with the
        Prometheus JMX exporter agent on that port (a missing agent jar fails the test in CI).
        """
        key = (str(config), cluster, tuple(sorted((overrides or {}).items())), tuple(sorted((env or {}).items())),
               metrics)
        if key in self._running and self._running[key].process.alive():
            return self._running[key]
        if config is None:
            if cluster is None:
                cluster = self._request.getfixturevalue("kafka_pair").dr
            port = dev_process.pick_free_ports(1)[0]
            text = connect_worker_properties(cluster, rest_port=port, group_id=f"it-connect-{uuid.uuid4().hex[:6]}")
        else:
            text = Path(config).read_text()
        text = _with_overrides(text, overrides or {})
        copy = self.root / f"worker-{len(self._running)}" / "connect-distributed.properties"
        copy.parent.mkdir(parents=True)
        copy.write_text(text)
        try:
            worker = ConnectWorker(copy, copy.parent, name="connect", env=env,
                                   metrics_port=metrics[0] if metrics else None,
                                   metrics_rules=metrics[1] if metrics else None)
        except ComponentMissing as exc:
            missing_component(exc)
        proc = worker.start(tie_to_parent=True)
        try:
            dev_process.wait_all_ready({proc: worker.ready}, timeout=timeout)
        except BaseException:
            dev_process.stop(proc)
            raise
        running = RunningWorker(worker.url, copy, proc,
                                metrics_url=f"http://127.0.0.1:{metrics[0]}/metrics" if metrics else None)
        self._running[key] = running
        return running

    def stop_all(self) -> None:
        dev_process.stop_all([w.process for w in self._running.values()])


@pytest.fixture(scope="session")
def connect_worker(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[ConnectWorkers]:
    """A factory: ``connect_worker(path, overrides={...})`` -> RunningWorker (``.url``)."""
    workers = ConnectWorkers(tmp_path_factory.mktemp("connect"), request)
    yield workers
    workers.stop_all()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_name("orders")`` -> ``orders-<test name>-<8 hex>``: a legal, unused topic/group name."""
    test = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:80]

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"

    return make


def _with_overrides(text: str, overrides: dict[str, str]) -> str:
    if not overrides:
        return text
    free = iter(dev_process.pick_free_ports(len(overrides)))
    overrides = {k: re.sub(r":0(/?)$", lambda m: f":{next(free)}{m.group(1)}", v) for k, v in overrides.items()}
    kept = [line for line in text.splitlines() if not _sets_key(line, overrides)]
    return "\n".join(kept + [f"{k}={v}" for k, v in overrides.items()]) + "\n"


def _sets_key(line: str, keys: dict[str, str]) -> bool:
    parsed = read_properties(line)
    return bool(parsed) and next(iter(parsed)) in keys

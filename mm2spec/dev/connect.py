"""Kafka Connect (distributed worker) and MirrorMaker 2 (dedicated mode) as Java processes.

Both start from a properties file the caller owns (normally rendered by ``mm2spec render``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from mm2spec.components import Components, components

from mm2spec.dev import process
from mm2spec.dev.config import HOST, read_properties, rest_port_of
from mm2spec.dev.process import JavaProcess
from mm2spec.errors import ConnectRequestFailed, DevError

MIRROR_SOURCE_CONNECTOR = "org.apache.kafka.connect.mirror.MirrorSourceConnector"


class ConnectWorker:
    """A distributed Connect worker (``ConnectDistributed``) running ``config``.

    Ready means its REST API answers ``GET /connectors`` and ``GET /connector-plugins`` lists
    MirrorSourceConnector, i.e. it joined its group and MM2's plugins loaded.

    With ``metrics_port`` (and ``metrics_rules``, the ``jmx-exporter.yml`` that ``mm2spec render``
    writes) it starts with the Prometheus JMX exporter java agent, serving MM2's and Connect's
    MBeans at ``http://127.0.0.1:<metrics_port>/metrics`` under the names of
    ``mm2spec.mm2.metric_names``, as the rendered ``connect-worker.env`` starts a real worker.
    """

    def __init__(
        self,
        config: Path,
        root: Path,
        *,
        name: str = "connect",
        found: Components | None = None,
        heap: str = "512m",
        env: dict[str, str] | None = None,
        metrics_port: int | None = None,
        metrics_rules: Path | None = None,
    ):
        self.config = Path(config).resolve()
        if not self.config.is_file():
            raise DevError(f"Connect worker config {self.config} does not exist")
        self.root = Path(root)
        self.name = name
        self.heap = heap
        self.env = env or {}
        self.java, self.libs = process.java_and_libs(found)
        try:
            self.rest_port = rest_port_of(read_properties(self.config.read_text()))
        except DevError as bad:
            raise DevError(f"{self.config}: {bad}") from None
        self.metrics_port = metrics_port
        self.agent: tuple[str, ...] = ()
        if metrics_port is not None:
            rules = Path(metrics_rules).resolve() if metrics_rules else None
            if rules is None or not rules.is_file():
                raise DevError(f"the JMX exporter's rules {rules or '(none given)'} do not exist: "
                               "`mm2spec render` writes jmx-exporter.yml for engine connect")
            jar = (found or components()).jmx_exporter_agent
            # HOST, not every interface: a dev worker's metrics stay on this machine.
            self.agent = (f"-javaagent:{jar}={HOST}:{metrics_port}:{rules}",)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.rest_port}"

    @property
    def log(self) -> Path:
        return self.root / "logs" / f"{self.name}.log"

    def start(self, *, tie_to_parent: bool = False) -> JavaProcess:
        ports = {self.rest_port: f"{self.name} REST"}
        if self.metrics_port is not None:
            ports[self.metrics_port] = f"{self.name} metrics (the JMX exporter agent)"
        process.check_ports_free(ports)
        command = process.java_command(
            self.java,
            self.libs,
            "org.apache.kafka.connect.cli.ConnectDistributed",
            [str(self.config)],
            log4j=process.log4j_config(self.root),
            heap=self.heap,
            jvm_options=self.agent,
        )
        return process.start(
            self.name,
            command,
            token=str(self.config),
            log=self.log,
            ports=tuple(ports),
            env=self.env,
            cwd=self.root,
            tie_to_parent=tie_to_parent,
        )

    def ready(self) -> bool:
        return connect_ready(self.url)


def connect_ready(url: str) -> bool:
    """True when the worker at ``url`` serves its REST API and offers MirrorSourceConnector."""
    try:
        connectors = _get_json(f"{url}/connectors")
        plugins = _get_json(f"{url}/connector-plugins")
    except (OSError, ValueError, ConnectRequestFailed):  # not up yet, or not answering properly yet
        return False
    return isinstance(connectors, list) and any(p.get("class") == MIRROR_SOURCE_CONNECTOR for p in plugins)


class MirrorMaker:
    """MirrorMaker 2 in dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``).

    Ready means it logged "Kafka MirrorMaker started" (all its herders are up) after this start.
    """

    def __init__(
        self,
        config: Path,
        root: Path,
        *,
        name: str = "mirrormaker",
        found: Components | None = None,
        heap: str = "512m",
        env: dict[str, str] | None = None,
    ):
        self.config = Path(config).resolve()
        if not self.config.is_file():
            raise DevError(f"MirrorMaker config {self.config} does not exist")
        self.root = Path(root)
        self.name = name
        self.heap = heap
        self.env = env or {}
        self.java, self.libs = process.java_and_libs(found)
        self._log_offset = 0

    @property
    def log(self) -> Path:
        return self.root / "logs" / f"{self.name}.log"

    def start(self, *, tie_to_parent: bool = False) -> JavaProcess:
        self._log_offset = self.log.stat().st_size if self.log.is_file() else 0
        command = process.java_command(
            self.java,
            self.libs,
            "org.apache.kafka.connect.mirror.MirrorMaker",
            [str(self.config)],
            log4j=process.log4j_config(self.root),
            heap=self.heap,
        )
        return process.start(
            self.name, command, token=str(self.config), log=self.log, env=self.env, cwd=self.root, tie_to_parent=tie_to_parent
        )

    def ready(self) -> bool:
        try:
            with open(self.log, "rb") as f:
                f.seek(self._log_offset)
                return b"Kafka MirrorMaker started" in f.read()
        except FileNotFoundError:
            return False


#: One readiness probe of the REST API. A worker that is up answers in milliseconds; one that is
#: still joining its group may hold the request, and then the next probe (every poll of
#: process.wait_all_ready) is as good as waiting longer on this one.
REST_PROBE_TIMEOUT_S = 3.0


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=REST_PROBE_TIMEOUT_S) as response:
        if response.status != 200:
            raise ConnectRequestFailed(f"{url}: HTTP {response.status}")
        return json.loads(response.read())

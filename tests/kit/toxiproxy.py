"""Faults on demand for the dev clusters: a Toxiproxy server in front of each cluster, and broker
restarts. Used by the fault-matrix tests and benchmarks (``tests/integration/test_faults.py``,
``benchmarks/fault_matrix.py``).

:class:`ProxiedPair` starts clusters ``primary`` and ``dr`` whose ``PROXIED`` listener advertises
the port of a Toxiproxy proxy (see :class:`~mm2spec.dev.config.BrokerSpec`): a mirror given the
proxied addresses talks to the clusters only through the proxies, while producers and checks use
the direct addresses, so cutting a proxy cuts the mirror off and nothing else.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from mm2spec.components import Components, components

from mm2spec.dev import process
from mm2spec.dev.config import BrokerSpec
from mm2spec.dev.kafka import KafkaCluster, broker_ready
from mm2spec.dev.process import JavaProcess
from mm2spec.dev.stack import DevState
from mm2spec.errors import DevError
from mm2spec.runtime.process import HOST

#: One call to Toxiproxy's REST API: it answers from memory in milliseconds; generous for a
#: machine whose two cores are busy with JVMs.
API_TIMEOUT_S = 10.0
#: Toxiproxy is a Go binary that listens within a second; brokers take far longer (``up`` timeout).
PROXY_READY_TIMEOUT_S = 60.0
#: Clusters of a ProxiedPair, like ``mm2spec dev``'s.
CLUSTERS = ("primary", "dr")


class Toxiproxy:
    """A Toxiproxy server on ``api_port`` (loopback) and its REST API."""

    def __init__(self, root: Path, api_port: int, *, found: Components | None = None):
        self.root = Path(root)
        self.api_port = api_port
        self.binary = (found or components()).toxiproxy_server

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.api_port}"

    def start(self, *, tie_to_parent: bool = False) -> JavaProcess:
        """Launch the server (does not wait: see ``ready``)."""
        command = [str(self.binary), "-host", HOST, "-port", str(self.api_port)]
        log = self.root / "logs" / "toxiproxy.log"
        return process.start("toxiproxy", command, token=str(self.binary), log=log, ports=(self.api_port,),
                             tie_to_parent=tie_to_parent)

    def ready(self) -> bool:
        try:
            self._call("GET", "/version")
        except DevError:
            return False
        return True

    def create(self, name: str, listen_port: int, upstream_port: int) -> None:
        """A proxy ``name`` from ``listen_port`` to ``upstream_port``, both on loopback."""
        self._call("POST", "/proxies", {"name": name, "listen": f"{HOST}:{listen_port}",
                                        "upstream": f"{HOST}:{upstream_port}", "enabled": True})

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Disabled: every open connection through ``name`` is closed and new ones are refused."""
        self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=API_TIMEOUT_S) as response:
                text = response.read()
        except urllib.error.HTTPError as failed:
            raise DevError(f"Toxiproxy {method} {path}: HTTP {failed.code} {failed.read()[:200]!r}") from None
        except (urllib.error.URLError, OSError) as failed:
            raise DevError(f"Toxiproxy at {self.url} did not answer {method} {path}: {failed}") from None
        return json.loads(text) if text.strip() else {}


@dataclass
class ProxiedPair:
    """Clusters ``primary`` and ``dr`` (PLAINTEXT), each behind a Toxiproxy proxy of its own name.

    ``cut(name)`` / ``heal(name)`` take the proxy down and up; ``restart(name)`` stops the broker
    and starts it again on the same storage. ``state`` is a DevState for client settings.
    """

    root: Path
    specs: dict[str, BrokerSpec]
    tie_to_parent: bool = False
    brokers: dict[str, JavaProcess] = field(default_factory=dict)
    proxy_process: JavaProcess | None = None
    proxy: Toxiproxy | None = None

    @classmethod
    def on_free_ports(cls, root: Path, *, tie_to_parent: bool = False) -> ProxiedPair:
        free = iter(process.pick_free_ports(4 * len(CLUSTERS) + 1))
        specs = {name: BrokerSpec(name, next(free), next(free), proxied_port=next(free), proxy_port=next(free))
                 for name in CLUSTERS}
        pair = cls(Path(root), specs, tie_to_parent)
        pair.proxy = Toxiproxy(pair.root, next(free))
        return pair

    def up(self, timeout: float) -> ProxiedPair:
        """Start the proxy and both brokers and wait for them; on failure stop what started."""
        clusters = [self._cluster(name) for name in CLUSTERS]
        try:
            self.proxy_process = self.proxy.start(tie_to_parent=self.tie_to_parent)
            process.wait_all_ready({self.proxy_process: self.proxy.ready}, timeout=PROXY_READY_TIMEOUT_S)
            for name, spec in self.specs.items():
                self.proxy.create(name, spec.proxy_port, spec.proxied_port)
            for cluster in clusters:
                cluster.format()
                self.brokers[cluster.spec.name] = cluster.start(tie_to_parent=self.tie_to_parent)
            self._wait_brokers(CLUSTERS, timeout)
        except BaseException:
            self.down()
            raise
        return self

    @property
    def state(self) -> DevState:
        """The pair as a DevState (bootstraps, client settings)."""
        running = [p for p in (*self.brokers.values(), self.proxy_process) if p is not None]
        return DevState(self.root, False, dict(self.specs), running)

    def cut(self, name: str) -> None:
        """Sever every connection through ``name``'s proxy; refuse new ones until ``heal``."""
        self.proxy.set_enabled(name, False)

    def heal(self, name: str) -> None:
        self.proxy.set_enabled(name, True)

    def restart(self, name: str, timeout: float) -> None:
        """Stop ``name``'s broker (SIGTERM: a controlled shutdown), start it on the same storage
        and wait until it answers again."""
        process.stop(self.brokers[name])
        self.brokers[name] = self._cluster(name).start(tie_to_parent=self.tie_to_parent)
        self._wait_brokers((name,), timeout)

    def down(self) -> None:
        process.stop_all([*self.brokers.values(), *([self.proxy_process] if self.proxy_process else [])])

    def _cluster(self, name: str) -> KafkaCluster:
        return KafkaCluster(self.specs[name], self.root)

    def _wait_brokers(self, names, timeout: float) -> None:
        checks = {self.brokers[n]: (lambda spec=self.specs[n]: broker_ready(spec)) for n in names}
        process.wait_all_ready(checks, timeout=timeout)

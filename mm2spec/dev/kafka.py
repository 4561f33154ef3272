"""A single-node KRaft Kafka cluster (combined broker + controller) started as a Java process."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from mm2spec.components import Components

from mm2spec.dev import process
from mm2spec.dev.config import (
    ADMIN_USER,
    BrokerSpec,
    broker_properties,
    client_config,
    fingerprint,
    format_args,
    new_cluster_id,
)
from mm2spec.dev.process import JavaProcess
from mm2spec.errors import DevError

# librdkafka reports every refused connection while a broker boots; readiness polling expects them.
_QUIET = logging.getLogger("mm2spec.dev.readiness")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

#: StorageTool formats an empty data folder with 2-3 s of CPU (a JVM start, class loading, SCRAM
#: hashing). Its limit is CPU time, not wall time, so the machine's load does not decide: on two
#: shared cores under heavy load a format's wall time runs to minutes while its CPU stays the same.
#: Twenty times its usual CPU is a runaway.
FORMAT_CPU_LIMIT_S = 60.0
#: Wall time only for a format blocked for good (a lock, a hung disk); load alone never gets there.
FORMAT_WALL_LIMIT_S = 1800.0
#: One readiness probe (a metadata request): a broker that is up answers in milliseconds. Short,
#: because ``wait_all_ready`` probes again every poll until its own deadline.
BROKER_PROBE_TIMEOUT_S = 3.0
# The most heap a dev broker may take: Kafka's own start script's (-Xmx1G). With half that, a pair
# holding 10,000 topics and 60,000 ACL bindings fills its old generation and spends most of its time
# in full collections, which every request waits on (pulumi/README.md, Scale). The heap starts at
# 64m and grows only as a broker needs it.
BROKER_HEAP = "1g"


class KafkaCluster:
    """One dev cluster: its files live in ``<root>/<name>/``, its log in ``<root>/logs/<name>.log``.

    ``format()`` prepares storage once (again only if the generated config changed, e.g. other
    ports or secure mode); ``start()`` launches ``kafka.Kafka``; ``wait_ready()`` blocks until a
    client can fetch metadata from it.
    """

    def __init__(self, spec: BrokerSpec, root: Path, *, found: Components | None = None, heap: str = BROKER_HEAP):
        self.spec = spec
        self.root = Path(root)
        self.heap = heap
        self.java, self.libs = process.java_and_libs(found)

    @property
    def home(self) -> Path:
        return self.root / self.spec.name

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"

    @property
    def log(self) -> Path:
        return self.root / "logs" / f"{self.spec.name}.log"

    def format(self) -> bool:
        """Write the config and format storage if needed; True when it formatted."""
        data = self.home / "data"
        text = broker_properties(self.spec, data)
        stamp = self.home / "formatted.json"
        wanted = fingerprint(text)
        formatted = (data / "meta.properties").is_file() and stamp.is_file()
        if formatted and json.loads(stamp.read_text()).get("config") == wanted:
            return False
        # Storage formatted for another config (ports, security) cannot be reused: the controller's
        # voter endpoint and the SCRAM users are written into the metadata log at format time.
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        self.properties.write_text(text)
        log4j = process.log4j_config(self.root)
        command = process.java_command(
            self.java,
            self.libs,
            "kafka.tools.StorageTool",
            format_args(self.spec, new_cluster_id(), self.properties),
            log4j=log4j,
            heap="256m",
        )
        process.run_to_completion(command, log=self.log, cpu_limit=FORMAT_CPU_LIMIT_S,
                                  wall_limit=FORMAT_WALL_LIMIT_S, what=f"formatting cluster {self.spec.name!r}")
        stamp.write_text(json.dumps({"config": wanted}))
        return True

    def start(self, *, tie_to_parent: bool = False) -> JavaProcess:
        """Launch the broker (call ``format()`` first). Does not wait: see ``wait_ready``."""
        if not self.properties.is_file():
            raise DevError(f"cluster {self.spec.name!r} is not formatted (no {self.properties})")
        command = process.java_command(
            self.java, self.libs, "kafka.Kafka", [str(self.properties)], log4j=process.log4j_config(self.root), heap=self.heap
        )
        return process.start(
            self.spec.name,
            command,
            token=str(self.properties),
            log=self.log,
            ports=self.spec.ports,
            cwd=self.home,
            tie_to_parent=tie_to_parent,
        )

    def ready(self) -> bool:
        """One quick probe: does the broker answer a metadata request and list itself?"""
        return broker_ready(self.spec)


def broker_ready(spec: BrokerSpec, timeout: float = BROKER_PROBE_TIMEOUT_S) -> bool:
    """True when ``spec``'s broker answers metadata with itself registered (admin credentials)."""
    if not process.listening(spec.port):
        return False  # cheap check first: no librdkafka client while nothing listens
    from confluent_kafka.admin import AdminClient  # imported late: the CLI should start fast

    admin = AdminClient({**client_config(spec, ADMIN_USER), "logger": _QUIET})
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False
    return bool(metadata.brokers)

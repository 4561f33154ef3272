"""dev: a local DR setup on this machine, without Docker, for the demo, tests and benchmarks.

- ``stack``, ``kafka``, ``connect``, ``config``, ``process``: single-node KRaft clusters ``primary``
  and ``dr``, a Kafka Connect worker and MirrorMaker 2 in dedicated mode, as Java processes
  (``mm2spec dev up|status|down`` and the integration-test fixtures)
- ``certs``: a private CA per cluster and the client certificates of ``mm2spec dev up --tls``
- ``spark``: a Spark standalone cluster (master + worker) from the pip pyspark distribution
- ``demo``: the demo's data: seed the source topics, wait until the target has them

The jars come from ``scripts/install-kafka.sh``; see :mod:`mm2spec.components`.

May import: ``spec``, ``live``, ``runtime`` (process helpers), ``components``, ``errors``.
Never ``plan``, ``provision``, ``ops`` or ``cli``; never prints.
"""

from mm2spec.dev.certs import ClusterCerts, ensure_certs, ensure_cluster_certs
from mm2spec.dev.config import (
    ADMIN_PASSWORD,
    ADMIN_PASSWORD_ENV_VARS,
    ADMIN_USER,
    MM2_PASSWORD,
    MM2_USER,
    PASSWORD_ENV_VARS,
    BrokerSpec,
    client_config,
    connect_worker_properties,
    java_client_properties,
    secure_env,
    spec_fragment,
    tls_env,
)
from mm2spec.dev.connect import ConnectWorker, MirrorMaker, connect_ready
from mm2spec.dev.kafka import KafkaCluster, broker_ready
from mm2spec.dev.process import JavaProcess
from mm2spec.errors import DevError, NotReady, PortInUse
from mm2spec.dev.stack import DEFAULT_ROOT, DevPorts, DevStack, DevState

__all__ = [
    "ADMIN_PASSWORD",
    "ADMIN_PASSWORD_ENV_VARS",
    "ADMIN_USER",
    "MM2_PASSWORD",
    "MM2_USER",
    "PASSWORD_ENV_VARS",
    "DEFAULT_ROOT",
    "BrokerSpec",
    "ClusterCerts",
    "ConnectWorker",
    "DevError",
    "DevPorts",
    "DevStack",
    "DevState",
    "JavaProcess",
    "KafkaCluster",
    "MirrorMaker",
    "NotReady",
    "PortInUse",
    "broker_ready",
    "client_config",
    "connect_ready",
    "connect_worker_properties",
    "ensure_certs",
    "ensure_cluster_certs",
    "java_client_properties",
    "secure_env",
    "spec_fragment",
    "tls_env",
]

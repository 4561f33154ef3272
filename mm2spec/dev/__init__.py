"""Real Kafka components on this machine, without Docker: single-node KRaft clusters ``primary`` and
``dr``, a Kafka Connect worker and MirrorMaker 2 in dedicated mode, as Java processes.

Used by ``mm2spec dev up|status|down`` and by the integration-test fixtures. The jars come from
``scripts/install-kafka.sh``; see :mod:`mm2spec.components`.
"""

from mm2spec.dev.config import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    MM2_PASSWORD,
    MM2_USER,
    PASSWORD_ENV_VARS,
    BrokerSpec,
    client_config,
    connect_worker_properties,
    java_client_properties,
    secure_env,
)
from mm2spec.dev.connect import ConnectWorker, MirrorMaker, connect_ready
from mm2spec.dev.kafka import KafkaCluster, broker_ready
from mm2spec.dev.process import JavaProcess
from mm2spec.errors import DevError, NotReady, PortInUse
from mm2spec.dev.stack import DEFAULT_ROOT, DevPorts, DevStack, DevState

__all__ = [
    "ADMIN_PASSWORD",
    "ADMIN_USER",
    "MM2_PASSWORD",
    "MM2_USER",
    "PASSWORD_ENV_VARS",
    "DEFAULT_ROOT",
    "BrokerSpec",
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
    "java_client_properties",
    "secure_env",
]

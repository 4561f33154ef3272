"""What each mirroring engine means before anything runs: the compile-time facts, in one table
keyed by the spec's ``engine`` name.

The spec compiler is offline and sits below ``mm2spec.engines`` (which renders, starts, stops
and restarts each engine), so what it needs to know about an engine is written here, once, as
data: no module outside ``mm2spec.engines`` branches on an engine's name.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ENGINE = "spark"
"""The engine a spec without ``engine`` runs."""


@dataclass(frozen=True)
class EngineFacts:
    """One engine's compile-time facts."""

    name: str
    """The spec's ``engine`` value."""
    writer_names_on_target: bool
    """Its exactly-once writer owns names on the target cluster (a progress group and a
    transactional-id prefix per flow, ``spark_eos``) that the mirror's principal must be granted.
    Connect's transactional ids are the worker's, granted for the worker whatever the engine."""
    runs_on_connect_workers: bool = False
    """MM2's connectors on Kafka Connect workers move the data: MM2's figures are the workers' MBeans,
    read by the Prometheus JMX exporter agent there, and the DR figures come from mm2spec's DR
    exporter. Otherwise the engine's own process serves both on its ``/metrics``."""
    runs_spark_job: bool = False
    """Its flows run in the Spark job the spec's ``spark`` section configures, so that section's run
    mode rules (``spark_modes``) apply to the spec."""


ENGINE_FACTS = {facts.name: facts for facts in (
    EngineFacts("spark", writer_names_on_target=True, runs_spark_job=True),
    EngineFacts("connect", writer_names_on_target=False, runs_on_connect_workers=True),
)}
"""Every engine mm2spec runs, by name (the spec schema's ``engine`` enum)."""


def engine_facts(name: str) -> EngineFacts:
    """The facts of engine ``name`` (a validated spec names one of ``ENGINE_FACTS``)."""
    return ENGINE_FACTS[name]

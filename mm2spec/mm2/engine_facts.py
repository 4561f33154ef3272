"""Every mirroring engine mm2spec runs, in one table keyed by the spec's ``engine`` name: what each
means before anything runs, and where the rest of it lives.

The spec compiler, the renderer and the plan formats are offline and sit below
``mm2spec.engines`` (which starts, stops and restarts each engine), so what they need to know about
an engine is written here, once, as data, and no module branches on an engine's name. The layers
above find the engine's code by name from the module paths its entry gives (``renderer``,
``module``), each in its own layer, the way dbt finds an adapter's plugin: adding an engine is its
own modules and one ``EngineFacts`` line below (ARCHITECTURE.md, "Adding an engine").
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ENGINE = "spark"
"""The engine a spec without ``engine`` runs."""


@dataclass(frozen=True)
class EngineFacts:
    """One engine's descriptor as the offline layers see it."""

    name: str
    """The spec's ``engine`` value (the spec schema's ``engine`` enum lists every name)."""
    title: str
    """How messages and plan headings name it (``Spark``, ``Connect``)."""
    section: str
    """The spec section that configures its deployment (``spark``, ``connect``): the model's
    ``DesiredState`` attribute of that name, whose ``exporter_port`` is its DR exporter's port."""
    plan_heading: str
    """The heading of its part of a plan; its changes carry its ``name`` as their scope."""
    renderer: str
    """``module:function`` in ``mm2spec.render``: the files its deployment needs, from a
    ``DesiredState`` (``mm2spec render`` writes every engine's)."""
    module: str
    """The module in ``mm2spec.engines`` whose ``DESCRIPTOR`` is its ``engines.EngineDescriptor``
    (its ``Engine`` class and the Pulumi resource kinds provisioning registers for it)."""
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
    EngineFacts("spark", "Spark", "spark", "Spark mirroring deployment", "mm2spec.render.kubernetes:spark_engine_files",
                "mm2spec.engines.spark", writer_names_on_target=True, runs_spark_job=True),
    EngineFacts("connect", "Connect", "connect", "Kafka Connect", "mm2spec.render.connect:engine_files",
                "mm2spec.engines.connect", writer_names_on_target=False, runs_on_connect_workers=True),
)}
"""Every engine mm2spec runs, by name, in the order messages list them."""


def engine_facts(name: str) -> EngineFacts:
    """The facts of engine ``name`` (a validated spec names one of ``ENGINE_FACTS``)."""
    return ENGINE_FACTS[name]


def engine_names(joiner: str = " or ", quote: str = "") -> str:
    """The engine names for messages: ``spark or connect`` (``quote="'"``: ``'spark' or 'connect'``)."""
    names = [f"{quote}{name}{quote}" for name in ENGINE_FACTS]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])}{joiner}{names[-1]}"

"""mm2spark: the Spark mirroring job that replaces MirrorMaker 2's data path (see spark/README.md).

Modules, each calling only the ones listed before it (tests/unit/test_layers.py checks the order):

- ``config``: the rendered job config (spark-mirror.json, MM2 key names and defaults) as typed values
- ``topics``: MM2's topic/group filters and replication policies (mm2spec.mm2) applied to a flow
- ``records``: MM2's binary layouts: OffsetSync and Checkpoint records
- ``offsets``: offset-sync emission (MM2's offset.lag.max rule) and translation
- ``kafka``: confluent-kafka clients: admin calls, topic creation, internal topics
- ``eos``: the exactly-once protocol (one transaction per source partition per micro-batch)
- ``writer``: the driver's side of the JVM writer each micro-batch is handed to
- ``groups``: checkpoints and consumer group offset sync (MirrorCheckpointConnector's work)
- ``metrics``: per-topic throughput/latency, StreamingQueryListener, status file
- ``prometheus``: the driver's ``/metrics`` (MM2's per-partition figures, the flows' own), Prometheus's text format
- ``pipeline``: the streaming queries (one per flow) and their per-batch work

MM2's rules are not copied here: they are ``mm2spec.mm2``, shared with mm2spec's plan, and errors
are ``mm2spec.errors``' classes. This package is shipped to executors with addPyFile, in one zip
with those two (stdlib only; ``pipeline.package_zip``); it must not be named ``spark`` or ``pyspark``.
It ships inside mm2spec's wheel, so its version is mm2spec's (``mm2spec.__version__``, the one source).
"""

from mm2spec import __version__

__all__ = ["__version__"]

"""MirrorMaker 2's own rules, written once as plain constants and functions.

What MM2 decides by itself, whatever engine mirrors (each name cites the MM2 class it mirrors,
Kafka 4.3, ``org.apache.kafka.connect.mirror``):

- ``policy``: how a replication policy names remote topics and MM2's internal topics (and each
  flow's probe topic and group, mm2spec's, which every mirror carries)
- ``selection``: which topics, groups and topic configs it replicates and which it never does
- ``defaults``: the defaults of its other settings
- ``records``: the binary layouts of its offset syncs and checkpoints
- ``offsets``: how it translates a group's offset through offset syncs
- ``retry``: the one retry of retriable Kafka errors, the chunking of bulk admin calls and the
  watch for a librdkafka client that lost a partition leader for good (it must be replaced)

Beside them, mm2spec's own rules of the same kind, and what mm2spec and the Spark job agree on:

- ``engine_facts``: the engines' compile-time facts
- ``spark_eos``: the Spark writer's exactly-once names
- ``spark_checkpoint``: the start-offsets file a failback leaves beside a checkpoint
- ``versions``: the one table of version rules (what a spec needs of the brokers' and the Connect
  worker's versions: refused, or warned where it only works worse)
- ``spark_modes``: what each Spark run mode (micro-batch, Real-time) needs of a config
- ``metric_names``: the one table of Prometheus metric names (MM2's where MM2 has one, ``mm2spec_*``
  for the DR figures) that the JMX exporter rules, the Spark job, alerts and dashboard share
- ``tls``: a cluster's TLS settings (CA, client certificate, stores) in each client family's form:
  Kafka Java properties, librdkafka settings, a Python ``ssl`` context, and their offline checks

The spec model, the plan, the Pulumi program and the Spark job (on its driver and, shipped as a
zip with ``addPyFile``, on its executors) all read these, so they cannot drift apart. Hence:
this package may import only the standard library and ``mm2spec.errors`` (itself stdlib only).
"""

"""MirrorMaker 2's own rules, written once as plain constants and functions.

What MM2 decides by itself, whatever engine mirrors: how a replication policy names remote topics
and MM2's internal topics (``policy``), which topics, groups and topic configs it replicates and
which it never does (``selection``), the defaults of its other settings (``defaults``), and the
binary layouts of its offset syncs and checkpoints (``records``). Each
name cites the MM2 class it mirrors (Kafka 4.3, ``org.apache.kafka.connect.mirror``).

The spec model, the plan, the Pulumi program and the Spark job (on its driver and, shipped as a
zip with ``addPyFile``, on its executors) all read these, so they cannot drift apart. Hence:
this package may import only the standard library and ``mm2spec.errors`` (itself stdlib only).
"""

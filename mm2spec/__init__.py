"""mm2spec: declarative Kafka disaster recovery with MirrorMaker 2, Spark and Pulumi."""

__version__ = "0.1.0"

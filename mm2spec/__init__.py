"""mm2spec: declarative Kafka disaster recovery with MirrorMaker 2, Spark and Pulumi."""

__version__ = "0.1.0"
"""The one version of mm2spec: the wheel's (pyproject.toml reads it), ``--version``'s and the Spark job's."""

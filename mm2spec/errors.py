"""Every error mm2spec reports to a user, in one taxonomy.

The CLI turns each ``Mm2specError`` into its message and exit code 1, never a traceback; anything
else that reaches the CLI is an internal error (a bug). Each class says what happened and its
message says what to do. Modules raise these; none defines an error class of its own.

    Mm2specError
    ├── SpecError                 the DR spec (or a baseline spec) cannot be used
    │   ├── SpecUnreadable        the file cannot be read
    │   ├── SpecSyntaxError       not readable YAML, or not a mapping
    │   ├── SpecInvalid           schema and semantic problems, all at once (FILE:LINE:COL each)
    │   ├── UnknownEnvironment    --env names an environment the spec does not define
    │   ├── UnknownCluster        a cluster alias the spec does not define
    │   └── BaselineUnavailable   promote's baseline (file or git revision) cannot be read
    ├── SecretMissing             a secret the spec names is not set
    ├── ComponentMissing          Java, the Kafka or Spark jars, or the Pulumi CLI are not installed
    ├── OutputUnwritable          rendered files cannot be written where --out says
    ├── InitRefused               `mm2spec init` cannot write the repository as asked (a flag, a non-empty folder)
    ├── ClusterError              talking to a live cluster failed
    │   ├── ClusterUnreachable    a Kafka cluster did not answer
    │   ├── KafkaOperationFailed  an admin request, produce or commit failed (names what)
    │   ├── ConnectUnreachable    the Connect REST API did not answer
    │   ├── ConnectRequestFailed  the Connect REST API answered with an error
    │   └── RecordMalformed       a record of an MM2 internal topic is not in MM2's binary layout
    ├── MirrorError               the Spark mirroring job could not be started, stopped or inspected
    │   └── JobConfigError        the job's config (spark-mirror.json) is unusable
    ├── ProvisionFailed           a Pulumi provider operation cannot be carried out
    ├── PlaybookError             a DR playbook cannot run as asked
    │   ├── PlaybookInvalid       the playbook file has problems, all at once (FILE:LINE:COL each)
    │   └── OperationRefused      a DR operation would be unsafe now (active group, unknown --limit ...)
    │       └── LeaseHeld         another run holds the DR pair's lease (who, since when, how to take over)
    └── DevError                  the local dev environment could not be started or stopped
        ├── PortInUse             a port it needs is taken
        └── NotReady              a started process did not become ready in time

Stdlib only: the Spark job's executors import this module too.
"""

from __future__ import annotations


class Mm2specError(Exception):
    """Base of every error mm2spec reports to a user."""


# ------------------------------------------------------------------------------------- the spec

class SpecError(Mm2specError):
    """The DR spec cannot be used as written: fix the file."""


class SpecUnreadable(SpecError):
    """The spec file cannot be read (missing, a directory, not UTF-8): the message says which."""


class SpecSyntaxError(SpecError):
    """The file is not readable YAML (or not a YAML mapping); the message has FILE:LINE:COL."""

    def __init__(self, pos, message: str):
        super().__init__(f"{pos}: {message}")
        self.pos = pos
        """Where the problem is (``mm2spec.spec.document.Position``)."""
        self.message = message


class SpecInvalid(SpecError):
    """The spec has one or more problems; ``diagnostics`` lists them all, each with its place."""

    def __init__(self, diagnostics: list):
        self.diagnostics = sorted(set(diagnostics))
        count = len(self.diagnostics)
        super().__init__("\n".join(map(str, self.diagnostics)) + f"\n{count} error{'s' if count != 1 else ''} found")


class UnknownEnvironment(SpecError):
    """``--env`` names an environment the spec does not define: use one it lists."""


class UnknownCluster(SpecError, LookupError):
    """A cluster alias the spec does not define: define it under ``clusters`` or fix the alias."""


class BaselineUnavailable(SpecError):
    """The baseline spec (file or git revision) cannot be read: check the path or revision."""


# --------------------------------------------------------------------------- this machine's setup

class SecretMissing(Mm2specError):
    """A secret the spec names is not set: export it, or set it as a Pulumi secret."""


class TlsInvalid(Mm2specError):
    """A cluster's TLS settings cannot be used: a file missing or unreadable, not in the form a client
    needs, a certificate expired, a password that does not open a store or key, or a broker whose
    certificate the CA did not sign or does not name the host. The message names the cluster, the
    spec field and the cause; nothing was applied."""


class ComponentMissing(Mm2specError):
    """A real component (Java, Kafka jars, Spark jars, Pulumi CLI) is not installed: run scripts/setup."""


class OutputUnwritable(Mm2specError):
    """Rendered files cannot be written to the output folder (it is a file, or it is not writable);
    nothing was written."""


class InitRefused(Mm2specError):
    """``mm2spec init`` cannot write the repository as asked: a flag is unusable, or the folder holds
    files (``--force`` adds the repository's files next to them); the message names which. Nothing
    was written."""


# ---------------------------------------------------------------------------------- live systems

class ClusterError(Mm2specError):
    """Talking to a live Kafka cluster or Connect worker failed."""


class ClusterUnreachable(ClusterError):
    """A Kafka cluster did not answer within the timeout: check the address and that it runs."""


class KafkaOperationFailed(ClusterError):
    """A Kafka operation (admin request, produce, commit) failed; the message names the cluster or
    flow and the resource."""


class ConnectUnreachable(ClusterError):
    """The Connect REST API did not answer: check connect.restUrl and that the worker runs."""


class ConnectRequestFailed(ClusterError):
    """The Connect REST API answered with an error (its message is passed on)."""


class VersionUnsupported(ClusterError):
    """A cluster or Connect worker is older than what the spec needs (``mm2spec.mm2.versions``):
    the message names it, its version, the feature and the version that has it."""


class RecordMalformed(ClusterError, ValueError):
    """A record of an MM2 internal topic (offset syncs, checkpoints) is not in MM2's binary layout
    (something other than MM2 or mm2spec wrote it), or a value to be written does not fit that
    layout (a name too long for Kafka's STRING); the message says which field. A ValueError too,
    so readers that skip undecodable records keep doing so."""


# ----------------------------------------------------------------------------------- operations

class KubernetesError(ClusterError):
    """The Kubernetes API server refused or failed a request (kubectl's message is passed on)."""


class SparkOperatorMissing(KubernetesError):
    """The cluster has no SparkApplication CRD: install the Kubeflow Spark Operator."""


class MirrorError(Mm2specError):
    """The Spark mirroring job could not be started, stopped or inspected; see its log."""


class JobConfigError(MirrorError, ValueError):
    """The job config is unusable; the message names the key, never a secret value."""


class ProvisionFailed(Mm2specError):
    """A Pulumi provider operation cannot be carried out; the message says what to do."""


class PlaybookError(Mm2specError):
    """A DR playbook cannot run as asked: the message says what to change."""


class PlaybookInvalid(PlaybookError):
    """The playbook has one or more problems; ``diagnostics`` lists them all, each with its place."""

    def __init__(self, diagnostics: list):
        self.diagnostics = sorted(set(diagnostics))
        count = len(self.diagnostics)
        super().__init__("\n".join(map(str, self.diagnostics)) + f"\n{count} error{'s' if count != 1 else ''} in the playbook")


class OperationRefused(PlaybookError):
    """A DR operation would be unsafe or cannot apply (a group active on DR, a ``--limit`` that
    matches nothing): nothing was changed; the message names what to do."""


class LeaseHeld(OperationRefused):
    """Another run holds the DR pair's lease (one operation at a time): the message says who, since
    when, for which operation, and how to take a dead run's lease over; nothing was changed."""


class DevError(Mm2specError):
    """A dev environment could not be started, inspected or stopped."""


class PortInUse(DevError):
    """A port the dev environment needs is already taken by another process."""


class NotReady(DevError):
    """A started process did not become ready before its deadline (it has been stopped)."""

"""What every mm2spec dynamic provider shares, so that each resource module holds only its own part.

A resource module (``topic``, ``acl``, ``connector``, ``files``, ``worker_config``,
``spark_deployment``) keeps its inputs (``input_keys``), what forces a replacement
(``identity_keys``, ``deletes_first`` and whatever its ``diff_properties`` decides), its checks
(``problems``), its diff and its create / update / delete. ``Provider`` holds the skeleton around
them:

- ``check`` reports every problem at once (Pulumi shows them all, and preview and up stop before
  touching anything);
- ``diff``: a changed identity input replaces the resource; otherwise the resource's own
  ``diff_properties`` decides, with ``changed_inputs`` for inputs it compares as they are
  (secrets never: rotating a password is no change);
- ``outputs``: the recorded state is the inputs (secrets included, declared secret outputs by
  ``ProvisionedResource``) plus what the provider learned, e.g. ``adopted``;
- ``configure`` keeps the stack's secret config given to the provider host
  (``connection.current_secret``), so ``delete`` can use a password rotated since;
- ``leave_adopted``: ``delete`` leaves what existed before the stack took it over;
- ``apply_create`` / ``apply_update``: what the plugin calls. A create or update that fails after
  it started something live (a running Spark job, a registered connector) returns a
  ``FailedAfterStart`` instead of raising: the plugin records it as a partial create (Pulumi's
  ``ErrorResourceInitFailed``), so ``destroy`` stops or deletes it and the next ``up`` updates it.
  A dynamic provider cannot record a failed create (the SDK's dynamic provider host passes no
  partial state), so its ``create`` / ``update`` undo what was started first (``undone``);
- ``read`` (``pulumi refresh``): the recorded outputs with what the resource's ``read_live``
  found on the cluster, in the shape ``diff`` compares, so the preview after a refresh shows the
  change back to the spec (the diff ``mm2spec plan`` makes). Each kind's live read is a plain
  function of its module (``read_topic``, ``read_acl``, ...), not tied to this class.

Why a base class is safe for the state: Pulumi pickles the provider *instance* (dill), which
references its class by module and name (``mm2spec.provision.topic.TopicProvider``); the base is
found again when the provider host imports that module, and nothing of it is written into the
state. Hence the rules: the concrete provider classes keep their names and modules (existing
stacks hold those references), and a provider keeps nothing on the instance (no client, no
secret: everything here is a class attribute or a method), so it pickles to the same few dozen
bytes and never as a secret.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Mapping

import pulumi
from pulumi.dynamic import (CheckFailure, CheckResult, ConfigureRequest, CreateResult, DiffResult, ReadResult,
                            Resource, ResourceProvider, UpdateResult)

from mm2spec.engines import DeploymentResource
from mm2spec.errors import ProvisionFailed
from mm2spec.provision import connection
from mm2spec.spec.model import DesiredState

#: The cyclic garbage collector's thresholds in the Pulumi program (``fewer_collections``).
GC_THRESHOLDS = (50_000, 10, 10)


def fewer_collections() -> None:
    """Let Python's cyclic garbage collector run less often in this process (the Pulumi program).

    The program allocates a few hundred objects per resource (Outputs, futures, protobuf values)
    that live for the run, so with Python's default (a young collection every 700 allocations) the
    collector runs thousands of times over objects that are never garbage, a large share of the
    program's CPU with thousands of resources; a young generation of 50,000 leaves it a small one,
    at no cost in peak memory. The older generations keep their defaults, so garbage in cycles is
    still collected. The plugin's collector costs it little: it keeps Python's defaults. Figures:
    pulumi/README.md, "Scale"."""
    gc.set_threshold(*GC_THRESHOLDS)


#: Output of a resource that existed before the stack created it (a topic, a connector): the stack
#: took it over as it was, and ``destroy`` leaves it, since its data or config was not the stack's.
ADOPTED = "adopted"
#: Where Pulumi puts the pickled provider among the inputs; not an input of ours, never compared.
_PROVIDER_KEY = "__provider"


@dataclass(frozen=True)
class FailedAfterStart:
    """A create or update that failed after it had started something live (a Spark job, a connector
    registered on Connect): what the stack records of it, or how to undo it where nothing can be recorded."""

    id: str
    """The resource's ID, as a successful create would have recorded it."""
    outputs: dict[str, Any]
    """The outputs to record: what ``destroy`` and the next ``up`` need to find what was started."""
    reason: str
    """Why it failed, as the error shows it."""
    kept: str
    """What the error adds when it is recorded (what was left, and what stops it)."""
    undo: Callable[[], str]
    """Stops or deletes what was started; what the error adds then ("" when there was nothing to undo)."""

    @property
    def recorded_message(self) -> str:
        return f"{self.reason} ({self.kept})"


def undone(result):
    """``result`` of an ``apply_create`` / ``apply_update``, for a dynamic provider: a
    ``FailedAfterStart`` is undone, then raised as ProvisionFailed saying what was undone."""
    if not isinstance(result, FailedAfterStart):
        return result
    words = result.undo()
    raise ProvisionFailed(f"{result.reason} ({words})" if words else result.reason)


class Provider(ResourceProvider):
    """The check / diff skeleton and the recorded outputs of an mm2spec provider; holds nothing."""

    # It holds nothing secret (see the module docstring), so its pickle need not be a Pulumi secret.
    serialize_as_secret_always = False

    input_keys: ClassVar[tuple[str, ...]] = ()
    """The inputs recorded as outputs (``secret_keys`` aside): what later diffs compare against."""
    identity_keys: ClassVar[tuple[str, ...]] = ()
    """Inputs that name the resource: a change of any of them replaces it."""
    secret_keys: ClassVar[tuple[str, ...]] = ()
    """Secret inputs: recorded (encrypted) and declared secret outputs, never compared."""

    def configure(self, req: ConfigureRequest) -> None:
        connection.remember_config(req.config)

    # ----------------------------------------------------------------------------------- check
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(news, list(self.problems(olds, news)))

    def problems(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Iterable[CheckFailure]:
        """Every reason ``news`` cannot be applied (``olds``: the recorded outputs, empty on create)."""
        return ()

    # ------------------------------------------------------------------------------------ diff
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [k for k in self.identity_keys if olds.get(k) != news.get(k)]
        if replaces:
            return self.replacement(replaces, olds, news)
        return self.diff_properties(olds, news)

    def diff_properties(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        """The diff when the identity is unchanged (no network: ``olds`` are the recorded outputs)."""
        raise NotImplementedError

    def deletes_first(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        """Whether a replacement deletes the old resource before creating the new one (Pulumi's
        default is the other way round, which two resources of one name cannot do)."""
        return False

    def replacement(self, keys: Iterable[str], olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        """The diff that replaces the resource because of ``keys``."""
        return DiffResult(changes=True, replaces=list(keys), delete_before_replace=self.deletes_first(olds, news))

    def changed_inputs(self, olds: Mapping[str, Any], news: Mapping[str, Any],
                       keys: Iterable[str] | None = None) -> list[str]:
        """Which of ``keys`` (default ``input_keys``) differ between the recorded outputs and the new
        inputs; secrets and the pickled provider are never compared."""
        skipped = set(self.secret_keys) | {_PROVIDER_KEY}
        return [k for k in (self.input_keys if keys is None else keys)
                if k not in skipped and olds.get(k) != news.get(k)]

    # ------------------------------------------------------------------------ create / update
    def apply_create(self, props: dict[str, Any]) -> CreateResult | FailedAfterStart:
        """The plugin's create: ``create``, unless the kind can fail after starting something
        (then a ``FailedAfterStart`` comes back, to be recorded, and its ``create`` is
        ``undone(self.apply_create(props))``)."""
        return self.create(props)

    def apply_update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult | FailedAfterStart:
        """The plugin's update, as ``apply_create`` is its create."""
        return self.update(id_, olds, news)

    # --------------------------------------------------------------------------------- outputs
    def outputs(self, props: Mapping[str, Any], **learned: Any) -> dict[str, Any]:
        """The outputs to record: the inputs (``input_keys`` and ``secret_keys``) and ``learned``."""
        return {**{k: props.get(k) for k in self.input_keys + self.secret_keys}, **learned}

    # ------------------------------------------------------------------------------------ read
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """``pulumi refresh``: the recorded outputs updated with what the live resource holds.

        A resource that no longer exists reads back gone (an empty ID: Pulumi drops it from the
        state and the next ``up`` creates it). A cluster that cannot be reached raises, naming it:
        the refresh fails and the state keeps what it held.
        """
        live = self.read_live(props)
        if live is None:
            return ReadResult("", {})
        return ReadResult(id_, {**{k: v for k, v in props.items() if k != _PROVIDER_KEY}, **live})

    def read_live(self, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The outputs the live resource changes (same keys and shape as recorded), with one call to
        its cluster; None when it no longer exists. Default: nothing to read, the record stands."""
        return {}

    @staticmethod
    def leave_adopted(props: Mapping[str, Any], what: str) -> bool:
        """For ``delete``: True, after saying so in the log, when the resource was adopted."""
        if not props.get(ADOPTED):
            return False
        pulumi.log.info(f"{what}: left in place")
        return True


class ProvisionedResource(Resource):
    """A resource of one of these providers, given as a class keyword::

        class Topic(ProvisionedResource, module="kafka", name="Topic", provider=TopicProvider()):

    registers with that provider and declares its ``secret_keys`` secret outputs too (the provider
    host gets secrets unwrapped and returns plain outputs: declared, the state still encrypts them).
    """

    dynamic_provider: ClassVar[Provider]
    """The provider instance every resource of the class is registered with."""
    pulumi_type: ClassVar[str]
    """The type the Pulumi SDK gives the class's resources (``pulumi-python:dynamic/kafka:Topic``)."""

    def __init_subclass__(cls, provider: Provider | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if provider is not None:
            cls.dynamic_provider = provider
        if "module" in kwargs and "name" in kwargs:
            cls.pulumi_type = f"pulumi-python:dynamic/{kwargs['module']}:{kwargs['name']}"

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        secrets = list(self.dynamic_provider.secret_keys)
        if secrets:
            opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(additional_secret_outputs=secrets), opts)
        super().__init__(self.dynamic_provider, name, props, opts)


# ----------------------------------------------------------------------------- resource kinds
PACKAGE = "mm2spec"
"""The Pulumi package: the plugin is ``pulumi-resource-mm2spec``; tokens read ``mm2spec:index:<Kind>``."""


@dataclass(frozen=True)
class ProgramSettings:
    """Where the program runs and writes."""

    root: str
    """The project root (the folder of ``Pulumi.yaml``); relative paths are taken from it."""
    out_dir: str
    """Where rendered files go (worker config, Spark job config), relative to ``root`` or absolute."""
    spark_run: bool = False
    """Engine spark: also run the mirroring job (stack config ``mm2spec:sparkRun``), not only configure it."""
    plugin: bool = True
    """Register the resources with the ``pulumi-resource-mm2spec`` plugin (``mm2spec:index:*`` types;
    stack config ``mm2spec:plugin``, default true); ``False``: as dynamic resources (the opt-out for
    stacks not moved over yet); the same providers serve both."""


@dataclass(frozen=True, eq=False)
class ResourceKind:
    """Everything the program, the component, the plugin and ``pulumi import`` need of one kind of
    resource, in the kind's own module (``KIND``); ``kinds.KINDS`` registers each by name."""

    name: str
    """The kind's name: its type token's last part (``Topic``) and what an engine's
    ``DeploymentResource.kind`` says."""
    resource: type[ProvisionedResource]
    """The dynamic resource class: its provider (the one the plugin serves too) and its type."""
    description: str
    """The package schema's description (with its import ID, when importable)."""
    learned: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Outputs its provider learns beyond its inputs, with their schema types (``adopted``, ...)."""
    import_learned: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None
    """``pulumi import`` takes it: ``(inputs, live) -> learned outputs`` of an existing resource, as
    its create would have recorded them had it found the resource there. None: not importable."""
    recorded_id: Callable[[Mapping[str, Any], str], str] | None = None
    """``(inputs, name) -> ID`` its create records, when not its name (an import ID may be either)."""
    exists: Callable[[list[tuple[Mapping[str, Any], str]], Callable[[str], Any]], set[str]] | None = None
    """``([(inputs, name)], admin_for) -> names that exist``, for kinds one read per cluster answers
    for many resources; default: each resource's ``read_live``."""
    deployment_inputs: Callable[[DesiredState, DeploymentResource, ProgramSettings | None], dict[str, Any]] | None = None
    """An engine's deployment registers it: its inputs from the engine's ``DeploymentResource``
    (``settings`` None only for an importable kind, whose inputs name no file)."""
    output: str | None = None
    """The ``DisasterRecovery`` output (attribute) that lists the engine's resources of this kind."""
    many: bool = False
    """``output`` is the resources' names (once each is created); otherwise the one resource's ID, or None."""

    @property
    def token(self) -> str:
        """The type token the plugin serves it as (``mm2spec:index:Topic``)."""
        return f"{PACKAGE}:index:{self.name}"

    @property
    def provider(self) -> Provider:
        return self.resource.dynamic_provider

    @property
    def dynamic_type(self) -> str:
        """The type of its dynamic resources (``pulumi-python:dynamic/kafka:Topic``)."""
        return self.resource.pulumi_type

    @property
    def importable(self) -> bool:
        return self.import_learned is not None

"""``pulumi-resource-mm2spec``: the mm2spec resources as a real Pulumi provider plugin.

Why a plugin besides the dynamic providers: ``pulumi import`` cannot call a dynamic provider
(there is no state yet to unpickle it from; pulumi/pulumi#16175), a plugin can. The engine starts
this executable (found on PATH: ``.venv/bin`` after ``pip install``; ``python -m
mm2spec.provision.plugin`` is the same), talks gRPC to it, and it serves the package
``plugin_package`` describes (``mm2spec:index:Topic``, ``AclBinding``, ``Connector``,
``WorkerConfig``, ``SparkDeployment``).

Each request is handed to the provider the dynamic resource of that kind uses
(``plugin_package.TOKENS``): the same check, the same diff (shared with ``mm2spec plan``), the same
create / read / update / delete. This module only translates: Pulumi's property values to plain
values and back (secret inputs stay secret outputs; numbers arrive as floats, whole ones are given
back as ints; check, diff and a refresh's read straight from the wire format, ``wire_plain``, as a
preview and a refresh call them for every resource), blocking calls to worker threads (the engine
sends many requests at once), and mm2spec's errors to the message Pulumi shows, without a Python
traceback.

A create or update that fails after it started something (a Spark job, a connector: the
provider's ``apply_create`` / ``apply_update`` return a ``FailedAfterStart``) is answered as
Pulumi's partial create: the gRPC error carries an ``ErrorResourceInitFailed`` with the resource's
ID and outputs, so the engine records the resource (with its error) although ``up`` fails:
``destroy`` then stops the job or deletes the connector, and the next ``up`` updates it (the engine
updates a resource recorded with an error even when its inputs are unchanged).

``read`` with no recorded properties is an import (``pulumi import``): the ID is looked up among
the resources the stack's spec means (``mm2spec:spec`` and ``mm2spec:environment``, the stack config
the engine gives the plugin's ``configure``, as the program reads them), read live, and recorded as
its create would have (``plugin_package.import_read``). The spec and the source snapshot are read
once per plugin process.

Built on ``pulumi.provider.experimental``: the SDK's older ``pulumi.provider.Provider`` serves
only construct / call / invoke, the experimental ``Provider`` the whole CRUD.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from mm2spec.components import module_missing

try:
    import grpc
    from google.protobuf import any_pb2
    from pulumi.provider.experimental import provider as sdk
    from pulumi.provider.experimental import server as sdk_server
    from pulumi.provider.experimental.property_value import Computed, PropertyValue
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc, status_pb2  # google.rpc.Status, as Pulumi ships it
except ModuleNotFoundError as exc:
    # Installed without the pulumi extra (the SDK brings grpc and protobuf): the engine shows the
    # plugin's stderr, so one line naming the extra, exit 1, instead of an import traceback.
    if (exc.name or "").partition(".")[0] not in ("pulumi", "grpc", "google"):
        raise
    raise SystemExit(f"pulumi-resource-mm2spec: {module_missing('pulumi')}") from None

import mm2spec
from mm2spec.errors import Mm2specError, ProvisionFailed
from mm2spec.provision import connection
from mm2spec.provision.base import FailedAfterStart
from mm2spec.provision.plugin_package import TOKENS, find_importable, import_read, importables, schema_text

#: What a value unknown during a preview reads as in plain values (Pulumi's dynamic providers use the same).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

#: How many requests the plugin works on at once: the engine sends every create, read and delete
#: without a bound (``--parallel``'s default), and each mostly waits on a broker (a topic's create
#: waits until its partitions are visible). The event loop's default is min(32, cores + 4) threads,
#: six on two cores, which would leave requests queued behind those waiting (the time of a large
#: create is bound elsewhere, so more costs nothing). ``THREADS_ENV`` sets another number.
DEFAULT_THREADS = 32
THREADS_ENV = "MM2SPEC_PROVIDER_THREADS"


def worker_threads(environ: Mapping[str, str] = os.environ) -> int:
    """The number of requests served at once: ``THREADS_ENV`` if it holds a positive integer, else
    ``DEFAULT_THREADS`` (a bad value is not an error: the plugin runs under the engine, not a shell)."""
    value = environ.get(THREADS_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_THREADS


# ------------------------------------------------------------------------------- conversion
def plain(value: PropertyValue) -> Any:
    """A property value as plain Python (secrets unwrapped, whole numbers as int, unknowns ``UNKNOWN``).

    Null entries of maps are left out, as the dynamic providers' host leaves them out: the outputs a
    dynamic provider recorded have none, and a null compared with a missing key would be a change."""
    inner = value.value
    if isinstance(inner, Computed):
        return UNKNOWN
    if isinstance(inner, float) and inner.is_integer():
        return int(inner)
    if isinstance(inner, Mapping):
        return {k: plain(v) for k, v in inner.items() if v.value is not None}
    if isinstance(inner, (tuple, list)):
        return [plain(v) for v in inner]
    return inner


def plain_map(values: Mapping[str, PropertyValue]) -> dict[str, Any]:
    return {k: plain(v) for k, v in values.items() if v.value is not None}


#: How Pulumi's wire format marks a secret: ``{SIG_KEY: SECRET_SIG, "value": ...}``.
SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


def wire_plain(value: struct_pb2.Value) -> Any:
    """A protobuf property value as plain Python, the same as ``plain`` of the SDK's property value
    (secrets unwrapped, whole numbers as int, unknowns ``UNKNOWN``, null map entries left out), in
    a fifth of the time: check and diff, which a preview calls for every resource, run on this."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value  # an unknown is the string UNKNOWN already
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() else number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        fields = value.struct_value.fields
        sig = fields.get(SIG_KEY)
        if sig is None:
            return wire_plain_map(value.struct_value)
        if sig.string_value == SECRET_SIG:
            return wire_plain(fields["value"]) if "value" in fields else None
        raise ProvisionFailed(f"mm2spec's resources take no assets, archives or resource references (got {sig.string_value})")
    if kind == "list_value":
        return [wire_plain(item) for item in value.list_value.values]
    return None


def wire_plain_map(struct: struct_pb2.Struct) -> dict[str, Any]:
    plain_values = {key: wire_plain(item) for key, item in struct.fields.items()}
    return {key: item for key, item in plain_values.items() if item is not None}


def wire_value(value: Any, secret: bool = False) -> struct_pb2.Value:
    """A plain value as a protobuf property value, as ``property_value`` then the SDK's marshalling
    would give it (ints as numbers, ``UNKNOWN`` as the unknown it is on the wire)."""
    if value is None:
        wrapped = struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)
    elif isinstance(value, bool):
        wrapped = struct_pb2.Value(bool_value=value)
    elif isinstance(value, str):
        wrapped = struct_pb2.Value(string_value=value)
    elif isinstance(value, (int, float)):
        wrapped = struct_pb2.Value(number_value=float(value))
    elif isinstance(value, Mapping):
        wrapped = struct_pb2.Value(struct_value=wire_map(value))
    elif isinstance(value, (list, tuple)):
        wrapped = struct_pb2.Value(list_value=struct_pb2.ListValue(values=[wire_value(v) for v in value]))
    else:
        wrapped = struct_pb2.Value(string_value=str(value))
    if not secret:
        return wrapped
    return struct_pb2.Value(struct_value=struct_pb2.Struct(
        fields={SIG_KEY: struct_pb2.Value(string_value=SECRET_SIG), "value": wrapped}))


def wire_map(values: Mapping[str, Any], secret_keys: tuple[str, ...] = ()) -> struct_pb2.Struct:
    """Plain values as a protobuf struct; ``secret_keys`` (a provider's secret inputs) marked secret."""
    return struct_pb2.Struct(fields={str(k): wire_value(v, secret=k in secret_keys and v is not None)
                                     for k, v in values.items()})


def property_value(value: Any, secret: bool = False) -> PropertyValue:
    """A plain value as a property value (ints as numbers; ``UNKNOWN`` as unknown)."""
    if value == UNKNOWN:
        return PropertyValue.computed()
    if isinstance(value, bool) or value is None or isinstance(value, str):
        wrapped = PropertyValue(value)
    elif isinstance(value, (int, float)):
        wrapped = PropertyValue(float(value))
    elif isinstance(value, Mapping):
        wrapped = PropertyValue({str(k): property_value(v) for k, v in value.items()})
    elif isinstance(value, (list, tuple)):
        wrapped = PropertyValue([property_value(v) for v in value])
    else:
        wrapped = PropertyValue(str(value))
    return wrapped.with_secret(True) if secret else wrapped


def property_map(values: Mapping[str, Any], secret_keys: tuple[str, ...] = ()) -> dict[str, PropertyValue]:
    """Plain values as a property map; ``secret_keys`` (a provider's secret inputs) marked secret."""
    return {k: property_value(v, secret=k in secret_keys and v is not None) for k, v in values.items()}


# --------------------------------------------------------------------------------- provider
class Mm2specProvider(sdk.Provider):
    """The plugin's provider: each resource request to the dynamic provider of its kind."""

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self._spec_lock = threading.Lock()
        self._spec: tuple | None = None

    @staticmethod
    def _provider(urn_type: str):
        # A URN's type is the chain of its parents' types: "mm2spec:index:DisasterRecovery$mm2spec:index:Topic".
        token = urn_type.rpartition("$")[2]
        try:
            return TOKENS[token]
        except KeyError:
            raise ProvisionFailed(f"unknown resource type {token}: this plugin serves {', '.join(TOKENS)}") from None

    async def get_schema(self, request: sdk.GetSchemaRequest) -> sdk.GetSchemaResponse:
        return sdk.GetSchemaResponse(schema_text())

    async def configure(self, request: sdk.ConfigureRequest) -> sdk.ConfigureResponse:
        # Keys arrive as "mm2spec:spec" (or "mm2spec:config:spec"): the last part names the setting.
        self.config = {key.rpartition(":")[2]: value for key, value in request.variables.items()}
        secrets = {k: v for k, v in plain_map(request.args).items() if isinstance(v, str)}
        connection.remember_config(_Configured({**self.config, **secrets}))
        # No preview support: the engine then never calls create or update during a preview.
        return sdk.ConfigureResponse(accept_secrets=True, supports_preview=False)

    async def create(self, request: sdk.CreateRequest) -> sdk.CreateResponse:
        provider = self._provider(request.type)
        result = await asyncio.to_thread(provider.apply_create, plain_map(request.properties))
        if isinstance(result, FailedAfterStart):
            raise _InitFailed(result, provider.secret_keys)
        return sdk.CreateResponse(result.id, property_map(result.outs or {}, provider.secret_keys))

    async def update(self, request: sdk.UpdateRequest) -> sdk.UpdateResponse:
        provider = self._provider(request.type)
        result = await asyncio.to_thread(provider.apply_update, request.resource_id, plain_map(request.olds),
                                         plain_map(request.news))
        if isinstance(result, FailedAfterStart):
            raise _InitFailed(result, provider.secret_keys)
        return sdk.UpdateResponse(property_map(result.outs or {}, provider.secret_keys))

    async def delete(self, request: sdk.DeleteRequest) -> None:
        provider = self._provider(request.type)
        await asyncio.to_thread(provider.delete, request.resource_id, plain_map(request.properties))

    async def read(self, request: sdk.ReadRequest) -> sdk.ReadResponse:
        """An import (``pulumi import``: nothing recorded yet); a refresh is ``_Servicer.Read``."""
        provider = self._provider(request.type)
        id_, outputs = await asyncio.to_thread(self.import_resource, request.type.rpartition("$")[2],
                                               request.resource_id)
        inputs = {k: outputs.get(k) for k in provider.input_keys + provider.secret_keys}
        return sdk.ReadResponse(id_, property_map(outputs, provider.secret_keys),
                                property_map(inputs, provider.secret_keys))

    # ------------------------------------------------------------------------------- import
    def import_resource(self, token: str, id_: str) -> tuple[str, dict[str, Any]]:
        """``(id, outputs)`` of the resource of kind ``token`` that the stack's spec means under ``id_``."""
        state, found = self._spec_resources(id_)
        return import_read(find_importable(found, token, id_, state.name))

    def _spec_resources(self, id_: str):
        """The stack's spec and the resources it means (read once per process)."""
        with self._spec_lock:
            if self._spec is None:
                self._spec = load_spec_resources(self.config, id_)
            return self._spec

    async def cancel(self) -> None:
        return None


class _Configured:
    """The shape ``connection.remember_config`` reads (a dynamic provider's config object)."""

    def __init__(self, values: Mapping[str, str]):
        self._props = dict(values)


def load_spec_resources(config: Mapping[str, str], id_: str):
    """``(state, importables)`` for the stack config the plugin was given."""
    from mm2spec.live.kafka import KafkaAdmin
    from mm2spec.plan.desired import snapshot_sources
    from mm2spec.provision.program import resolve_passwords
    from mm2spec.spec.load import load_desired_state

    spec = config.get("spec")
    if not spec:
        raise ProvisionFailed(f'import ID "{id_}": the stack has no mm2spec:spec, so the plugin cannot tell what the '
                              "ID names: `pulumi config set mm2spec:spec <DR spec file>` (and mm2spec:environment)")
    path = spec if os.path.isabs(spec) else os.path.join(_project_folder(), spec)
    state = load_desired_state(path, config.get("environment") or None)
    passwords = resolve_passwords(state, connection.current_secret)
    sources = snapshot_sources(state, lambda alias: KafkaAdmin(state.cluster(alias),
                                                               secrets=lambda _name: passwords.get(alias)))
    return state, importables(state, sources, passwords)


def _project_folder() -> str:
    """The folder of ``Pulumi.yaml``: the engine starts the plugin in the project's folder (or below),
    where the SDK's ``get_root_directory`` is not set."""
    here = os.path.abspath(os.getcwd())
    while True:
        if os.path.isfile(os.path.join(here, "Pulumi.yaml")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return os.getcwd()
        here = parent


# ----------------------------------------------------------------------------------- server
class _Servicer(sdk_server.ProviderServicer):
    """The SDK's servicer, with mm2spec's errors shown as their message (no traceback), and check
    and diff answered from the wire format directly.

    A preview asks for a check and a diff of every resource, one resource after the other, so
    their cost is the preview's: through the SDK's property values (four maps converted to them
    and to plain values, one back) they were most of the plugin's CPU (pulumi/README.md, "Scale").
    They touch no cluster (a diff compares the recorded outputs with the new inputs), so they also
    run on the event loop rather than in a worker thread."""

    async def Check(self, request: provider_pb2.CheckRequest, context) -> provider_pb2.CheckResponse:
        provider = Mm2specProvider._provider(request.urn.split("::")[2])
        result = provider.check(wire_plain_map(request.olds), wire_plain_map(request.news))
        return provider_pb2.CheckResponse(
            inputs=wire_map(result.inputs or {}, provider.secret_keys),
            failures=[provider_pb2.CheckFailure(property=f.property, reason=f.reason) for f in result.failures or ()])

    async def Diff(self, request: provider_pb2.DiffRequest, context) -> provider_pb2.DiffResponse:
        provider = Mm2specProvider._provider(request.urn.split("::")[2])
        result = provider.diff(request.id, wire_plain_map(request.olds), wire_plain_map(request.news))
        changes = (provider_pb2.DiffResponse.DIFF_UNKNOWN if result.changes is None else
                   provider_pb2.DiffResponse.DIFF_SOME if result.changes else provider_pb2.DiffResponse.DIFF_NONE)
        return provider_pb2.DiffResponse(changes=changes, replaces=list(result.replaces or ()),
                                         stables=list(result.stables or ()),
                                         deleteBeforeReplace=bool(result.delete_before_replace))

    async def Read(self, request: provider_pb2.ReadRequest, context) -> provider_pb2.ReadResponse:
        """A refresh: the recorded outputs updated with the live resource's (the inputs stay as
        recorded); gone, an empty ID (Pulumi drops it). Nothing recorded: an import, through the
        SDK's property values to ``Mm2specProvider.read``."""
        if not request.properties.fields:
            return await sdk_server.ProviderServicer.Read(self, request, context)
        provider = Mm2specProvider._provider(request.urn.split("::")[2])
        result = await asyncio.to_thread(provider.read, request.id, wire_plain_map(request.properties))
        if not result.id:
            return provider_pb2.ReadResponse(id="", properties=struct_pb2.Struct(), inputs=struct_pb2.Struct())
        return provider_pb2.ReadResponse(id=result.id, properties=wire_map(result.outs or {}, provider.secret_keys),
                                         inputs=request.inputs)


class _InitFailed(Exception):
    """Carries a ``FailedAfterStart`` from the provider's create or update to the servicer, which
    answers with it (not an mm2spec error: it never leaves this module)."""

    def __init__(self, failed: FailedAfterStart, secret_keys: tuple[str, ...]):
        super().__init__(failed.recorded_message)
        self.failed, self.secret_keys = failed, secret_keys


def init_failed_trailer(message: str, failed: FailedAfterStart, secret_keys: tuple[str, ...] = ()) -> tuple:
    """The gRPC trailing metadata of a partial create or update: a ``google.rpc.Status`` whose
    detail is Pulumi's ``ErrorResourceInitFailed`` (the ID and outputs the engine records)."""
    detail = any_pb2.Any()
    detail.Pack(provider_pb2.ErrorResourceInitFailed(id=failed.id, properties=wire_map(failed.outputs, secret_keys),
                                                     reasons=[message]))
    status = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message, details=[detail])
    return (("grpc-status-details-bin", status.SerializeToString()),)


def _shown(method_name: str):
    method = getattr(_Servicer, method_name)

    async def call(self, request, context):
        try:
            return await method(self, request, context)
        except _InitFailed as exc:
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc),
                                trailing_metadata=init_failed_trailer(str(exc), exc.failed, exc.secret_keys))
        except Mm2specError as exc:
            await context.abort(grpc.StatusCode.UNKNOWN, str(exc))

    call.__name__ = method_name
    return call


for _name in ("Check", "Diff", "Create", "Read", "Update", "Delete", "Configure"):
    setattr(_Servicer, _name, _shown(_name))


def main(args: list[str] | None = None) -> None:
    """Serve the plugin: print the port for the engine, then answer until it closes the connection."""
    argv = sys.argv[1:] if args is None else args
    engine = next((a for a in argv if not a.startswith("-")), "")

    async def serve() -> None:
        # The providers' calls run in these threads (asyncio.to_thread); each keeps its own admin clients.
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=worker_threads(), thread_name_prefix="mm2spec-provider"))
        server = grpc.aio.server(options=sdk_server._GRPC_CHANNEL_OPTIONS)
        provider_pb2_grpc.add_ResourceProviderServicer_to_server(
            _Servicer(argv, mm2spec.__version__, Mm2specProvider(), engine_address=engine), server)
        port = server.add_insecure_port(address="127.0.0.1:0")
        await server.start()
        sys.stdout.buffer.write(f"{port}\n".encode())
        sys.stdout.buffer.flush()
        await server.wait_for_termination()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

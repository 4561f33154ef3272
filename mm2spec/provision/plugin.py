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
back as ints), blocking calls to worker threads (the engine sends many requests at once), and
mm2spec's errors to the message Pulumi shows, without a Python traceback.

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

import grpc
from pulumi.provider.experimental import provider as sdk
from pulumi.provider.experimental import server as sdk_server
from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.runtime.proto import provider_pb2_grpc

import mm2spec
from mm2spec.errors import Mm2specError, ProvisionFailed
from mm2spec.provision import connection
from mm2spec.provision.plugin_package import TOKENS, find_importable, import_read, importables, schema_text

#: What a value unknown during a preview reads as in plain values (Pulumi's dynamic providers use the same).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

#: How many requests the plugin works on at once: the engine sends every create, read and delete
#: without a bound (``--parallel``'s default), and each mostly waits on a broker (a topic's create
#: waits until its partitions are visible). The event loop's default is min(32, cores + 4) threads,
#: six on two cores (a create of 10,000 topics: 486 s with six, 457 s with 32; bound elsewhere).
#: ``THREADS_ENV`` sets another number.
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

    async def check(self, request: sdk.CheckRequest) -> sdk.CheckResponse:
        provider = self._provider(request.type)
        result = await asyncio.to_thread(provider.check, plain_map(request.old_inputs), plain_map(request.new_inputs))
        return sdk.CheckResponse(property_map(result.inputs or {}, provider.secret_keys),
                                 [sdk.CheckFailure(f.property, f.reason) for f in result.failures or ()])

    async def diff(self, request: sdk.DiffRequest) -> sdk.DiffResponse:
        provider = self._provider(request.type)
        result = await asyncio.to_thread(provider.diff, request.resource_id, plain_map(request.old_state),
                                         plain_map(request.new_inputs))
        return sdk.DiffResponse(changes=result.changes, replaces=list(result.replaces or ()),
                                stables=list(result.stables or ()),
                                delete_before_replace=bool(result.delete_before_replace))

    async def create(self, request: sdk.CreateRequest) -> sdk.CreateResponse:
        provider = self._provider(request.type)
        result = await asyncio.to_thread(provider.create, plain_map(request.properties))
        return sdk.CreateResponse(result.id, property_map(result.outs or {}, provider.secret_keys))

    async def update(self, request: sdk.UpdateRequest) -> sdk.UpdateResponse:
        provider = self._provider(request.type)
        result = await asyncio.to_thread(provider.update, request.resource_id, plain_map(request.olds),
                                         plain_map(request.news))
        return sdk.UpdateResponse(property_map(result.outs or {}, provider.secret_keys))

    async def delete(self, request: sdk.DeleteRequest) -> None:
        provider = self._provider(request.type)
        await asyncio.to_thread(provider.delete, request.resource_id, plain_map(request.properties))

    async def read(self, request: sdk.ReadRequest) -> sdk.ReadResponse:
        provider = self._provider(request.type)
        if not request.properties:  # nothing recorded yet: pulumi import
            id_, outputs = await asyncio.to_thread(self.import_resource, request.type.rpartition("$")[2],
                                               request.resource_id)
            inputs = {k: outputs.get(k) for k in provider.input_keys + provider.secret_keys}
            return sdk.ReadResponse(id_, property_map(outputs, provider.secret_keys),
                                    property_map(inputs, provider.secret_keys))
        result = await asyncio.to_thread(provider.read, request.resource_id, plain_map(request.properties))
        if not result.id:  # gone: Pulumi drops it from the state
            return sdk.ReadResponse("", {}, {})
        return sdk.ReadResponse(result.id, property_map(result.outs or {}, provider.secret_keys), request.inputs)

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
    """The SDK's servicer, with mm2spec's errors shown as their message (no traceback)."""


def _shown(method_name: str):
    method = getattr(sdk_server.ProviderServicer, method_name)

    async def call(self, request, context):
        try:
            return await method(self, request, context)
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

"""The ``pulumi-resource-mm2spec`` plugin's request handling, with fakes (no network, no engine).

Each request goes to the provider the dynamic resource of its kind uses; property values convert
both ways (secrets kept secret, whole numbers as ints); an import (``read`` with nothing recorded)
resolves its ID against the spec's resources and fails naming an ID that names nothing; the schema
follows the providers' inputs; ``mm2spec plan --pulumi-import-file`` writes Pulumi's import file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pulumi
import pytest
from pulumi.dynamic import CreateResult, UpdateResult
from pulumi.provider.experimental import provider as sdk
from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.runtime import set_mocks

from mm2spec.errors import ProvisionFailed
from mm2spec.live.types import LiveTopic
from mm2spec.plan.desired import SourceSnapshot
from mm2spec.provision import connection, plugin, plugin_package, program
from mm2spec.provision.base import Provider
from mm2spec.provision.kinds import KINDS
from mm2spec.provision.plugin_package import TOKENS, Importable, find_importable, import_entries, importables
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
URN = "urn:pulumi:it::mm2spec::mm2spec:index:DisasterRecovery$mm2spec:index:Topic::dr/orders"
TOPIC, ACL_BINDING, CONNECTOR = (KINDS[name].token for name in ("Topic", "AclBinding", "Connector"))


def call(coro):
    """Run a request's coroutine on a loop of its own: ``asyncio.run`` would leave the thread without the
    current loop the Pulumi mocks of other tests need."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def props(**values) -> dict[str, PropertyValue]:
    return plugin.property_map(values)


def topic_inputs(**more) -> dict:
    return {"cluster": "dr", "connection": {"bootstrapServers": "localhost:1"}, "password": "pw-1",
            "name": "orders", "partitions": 3, "configs": {"retention.ms": "1000"},
            "options": {"replicationFactor": -1, "allowReplacement": False}, **more}


class FakeProvider(Provider):
    """Records what it was asked; answers like a provider that found what it was given."""

    input_keys = ("cluster", "name")
    identity_keys = ("cluster", "name")
    secret_keys = ("password",)

    def __init__(self, live=None):
        self.calls: list[tuple] = []
        self.live = live

    def diff_properties(self, olds, news):
        return pulumi.dynamic.DiffResult(changes=olds.get("name") != news.get("name"))

    def create(self, props):
        self.calls.append(("create", props))
        return CreateResult("the-id", self.outputs(props, adopted=False))

    def update(self, id_, olds, news):
        self.calls.append(("update", id_, olds, news))
        return UpdateResult(self.outputs(news))

    def delete(self, id_, props):
        self.calls.append(("delete", id_, props))

    def read_live(self, props):
        self.calls.append(("read", props))
        return self.live


@pytest.fixture
def fake(monkeypatch):
    provider = FakeProvider(live={"name": "orders"})
    monkeypatch.setitem(TOKENS, TOPIC, provider)
    return provider


def test_property_values_convert_both_ways_keeping_secrets_and_whole_numbers():
    value = plugin.property_map({"partitions": 3, "password": "s3cret", "configs": {"a": "1"}, "run": True,
                                 "reasons": ["x"], "timeout": 2.5}, ("password",))
    assert value["partitions"] == PropertyValue(3.0) and value["password"].is_secret
    assert not value["configs"].is_secret
    assert plugin.plain_map(value) == {"partitions": 3, "password": "s3cret", "configs": {"a": "1"}, "run": True,
                                       "reasons": ["x"], "timeout": 2.5}
    assert isinstance(plugin.plain(PropertyValue(3.0)), int)
    assert plugin.plain(PropertyValue(Computed())) == plugin.UNKNOWN
    assert isinstance(plugin.property_value(plugin.UNKNOWN).value, Computed)  # (Computed.__eq__ is broken in the SDK)
    assert not plugin.property_map({"password": None}, ("password",))["password"].is_secret
    # nulls are left out at every level, as the dynamic providers' host does (their recorded outputs have none)
    assert plugin.plain_map(plugin.property_map({"a": None, "options": {"sourceTopic": None, "k": "x"}})) == {
        "options": {"k": "x"}}


SAMPLES = [
    {"partitions": 3, "password": "s3cret", "configs": {"a": "1"}, "run": True, "reasons": ["x", 2], "timeout": 2.5},
    {"a": None, "options": {"sourceTopic": None, "k": "x", "n": -1, "deep": {"l": [1.5, "u", False, None]}}},
    {"password": None, "pending": plugin.UNKNOWN, "empty": {}, "none": [], "big": 2 ** 40},
]


@pytest.mark.parametrize("values", SAMPLES)
def test_the_wire_conversions_of_check_and_diff_agree_with_the_sdks(values):
    # check and diff read and write the wire format directly (a fifth of the CPU); what they see and
    # send must be what the SDK's property values give, secrets and unknowns included.
    sdk_struct = PropertyValue.marshal_map({k: v for k, v in plugin.property_map(
        {k: v for k, v in values.items() if v != plugin.UNKNOWN}, ("password",)).items()})
    assert plugin.wire_map({k: v for k, v in values.items() if v != plugin.UNKNOWN}, ("password",)) == sdk_struct
    assert plugin.wire_plain_map(sdk_struct) == plugin.plain_map(PropertyValue.unmarshal_map(sdk_struct))
    secret = plugin.wire_map(values, ("password", "pending"))
    assert plugin.wire_plain_map(secret) == plugin.plain_map(PropertyValue.unmarshal_map(secret))
    if values.get("password") is not None:
        assert plugin.wire_map(values, ("password",))["password"] == {plugin.SIG_KEY: plugin.SECRET_SIG, "value": "s3cret"}
    # an unknown travels as the string the engine sends for one, both ways
    assert plugin.wire_plain_map(plugin.wire_map({"x": plugin.UNKNOWN})) == {"x": plugin.UNKNOWN}


def test_the_wire_format_refuses_assets_and_resource_references():
    struct = plugin.wire_map({"x": {plugin.SIG_KEY: "5cf8f73096256a8f31e491e813e4eb8e", "urn": "u"}})
    with pytest.raises(ProvisionFailed, match="no assets, archives or resource references"):
        plugin.wire_plain_map(struct)


def servicer() -> plugin._Servicer:
    return plugin._Servicer([], "0", plugin.Mm2specProvider(), engine_address="")


def wire(**values):
    return plugin.wire_map(values)


def test_check_is_the_dynamic_providers_check_with_its_failures_and_the_password_secret():
    proto = pulumi.runtime.proto.provider_pb2
    bad = call(servicer().Check(proto.CheckRequest(urn=URN, news=wire(**topic_inputs(name="bad name!", partitions=0))),
                                None))
    assert {(f.property, f.reason.split(" ")[0]) for f in bad.failures} == {("name", "'bad"), ("partitions", "partitions")}
    good = call(servicer().Check(proto.CheckRequest(urn=URN, news=wire(**topic_inputs())), None))
    assert list(good.failures) == []
    assert PropertyValue.unmarshal_map(good.inputs)["password"].is_secret
    assert plugin.wire_plain_map(good.inputs) == topic_inputs()


def test_diff_is_the_shared_diff_and_names_what_replaces():
    proto = pulumi.runtime.proto.provider_pb2
    olds = wire(**topic_inputs())

    def diff(**news):
        return call(servicer().Diff(proto.DiffRequest(id="dr/orders", urn=URN, olds=olds, news=wire(**topic_inputs(**news))),
                                    None))

    assert diff(password="rotated").changes == proto.DiffResponse.DIFF_NONE  # a rotated password is no change
    config = diff(configs={})
    assert config.changes == proto.DiffResponse.DIFF_SOME and list(config.replaces) == []
    renamed = diff(name="other")
    assert list(renamed.replaces) == ["name"] and renamed.deleteBeforeReplace


def test_create_update_delete_and_refresh_go_to_the_kinds_provider(fake):
    provider = plugin.Mm2specProvider()
    created = call(provider.create(sdk.CreateRequest(URN, props(cluster="dr", name="orders", password="pw"), 0, False)))
    assert created.resource_id == "the-id" and created.properties["password"].is_secret
    assert fake.calls[-1] == ("create", {"cluster": "dr", "name": "orders", "password": "pw"})
    updated = call(provider.update(sdk.UpdateRequest(URN, "the-id", props(cluster="dr", name="a"),
                                                     props(cluster="dr", name="b"), 0, [], False)))
    assert plugin.plain_map(updated.properties)["name"] == "b"
    call(provider.delete(sdk.DeleteRequest(URN, "the-id", props(cluster="dr", name="b"), 0)))
    assert fake.calls[-1][0:2] == ("delete", "the-id")
    proto = pulumi.runtime.proto.provider_pb2
    recorded = proto.ReadRequest(id="the-id", urn=URN, properties=wire(cluster="dr", name="x", password="pw"),
                                 inputs=wire(cluster="dr", name="x"))
    refreshed = call(servicer().Read(recorded, None))
    assert plugin.wire_plain_map(refreshed.properties) == {"cluster": "dr", "name": "orders", "password": "pw"}
    assert PropertyValue.unmarshal_map(refreshed.properties)["password"].is_secret
    assert fake.calls[-1] == ("read", {"cluster": "dr", "name": "x", "password": "pw"})
    assert refreshed.id == "the-id" and refreshed.inputs == wire(cluster="dr", name="x")  # inputs stay as recorded
    fake.live = None
    gone = call(servicer().Read(recorded, None))
    assert gone.id == "" and plugin.wire_plain_map(gone.properties) == {}


def test_an_unknown_type_is_named():
    with pytest.raises(ProvisionFailed, match="unknown resource type mm2spec:index:Nope"):
        call(plugin.Mm2specProvider().create(sdk.CreateRequest(URN.replace("Topic", "Nope"), {}, 0, False)))


def test_configure_keeps_the_stack_config_for_imports_and_secrets_for_delete():
    from mm2spec.provision import connection

    provider = plugin.Mm2specProvider()
    answer = call(provider.configure(sdk.ConfigureRequest({"mm2spec:config:spec": "payments.yaml", "mm2spec:PW_X": "v"},
                                                          {}, True, False)))
    assert provider.config["spec"] == "payments.yaml" and connection.current_secret("PW_X") == "v"
    assert answer.accept_secrets and not answer.supports_preview  # never asked to create in a preview


def test_import_reads_the_resource_the_id_names_and_records_it_as_its_create_would(monkeypatch, fake):
    item = Importable(TOPIC, "dr/orders", {"cluster": "dr", "name": "orders", "password": "pw"})
    provider = plugin.Mm2specProvider()
    monkeypatch.setattr(plugin, "load_spec_resources", lambda config, id_: (type("S", (), {"name": "payments"}), [item]))
    monkeypatch.setattr("mm2spec.provision.topic._held_records", lambda admin, name: True)
    monkeypatch.setattr("mm2spec.provision.connection.admin", lambda props: None)
    answer = call(provider.read(sdk.ReadRequest(URN, "dr/orders", {}, {})))  # nothing recorded: an import
    assert answer.resource_id == "dr/orders"
    assert plugin.plain_map(answer.properties) == {"cluster": "dr", "name": "orders", "password": "pw", "adopted": True}
    assert plugin.plain_map(answer.inputs) == {"cluster": "dr", "name": "orders", "password": "pw"}
    assert answer.inputs["password"].is_secret

    with pytest.raises(ProvisionFailed, match='import ID "dr/nope" names no Topic of spec "payments"'):
        call(provider.read(sdk.ReadRequest(URN, "dr/nope", {}, {})))
    fake.live = None
    with pytest.raises(ProvisionFailed, match='import ID "dr/orders": the Topic does not exist on cluster "dr"'):
        call(provider.read(sdk.ReadRequest(URN, "dr/orders", {}, {})))


def test_import_without_a_spec_in_the_stack_config_says_what_to_set():
    with pytest.raises(ProvisionFailed, match=r'import ID "dr/x": the stack has no mm2spec:spec.*pulumi config set'):
        plugin.load_spec_resources({}, "dr/x")


def test_a_connector_is_found_by_its_name_or_the_id_its_create_records():
    item = Importable(CONNECTOR, "p-to-dr-MirrorSourceConnector", {"connectUrl": "http://c:8083/"})
    assert find_importable([item], CONNECTOR, "p-to-dr-MirrorSourceConnector", "s") is item
    assert find_importable([item], CONNECTOR, "http://c:8083/connectors/p-to-dr-MirrorSourceConnector", "s") is item
    with pytest.raises(ProvisionFailed, match="a WorkerConfig cannot be imported"):
        find_importable([item], "mm2spec:index:WorkerConfig", "x", "s")


def test_the_servicer_shows_mm2spec_errors_as_their_message():
    class Context:
        async def abort(self, code, details):
            raise RuntimeError((code, details))

    class Failing(plugin.Mm2specProvider):
        async def delete(self, request):
            raise ProvisionFailed('cluster "dr": topic x: still listed')

    servicer = plugin._Servicer([], "0", Failing(), engine_address="")
    request = pulumi.runtime.proto.provider_pb2.DeleteRequest(id="x", urn=URN)
    with pytest.raises(RuntimeError) as raised:
        call(servicer.Delete(request, Context()))
    assert raised.value.args[0] == (grpc.StatusCode.UNKNOWN, 'cluster "dr": topic x: still listed')


def test_the_schema_lists_every_kind_with_the_providers_inputs():
    schema = plugin_package.schema()
    assert schema["name"] == "mm2spec" and set(schema["resources"]) == set(TOKENS)
    for token, provider in TOKENS.items():
        resource = schema["resources"][token]
        assert set(resource["inputProperties"]) == set(provider.input_keys + provider.secret_keys)
        assert set(provider.identity_keys) <= set(resource["requiredInputs"])
    assert schema["resources"][TOPIC]["inputProperties"]["password"]["secret"] is True
    assert json.loads(plugin_package.schema_text()) == schema
    assert {k.token for k in KINDS.values() if k.importable} == {TOPIC, ACL_BINDING, CONNECTOR}
    assert schema["resources"][TOPIC]["properties"]["adopted"] == {"type": "boolean"}


def snapshot() -> dict[str, SourceSnapshot]:
    topics = {"orders": LiveTopic("orders", 6, 3, {}), "payments": LiveTopic("payments", 3, 3, {})}
    return {"primary": SourceSnapshot("primary", topics, ("orders-service",))}


def without_nulls(value):
    """What the engine receives: the SDK leaves out null values."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


def test_importables_are_what_the_program_declares_by_name_and_inputs(tmp_path):
    state = load_desired_state(EXAMPLE, "prod")
    passwords = {alias: "pw" for alias in program.used_clusters(state)}
    found = importables(state, snapshot(), passwords)
    recorded = {}

    class Recorder(pulumi.runtime.Mocks):
        def new_resource(self, args):
            recorded[args.name] = (args.typ, args.inputs)
            return [args.name, args.inputs]

        def call(self, args):
            return {}

    set_mocks(Recorder(), project="mm2spec", stack="prod", preview=False)

    @pulumi.runtime.test
    def body():
        program.declare(state, snapshot(), passwords, program.ProgramSettings(str(ROOT), str(tmp_path), plugin=True))

    body()
    assert {f.name for f in found} == {n for n, (typ, _i) in recorded.items() if typ.rpartition(":")[2] in
                                       ("Topic", "AclBinding", "Connector")}
    for item in found:  # the same type and inputs (the program's password is a secret Output)
        typ, inputs = recorded[item.name]
        assert typ == item.type
        assert without_nulls({k: v for k, v in inputs.items() if k != "password"}) == without_nulls(
            {k: v for k, v in item.inputs.items() if k != "password"})
    assert {typ for typ, _i in recorded.values()} >= {TOPIC, ACL_BINDING}


def test_the_import_file_puts_every_resource_under_the_component():
    items = [Importable(TOPIC, "dr/orders", {}), Importable(ACL_BINDING, "dr/User:mm2/TOPIC/LITERAL/orders", {})]
    assert import_entries(items, "mm2spec") == {"resources": [
        {"type": "mm2spec:index:DisasterRecovery", "name": "mm2spec", "component": True},
        {"type": TOPIC, "name": "dr/orders", "id": "dr/orders", "parent": "mm2spec"},
        {"type": ACL_BINDING, "name": "dr/User:mm2/TOPIC/LITERAL/orders", "id": "dr/User:mm2/TOPIC/LITERAL/orders",
         "parent": "mm2spec"}]}
    assert import_entries(items[:1], None) == {"resources": [{"type": TOPIC, "name": "dr/orders", "id": "dr/orders"}]}


def test_existing_reads_topics_once_per_cluster_and_the_rest_through_their_read(monkeypatch):
    asked = []

    class Admin:
        def topics(self, names, with_configs=True):
            asked.append(sorted(names))
            return {"orders": object()}

    acl_provider = FakeProvider(live=None)
    monkeypatch.setitem(TOKENS, ACL_BINDING, acl_provider)
    items = [Importable(TOPIC, "dr/orders", {"cluster": "dr", "name": "orders"}),
             Importable(TOPIC, "dr/gone", {"cluster": "dr", "name": "gone"}),
             Importable(ACL_BINDING, "dr/User:x/TOPIC/LITERAL/a", {"cluster": "dr"})]
    assert plugin_package.existing(items, lambda alias: Admin()) == items[:1]
    assert asked == [["gone", "orders"]]


def test_plan_writes_the_import_file_for_the_existing_resources_under_the_projects_component(monkeypatch, tmp_path):
    plan_cli = plugin_package  # what `mm2spec plan --pulumi-import-file` calls
    state = load_desired_state(EXAMPLE, "prod")
    monkeypatch.setattr(plugin_package, "snapshot_sources", lambda state, admin_for: snapshot())
    seen = {}

    def existing(found, admin_for):
        seen["found"] = found
        return [f for f in found if f.type == TOPIC][:2]

    monkeypatch.setattr(plugin_package, "existing", existing)
    for alias in program.used_clusters(state):
        for secret in {connection.provisioning_security(state.cluster(alias)).password_secret} - {None}:
            monkeypatch.setenv(secret, "pw")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Pulumi.yaml").write_text("name: payments-dr\nruntime: python\n")
    assert plan_cli.write_import_file(state, "import.json", None, 5.0) == 2
    written = json.loads((tmp_path / "import.json").read_text())["resources"]
    assert written[0] == {"type": "mm2spec:index:DisasterRecovery", "name": "payments-dr", "component": True}
    assert [e["parent"] for e in written[1:]] == ["payments-dr", "payments-dr"]
    assert [f.name for f in seen["found"]] == [f.name for f in importables(state, snapshot(), {})]  # all asked about
    assert plan_cli.write_import_file(state, "root.json", "", 5.0) == 2
    assert "parent" not in json.loads((tmp_path / "root.json").read_text())["resources"][0]

    from mm2spec.errors import OutputUnwritable

    with pytest.raises(OutputUnwritable, match="cannot write the import file"):
        plan_cli.write_import_file(state, str(tmp_path / "no" / "such" / "dir.json"), "", 5.0)


def test_the_plugin_is_a_console_script_of_the_package():
    import importlib
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["pulumi-resource-mm2spec"].partition(":")
    assert getattr(importlib.import_module(module), function) is plugin.main


def test_the_plugin_serves_many_requests_at_once_unless_told_otherwise():
    from mm2spec.provision import plugin

    assert plugin.worker_threads({}) == plugin.DEFAULT_THREADS >= 16
    assert plugin.worker_threads({plugin.THREADS_ENV: "8"}) == 8
    for bad in ("0", "-3", "many", ""):
        assert plugin.worker_threads({plugin.THREADS_ENV: bad}) == plugin.DEFAULT_THREADS


def test_the_schema_command_refuses_an_abbreviated_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        plugin_package.main(["--sch", str(tmp_path / "schema.json")])
    assert refused.value.code == 2
    assert "required: --schema" in capsys.readouterr().err  # --sch is not taken for it
    assert not (tmp_path / "schema.json").exists()

"""The ``DisasterRecovery`` component under ``pulumi.runtime.set_mocks`` (no network, no CLI).

Its children (every resource the program declares, parented to it and aliased to the stack's root,
so existing stacks move under it unchanged), its outputs (resolved from the children), and an
invalid spec or a missing password failing before anything, the component included, is registered.
The migration of a real stack is ``tests/integration/test_pulumi_component_aliases.py``.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
from pulumi.runtime import Mocks, set_mocks
from pulumi.runtime.mocks import MockMonitor

from mm2spec.errors import SpecInvalid
from mm2spec.live.types import LiveTopic
from mm2spec.plan.desired import SourceSnapshot
from mm2spec.provision import component, plugin_package
from mm2spec.pulumi import DisasterRecovery
from mm2spec.spec.load import load_desired_state

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"
PASSWORDS = {"PRIMARY_MM2_PASSWORD": "primary-pw-123", "DR_MM2_PASSWORD": "dr-pw-456"}


class Registry(Mocks):
    """Records every registration request (parent, aliases) and the registered outputs; a resource's
    ID is its name (as the providers' IDs are: ``dr/orders``), its outputs its inputs."""

    def __init__(self, monkeypatch):
        self.requests: dict[str, object] = {}
        self.outputs: dict[str, dict] = {}
        registry = self
        register, register_outputs = MockMonitor.RegisterResource, MockMonitor.RegisterResourceOutputs

        def recorded(monitor, request):
            registry.requests[request.name] = request
            return register(monitor, request)

        def recorded_outputs(monitor, request):
            registry.outputs[request.urn] = pulumi.runtime.rpc.deserialize_properties(request.outputs)
            return register_outputs(monitor, request)

        monkeypatch.setattr(MockMonitor, "RegisterResource", recorded)
        monkeypatch.setattr(MockMonitor, "RegisterResourceOutputs", recorded_outputs)

    def new_resource(self, args):
        return [args.name, args.inputs]

    def call(self, args):
        return {}


def sources(_state, _admin_for) -> dict[str, SourceSnapshot]:
    topics = {"orders": LiveTopic("orders", 6, 3, {}), "payments": LiveTopic("payments", 3, 3, {}),
              "audit": LiveTopic("audit", 1, 3, {})}
    return {"primary": SourceSnapshot("primary", topics, ("orders-service",))}


def build(monkeypatch, spec=EXAMPLE, secrets=PASSWORDS.get, **kwargs):
    registry = Registry(monkeypatch)
    set_mocks(registry, project="team-infra", stack="prod", preview=False)
    built = {}

    @pulumi.runtime.test
    def body():
        built["dr"] = dr = DisasterRecovery("payments", str(spec), "prod", secrets=secrets, snapshot=sources,
                                            out_dir="out/prod", **kwargs)
        outputs = [dr.target_topics, dr.acl_bindings, dr.connectors, dr.worker_config, dr.spark_deployment]
        return pulumi.Output.all(*outputs).apply(lambda values: built.__setitem__("outputs", values))

    body()
    return registry, built


def test_every_resource_is_a_child_aliased_to_the_stack_root(monkeypatch):
    registry, built = build(monkeypatch, plugin=False)
    dr = built["dr"]
    registry.requests.pop("team-infra-prod", None)  # the stack (registered once per process)
    parent = registry.requests.pop("payments")
    assert parent.type == component.TYPE == "mm2spec:index:DisasterRecovery" and not parent.custom
    children = registry.requests
    assert set(children) == {*dr.declared.topics, *dr.declared.acls, "spark-mirror"}
    assert "dr/orders" in children and "dr/User:mm2/TOPIC/LITERAL/orders" in children
    for name, request in children.items():
        assert request.parent.endswith("mm2spec:index:DisasterRecovery::payments"), name
        # One alias: the same type and name at the stack's root, where the program put it before.
        [alias] = request.aliases
        root = "::".join(request.parent.split("::")[:2])  # urn:pulumi:<stack>::<project>, as the mocks name them
        assert alias.urn == f"{root}::{request.type}::{name}", name


def test_by_default_the_children_are_the_plugins_and_keep_every_earlier_address(monkeypatch):
    registry, built = build(monkeypatch)
    registry.requests.pop("team-infra-prod", None)  # the stack (registered once per process)
    registry.requests.pop("payments")
    assert set(registry.requests) == {*built["dr"].declared.topics, *built["dr"].declared.acls, "spark-mirror"}
    for name, request in registry.requests.items():
        assert request.type.startswith("mm2spec:index:") and request.custom, name
        twin = plugin_package.DYNAMIC_TYPES[request.type]
        # Where the dynamic providers put it: their type, under the component and at the root
        # (before the component). The plugin's types came after the component: never at the root.
        stack, project, parent_type, parent_name = request.parent.split("::")
        assert parent_type.endswith("mm2spec:index:DisasterRecovery") and parent_name == "payments"
        assert {a.urn for a in request.aliases} == {
            f"{stack}::{project}::{parent_type}${twin}::{name}", f"{stack}::{project}::{twin}::{name}"}, name


def test_outputs_resolve_from_the_children_and_are_registered(monkeypatch):
    registry, built = build(monkeypatch)
    dr = built["dr"]
    topics, acls, connectors, worker, spark = built["outputs"]
    assert topics == sorted(k for k in dr.declared.topics if k.startswith("dr/"))
    assert "dr/orders" in topics and "dr/mm2-offset-syncs.primary.internal" in topics and "dr/audit" not in topics
    assert acls == sorted(dr.declared.acls) and len(acls) == len(dr.declared.acl_groups) > 0
    assert (connectors, worker, spark) == ([], None, "spark-mirror")
    [registered] = registry.outputs.values()
    assert registered["target_topics"] == topics and registered["spark_deployment"] == "spark-mirror"
    # None (worker_config with spark) is left out of the registered outputs.
    assert set(registered) == {"target_topics", "acl_bindings", "connectors", "spark_deployment"}
    assert dr.state.environment == "prod" and dr.state.name == "payments-dr"


def test_connect_engine_outputs_the_connectors_by_name(monkeypatch, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE.read_text().replace("engine: spark ", "engine: connect"))
    _registry, built = build(monkeypatch, spec)
    _topics, _acls, connectors, worker, spark = built["outputs"]
    assert connectors == ["primary-to-dr-MirrorCheckpointConnector", "primary-to-dr-MirrorSourceConnector"]
    assert (worker, spark) == ("connect-worker", None)


@pytest.mark.parametrize("broken, expected", [
    ("tasksMax: 30", "/mirrors/0/tasksMax"),
    ("engine: spark ", "/engine"),
])
def test_an_invalid_spec_fails_with_located_errors_before_anything_is_registered(monkeypatch, tmp_path, broken,
                                                                                  expected):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace(broken, broken.replace("30", "0").replace("spark ", "flink ")))
    with pytest.raises(pulumi.RunError) as raised:
        build(monkeypatch, bad)
    message = str(raised.value)
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if broken.split(":")[0] in text)
    assert f"{bad}:{line}:" in message and expected in message and "Traceback" not in message
    with pytest.raises(SpecInvalid) as validated:  # what `mm2spec validate` reports, word for word
        load_desired_state(bad, "prod")
    assert message == str(validated.value)


def test_a_missing_password_names_its_secret_before_anything_is_registered(monkeypatch):
    registry = None
    with pytest.raises(pulumi.RunError, match="needs the secret DR_MM2_PASSWORD") as raised:
        registry, _ = build(monkeypatch, secrets={"PRIMARY_MM2_PASSWORD": "primary-pw-123"})
    assert registry is None and "primary-pw-123" not in str(raised.value)


def test_the_public_path_is_the_component():
    assert DisasterRecovery is component.DisasterRecovery

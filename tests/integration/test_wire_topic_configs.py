"""Topic configs read over Kafka's protocol (``mm2spec.live.wire``) against real brokers: on
PLAINTEXT and on SASL/SCRAM-SHA-512 the wire path itself answers (the AdminClient's is not taken)
and gives what the AdminClient gives."""

from __future__ import annotations

import pytest

from mm2spec.live.kafka import KafkaAdmin
from mm2spec.spec.load import load_desired_state
from specs import write_spec

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("pair", ["kafka_pair", "secure_kafka_pair"])
def test_topic_configs_over_the_wire_match_the_admin_clients(request, pair, unique_name, tmp_path, monkeypatch):
    from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD

    monkeypatch.setenv("IT_ADMIN_PASSWORD", ADMIN_PASSWORD)
    monkeypatch.setenv("IT_MM2_PASSWORD", MM2_PASSWORD)
    secure = pair == "secure_kafka_pair"
    names = [unique_name("wire") for _ in range(3)]
    spec = write_spec(tmp_path / "s.yaml", request.getfixturevalue(pair), names, secure=secure, engine="connect")
    admin = KafkaAdmin(load_desired_state(spec, None).cluster("primary"))
    admin.create_topic(names[0], 1, -1, {"retention.ms": "123456", "cleanup.policy": "compact"})
    admin.create_topic(names[1], 1, -1, {})
    admin.create_topic(names[2], 2, -1, {"max.message.bytes": "2000000"})
    through_client = admin._client_topic_configs(names)

    def no_fallback(*_args, **_kwargs):
        raise AssertionError("the wire path gave up: the AdminClient read the configs")

    monkeypatch.setattr(admin, "_client_topic_configs", no_fallback)
    assert admin.topic_configs(names) == through_client == {
        names[0]: {"retention.ms": "123456", "cleanup.policy": "compact"}, names[1]: {},
        names[2]: {"max.message.bytes": "2000000"}}
    live = admin.topics(names + [unique_name("absent")])  # DescribeTopics and DescribeConfigs at once
    assert {name: (t.partitions, t.configs) for name, t in live.items()} == {
        name: (2 if name == names[2] else 1, through_client[name]) for name in names}

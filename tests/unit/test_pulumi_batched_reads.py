"""A large ``pulumi refresh`` reads each cluster once (mm2spec.provision.reads): past a threshold, the
topics and ACL resources of a run look themselves up in one read of the whole cluster, with the
same answers as their own reads; a write drops it, a failed read is kept by no one."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mm2spec.errors import ClusterUnreachable
from mm2spec.live.kafka import ACL_READ_BY_RESOURCE_MAX, KafkaAdmin
from mm2spec.live.types import LiveTopic
from mm2spec.provision import acl, batch, connection, reads, topic
from mm2spec.spec.model import AclBinding

NAMES = [f"t{i:03d}" for i in range(40)]
PROPS = {"cluster": "dr", "connection": {"bootstrapServers": "127.0.0.1:9092", "securityProtocol": "PLAINTEXT"},
         "partitions": 1, "configs": {}, "password": "pw", "adopted": False,
         "options": {"replicationFactor": -1, "allowReplacement": False, "kind": "mirror", "purpose": "p"}}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    reads.forget()
    monkeypatch.setattr(reads, "BATCH_AFTER", 5)
    monkeypatch.setattr(batch, "_COALESCERS", {})
    yield
    reads.forget()


class ClusterAdmin:
    """A fake cluster: topics (some with drift) and ACL bindings; counts whole-cluster and single reads."""

    def __init__(self, topics: dict[str, LiveTopic], bindings: set[AclBinding] = frozenset()):
        self.live, self.bindings = topics, set(bindings)
        self.calls: list[str] = []
        self.unreachable = False

    def topics(self, names=None, with_configs=True, include_internal=False):
        if self.unreachable:
            raise ClusterUnreachable('cluster "dr" (127.0.0.1:9092) is unreachable: timed out')
        self.calls.append("all topics" if names is None else "one topic")
        wanted = self.live if names is None else {n: self.live[n] for n in names if n in self.live}
        return dict(wanted)

    def acls(self, principal, resource_type=None, resource_name=None, pattern_type=None):
        self.calls.append("all acls" if resource_type is None else "one acl resource")
        return {b for b in self.bindings if b.principal == principal
                and resource_type in (None, b.resource_type) and pattern_type in (None, b.pattern_type)}


def _use(monkeypatch, fake):
    monkeypatch.setattr(connection, "admin", lambda props, prefer_current=False: fake)


def _read_topic(name):
    return topic.TopicProvider().read(f"dr/{name}", {**PROPS, "name": name})


def test_a_large_refresh_reads_the_cluster_once_with_the_answers_of_single_reads(monkeypatch):
    live = {n: LiveTopic(n, 1, 1, {"retention.ms": "1000"} if n == "t007" else {}) for n in NAMES}
    fake = ClusterAdmin(live)
    _use(monkeypatch, fake)
    batched = [_read_topic(n) for n in NAMES]
    assert fake.calls == ["one topic"] * reads.BATCH_AFTER + ["all topics"]
    reads.forget()
    single = []
    for name in NAMES:
        reads.forget()  # never past the threshold: every read alone
        single.append(_read_topic(name))
    assert [(r.id, r.outs) for r in batched] == [(r.id, r.outs) for r in single]
    assert batched[7].outs["configs"] == {"retention.ms": "1000"}


def test_a_topic_the_whole_read_lacks_is_read_alone_and_reads_back_gone(monkeypatch):
    fake = ClusterAdmin({n: LiveTopic(n, 1, 1, {}) for n in NAMES})
    _use(monkeypatch, fake)
    for name in NAMES[:10]:
        _read_topic(name)
    fake.calls.clear()
    assert _read_topic("deleted-behind-the-stack").id == ""
    assert fake.calls == ["one topic"]


def test_a_write_to_the_cluster_drops_the_shared_read(monkeypatch):
    fake = ClusterAdmin({n: LiveTopic(n, 1, 1, {}) for n in NAMES})
    _use(monkeypatch, fake)
    for name in NAMES[:10]:
        _read_topic(name)
    reads.forget(connection.cluster_from(PROPS))  # what every create, update and delete does first
    fake.live["t001"] = LiveTopic("t001", 3, 1, {})
    fake.calls.clear()
    assert _read_topic("t001").outs["partitions"] == 3
    assert fake.calls == ["all topics"]


def test_when_the_whole_read_fails_each_resource_is_read_alone_and_fails_on_its_own(monkeypatch):
    fake = ClusterAdmin({n: LiveTopic(n, 1, 1, {}) for n in NAMES})
    _use(monkeypatch, fake)
    for name in NAMES[:reads.BATCH_AFTER]:
        _read_topic(name)
    fake.unreachable = True
    with pytest.raises(ClusterUnreachable, match='cluster "dr"'):  # the refresh fails naming it, not "gone"
        _read_topic("t010")
    fake.unreachable = False
    fake.calls.clear()
    assert _read_topic("t010").id == "dr/t010"
    assert fake.calls == ["one topic"]  # the failed whole read is not tried again in this run
    monkeypatch.setattr(reads, "MAX_AGE_S", -1.0)
    _read_topic("t011")
    assert fake.calls == ["one topic", "all topics"]  # ... until it is old


def _binding(name, op, rtype="TOPIC"):
    return AclBinding("dr", "User:mm2", rtype, name, "LITERAL", op)


def test_acl_resources_of_one_principal_share_one_describe_with_the_same_answers(monkeypatch):
    bindings = {_binding(n, op) for n in NAMES for op in ("READ", "DESCRIBE")} - {_binding("t003", "READ")}
    bindings |= {_binding("t001", "READ", "GROUP"), AclBinding("dr", "User:app", "TOPIC", "t002", "LITERAL", "READ")}
    fake = ClusterAdmin({}, bindings)
    _use(monkeypatch, fake)
    binding = {"principal": "User:mm2", "resourceType": "TOPIC", "patternType": "LITERAL", "permission": "ALLOW",
               "host": "*"}

    def read(name):
        props = {**PROPS, "binding": binding, "resources": {name: ["DESCRIBE", "READ"]}, "reasons": [], "preexisting": {}}
        return acl.AclProvider().read(f"dr/User:mm2/TOPIC/LITERAL/{name}", props)

    batched = [read(n) for n in NAMES]
    assert fake.calls == ["all acls"]  # one DescribeAcls of the principal for every ACL resource, from the first
    single = []
    for name in NAMES:
        reads.forget()
        single.append(read(name))
    assert [(r.id, r.outs) for r in batched] == [(r.id, r.outs) for r in single]
    assert batched[3].outs["resources"] == {"t003": ["DESCRIBE"]}


class WritingAdmin(ClusterAdmin):
    """The fake cluster with ``KafkaAdmin.live_acls`` and ``create_acls``: counts the resources read."""

    created: list

    def live_acls(self, bindings, by_resource=ACL_READ_BY_RESOURCE_MAX):
        return KafkaAdmin.live_acls(self, bindings, by_resource)

    def _acls_request(self, *query):  # what KafkaAdmin.live_acls sends, answered by _acls_answer
        return query

    def _acls_answer(self, query, _principal):
        return self.acls(*query)

    def acls(self, principal, resource_type=None, resource_name=None, pattern_type=None):
        self.calls.append("all acls" if resource_type is None else f"acls of {resource_name}")
        return {b for b in self.bindings if b.principal == principal and resource_type in (None, b.resource_type)
                and resource_name in (None, b.resource_name) and pattern_type in (None, b.pattern_type)}

    def create_acls(self, bindings):
        self.created = list(bindings)


def test_an_acl_resource_on_one_topic_reads_back_only_that_topic_and_keeps_what_existed(monkeypatch):
    """A literal statement's ACL resource is one topic: its create reads that topic's bindings, not
    every binding of the principal (6,000 such creates read a growing 20,000 each: quadratic), creates
    only what is missing and records the rest as pre-existing (its delete leaves them)."""
    others = {_binding(n, op) for n in NAMES for op in ("READ", "DESCRIBE")}
    fake = WritingAdmin({}, others | {_binding("t999", "READ")})
    _use(monkeypatch, fake)
    binding = {"principal": "User:mm2", "resourceType": "TOPIC", "patternType": "LITERAL", "permission": "ALLOW",
               "host": "*"}
    props = {**PROPS, "binding": binding, "resources": {"t999": ["DESCRIBE", "READ"]}, "reasons": [], "preexisting": {}}
    created = acl.AclProvider().create(props)
    assert fake.calls == ["acls of t999"]
    assert fake.created == [_binding("t999", "DESCRIBE")]
    assert created.outs["preexisting"] == {"t999": ["READ"]}


class GatedAdmin(WritingAdmin):
    """``WritingAdmin`` whose first CreateAcls waits for ``gate``; records every CreateAcls."""

    def __init__(self, *args):
        super().__init__(*args)
        self.gate, self.requests = threading.Event(), []

    def create_acls(self, bindings):
        self.requests.append(sorted(b.resource_name for b in bindings))
        self.gate.wait(5)
        self.bindings |= set(bindings)


def test_acl_resources_created_at_the_same_time_go_to_the_cluster_in_one_create(monkeypatch):
    """A KRaft controller commits each CreateAcls on its own: the creates of literal ACL resources that
    run at once become one read per topic and one CreateAcls, and each resource still records its own
    pre-existing bindings."""
    fake = GatedAdmin({}, {_binding("t005", "READ")})
    _use(monkeypatch, fake)
    binding = {"principal": "User:mm2", "resourceType": "TOPIC", "patternType": "LITERAL", "permission": "ALLOW",
               "host": "*"}

    def create(name):
        props = {**PROPS, "binding": binding, "resources": {name: ["DESCRIBE", "READ"]}, "reasons": [],
                 "preexisting": {}}
        return acl.AclProvider().create(props)

    with ThreadPoolExecutor(max_workers=12) as pool:
        first = pool.submit(create, "t000")
        while not fake.requests:  # the first is in flight, alone
            time.sleep(0.001)
        rest = {name: pool.submit(create, name) for name in NAMES[1:11]}
        coalescer = next(iter(batch._COALESCERS.values()))
        while len(coalescer._queue) < 10:
            time.sleep(0.001)
        fake.gate.set()
        results = {"t000": first.result(), **{name: f.result() for name, f in rest.items()}}
    assert fake.requests == [["t000", "t000"], sorted(n for n in NAMES[1:11] for op in ("DESCRIBE", "READ")
                                                      if (n, op) != ("t005", "READ"))]
    assert fake.calls == [f"acls of {n}" for n in NAMES[:11]]
    assert results["t005"].outs["preexisting"] == {"t005": ["READ"]}
    assert {name: r.outs["preexisting"] for name, r in results.items() if name != "t005"} == {
        name: {} for name in NAMES[:11] if name != "t005"}
    assert {b.key for b in fake.bindings} == {_binding(n, op).key for n in NAMES[:11] for op in ("DESCRIBE", "READ")}

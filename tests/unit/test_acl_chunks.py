"""KafkaAdmin's ACL writes at scale: bounded requests, retried when they time out, and a delete
stopped half-way that finishes when run again (mm2spec.live.kafka, mm2spec.mm2.retry)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding as KAclBinding
from confluent_kafka.admin import AclOperation

from mm2spec.errors import KafkaOperationFailed
from mm2spec.live import kafka
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.mm2 import retry
from mm2spec.mm2.retry import MAX_ACL_FILTERS_PER_DELETE, MAX_ACLS_PER_CREATE, acl_filters_per_delete
from mm2spec.spec.model import AclBinding, Cluster


def _fields(b) -> tuple:
    permission = getattr(b, "permission_type", None)
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, permission)


def _done(value=None, error: int | None = None) -> Future:
    future: Future = Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(error)))
    return future


class FakeAcls:
    """The ACL calls of confluent-kafka's AdminClient on one cluster; ``fail`` lists, request by
    request (None: answer), the error code every binding of that request fails with."""

    def __init__(self, fail=()):
        self.live: dict[tuple, KAclBinding] = {}
        self.fail = list(fail)
        self.requests: list[tuple[str, int]] = []
        self.deleted_filters: list = []

    def _failure(self, kind: str, size: int) -> int | None:
        self.requests.append((kind, size))
        return self.fail.pop(0) if self.fail else None

    def create_acls(self, bindings, request_timeout=None):
        error = self._failure("create", len(bindings))
        if error is None:
            self.live.update({_fields(b): b for b in bindings})
        return {b: _done(None, error) for b in bindings}

    def delete_acls(self, filters, request_timeout=None):
        error = self._failure("delete", len(filters))
        if error is None:
            for f in filters:  # a filter that matches nothing is no error
                self.deleted_filters.append(f)
                wanted = _fields(f)
                ops = list(AclOperation) if f.operation == AclOperation.ANY else [f.operation]
                for op in ops:
                    self.live.pop((*wanted[:5], op, wanted[6]), None)
        return {f: _done([], error) for f in filters}

    def describe_acls(self, query, request_timeout=None):
        return _done([b for b in self.live.values() if query.principal in (None, b.principal)])


def _admin(client: FakeAcls) -> KafkaAdmin:
    admin = KafkaAdmin.__new__(KafkaAdmin)
    admin.cluster, admin.timeout, admin._client = Cluster("dr", ("127.0.0.1:1",)), 5.0, client
    return admin


def _created(count: int, ops=("READ", "DESCRIBE")) -> tuple[FakeAcls, KafkaAdmin, list[AclBinding]]:
    """A fake cluster holding ``count`` bindings created through the admin, its requests forgotten."""
    client = FakeAcls()
    admin = _admin(client)
    bindings = _bindings(count, ops)
    admin.create_acls(bindings)
    client.requests.clear()
    return client, admin, bindings


def _bindings(count: int, ops=("READ", "DESCRIBE")) -> list[AclBinding]:
    return [AclBinding("dr", "User:mm2", "TOPIC", f"bench-{i:05d}", "LITERAL", op)
            for i in range(count // len(ops)) for op in ops]


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch):
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)
    monkeypatch.setattr(kafka.time, "sleep", lambda _s: None)


def test_creates_and_deletes_are_sent_in_bounded_requests():
    client = FakeAcls()
    admin = _admin(client)
    bindings = _bindings(2 * MAX_ACLS_PER_CREATE + 2)
    admin.create_acls(bindings)
    creates = [size for kind, size in client.requests if kind == "create"]
    assert creates == [MAX_ACLS_PER_CREATE, MAX_ACLS_PER_CREATE, 2]
    admin.delete_acls(bindings)
    deletes = [size for kind, size in client.requests if kind == "delete"]
    # both operations of each topic go: one filter (operation ANY) each
    assert max(deletes) == MAX_ACL_FILTERS_PER_DELETE and sum(deletes) == len(bindings) // 2
    assert client.live == {}


def test_a_delete_holds_fewer_filters_the_more_bindings_the_cluster_holds(monkeypatch):
    monkeypatch.setattr(retry, "MAX_ACL_MATCHES_PER_DELETE", 300_000)
    assert acl_filters_per_delete(1_500) == 200
    assert acl_filters_per_delete(30) == MAX_ACL_FILTERS_PER_DELETE
    assert acl_filters_per_delete(10**9) == 1
    client, admin, bindings = _created(1_500)
    admin.delete_acls(bindings)
    # 750 filters of two bindings each; counted again after each request: 1,500 -> 1,100 -> 556 left
    assert [size for _kind, size in client.requests] == [200, 272, 278]


def test_a_resource_keeps_the_operations_that_do_not_go():
    client, admin, bindings = _created(6)  # three topics, READ and DESCRIBE each
    gone = [b for b in bindings if b.resource_name != "bench-00001" or b.operation == "READ"]
    admin.delete_acls(gone)
    # bench-00001's DESCRIBE stays, so its READ goes by its own filter; the others by one filter each
    assert {(f.name, f.operation) for f in client.deleted_filters} == {
        ("bench-00000", AclOperation.ANY), ("bench-00001", AclOperation.READ), ("bench-00002", AclOperation.ANY)}
    assert [(k[1], k[5]) for k in client.live] == [("bench-00001", AclOperation.DESCRIBE)]


def test_a_timed_out_request_is_sent_again_and_only_that_one():
    client, admin, bindings = _created(3 * MAX_ACL_FILTERS_PER_DELETE, ops=("READ",))  # a filter each
    client.fail = [None, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT]  # the second request, twice
    admin.delete_acls(bindings)
    assert [size for _kind, size in client.requests] == [MAX_ACL_FILTERS_PER_DELETE] * 5
    assert client.live == {}


def test_a_delete_stopped_half_way_finishes_when_run_again_sending_only_what_is_left():
    client, admin, bindings = _created(4 * MAX_ACL_FILTERS_PER_DELETE, ops=("READ",))
    client.fail = [None, KafkaError.CLUSTER_AUTHORIZATION_FAILED]  # the first run stops at its second request
    with pytest.raises(KafkaOperationFailed, match='cluster "dr": delete ACLs failed'):
        admin.delete_acls(bindings)
    assert len(client.live) == 3 * MAX_ACL_FILTERS_PER_DELETE
    client.requests.clear()
    admin.delete_acls(bindings)  # the same bindings, as Pulumi's state still lists them
    assert sum(size for _kind, size in client.requests) == 3 * MAX_ACL_FILTERS_PER_DELETE
    assert client.live == {}
    client.requests.clear()
    admin.delete_acls(bindings)  # all gone already: success, and nothing is sent
    assert client.requests == []


def test_a_request_that_keeps_timing_out_fails_naming_the_cluster(monkeypatch):
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(retry.time, "monotonic", lambda: float(next(clock)))
    client = FakeAcls(fail=[KafkaError._TIMED_OUT] * 1000)
    with pytest.raises(KafkaOperationFailed) as raised:
        _admin(client).create_acls(_bindings(4))
    message = str(raised.value)
    assert message.startswith('cluster "dr": create ACLs failed for 4 binding(s) (e.g. bench-00000)')
    assert "_TIMED_OUT" in message
    assert 1 < len(client.requests) < 1000

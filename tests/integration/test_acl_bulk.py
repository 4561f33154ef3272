"""ACL writes in bounded requests on a real authorizer: a delete stopped half-way finishes when run
again, and deleting bindings already gone sends nothing (``KafkaAdmin.delete_acls``)."""

from __future__ import annotations

import time
import uuid

import pytest

from mm2spec.dev import ADMIN_PASSWORD
from mm2spec.errors import KafkaOperationFailed
from mm2spec.live.kafka import KafkaAdmin
from mm2spec.mm2 import retry
from mm2spec.spec.model import AclBinding, Cluster, Security

pytestmark = pytest.mark.integration


class Stopping:
    """The admin client, with its ``stop_at``-th DeleteAcls request failing as a killed run would leave it."""

    def __init__(self, client, stop_at: int | None):
        self.client, self.stop_at, self.deletes = client, stop_at, []

    def delete_acls(self, filters, **kwargs):
        self.deletes.append(len(filters))
        if len(self.deletes) == self.stop_at:
            raise KafkaOperationFailed('cluster "dr": stopped half-way')
        return self.client.delete_acls(filters, **kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


def shown(admin: KafkaAdmin, principal: str, expected: int, timeout: float = 10.0) -> int:
    """How many bindings of ``principal`` the broker shows, once it shows ``expected`` or ``timeout``
    passed: KRaft applies an ACL change to the broker's view asynchronously, and the delete stopped
    half-way did not wait for it."""
    deadline = time.monotonic() + timeout
    while (count := len(admin.acls(principal))) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return count


def test_a_delete_stopped_half_way_finishes_when_run_again(secure_kafka_pair, monkeypatch):
    cluster = Cluster("dr", (secure_kafka_pair.dr.bootstrap,),
                      Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", "IT_ADMIN_PASSWORD"))
    admin = KafkaAdmin(cluster, secrets=lambda _name: ADMIN_PASSWORD)
    principal = f"User:bulk-{uuid.uuid4().hex[:8]}"
    bindings = [AclBinding("dr", principal, "TOPIC", f"bulk-{i:04d}", "LITERAL", op)
                for i in range(600) for op in ("READ", "DESCRIBE")]
    # What the delete must leave: another operation on a listed topic, the same operations of another
    # principal, and a topic not listed.
    kept = [AclBinding("dr", principal, "TOPIC", "bulk-0007", "LITERAL", "WRITE"),
            AclBinding("dr", f"{principal}-other", "TOPIC", "bulk-0001", "LITERAL", "READ"),
            AclBinding("dr", principal, "TOPIC", "bulk-9999", "LITERAL", "READ")]
    admin.create_acls(bindings + kept)  # two CreateAcls requests (MAX_ACLS_PER_CREATE)
    assert len(admin.acls(principal)) == 1202
    # Each topic whose every binding of the principal goes is one filter (operation ANY); bulk-0007
    # keeps WRITE, so its READ and DESCRIBE go by a filter each: 601 filters, three requests.
    monkeypatch.setattr(retry, "MAX_ACL_FILTERS_PER_DELETE", 300)

    real = admin._client
    admin._client = Stopping(real, stop_at=2)
    with pytest.raises(KafkaOperationFailed, match="stopped half-way"):
        admin.delete_acls(bindings)
    # the first request: bulk-0000..0006 and 0008..0298 whole (2 x 298 bindings) and 0007's two
    assert admin._client.deletes == [300, 300] and shown(admin, principal, 1202 - 598) == 1202 - 598

    admin._client = Stopping(real, stop_at=None)
    admin.delete_acls(bindings)  # the same list, as the state still holds it: only what is left is sent
    assert admin._client.deletes == [300, 1]
    left = {(b.principal, b.resource_name, b.operation) for b in admin.acls(principal) | admin.acls(f"{principal}-other")}
    assert left == {(k.principal, k.resource_name, k.operation) for k in kept}
    admin.delete_acls(bindings)  # all gone: success, no request
    assert admin._client.deletes == [300, 1]
    admin.delete_acls(kept)

"""Least privilege as a matrix: what the mirror's principal may not do, tried for real. Prints a table.

    .venv/bin/python benchmarks/least_privilege.py

On its own secured dev pair (SASL/SCRAM, StandardAuthorizer; free ports): a spec mirroring one
topic and one group from ``primary`` to ``dr`` as ``User:mm2`` (``benchmarks/specs.py``), the ACLs
``compile`` derives for it created and nothing else, then every ACL operation x resource type on
the mirrored topic and group, on a topic and a group outside the mirror, on the cluster and on a
foreign transactional id, per cluster: granted by the derived ACLs, or probed with a real client
call as mm2 (``tests.kit.acl_matrix``), which must come back with the authorization error of
that resource type. That the engines work with exactly these ACLs is what
tests/integration/test_least_privilege.py (Spark) and test_mm2_rendered.py (Connect) show.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.specs import secured_spec  # noqa: E402
from mm2spec.dev import DevPorts, DevStack  # noqa: E402
from tests.kit.acl_matrix import mirror_matrix, render  # noqa: E402
from mm2spec.dev.config import ADMIN_PASSWORD, MM2_PASSWORD  # noqa: E402
from mm2spec.live.kafka import KafkaAdmin  # noqa: E402
from mm2spec.spec.load import load_desired_state  # noqa: E402

SECRETS = {"BENCH_MM2_PASSWORD": MM2_PASSWORD, "BENCH_ADMIN_PASSWORD": ADMIN_PASSWORD}
#: The group benchmarks/specs.py mirrors.
GROUP = "bench-group"
#: Dev clusters start in seconds on an idle machine, minutes on a busy one.
CLUSTER_START_TIMEOUT_S = 300.0


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="mm2spec-least-privilege-"))
    stack = DevStack(work / "dev", ports=DevPorts.free(), secure=True, tie_to_parent=True, echo=lambda _line: None)
    pair = stack.up(with_connect=False, timeout=CLUSTER_START_TIMEOUT_S)
    try:
        uid = uuid.uuid4().hex[:6]
        topic, outside = f"lp-{uid}-orders", f"lp-{uid}-hr"
        spec = work / "spec.yaml"
        spec.write_text(yaml.safe_dump(secured_spec(pair, [topic], "least-privilege"), sort_keys=False))
        state = load_desired_state(spec, None)
        for alias in ("primary", "dr"):
            admin = KafkaAdmin(state.cluster(alias), secrets=SECRETS.get)
            admin.create_topic(topic, 1, -1, {})  # on dr: as the mirror would create it
            admin.create_topic(outside, 1, -1, {})
            admin.create_acls([b for b in state.acl_bindings if b.cluster == alias])
        clients = {alias: pair.client_config(alias, "mm2") for alias in ("primary", "dr")}
        cells = mirror_matrix(state.acl_bindings, clients, topic=topic, outside=outside, group=GROUP,
                              other_group=f"lp-{uid}-payroll", transactional_id=f"lp-{uid}-txn")
        print(render(cells))
        return 0
    finally:
        stack.down()


if __name__ == "__main__":
    sys.exit(main())

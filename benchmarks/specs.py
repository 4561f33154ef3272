"""The DR spec the benchmarks run against: one identity flow between a secured dev pair."""

from __future__ import annotations


def secured_spec(state, topics: list, name: str) -> dict:
    """``topics`` mirrored primary -> dr; the mirror runs as mm2, mm2spec provisions as admin."""
    def cluster(broker):
        return {"bootstrapServers": [broker.bootstrap],
                "security": {"protocol": "SASL_PLAINTEXT", "saslMechanism": "SCRAM-SHA-512", "username": "mm2",
                             "passwordSecret": "BENCH_MM2_PASSWORD",
                             "admin": {"username": "admin", "passwordSecret": "BENCH_ADMIN_PASSWORD"}}}

    return {"apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": name},
            "clusters": {"primary": cluster(state.primary), "dr": cluster(state.dr)},
            "mirrors": [{"source": "primary", "target": "dr", "replicationPolicy": "identity", "topics": topics,
                         "groups": ["bench-group"], "tasksMax": 2}],
            "acls": {"manage": True, "principal": "User:mm2"}}

"""DR specs for the fixture clusters, written to a file the way a user would write them.

The fixtures start their clusters on free ports, so specs are written per test: ``write_spec`` for
a small primary -> dr setup, ``retarget_example`` for the project's examples pointed at the
fixture clusters (everything else in them unchanged).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import yaml

from mm2spec.dev import ADMIN_PASSWORD, MM2_PASSWORD
from mm2spec.dev.process import pick_free_ports

ROOT = Path(__file__).resolve().parents[2]

#: Secret names the secure specs use; ``SECRETS`` maps them to the dev clusters' passwords.
MM2_SECRET = "IT_MM2_PASSWORD"
ADMIN_SECRET = "IT_ADMIN_PASSWORD"
SECRETS = {MM2_SECRET: MM2_PASSWORD, ADMIN_SECRET: ADMIN_PASSWORD}


def spec_for(pair, topics: Sequence[str], groups: Sequence[str] = (), *, secure: bool = False,
             engine: str = "spark", rest_url: str | None = None, manage_acls: bool = False,
             name: str = "it-plan", mirror: Mapping | None = None, connect: Mapping | None = None,
             aliases: tuple[str, str] = ("primary", "dr")) -> dict:
    """A spec (as data) for the fixture clusters: one identity flow from ``pair.primary`` to ``pair.dr``.

    ``aliases`` names the two clusters in the spec (MM2 names its internal topics after the source
    alias, so a module that runs MM2 can keep its topics apart from other modules' on the shared
    clusters). ``mirror`` adds or replaces keys of the flow (e.g. ``replicationPolicy``,
    ``exactlyOnce``, ``config``); ``connect`` those of the ``connect`` section. Secure clusters
    authenticate as ``mm2`` (secret ``IT_MM2_PASSWORD``) and provision as ``admin`` (``IT_ADMIN_PASSWORD``).
    """
    def cluster(broker):
        spec = {"bootstrapServers": [broker.bootstrap]}
        if secure:
            spec["security"] = {"protocol": "SASL_PLAINTEXT", "saslMechanism": "SCRAM-SHA-512", "username": "mm2",
                                "passwordSecret": MM2_SECRET,
                                "admin": {"username": "admin", "passwordSecret": ADMIN_SECRET}}
        return spec

    source, target = aliases
    flow = {"source": source, "target": target, "replicationPolicy": "identity", "topics": list(topics),
            "groups": list(groups), "tasksMax": 1, **(mirror or {})}
    spec = {
        "apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": name},
        "clusters": {source: cluster(pair.primary), target: cluster(pair.dr)},
        "mirrors": [flow],
        "engine": engine,
        "acls": {"manage": manage_acls, "principal": "User:mm2"},
        # A free /metrics port: the default (9405) would be held by any other Spark job on this host.
        "spark": {"metrics": {"port": pick_free_ports(1)[0]}},
    }
    connect_section = dict(connect or {})
    if rest_url:
        connect_section.update({"cluster": target, "restUrl": rest_url})
    if connect_section:
        spec["connect"] = connect_section
    return spec


def write_spec(path: Path, pair, topics: Sequence[str], groups: Sequence[str] = (), secure: bool = False,
               engine: str = "spark", rest_url: str | None = None, manage_acls: bool = False, **more) -> Path:
    """``spec_for(...)`` written as YAML to ``path``; returns ``path``."""
    spec = spec_for(pair, topics, groups, secure=secure, engine=engine, rest_url=rest_url,
                    manage_acls=manage_acls, **more)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def retarget_example(example: str, path: Path, bootstraps: Mapping[str, str], env: str | None = None) -> Path:
    """Copy ``examples/<example>`` to ``path`` with each cluster alias's bootstrap servers replaced.

    The base clusters get the new address, and so does ``environments.<env>`` where it sets one, so
    the environment's own settings (security, tasks, exactly-once) stay as the example has them.
    """
    spec = yaml.safe_load((ROOT / "examples" / example).read_text())
    for alias, bootstrap in bootstraps.items():
        spec["clusters"][alias]["bootstrapServers"] = [bootstrap]
        overlay = ((spec.get("environments") or {}).get(env) or {}).get("clusters", {}).get(alias) if env else None
        if overlay and "bootstrapServers" in overlay:
            overlay["bootstrapServers"] = [bootstrap]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path

"""Render a ``Plan`` as text (Terraform-like, optionally coloured), markdown (PR comment) or JSON.

Pure functions. Values of sensitive fields (passwords, JAAS configs, tokens) are masked in every
format unless they are config-provider references like ``${env:NAME}``, which name a secret only
(``mm2spec.spec.secrets.mask``).
"""

from __future__ import annotations

import json
import re

from mm2spec.mm2.engine_facts import ENGINE_FACTS
from mm2spec.plan.diff import FieldChange
from mm2spec.plan.model import PLAN_FORMAT_VERSION, Plan, ResourceChange
from mm2spec.spec.secrets import mask

SYMBOLS = {"create": "+", "update": "~", "replace": "-/+", "delete": "-", "refused": "!", "no-op": " "}
WORDS = {"create": "create", "update": "update", "replace": "replace", "delete": "delete", "refused": "refused"}
COLOURS = {"create": "32", "update": "33", "replace": "35", "delete": "31", "refused": "1;31"}
MARKDOWN_BADGES = {"create": "➕ create", "update": "🔄 update", "replace": "♻️ replace", "delete": "➖ delete",
                   "refused": "⛔ refused"}


def _value(v: object) -> str:
    return "(absent)" if v is None else json.dumps(v) if not isinstance(v, str) else f'"{v}"'


def _field_line(change: FieldChange) -> str:
    old, new = mask(change.field, change.old), mask(change.field, change.new)
    if change.old is None:
        return f"{change.field} = {_value(new)}"
    if change.new is None:
        return f"{change.field} = {_value(old)} -> (removed)"
    return f"{change.field}: {_value(old)} -> {_value(new)}"


def _shown_fields(change: ResourceChange) -> tuple[FieldChange, ...]:
    """Field changes worth a line: a created connector's whole config and a created topic's partition
    count (already in its detail) would only repeat what the resource line says."""
    if change.action == "create" and change.kind == "connector":
        return ()
    if change.action == "create":
        return tuple(f for f in change.changes if f.field != "partitions")
    return change.changes


def summary_line(plan: Plan) -> str:
    s = plan.summary()
    line = (f"Plan: {s['create']} to create, {s['update']} to update, {s['replace']} to replace, "
            f"{s['delete']} to delete.")
    if s["refused"]:
        line += f" {s['refused']} change(s) refused: this plan cannot be applied."
    return line if plan.has_changes else "No changes. The live clusters match the spec."


def _scopes(plan: Plan) -> list[tuple[str, str]]:
    """(scope, heading) in display order: clusters, then each engine with changes, in
    ``ENGINE_FACTS``' order (an engine's changes carry its name as their scope); the engine on
    Connect workers also when the workers' version was read."""
    scopes = [(c.alias, f"cluster {c.alias} ({c.bootstrap}" + (f"; Kafka {c.version})" if c.version else ")"))
              for c in plan.clusters]
    for facts in ENGINE_FACTS.values():
        version = plan.connect_version if facts.runs_on_connect_workers else None
        if version or any(c.scope == facts.name for c in plan.changes):
            scopes.append((facts.name, facts.plan_heading + (f" ({version})" if version else "")))
    return scopes


def _visible(plan: Plan, scope: str) -> list[ResourceChange]:
    order = {"refused": 0, "replace": 1, "delete": 2, "update": 3, "create": 4}
    changes = [c for c in plan.changes if c.scope == scope and c.action != "no-op"]
    return sorted(changes, key=lambda c: (c.kind != "topic", order[c.action], c.kind, c.name))


def to_text(plan: Plan, colour: bool = False) -> str:
    def paint(action: str, text: str) -> str:
        return f"\033[{COLOURS[action]}m{text}\033[0m" if colour and action in COLOURS else text

    env = plan.environment or "base"
    lines = [f"mm2spec plan: {plan.spec_name} (environment {env}, engine {plan.engine})", ""]
    for scope, heading in _scopes(plan):
        changes = _visible(plan, scope)
        lines.append(f"{heading}:" + ("" if changes else " no changes"))
        for change in changes:
            lines.append(paint(change.action, f"  {SYMBOLS[change.action]:>3} {change.kind} {change.name}"))
            if change.detail and change.action in ("create", "replace"):
                lines.append(f"        {change.detail}")
            for field_change in _shown_fields(change):
                lines.append(f"        {_field_line(field_change)}")
            if change.reason:
                lines.append(paint(change.action, f"        {change.reason}"))
        lines.append("")
    if plan.resolutions:
        lines.append("Patterns resolved against the live source clusters:")
        for r in plan.resolutions:
            matched = ", ".join(r.matched) if r.matched else "(nothing yet)"
            lines.append(f"  {r.flow} {r.field} {r.pattern!r} -> {matched}")
        lines.append("")
    lines += [f"Note: {note}" for note in plan.notes]
    lines.append(summary_line(plan))
    return "\n".join(lines) + "\n"


def _mermaid(plan: Plan) -> list[str]:
    def node_id(alias: str) -> str:
        return "c_" + re.sub(r"[^A-Za-z0-9_]", "_", alias)

    lines = ["```mermaid", "flowchart LR"]
    for c in plan.clusters:
        lines.append(f'  {node_id(c.alias)}["{c.alias}<br/>{c.bootstrap}"]')
    for f in plan.flows:
        mode = "exactly-once" if f.exactly_once else "at-least-once"
        label = f"{f.name}: {f.policy} policy, {mode}<br/>topics: {', '.join(f.topics)}"
        lines.append(f'  {node_id(f.source)} -- "{label}" --> {node_id(f.target)}')
    lines.append("```")
    return lines


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(plan: Plan) -> str:
    env = plan.environment or "base"
    lines = [f"### mm2spec plan: `{plan.spec_name}` (environment `{env}`, engine `{plan.engine}`)", ""]
    lines += _mermaid(plan)
    lines += ["", f"**{summary_line(plan)}**", ""]
    for scope, heading in _scopes(plan):
        changes = _visible(plan, scope)
        lines.append(f"#### {heading}")
        if not changes:
            lines += ["", "No changes.", ""]
            continue
        lines += ["", "| action | resource | details |", "|---|---|---|"]
        for change in changes:
            details = [change.detail] if change.detail and change.action in ("create", "replace") else []
            details += [f"`{_field_line(fc)}`" for fc in _shown_fields(change)]
            if change.reason:
                details.append(f"**{change.reason}**")
            lines.append(f"| {MARKDOWN_BADGES[change.action]} | {change.kind} `{_md_escape(change.name)}` | "
                         f"{_md_escape('<br/>'.join(details))} |")
        lines.append("")
    if plan.resolutions:
        lines += ["<details><summary>Patterns resolved against the live source clusters</summary>", "",
                  "| flow | field | pattern | matched |", "|---|---|---|---|"]
        for r in plan.resolutions:
            matched = ", ".join(f"`{m}`" for m in r.matched) or "(nothing yet)"
            lines.append(f"| {r.flow} | {r.field} | `{_md_escape(r.pattern)}` | {_md_escape(matched)} |")
        lines += ["", "</details>", ""]
    lines += [f"> {note}" for note in plan.notes]
    return "\n".join(lines).rstrip() + "\n"


def to_json(plan: Plan) -> str:
    document = {
        "formatVersion": PLAN_FORMAT_VERSION,
        "spec": {"name": plan.spec_name, "file": plan.source_file, "environment": plan.environment,
                 "engine": plan.engine},
        "clusters": [{"alias": c.alias, "bootstrapServers": c.bootstrap,
                      "defaultReplicationFactor": c.default_replication_factor, "authorizer": c.authorizer,
                      **({"version": c.version} if c.version else {})}
                     for c in plan.clusters],
        **({"connectVersion": plan.connect_version} if plan.connect_version else {}),
        "flows": [f.to_json() for f in plan.flows],
        "summary": {**plan.summary(), "hasChanges": plan.has_changes},
        "changes": [
            {"scope": c.scope, "kind": c.kind, "name": c.name, "action": c.action, "detail": c.detail,
             "reason": c.reason,
             "fields": [{"field": f.field, "old": mask(f.field, f.old), "new": mask(f.field, f.new)} for f in c.changes]}
            for c in plan.changes if c.action != "no-op"
        ],
        "resolutions": [{"flow": r.flow, "field": r.field, "pattern": r.pattern, "matched": list(r.matched)}
                        for r in plan.resolutions],
        "notes": list(plan.notes),
    }
    return json.dumps(document, indent=2) + "\n"

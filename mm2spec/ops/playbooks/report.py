"""What a playbook run did: per task its status, duration and diff; a recap per cluster; the
failover's translations and RTO. Rendered as text (the terminal), markdown (an incident channel)
or JSON (``schemas/playbook-report.schema.json``, ``formatVersion`` below).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from mm2spec.ops.modules.translate import Translation

REPORT_FORMAT_VERSION = 1
STATUSES = ("ok", "changed", "skipped", "failed")


COMMIT_MODULES = ("offsets.commit", "failback.commit")
"""The modules whose end is the RTO: the groups can resume from then on."""

@dataclass(frozen=True)
class Outcome:
    """What one task did on one cluster (or for one flow)."""

    status: str
    """ok | changed | skipped | failed (in check mode, ``changed`` means "would change")."""
    cluster: str
    """The cluster alias it read or wrote, ``local`` for this machine (the Spark driver)."""
    message: str = ""
    diff: tuple[tuple[str, str, str], ...] = ()
    """(what, before, after) lines, shown with --diff."""
    flow: str = ""


@dataclass
class TaskResult:
    name: str
    module: str
    status: str
    seconds: float
    outcomes: list[Outcome] = field(default_factory=list)
    reason: str = ""
    """Why it was skipped (tags, when) or not run (an earlier task failed)."""

    def to_json(self) -> dict:
        return {"name": self.name, "module": self.module, "status": self.status, "seconds": round(self.seconds, 3),
                "reason": self.reason,
                "outcomes": [{"status": o.status, "cluster": o.cluster, "flow": o.flow, "message": o.message,
                              "diff": [{"what": w, "before": b, "after": a} for w, b, a in o.diff]}
                             for o in self.outcomes]}


def task_status(outcomes: list[Outcome]) -> str:
    statuses = {o.status for o in outcomes}
    for status in ("failed", "changed", "ok"):
        if status in statuses:
            return status
    return "skipped"


@dataclass
class RunReport:
    playbook: str
    spec: str
    environment: str | None
    check: bool
    started_at: float
    seconds: float = 0.0
    tasks: list[TaskResult] = field(default_factory=list)
    translations: list[Translation] = field(default_factory=list)
    rpo: list[dict] = field(default_factory=list)
    """Unplanned failover: per partition the last mirrored record's timestamp and records behind."""

    @property
    def failed(self) -> bool:
        return any(t.status == "failed" for t in self.tasks)

    @property
    def changed(self) -> bool:
        return any(t.status == "changed" for t in self.tasks)

    def exit_code(self) -> int:
        """As ``plan --detailed-exitcode``: 1 a task failed; 2 changes pending (check mode); else 0."""
        if self.failed:
            return 1
        return 2 if self.check and self.changed else 0

    def recap(self) -> dict[str, dict[str, int]]:
        """Per cluster: how many tasks ended ok / changed / skipped / failed there."""
        counts: dict[str, Counter] = {}
        for task in self.tasks:
            per_cluster: dict[str, list[Outcome]] = {}
            for outcome in task.outcomes:
                per_cluster.setdefault(outcome.cluster, []).append(outcome)
            for cluster, outcomes in per_cluster.items():
                counts.setdefault(cluster, Counter())[task_status(outcomes)] += 1
        return {c: {s: counts[c][s] for s in STATUSES} for c in sorted(counts)}

    def phases(self) -> list[tuple[str, float]]:
        """Wall time per task that ran: the RTO split by phase."""
        return [(t.name, t.seconds) for t in self.tasks if t.status not in ("skipped", "not run")]

    def rto_seconds(self) -> float | None:
        """Wall time from the start until the groups were committed where they resume (the last
        ``offsets.commit``, or ``failback.commit`` on the source)."""
        elapsed, rto = 0.0, None
        for task in self.tasks:
            elapsed += task.seconds
            if task.module in COMMIT_MODULES and task.status in ("ok", "changed"):
                rto = elapsed
        return rto

    def totals(self) -> dict[str, int]:
        known = [t for t in self.translations if t.dr_offset is not None]
        return {"groups": len({t.group for t in self.translations}), "partitions": len(self.translations),
                "skipped": sum(max(0, t.skipped) for t in known), "reread": sum(max(0, t.reread) for t in known),
                "mm2Reread": sum(t.mm2_reread or 0 for t in known),
                "untranslated": len(self.translations) - len(known),
                "unmirrored": sum(t.unmirrored for t in known)}

    def to_json(self) -> dict:
        rto = self.rto_seconds()
        return {"formatVersion": REPORT_FORMAT_VERSION, "playbook": self.playbook, "spec": self.spec,
                "environment": self.environment, "check": self.check, "startedAt": self.started_at,
                "seconds": round(self.seconds, 3), "exitCode": self.exit_code(),
                "tasks": [t.to_json() for t in self.tasks], "recap": self.recap(),
                "rto": {"seconds": None if rto is None else round(rto, 3),
                        "phases": [{"task": n, "seconds": round(s, 3)} for n, s in self.phases()]},
                "translations": [t.to_json() for t in self.translations], "totals": self.totals(),
                "rpo": self.rpo}


def _diff_lines(task: TaskResult) -> list[str]:
    return [f"    {o.cluster}: {w}: {b} -> {a}" for o in task.outcomes for w, b, a in o.diff]


def task_line(task: TaskResult, diff: bool = False) -> str:
    """The line (and, with ``diff``, the before -> after lines) shown when a task ends."""
    detail = "; ".join(f"{o.cluster}: {o.message}" for o in task.outcomes if o.message) or task.reason
    head = f"{task.status}: [{task.name}] ({task.seconds:.1f}s)" + (f" {detail}" if detail else "")
    return "\n".join([head] + (_diff_lines(task) if diff else []))


def format_text(report: RunReport, diff: bool = False) -> str:
    lines = [f"PLAY [{report.playbook}] {report.spec}" + (f" env {report.environment}" if report.environment else "")
             + (" (check mode: nothing is changed)" if report.check else ""), ""]
    for task in report.tasks:
        lines.append(f"TASK [{task.name}] {task.module}")
        lines.append(task_line(task, diff))
    lines += _translation_lines(report) + _rpo_lines(report)
    lines += ["", "PLAY RECAP"]
    for cluster, counts in report.recap().items():
        lines.append(f"{cluster:<20} : " + "  ".join(f"{s}={counts[s]}" for s in STATUSES))
    rto = report.rto_seconds()
    lines.append(f"total {report.seconds:.1f}s" + (f", RTO {rto:.1f}s (start to groups committed)" if rto else ""))
    return "\n".join(lines) + "\n"


def _translation_lines(report: RunReport) -> list[str]:
    if not report.translations:
        return []
    totals = report.totals()
    lines = ["", f"OFFSETS {totals['groups']} groups, {totals['partitions']} partitions: "
                 f"{totals['skipped']} records skipped, {totals['reread']} re-read "
                 f"(MM2's translation would re-read {totals['mm2Reread']})"
                 + (f", {totals['untranslated']} not translated" if totals["untranslated"] else "")
                 + (f", {totals['unmirrored']} consumed on the source but never mirrored" if totals["unmirrored"] else "")]
    for t in report.translations:
        target = "-" if t.dr_offset is None else t.dr_offset
        lines.append(f"  {t.group} {t.topic}-{t.partition}: source {t.committed} -> dr {t.target_topic}-{t.partition} "
                     f"{target} ({t.method}, skipped {t.skipped}, re-read {t.reread}, MM2 {t.mm2_reread if t.mm2_reread is not None else '-'})"
                     + (f" {t.note}" if t.note else ""))
    return lines


def _rpo_lines(report: RunReport) -> list[str]:
    if not report.rpo:
        return []
    return ["", "RPO (last record mirrored before the switch)"] + [
        f"  {r['topic']}-{r['partition']}: last mirrored record at {r['lastMirroredTimestamp']}"
        + (f", {r['recordsBehind']} records behind" if r.get("recordsBehind") is not None else "")
        for r in report.rpo]


def format_markdown(report: RunReport, diff: bool = False) -> str:
    mode = " (check mode)" if report.check else ""
    lines = [f"### `{report.playbook}`{mode}: {report.spec}" + (f" (env `{report.environment}`)" if report.environment else ""),
             "", "| task | module | status | time | detail |", "|---|---|---|---|---|"]
    for task in report.tasks:
        detail = "; ".join(f"{o.cluster}: {o.message}" for o in task.outcomes if o.message) or task.reason
        lines.append(f"| {task.name} | `{task.module}` | **{task.status}** | {task.seconds:.1f}s | {_md(detail)} |")
        if diff:
            lines += [f"| | | | | `{_md(d.strip())}` |" for d in _diff_lines(task)]
    if report.translations:
        totals = report.totals()
        lines += ["", f"**Offsets**: {totals['groups']} groups, {totals['partitions']} partitions, "
                      f"{totals['skipped']} skipped, {totals['reread']} re-read (MM2 would re-read {totals['mm2Reread']})",
                  "", "| group | partition | source offset | DR offset | method | skipped | re-read | MM2 re-read |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {t.group} | {t.topic}-{t.partition} | {t.committed} | "
                  f"{'-' if t.dr_offset is None else t.dr_offset} | {t.method} | {t.skipped} | {t.reread} | "
                  f"{'-' if t.mm2_reread is None else t.mm2_reread} |" for t in report.translations]
    if report.rpo:
        lines += ["", "**RPO**", ""] + [f"- `{r['topic']}-{r['partition']}`: last mirrored record at "
                                       f"{r['lastMirroredTimestamp']}" for r in report.rpo]
    lines += ["", "| cluster | ok | changed | skipped | failed |", "|---|---|---|---|---|"]
    lines += [f"| {c} | " + " | ".join(str(n[s]) for s in STATUSES) + " |" for c, n in report.recap().items()]
    rto = report.rto_seconds()
    lines += ["", f"Total {report.seconds:.1f}s" + (f"; RTO {rto:.1f}s" if rto else "") + "."]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_json(report: RunReport) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=False) + "\n"


def render(report: RunReport, fmt: str, diff: bool = False) -> str:
    if fmt == "json":
        return format_json(report)
    return format_markdown(report, diff) if fmt == "markdown" else format_text(report, diff)


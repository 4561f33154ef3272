"""What a playbook run did: per task its status, duration and diff; a recap per cluster; the RTO;
and the sections the catalogue's modules contribute (a failover's translations, say), which this
engine renders without knowing them. Rendered as text (the terminal), markdown (an incident
channel) or JSON (``schemas/playbook-report.schema.json``, ``formatVersion`` below).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

REPORT_FORMAT_VERSION = 1
STATUSES = ("ok", "changed", "skipped", "failed")


class ReportSection(Protocol):
    """A part of the report that modules contribute after the tasks (``Module.sections``), read
    from the facts they leave. Every report of a catalogue has every section of it, empty when
    none of its modules ran, so the JSON's keys do not depend on which tasks ran."""

    name: str
    """Unique in a catalogue: ``RunReport.section(name)`` is what it collected."""

    def collect(self, facts: Mapping[str, Any]) -> Any:
        """What the section shows, taken from the run's facts once the run ends."""
        ...

    def to_json(self, content: Any) -> dict[str, Any]:
        """The top-level keys it adds to the JSON report (after ``rto``), present even when empty."""
        ...

    def text_lines(self, content: Any) -> list[str]:
        """Its lines in the text report, between the tasks and the recap."""
        ...

    def markdown_lines(self, content: Any) -> list[str]:
        """Its lines in the markdown report, between the tasks and the recap."""
        ...


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
    ends_rto: bool = False
    """Its module's ``ends_rto``: once it ran, the groups can resume (not in the JSON: ``rto`` is)."""

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
    sections: list[tuple[ReportSection, Any]] = field(default_factory=list)
    """Each section of the catalogue with what it collected from the run's facts, in the order shown."""

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

    def _rto_end(self) -> int | None:
        """The index of the task whose end is the RTO's end (None: no task ended it)."""
        return max((i for i, t in enumerate(self.tasks) if t.ends_rto and t.status in ("ok", "changed")), default=None)

    def rto_phases(self) -> list[tuple[str, float]]:
        """The phases up to the end of the RTO (none when no task ended it): what the RTO is made of."""
        end = self._rto_end()
        return [] if end is None else [(t.name, t.seconds) for t in self.tasks[:end + 1]
                                       if t.status not in ("skipped", "not run")]

    def rto_seconds(self) -> float | None:
        """Wall time from the start until the groups were committed where they resume: the end of
        the last task whose module ends the RTO (``Module.ends_rto``) and that ran."""
        elapsed, rto = 0.0, None
        for task in self.tasks:
            elapsed += task.seconds
            if task.ends_rto and task.status in ("ok", "changed"):
                rto = elapsed
        return rto

    def section(self, name: str) -> Any:
        """What the section ``name`` collected; None when the report has no such section."""
        return next((content for section, content in self.sections if section.name == name), None)

    def to_json(self) -> dict:
        rto = self.rto_seconds()
        end = self._rto_end()
        document = {"formatVersion": REPORT_FORMAT_VERSION, "playbook": self.playbook, "spec": self.spec,
                    "environment": self.environment, "check": self.check, "startedAt": self.started_at,
                    "seconds": round(self.seconds, 3), "exitCode": self.exit_code(),
                    "tasks": [t.to_json() for t in self.tasks], "recap": self.recap(),
                    "rto": {"seconds": None if rto is None else round(rto, 3),
                            "phases": [{"task": t.name, "seconds": round(t.seconds, 3),
                                        "inRto": end is not None and i <= end} for i, t in enumerate(self.tasks)
                                       if t.status not in ("skipped", "not run")]}}
        for section, content in self.sections:
            document.update(section.to_json(content))
        return document


def _diff_lines(task: TaskResult) -> list[str]:
    return [f"    {o.cluster}: {w}: {b} -> {a}" for o in task.outcomes for w, b, a in o.diff]


def task_line(task: TaskResult, diff: bool = False) -> str:
    """The line (and, with ``diff``, the before -> after lines) shown when a task ends."""
    detail = "; ".join(f"{o.cluster}: {o.message}" for o in task.outcomes if o.message) or task.reason
    head = f"{task.status}: [{task.name}] ({task.seconds:.1f}s)" + (f" {detail}" if detail else "")
    return "\n".join([head] + (_diff_lines(task) if diff else []))


def rto_split(report: RunReport) -> str:
    """The RTO's phases, longest first: where an incident's minutes went."""
    phases = sorted(report.rto_phases(), key=lambda p: -p[1])
    return ", ".join(f"{name} {seconds:.1f}s" for name, seconds in phases)


def format_text(report: RunReport, diff: bool = False) -> str:
    lines = [f"PLAY [{report.playbook}] {report.spec}" + (f" env {report.environment}" if report.environment else "")
             + (" (check mode: nothing is changed)" if report.check else ""), ""]
    for task in report.tasks:
        lines.append(f"TASK [{task.name}] {task.module}")
        lines.append(task_line(task, diff))
    for section, content in report.sections:
        lines += section.text_lines(content)
    lines += ["", "PLAY RECAP"]
    for cluster, counts in report.recap().items():
        lines.append(f"{cluster:<20} : " + "  ".join(f"{s}={counts[s]}" for s in STATUSES))
    rto = report.rto_seconds()
    lines.append(f"total {report.seconds:.1f}s" + (f", RTO {rto:.1f}s (start to groups committed)" if rto else ""))
    if rto:
        lines.append(f"RTO by task: {rto_split(report)}")
    return "\n".join(lines) + "\n"


def format_markdown(report: RunReport, diff: bool = False) -> str:
    mode = " (check mode)" if report.check else ""
    lines = [f"### `{report.playbook}`{mode}: {report.spec}" + (f" (env `{report.environment}`)" if report.environment else ""),
             "", "| task | module | status | time | detail |", "|---|---|---|---|---|"]
    for task in report.tasks:
        detail = "; ".join(f"{o.cluster}: {o.message}" for o in task.outcomes if o.message) or task.reason
        lines.append(f"| {task.name} | `{task.module}` | **{task.status}** | {task.seconds:.1f}s | {_md(detail)} |")
        if diff:
            lines += [f"| | | | | `{_md(d.strip())}` |" for d in _diff_lines(task)]
    for section, content in report.sections:
        lines += section.markdown_lines(content)
    lines += ["", "| cluster | ok | changed | skipped | failed |", "|---|---|---|---|---|"]
    lines += [f"| {c} | " + " | ".join(str(n[s]) for s in STATUSES) + " |" for c, n in report.recap().items()]
    rto = report.rto_seconds()
    lines += ["", f"Total {report.seconds:.1f}s" + (f"; RTO {rto:.1f}s ({_md(rto_split(report))})" if rto else "") + "."]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_json(report: RunReport) -> str:
    """One top-level key a line, and each item of a top-level list on a line of its own: at 1,000
    groups (60,000 translations, as many commit diffs) an indented document takes Python's pure
    encoder tens of seconds, where one line per item is the C encoder's, well under a second."""
    lines = []
    for key, value in report.to_json().items():
        if isinstance(value, list) and value:
            value_text = "[\n" + ",\n".join(f"    {json.dumps(item)}" for item in value) + "\n  ]"
        else:
            value_text = json.dumps(value)
        lines.append(f"  {json.dumps(key)}: {value_text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def render(report: RunReport, fmt: str, diff: bool = False) -> str:
    if fmt == "json":
        return format_json(report)
    return format_markdown(report, diff) if fmt == "markdown" else format_text(report, diff)


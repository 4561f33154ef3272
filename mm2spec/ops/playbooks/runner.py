"""Runs a playbook: tasks in order; ``tags``/``--skip-tags`` and ``when`` decide which run; the
first failed task stops the run (unless it says ``ignore_errors``) before the next one writes
anything; the report lists every task, those not run included, and the playbook's report
sections, each collected from the facts the run left.

A run that will call a module that writes (outside check mode) first takes the lease of each DR
pair its flows span (``live.lease``: one operation at a time per pair), renews it while it runs,
stops before the next task if it lost it, and releases it at the end, failed or interrupted too.
Such a playbook never spans flows that run both ways through a cluster (active-active, a chain).
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from mm2spec.errors import Mm2specError, OperationRefused
from mm2spec.live.lease import HeldLeases, PairLease
from mm2spec.ops.playbooks.context import Context, failure_text
from mm2spec.ops.playbooks.playbook import Playbook, Task, evaluate
from mm2spec.ops.playbooks.report import Outcome, RunReport, TaskResult, task_status
from mm2spec.spec.model import MirrorFlow

Listener = Callable[[str, Task, TaskResult | None], None]
"""Called with ("start", task, None) and ("end", task, result): the CLI's progress lines."""


def _skip_reason(task: Task, tags: set[str], skip_tags: set[str], variables: dict | None) -> str | None:
    if tags and not (tags & set(task.tags)) and "always" not in task.tags:
        return f"not tagged {', '.join(sorted(tags))}"
    if skip_tags & set(task.tags):
        return f"tagged {', '.join(sorted(skip_tags & set(task.tags)))} (--skip-tags)"
    if variables is not None and not evaluate(task.when, variables):
        return f"when: {task.when}"
    return None


def writes(playbook: Playbook, tags: Iterable[str] = (), skip_tags: Iterable[str] = (),
           variables: dict | None = None) -> bool:
    """Whether a run may change a cluster: a task that tags (and ``when``, given the run's
    ``variables``) let run calls a module that writes."""
    tags, skip_tags = set(tags), set(skip_tags)
    return any(task.module.writes and _skip_reason(task, tags, skip_tags, variables) is None
               for task in playbook.tasks)


def refuse_two_way(flows: Iterable[MirrorFlow]) -> None:
    """Refuse flows of which one's target is another's source: a failover or failback moves
    consumers one way, and both at once would stop both mirrors and move the groups both ways."""
    flows = list(flows)
    for first in flows:
        for second in flows:
            if first.target == second.source and first is not second:
                kind = "active-active" if second.target == first.source else "a chain"
                raise OperationRefused(
                    f"flows {first.name} ({first.source} -> {first.target}) and {second.name} ({second.source} -> "
                    f"{second.target}) go both ways through {first.target} ({kind}): one run moves consumers one "
                    f"way only. Run one direction at a time, e.g. --limit flow={first.name}; nothing was changed")


def hold_leases(ctx: Context, operation: str) -> HeldLeases:
    """Take the lease of every DR pair the run's flows span (``LeaseHeld`` when another run holds one)."""
    pairs = sorted({(f.source, f.target) for f in ctx.flows})
    return HeldLeases(PairLease(ctx.lease_store(source, target), ctx.spec.name, source, target, operation)
                      for source, target in pairs).acquire(ctx.options.break_lease)


def run(playbook: Playbook, ctx: Context, tags: Iterable[str] = (), skip_tags: Iterable[str] = (),
        listener: Listener = lambda *_: None) -> RunReport:
    """Run ``playbook``'s tasks with ``ctx`` (closed at the end) and report what each did."""
    report = RunReport(playbook.name, ctx.spec.name, ctx.spec.environment, ctx.options.check, time.time())
    started = time.monotonic()
    tags, skip_tags = set(tags), set(skip_tags)
    stopped = False
    leases: HeldLeases | None = None
    try:
        variables = ctx.variables()
        if writes(playbook, tags, skip_tags, variables):
            refuse_two_way(ctx.flows)
            if not ctx.options.check:
                leases = hold_leases(ctx, playbook.name)
        for task in playbook.tasks:
            if stopped:
                report.tasks.append(TaskResult(task.name, task.module.name, "not run", 0.0,
                                               reason="an earlier task failed", ends_rto=task.module.ends_rto))
                continue
            reason = _skip_reason(task, tags, skip_tags, variables)
            if reason:
                result = TaskResult(task.name, task.module.name, "skipped", 0.0, reason=reason,
                                    ends_rto=task.module.ends_rto)
                report.tasks.append(result)
                listener("end", task, result)
                continue
            listener("start", task, None)
            begin = time.monotonic()
            lost = leases.lost() if leases is not None else None
            try:
                if lost:
                    # Another run took the pair over (--break-lease, or this one stalled past its
                    # lease): two runs must not both write, so this one stops here.
                    outcomes = [Outcome("failed", "local", f"{lost}: stopped before this task; see what the "
                                        "other run did (mm2spec failover/failback --check) before running again")]
                else:
                    outcomes = task.module.run(ctx, task.args)
            except Mm2specError as exc:
                outcomes = [Outcome("failed", "local", failure_text(ctx.options, exc))]
            result = TaskResult(task.name, task.module.name, task_status(outcomes), time.monotonic() - begin, outcomes,
                                ends_rto=task.module.ends_rto)
            report.tasks.append(result)
            listener("end", task, result)
            if result.status == "failed" and not task.ignore_errors:
                stopped = True
    finally:
        if leases is not None:
            leases.release()
        report.sections = [(section, section.collect(ctx.facts)) for section in playbook.sections]
        report.seconds = time.monotonic() - started
        ctx.close()
    return report

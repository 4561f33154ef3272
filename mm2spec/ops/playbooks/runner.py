"""Runs a playbook: tasks in order; ``tags``/``--skip-tags`` and ``when`` decide which run; the
first failed task stops the run (unless it says ``ignore_errors``) before the next one writes
anything; the report lists every task, those not run included, and the playbook's report
sections, each collected from the facts the run left.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from mm2spec.errors import Mm2specError
from mm2spec.ops.playbooks.context import Context, failure_text
from mm2spec.ops.playbooks.playbook import Playbook, Task, evaluate
from mm2spec.ops.playbooks.report import Outcome, RunReport, TaskResult, task_status

Listener = Callable[[str, Task, TaskResult | None], None]
"""Called with ("start", task, None) and ("end", task, result): the CLI's progress lines."""


def _skip_reason(task: Task, tags: set[str], skip_tags: set[str], variables: dict) -> str | None:
    if tags and not (tags & set(task.tags)) and "always" not in task.tags:
        return f"not tagged {', '.join(sorted(tags))}"
    if skip_tags & set(task.tags):
        return f"tagged {', '.join(sorted(skip_tags & set(task.tags)))} (--skip-tags)"
    if not evaluate(task.when, variables):
        return f"when: {task.when}"
    return None


def run(playbook: Playbook, ctx: Context, tags: Iterable[str] = (), skip_tags: Iterable[str] = (),
        listener: Listener = lambda *_: None) -> RunReport:
    """Run ``playbook``'s tasks with ``ctx`` (closed at the end) and report what each did."""
    report = RunReport(playbook.name, ctx.spec.name, ctx.spec.environment, ctx.options.check, time.time())
    started = time.monotonic()
    tags, skip_tags = set(tags), set(skip_tags)
    variables = ctx.variables()
    stopped = False
    try:
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
            try:
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
        report.sections = [(section, section.collect(ctx.facts)) for section in playbook.sections]
        report.seconds = time.monotonic() - started
        ctx.close()
    return report

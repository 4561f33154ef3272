"""A module of the playbook catalogue: a name, its arguments' JSON Schema, what it needs before
it, the function that runs it (one ``Outcome`` per cluster or flow it touched), whether its end is
the RTO, and the report sections it contributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from mm2spec.ops.playbooks.context import Context
from mm2spec.ops.playbooks.report import Outcome, ReportSection

RunFn = Callable[[Context, Mapping[str, Any]], list[Outcome]]


def arguments(**properties: dict) -> dict:
    """The JSON Schema of a module's arguments: these properties, nothing else."""
    return {"type": "object", "additionalProperties": False, "properties": properties}


TIMEOUT_ARG = {"type": "number", "exclusiveMinimum": 0, "description": "seconds to wait at most"}


@dataclass(frozen=True)
class Module:
    """One entry of the catalogue, called by a playbook's tasks."""

    name: str
    summary: str
    run: RunFn
    args: dict = field(default_factory=arguments)
    needs: tuple[str, ...] = ()
    """Modules whose result this one uses: a playbook must run them earlier."""
    ends_rto: bool = False
    """Once it has run (ok or changed) the groups can resume where they are: the report's RTO is
    the end of the last such task."""
    sections: tuple[ReportSection, ...] = ()
    """What it adds to the report after the tasks, from the facts it leaves (a module family's
    modules may share one section)."""
    writes: bool = True
    """It may change a cluster (outside check mode): a run that will run it confirms first (CLI)
    and holds the DR pair's lease; read-only modules (the checks) say False."""


def report_sections(modules: Iterable[Module]) -> tuple[ReportSection, ...]:
    """The sections these modules contribute, each once (by name), in the modules' order: a
    catalogue's are the sections of every report run against it."""
    found: dict[str, ReportSection] = {}
    for module in modules:
        for section in module.sections:
            found.setdefault(section.name, section)
    return tuple(found.values())

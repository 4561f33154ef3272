"""A module of the playbook catalogue: a name, its arguments' JSON Schema, what it needs before
it, and the function that runs it (one ``Outcome`` per cluster or flow it touched)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mm2spec.ops.playbooks.context import Context
from mm2spec.ops.playbooks.report import Outcome

RunFn = Callable[[Context, Mapping[str, Any]], list[Outcome]]


def arguments(**properties: dict) -> dict:
    """The JSON Schema of a module's arguments: these properties, nothing else."""
    return {"type": "object", "additionalProperties": False, "properties": properties}


TIMEOUT_ARG = {"type": "number", "exclusiveMinimum": 0, "description": "seconds to wait at most"}


@dataclass(frozen=True)
class Module:
    name: str
    summary: str
    run: RunFn
    args: dict = field(default_factory=arguments)
    needs: tuple[str, ...] = ()
    """Modules whose result this one uses: a playbook must run them earlier."""

"""The fixed catalogue of playbook modules, by name."""

from __future__ import annotations

from mm2spec.ops.modules import acls, failback, mirror, offsets, state, verify
from mm2spec.ops.playbooks.module import Module

CATALOGUE: dict[str, Module] = {m.name: m for group in (mirror, offsets, acls, state, failback, verify) for m in group.MODULES}

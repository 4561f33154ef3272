"""The one path from a spec file to something usable: load -> resolve -> validate -> compile.

Every command, the Pulumi program and the runtime read specs through these two functions, so an
unknown ``--env`` is reported first (naming the known ones), then every problem at once.
"""

from __future__ import annotations

from pathlib import Path

from mm2spec.errors import SpecInvalid, UnknownEnvironment
from mm2spec.spec.compile import compile_spec
from mm2spec.spec.document import Node, load_file
from mm2spec.spec.model import DesiredState
from mm2spec.spec.validate import environments, environments_problems, resolve, validate


def load_valid(path: str | Path, *envs: str | None, all_environments: bool = False) -> Node:
    """The spec's positioned tree, valid for each of ``envs`` (the base when none is given, and with
    ``all_environments`` every environment too); SpecInvalid lists every problem."""
    root = load_file(path)
    for env in envs:
        if env is not None:
            try:
                resolve(root, env)  # an unknown --env fails here, before anything else
            except UnknownEnvironment:
                # ... unless no environment can be known: the block is not a mapping (a list, a string).
                broken = environments_problems(root) if not environments(root) else []
                if broken:
                    raise SpecInvalid(broken) from None
                raise
    problems = []
    for env in envs or (None,):
        problems += validate(root, env, all_environments=all_environments)
    if problems:
        raise SpecInvalid(problems)
    return root


def load_desired_state(path: str | Path, env: str | None) -> DesiredState:
    """Load, validate and compile a spec file for one environment."""
    return compile_spec(resolve(load_valid(path, env), env), env, str(path))

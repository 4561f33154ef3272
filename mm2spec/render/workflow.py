"""The CI workflow of a DR-spec repository, from the one template ``ci-workflow.yml`` beside this file.

``mm2spec init`` writes it into a team's repository, and this checkout's example
``.github/workflows/dr-spec.yml`` is the same template filled in for ``examples/`` (a unit test keeps
the two identical). The template is GitHub Actions YAML with ``@NAME@`` placeholders (``${{ }}`` is
the workflow's own syntax) and one block between ``# mm2spec:each-environment`` and
``# mm2spec:end`` that is repeated per environment: the ``up`` jobs, each ``needs:`` the one before.
Secrets appear only as ``${{ secrets.NAME }}``, one per ``passwordSecret`` name of the spec.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Iterable

import yaml

WORKFLOW_FILE = ".github/workflows/dr-spec.yml"
"""Where the workflow goes in a repository."""
PLAN_MARKER = "<!-- mm2spec-plan -->"
"""The hidden first line of the pull request's plan comment, by which each push finds and updates it."""
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A ``passwordSecret`` (the schema's rule), which is also a GitHub secret's and an environment variable's."""
_BLOCK = re.compile(r"^  # mm2spec:each-environment[^\n]*\n(?P<block>.*?)^  # mm2spec:end\n", re.MULTILINE | re.DOTALL)
_SECRETS_LINE = re.compile(r"^(?P<indent> *)@SECRETS@\n", re.MULTILINE)


def workflow_template() -> str:
    """The template's text, as installed with the package."""
    return (files(__package__) / "ci-workflow.yml").read_text(encoding="utf-8")


def ci_workflow(spec_file: str, environments: Iterable[str], secrets: Iterable[str], package: str,
                pulumi_version: str, template: str | None = None) -> str:
    """The workflow for the spec ``spec_file`` (a path from the repository's root) and its
    ``environments`` in promotion order (one Pulumi stack and GitHub environment each). ``secrets``
    are the spec's ``passwordSecret`` names, ``package`` what pip installs (``mm2spec[pulumi]==X``)
    and ``pulumi_version`` the Pulumi CLI's version."""
    envs = list(environments)
    names = list(dict.fromkeys(secrets))
    bad = [name for name in names if not SECRET_NAME.fullmatch(name)]
    if not envs or bad:
        raise ValueError(f"no environment, or secret names a workflow cannot hold: {bad}")
    text = template if template is not None else workflow_template()
    match = _BLOCK.search(text)
    jobs = "  # One `up` job per environment, in promotion order: each needs the one before.\n"
    for previous, env in zip([None, *envs], envs):
        block = match.group("block")
        if previous is None:
            block = "".join(line for line in block.splitlines(keepends=True) if "@PREVIOUS@" not in line)
        jobs += (block.replace("@PREVIOUS@", previous or "").replace("@ENV_VALUE@", _scalar(env))
                 .replace("@ENV@", env)) + "\n"
    text = text[:match.start()] + jobs[:-1] + text[match.end():]
    text = _SECRETS_LINE.sub(lambda m: "".join(f"{m['indent']}{n}: ${{{{ secrets.{n} }}}}\n" for n in names), text)
    values = {
        "@SPEC@": _scalar(spec_file),
        "@ENVIRONMENT_WORDS@": " ".join(envs),
        "@ENVIRONMENT_LIST@": "[" + ", ".join(_scalar(env) for env in envs) + "]",
        "@ORDER@": " -> ".join(envs),
        "@SECRET_NAMES@": ", ".join(names) if names else "none (the spec names no passwordSecret yet)",
        "@PACKAGE@": package,
        "@PULUMI_VERSION@": pulumi_version,
    }
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def _scalar(text: str) -> str:
    """``text`` as a YAML scalar that reads back as the same string (``on``, ``1`` or ``null`` quoted)."""
    return text if yaml.safe_load(text) == text and ":" not in text and "#" not in text else f"'{text}'"

"""A rendered file as a resource: the shared part of ``worker_config`` and ``spark_deployment``.

Inputs: ``path`` (as the stack config gives it: relative to the project root, or absolute),
``root`` (the project root the program ran in; not compared, so a checkout elsewhere is no change)
and ``content``. Outputs add ``file`` (the absolute path written) and ``sha256``. A new path
replaces the resource (the old file is removed after the new one is written); new content is
written in place, atomically. ``destroy`` removes the file only if it still holds what the stack
wrote, so a file an operator edited by hand is kept (and named in the log).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, CreateResult, DiffResult, ResourceProvider, UpdateResult

from mm2spec.render import write_files

INPUT_KEYS = ("path", "root", "content")


def file_inputs(path: str, root: str | Path, content: str) -> dict[str, Any]:
    return {"path": str(path), "root": str(root), "content": content}


def target(props: Mapping[str, Any]) -> Path:
    path = Path(props["path"])
    return path if path.is_absolute() else Path(props["root"]) / path


def digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


class RenderedFileProvider(ResourceProvider):
    """Writes one file; subclasses add what the file is for."""

    serialize_as_secret_always = False

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = []
        if not news.get("path"):
            failures.append(CheckFailure("path", "a file path is required"))
        if not isinstance(news.get("content"), str):
            failures.append(CheckFailure("content", "the file content must be text"))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        if olds.get("path") != news.get("path"):
            return DiffResult(changes=True, replaces=["path"])
        return DiffResult(changes=olds.get("content") != news.get("content"))

    def write(self, props: Mapping[str, Any]) -> dict[str, Any]:
        path = target(props)
        write_files({path.name: props["content"]}, path.parent)
        return {**{k: props.get(k) for k in INPUT_KEYS}, "file": str(path), "sha256": digest(props["content"])}

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = self.write(props)
        return CreateResult(outs["file"], outs)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self.write(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        path = Path(props.get("file") or target(props))
        try:
            current = path.read_text()
        except FileNotFoundError:
            return
        if digest(current) == props.get("sha256"):
            path.unlink()
        else:
            pulumi.log.warn(f"{path} was changed since the stack wrote it: left in place")

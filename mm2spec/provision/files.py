"""A rendered file as a resource: the shared part of ``worker_config`` and ``spark_deployment``.

Inputs: ``path`` (as the stack config gives it: relative to the project root, or absolute),
``root`` (the project root the program ran in; not compared, so a checkout elsewhere is no change)
and ``content``. Outputs add ``file`` (the absolute path written) and ``sha256``. A new path
replaces the resource (the old file is removed after the new one is written); new content is
written in place, atomically. ``destroy`` removes the file only if it still holds what the stack
wrote, so a file an operator edited by hand is kept (and named in the log). ``pulumi refresh``
reads the file back (``read_file``): edited by hand, its ``content`` shows the edit (``sha256``
stays what the stack wrote, so ``destroy`` still keeps the edited file) and the next ``up``
writes it again; removed, it reads back gone and the next ``up`` writes it anew.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable, Mapping

import pulumi
from pulumi.dynamic import CheckFailure, CreateResult, DiffResult, UpdateResult

from mm2spec.provision.base import Provider
from mm2spec.render import write_files


def file_inputs(path: str, root: str | Path, content: str) -> dict[str, Any]:
    return {"path": str(path), "root": str(root), "content": content}


def target(props: Mapping[str, Any]) -> Path:
    path = Path(props["path"])
    return path if path.is_absolute() else Path(props["root"]) / path


def digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def read_file(props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The recorded ``content`` as the file holds it now; None when the file is gone."""
    try:
        return {"content": Path(props.get("file") or target(props)).read_text()}
    except FileNotFoundError:
        return None


class RenderedFileProvider(Provider):
    """Writes one file; subclasses add what the file is for."""

    input_keys = ("path", "root", "content")
    identity_keys = ("path",)

    def problems(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Iterable[CheckFailure]:
        if not news.get("path"):
            yield CheckFailure("path", "a file path is required")
        if not isinstance(news.get("content"), str):
            yield CheckFailure("content", "the file content must be text")

    def diff_properties(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> DiffResult:
        # Not ``root``: the same stack run from a checkout elsewhere is no change.
        return DiffResult(changes=olds.get("content") != news.get("content"))

    def read_live(self, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return read_file(props)

    def write(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Write the file; the outputs that record it."""
        path = target(props)
        write_files({path.name: props["content"]}, path.parent)
        return self.outputs(props, file=str(path), sha256=digest(props["content"]))

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

"""Every file ``mm2spec render`` writes, and the one function that writes them to disk."""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from mm2spec.mm2.engine_facts import ENGINE_FACTS
from mm2spec.render.monitoring import monitoring_files
from mm2spec.render.resources import resources, resources_text
from mm2spec.errors import OutputUnwritable
from mm2spec.spec.document import printable
from mm2spec.spec.model import DesiredState


class RenderedFiles(dict):
    """File name -> content of one whole render (``render_files``). ``write_files`` makes such a set
    own its folder: the files a previous render wrote there (its ``RENDER_MANIFEST``) that this set no
    longer holds (a mirror the spec dropped) are removed with the same all-or-nothing swap, and the
    manifest is rewritten. Files no render wrote are never touched."""


RENDER_MANIFEST = ".mm2spec-render.json"
"""In a folder ``write_files`` wrote a ``RenderedFiles`` into: the names of the files it wrote, and only
those are removed by a later render that no longer makes them."""


def render_files(state: DesiredState) -> RenderedFiles:
    """File name -> content for everything ``mm2spec render`` writes: every engine's deployment
    files (whichever engine the spec names, so a team can compare or switch), the internal topics
    and ACLs, and the monitoring files."""
    files = RenderedFiles()
    for name in ENGINE_FACTS:
        files.update(engine_files(state, name))
    files["resources.json"] = json.dumps(resources(state), indent=2) + "\n"
    files["resources.txt"] = resources_text(state)
    files.update(monitoring_files(state))
    return files


def engine_files(state: DesiredState, engine: str) -> dict[str, str]:
    """File name -> content of the deployment of engine ``engine``: its renderer's
    (``EngineFacts.renderer``, a function of this package found by name)."""
    module, _, function = ENGINE_FACTS[engine].renderer.partition(":")
    return getattr(importlib.import_module(module), function)(state)



FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,250}")
"""What a rendered file may be called: names come from the spec (mirror names), so anything that could
climb out of the folder, hide, or break a file system's rules (length, odd characters) is refused."""

FIXED_NAME = re.compile(r"[A-Za-z0-9._-]{1,251}")
"""What a name of mm2spec's own (``write_files``'s ``fixed``) may be: also a leading '.' or '_'."""


STAGING_PREFIX = ".mm2spec-render-"
"""Folders ``write_files`` stages a render in, inside the output folder (the same file system, so each
move is one atomic rename). One left behind is an interrupted render: the next write rolls it back."""
JOURNAL = ".journal.json"
"""In a staging folder: the names being moved in and which of them replace an existing file, written
before the first move. Rendered names start with a letter or digit, so they never meet it or ``OLD``."""
OLD = ".old"
"""In a staging folder: the files a render replaces, moved aside until it has moved every new one in."""


def write_files(files: dict[str, str], out_dir: str | Path, private: Iterable[str] = (),
                fixed: Iterable[str] = ()) -> list[Path]:
    """Write ``files`` into the folder ``out_dir`` (created if missing), all or nothing.

    Every file is written into a staging folder inside ``out_dir`` first; then each existing file is
    moved aside and the new one moved in, after a journal of the moves. An error or an interrupt
    moves the old files back; a process killed half-way leaves the journal, and the next write into
    the folder rolls it back first. So ``out_dir`` only ever ends with the old set of files or the
    new one, never a mix. Writers into one folder take turns (a lock on the folder). Files are
    created with the usual permissions (umask), those named in ``private`` as 0600: only a file that
    holds a secret needs hiding. Names in ``fixed`` are mm2spec's own (``.gitignore``, ``__main__.py``
    for ``mm2spec init``), never from a spec, so they may start with '.' or '_'. Problems are
    ``OutputUnwritable``, never a traceback. A ``RenderedFiles`` also removes what the folder's previous
    render wrote and this one does not (see there)."""
    out = Path(out_dir)
    owns = isinstance(files, RenderedFiles)
    _check_writable(files, out, frozenset(fixed))
    created = _make_folders(out)
    try:
        with _folder_lock(out):
            for interrupted in sorted(out.glob(f"{STAGING_PREFIX}*")):
                if interrupted.is_dir():
                    _roll_back(out, interrupted)
            stale = [name for name in _rendered_before(out) if name not in files] if owns else []
            if owns:  # a dict's copy, so the caller's files stay as given
                files = {**files, RENDER_MANIFEST: json.dumps({"files": sorted(files)}, indent=2) + "\n"}
            _stage_and_swap(files, out, {name: 0o600 if name in private else 0o666 for name in files}, stale)
    except OSError as exc:
        for folder in reversed(created):
            shutil.rmtree(folder, ignore_errors=True)
        raise OutputUnwritable(f"cannot write into {printable(str(out))}: {exc.strerror or exc}; nothing was written") \
            from None
    return [out / name for name in sorted(files)]


def _rendered_before(out: Path) -> list[str]:
    """The files the folder's last render wrote, from its manifest: only plain file names a render can
    write (an edited manifest cannot point outside the folder or at a folder); none without one."""
    try:
        listed = json.loads((out / RENDER_MANIFEST).read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [name for name in listed if isinstance(name, str) and FILE_NAME.fullmatch(name)
            and not (out / name).is_dir() and os.path.lexists(out / name)]


@contextlib.contextmanager
def _folder_lock(out: Path) -> Iterator[None]:
    """An exclusive lock on the folder itself (no lock file left behind), released when the process
    ends however it ends: a staging folder found under it belongs to no running writer."""
    handle = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _stage_and_swap(files: dict[str, str], out: Path, modes: dict[str, int], remove: list[str] = ()) -> None:
    """``remove``: existing files of the folder that go with the swap (moved aside like a replaced
    file, so a roll-back brings them back)."""
    staging = Path(tempfile.mkdtemp(dir=out, prefix=STAGING_PREFIX))
    try:
        for name, content in files.items():
            _write_new(staging / name, content, modes[name])
        names = sorted({*files, *remove})
        existed = {name for name in names if os.path.lexists(out / name)}
        (staging / OLD).mkdir()
        _write_new(staging / JOURNAL, json.dumps({"names": names, "existed": sorted(existed)}), 0o600)
        for name in names:
            if name in existed:
                os.replace(out / name, staging / OLD / name)
            if name in files:
                os.replace(staging / name, out / name)
    except BaseException:
        _roll_back(out, staging)  # if this fails too, the staging folder stays for the next write
        raise
    shutil.rmtree(staging)


def _roll_back(out: Path, staging: Path) -> None:
    """Undo what an interrupted swap moved (each step may be repeated), then drop its staging folder.

    An old file still aside goes back; a new file moved in where none was before goes. Without a
    complete journal no move had started."""
    try:
        journal = json.loads((staging / JOURNAL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        journal = {"names": [], "existed": []}
    for name in journal["names"]:
        if os.path.lexists(staging / OLD / name):
            os.replace(staging / OLD / name, out / name)
        elif name not in journal["existed"] and not os.path.lexists(staging / name):
            (out / name).unlink(missing_ok=True)
    shutil.rmtree(staging)


def check_output_folder(out_dir: str | Path) -> None:
    """Refuse an output folder that cannot be written (``OutputUnwritable``), before any work is done:
    a large spec must not be loaded and rendered only to fail at the last step. ``out_dir`` is usable
    when it is a writable folder, or when it is missing and its nearest existing parent is one. An empty
    name is refused: it would mean the current folder, which is never what ``--out ''`` (an unset
    variable) meant."""
    if not str(out_dir).strip():
        raise OutputUnwritable("--out is empty: give the folder to write into (it is created if missing), "
                               "e.g. --out rendered/prod")
    out = Path(out_dir)
    shown = printable(str(out))
    if out.exists() and not out.is_dir():
        raise OutputUnwritable(f"--out {shown} is not a folder: give a folder (it is created if missing)")
    # Normalised, as mkdir will resolve "..", but not made absolute: a relative path's parents end with
    # ".", which exists, and the message keeps the path as it was given.
    normal = Path(os.path.normpath(out))
    existing = next((folder for folder in (normal, *normal.parents) if folder.exists()), None)
    if existing is None or not existing.is_dir():
        raise OutputUnwritable(f"--out {shown}: {printable(str(existing))} is not a folder, so {shown} cannot be "
                               "created: give a folder path")
    try:
        # A real probe, not os.access: root passes every permission check, not a read-only file system.
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=STAGING_PREFIX))
    except OSError as exc:
        what = "is not writable" if existing == normal else f"cannot be created in {printable(str(existing))}"
        raise OutputUnwritable(f"--out {shown} {what}: {exc.strerror or exc}; give a folder you may write to") from None


def _check_writable(files: dict[str, str], out: Path, fixed: frozenset = frozenset()) -> None:
    for name in files:
        # A fixed name is still one plain file name, and never a staging folder's own (JOURNAL, OLD).
        own = (name in fixed and FIXED_NAME.fullmatch(name) and name.strip(".") and name not in (JOURNAL, OLD)
               and not name.startswith(STAGING_PREFIX))
        if not own and not FILE_NAME.fullmatch(name):
            raise OutputUnwritable(f'cannot write a file named "{printable(name)[:80]}": '
                                   "use letters, digits, '.', '_' and '-' in names that reach file names")
    check_output_folder(out)
    for name in files:
        if (out / name).is_dir():
            raise OutputUnwritable(f"{printable(str(out / name))} is a folder: move it away to render there")


def _make_folders(out: Path) -> list[Path]:
    """Create ``out`` and missing parents; the folders created, outermost first."""
    missing = [folder for folder in (out, *out.parents) if not folder.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputUnwritable(f"cannot create {printable(str(out))}: {exc.strerror or exc}") from None
    return missing


def _write_new(path: Path, content: str, mode: int) -> None:
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w", encoding="utf-8") as handle:
        handle.write(content)

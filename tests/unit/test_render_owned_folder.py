"""``mm2spec render`` owns its output folder: what an earlier render wrote there and this one does not
make is removed (by the folder's manifest), the user's own files stay; an unusable --out is refused."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import yaml

from mm2spec.cli import main
from mm2spec.errors import OutputUnwritable
from mm2spec.render import files as files_module
from mm2spec.render.files import RENDER_MANIFEST, RenderedFiles, write_files

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


def _spec(tmp_path: Path, mirror: str) -> Path:
    """The example spec with its one mirror renamed ``mirror`` (its connectors' files are named by it)."""
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["mirrors"][0]["name"] = mirror
    path = tmp_path / f"{mirror}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_render_removes_the_files_of_a_mirror_the_spec_no_longer_has(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("the team's own\n")
    assert main(["render", str(_spec(tmp_path, "old-flow")), "--out", str(out)]) == 0
    assert (out / "old-flow-MirrorSourceConnector.json").is_file()
    assert main(["render", str(_spec(tmp_path, "new-flow")), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert "new-flow-MirrorSourceConnector.json" in names and not any(n.startswith("old-flow") for n in names), names
    assert (out / "notes.txt").read_text() == "the team's own\n"
    assert json.loads((out / RENDER_MANIFEST).read_text())["files"] == sorted(names - {"notes.txt", RENDER_MANIFEST})
    assert f"wrote {out / 'new-flow-MirrorSourceConnector.json'}" in capsys.readouterr().out


def test_only_plain_files_of_the_folder_named_in_the_manifest_are_removed(tmp_path):
    out = tmp_path / "out"
    (out / "kept-folder").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("x")
    (out / "listed.txt").write_text("an earlier render's")
    (out / RENDER_MANIFEST).write_text(json.dumps({"files": ["../outside.txt", "kept-folder", ".hidden", "listed.txt"]}))
    assert main(["render", str(EXAMPLE), "--out", str(out)]) == 0
    assert (tmp_path / "outside.txt").exists() and (out / "kept-folder").is_dir()
    assert not (out / "listed.txt").exists()


def test_a_broken_manifest_removes_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    (out / RENDER_MANIFEST).write_text("{not json")
    assert main(["render", str(EXAMPLE), "--out", str(out)]) == 0
    assert (out / "mine.txt").exists() and "files" in json.loads((out / RENDER_MANIFEST).read_text())


@pytest.mark.parametrize("out,message", [
    ("", "--out is empty: give the folder to write into"),
    ("   ", "--out is empty: give the folder to write into"),
    ("spec-file", "is not a folder"),
    ("spec-file/sub", "is not a folder, so"),
])
def test_an_unusable_out_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, out, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec-file").write_text("not a folder")
    assert main(["render", str(EXAMPLE), "--out", out]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec-file"]


def test_a_render_that_fails_half_way_brings_back_the_files_it_was_removing(tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_files(RenderedFiles({"gone.json": "old\n", "z.json": "z\n"}), out)
    before = {p.name: p.read_text() for p in out.iterdir()}
    real, moves = os.replace, []

    def replace(src, dst):  # the manifest aside and in, "gone.json" aside, then "z.json" aside fails
        moves.append(dst)
        if len(moves) == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(src, dst)
    monkeypatch.setattr(files_module.os, "replace", replace)
    with pytest.raises(OutputUnwritable, match="No space left on device"):
        write_files(RenderedFiles({"z.json": "new z\n"}), out)
    assert moves[2].name == "gone.json"
    assert {p.name: p.read_text() for p in out.iterdir()} == before

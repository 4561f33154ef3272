"""``mm2spec init --package``: where the new repository installs mm2spec from, written alike into
requirements.txt, the pre-commit hook and the CI workflow; a local wheel is copied into the repository."""

from __future__ import annotations

import pytest
import yaml

from mm2spec import __version__
from mm2spec.cli import main
from mm2spec.render.workflow import WORKFLOW_FILE

WHEEL = f"mm2spec-{__version__}-py3-none-any.whl"


def _installs(repo) -> tuple[str, dict, str]:
    """(requirements.txt's requirement, the pre-commit hook, the CI workflow's MM2SPEC_PACKAGE)."""
    requirement = (repo / "requirements.txt").read_text().splitlines()[-1]
    hook = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"][0]
    workflow = yaml.safe_load((repo / WORKFLOW_FILE).read_text())["env"]["MM2SPEC_PACKAGE"]
    return requirement, hook, workflow


@pytest.mark.parametrize("package,program,hook", [
    (None, f"mm2spec[pulumi]=={__version__}", f"mm2spec=={__version__}"),
    ("mm2spec>=0.1,<0.2", "mm2spec[pulumi]>=0.1,<0.2", "mm2spec>=0.1,<0.2"),
    ("mm2spec[drill]==0.1.0", "mm2spec[pulumi]==0.1.0", "mm2spec==0.1.0"),
    ("git+https://git.example.com/dr/mm2spec.git@v0.1.0", "mm2spec[pulumi] @ git+https://git.example.com/dr/mm2spec.git@v0.1.0",
     "mm2spec @ git+https://git.example.com/dr/mm2spec.git@v0.1.0"),
    ("mm2spec @ https://files.example.com/mm2spec-0.1.0-py3-none-any.whl",
     "mm2spec[pulumi] @ https://files.example.com/mm2spec-0.1.0-py3-none-any.whl",
     "mm2spec @ https://files.example.com/mm2spec-0.1.0-py3-none-any.whl"),
])
def test_the_package_goes_into_every_place_that_installs_mm2spec(tmp_path, capsys, package, program, hook):
    repo = tmp_path / "repo"
    assert main(["init", str(repo), *(["--package", package] if package else [])]) == 0
    assert f"installs {program})" in capsys.readouterr().out
    requirement, precommit, workflow = _installs(repo)
    assert requirement == workflow == program
    assert precommit["language"] == "python" and precommit["additional_dependencies"] == [hook]
    assert not (repo / "wheels").exists()


def test_a_wheel_path_is_copied_into_the_repository_and_named_from_its_root(tmp_path, capsys):
    wheel = tmp_path / "dist" / WHEEL
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: init copies it, never opens it
    repo = tmp_path / "repo"
    assert main(["init", str(repo), "--package", str(wheel)]) == 0
    assert f"wrote {repo / 'wheels' / WHEEL}" in capsys.readouterr().out
    assert (repo / "wheels" / WHEEL).read_bytes() == wheel.read_bytes()
    requirement, hook, workflow = _installs(repo)
    assert requirement == workflow == f"./wheels/{WHEEL}[pulumi]"
    # pre-commit installs a hook's dependencies from its own folder, where ./wheels is not: .venv's mm2spec.
    assert hook["language"] == "system" and hook["entry"] == ".venv/bin/mm2spec validate"
    assert "pip install -r requirements.txt" in (repo / "README.md").read_text()

    # Again, over the same folder: the wheel is one of the files it replaces.
    assert main(["init", str(repo), "--package", str(wheel), "--force"]) == 0
    assert f"replaced {repo / 'wheels' / WHEEL}" in capsys.readouterr().out


@pytest.mark.parametrize("package,message", [
    ("", "give a requirement on mm2spec (mm2spec==VERSION, mm2spec @ URL), a URL"),
    ("requests==2.0", "give a requirement on mm2spec"),
    ("mm2spec==0.1; python_version>'3'", "give a requirement on mm2spec"),
    ("https://files.example.com/other-1.0.tar.gz", "a URL names a wheel of mm2spec"),
    ("dist/mm2spec-9.9.9-py3-none-any.whl", "no such file; build it with scripts/release"),
    ("dist/other-1.0-py3-none-any.whl", "not a wheel of mm2spec by its name"),
    ("dist/mm2spec latest.whl", "not a wheel of mm2spec by its name"),
    ('mm2spec @ https://x.example.com/mm2spec-1-py3-none-any.whl"; rm -rf /', "give a requirement on mm2spec"),
])
def test_a_package_init_cannot_install_from_is_refused_before_anything_is_written(tmp_path, capsys, package, message):
    repo = tmp_path / "repo"
    assert main(["init", str(repo), "--package", package]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not repo.exists()

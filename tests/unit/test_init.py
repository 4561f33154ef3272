"""``mm2spec init``: the repository it writes, that its spec validates, and what it refuses."""

from __future__ import annotations

import ast
import json

import pytest
import yaml

from mm2spec import __version__
from mm2spec.cli import main
from mm2spec.render.repository import RepositoryOptions, init_files

FLAGS = ["--source", "primary=127.0.0.1:19092", "--target", "dr=127.0.0.1:29092,127.0.0.1:29093",
         "--topic", "orders", "--topic", "invoices-.*"]


def _init(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["init", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_skeleton_repository_has_every_file_and_validates(tmp_path, capsys):
    repo = tmp_path / "Payments_DR"
    code, out, err = _init(capsys, str(repo))
    assert (code, err) == (0, "")
    assert sorted(p.name for p in repo.iterdir()) == sorted([
        ".github", ".gitignore", ".pre-commit-config.yaml", "Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.staging.yaml",
        "Pulumi.prod.yaml", "README.md", "__main__.py", "dr-spec.schema.json", "payments-dr.dr.yaml",
        "requirements.txt"])
    assert "wrote" in out and not list(repo.glob(".mm2spec-render-*"))
    spec = repo / "payments-dr.dr.yaml"
    # The editor's modeline names the schema copied next to the spec: the one of the installed package.
    assert spec.read_text().startswith("# yaml-language-server: $schema=dr-spec.schema.json\n")
    assert json.loads((repo / "dr-spec.schema.json").read_text())["$id"].startswith("https://mm2spec.dev/")
    assert main(["validate", str(spec)]) == 0
    assert "valid (base, dev, staging, prod)" in capsys.readouterr().out


def test_pulumi_project_stacks_and_program_use_the_installed_package(tmp_path, capsys):
    repo = tmp_path / "repo"
    assert _init(capsys, str(repo), "--name", "payments-dr", *FLAGS)[0] == 0
    project = yaml.safe_load((repo / "Pulumi.yaml").read_text())
    assert project["name"] == "payments-dr" and project["runtime"]["name"] == "python"
    assert "main" not in project  # the program is __main__.py at the root; no pulumi/ folder to shadow the SDK
    for env in ("dev", "staging", "prod"):
        # pulumi.Config() reads the project's namespace, so the keys are <project>:spec / :environment
        stack = yaml.safe_load((repo / f"Pulumi.{env}.yaml").read_text())
        assert stack == {"config": {"payments-dr:spec": "payments-dr.dr.yaml", "payments-dr:environment": env}}
    program = (repo / "__main__.py").read_text()
    imports = [node for node in ast.walk(ast.parse(program)) if isinstance(node, (ast.Import, ast.ImportFrom))]
    found = [(getattr(node, "module", None), [a.name for a in node.names]) for node in imports]
    assert found == [(None, ["pulumi"]), ("mm2spec.pulumi", ["DisasterRecovery"])]  # the component, installed
    assert "sys.path" not in program and "/work" not in program
    assert (repo / "requirements.txt").read_text().splitlines()[-1] == f"mm2spec[pulumi]=={__version__}"
    hook = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text())["repos"][0]["hooks"][0]
    assert hook["entry"] == "mm2spec validate" and hook["additional_dependencies"] == [f"mm2spec=={__version__}"]
    assert {".venv/", ".mm2spec/"} <= set((repo / ".gitignore").read_text().splitlines())
    assert "pulumi preview --stack dev" in (repo / "README.md").read_text()


@pytest.mark.parametrize("engine", ["spark", "connect"])
def test_spec_from_flags_has_them_and_validates(tmp_path, capsys, engine):
    repo = tmp_path / "repo"
    assert _init(capsys, str(repo), "--name", "orders-dr", "--engine", engine, "--environments", "dev,prod", *FLAGS)[0] == 0
    spec_file = repo / "orders-dr.dr.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    assert spec["clusters"]["primary"]["bootstrapServers"] == ["127.0.0.1:19092"]
    assert spec["clusters"]["dr"]["bootstrapServers"] == ["127.0.0.1:29092", "127.0.0.1:29093"]
    assert spec["mirrors"] == [{"name": "primary-to-dr", "source": "primary", "target": "dr",
                                "replicationPolicy": "identity", "topics": ["orders", "invoices-.*"], "groups": []}]
    assert spec["engine"] == engine and set(spec["environments"]) == {"dev", "prod"}
    # A new Spark spec runs in Real-time Mode, said outright (a spec that names no mode runs micro-batches).
    assert spec.get("spark") == ({"mode": "realtime"} if engine == "spark" else None)
    assert sorted(p.name for p in repo.glob("Pulumi.*.yaml")) == ["Pulumi.dev.yaml", "Pulumi.prod.yaml"]
    assert main(["validate", str(spec_file), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["environments"] == ["base", "dev", "prod"]


def test_a_folder_with_files_is_refused_unless_force_and_other_files_stay(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "notes.txt").write_text("ours\n")
    code, out, err = _init(capsys, str(repo))
    assert code == 1 and out == ""
    assert "is not empty: it holds 1 file (notes.txt)" in err and "--force" in err
    assert [p.name for p in repo.iterdir()] == ["notes.txt"]

    (repo / "README.md").write_text("our readme\n")
    code, _, err = _init(capsys, str(repo))
    assert code == 1 and "it already has README.md, which init would replace" in err
    assert (repo / "README.md").read_text() == "our readme\n"

    code, out, err = _init(capsys, str(repo), "--force")
    assert (code, err) == (0, "")
    assert f"replaced {repo / 'README.md'}" in out
    assert (repo / "notes.txt").read_text() == "ours\n"
    assert (repo / "README.md").read_text().startswith("# repo: Kafka disaster recovery")


def test_a_file_as_dir_is_refused(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("x")
    code, _, err = _init(capsys, str(target))
    assert code == 1 and "taken is not a folder" in err


@pytest.mark.parametrize(("flags", "message"), [
    (["--engine", "flink"], "--engine 'flink': use one of spark, connect"),
    (["--name", "Payments_DR"], "--name 'Payments_DR': use lowercase letters"),
    (["--source", "primary=k1:9092"], "give both --source and --target, or neither"),
    (["--source", "primary", "--target", "dr=k:9092"], "--source needs ALIAS=HOST:PORT"),
    (["--source", "a=k:9092", "--target", "a=k2:9092"], "--source and --target are both 'a'"),
    (["--source", "a=k:0", "--target", "b=k2:9092"], "--source a: 'k:0' is not HOST:PORT"),
    (["--source", "a=k", "--target", "b=k2:9092"], "--source a: 'k' is not HOST:PORT"),
    (["--source", "a b=k:1", "--target", "b=k2:9092"], "--source: cluster alias 'a b' must be"),
    (["--topic", "invoices-("], "--topic 'invoices-(': a topic name or Java regex: missing )"),
    (["--topic", ""], "--topic '': not a topic name or Java regex"),
    (["--environments", "dev,dev"], "--environments names an environment twice"),
    (["--environments", "dev,pr od"], "--environments: 'pr od' must be"),
    (["--environments", ""], "--environments names no environment"),
])
def test_bad_flags_exit_1_with_the_flag_named_and_nothing_written(tmp_path, capsys, flags, message):
    repo = tmp_path / "repo"
    code, out, err = _init(capsys, str(repo), *flags)
    assert code == 1 and out == ""
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not repo.exists()


def test_credentials_in_an_address_are_refused_and_never_echoed(tmp_path, capsys):
    code, _, err = _init(capsys, str(tmp_path / "repo"), "--source", "a=mm2:hunter2@k:9092", "--target", "b=k2:9092")
    assert code == 1 and "holds no credentials" in err and "passwordSecret" in err
    assert "hunter2" not in err


def test_default_name_comes_from_the_folder(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "Team.Kafka_DR"
    repo.mkdir()
    monkeypatch.chdir(repo)
    assert _init(capsys)[0] == 0
    assert (repo / "team-kafka-dr.dr.yaml").is_file()


def test_every_environment_gets_a_stack_and_an_overlay():
    files = init_files(RepositoryOptions(name="x", environments=("qa", "live")), "{}", "1.0")
    assert {n for n in files if n.startswith("Pulumi.")} == {"Pulumi.yaml", "Pulumi.qa.yaml", "Pulumi.live.yaml"}
    assert yaml.safe_load(files["x.dr.yaml"])["environments"] == {"qa": {}, "live": {}}


@pytest.mark.parametrize("name", ["..", ".", ".mm2spec-render-x", ".journal.json", ".old", "a/b"])
def test_fixed_names_are_still_plain_file_names(tmp_path, name):
    from mm2spec.errors import OutputUnwritable
    from mm2spec.render.files import write_files

    with pytest.raises(OutputUnwritable):
        write_files({name: "x"}, tmp_path / "out", fixed=[name])
    assert not (tmp_path / "out").exists()

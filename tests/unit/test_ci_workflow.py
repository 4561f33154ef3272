"""The CI workflow a team copies: the one ``mm2spec init`` writes and this checkout's example, both
from the one template (``mm2spec/render/ci-workflow.yml``). Its structure is checked here (actionlint
checks it as GitHub reads it: tests/integration/test_workflow_actionlint.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from mm2spec import __version__
from mm2spec.cli import main
from mm2spec.components import versions
from mm2spec.render.repository import RepositoryOptions, init_files
from mm2spec.render.workflow import PLAN_MARKER, WORKFLOW_FILE, ci_workflow, workflow_template
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.secrets import holds_secret, is_sensitive_key

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SPEC = "examples/dr-spec.example.yaml"
EXAMPLE_ENVIRONMENTS = ("dev", "staging", "prod")
PULUMI_SECRETS = {"PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE"}


def spec_secrets(path: Path, environments: tuple[str, ...]) -> tuple[str, ...]:
    """Every secret name the spec's clusters hold (the mirror's and the admin's ``passwordSecret``),
    in the base and in each environment, in order, each once."""
    found: dict[str, None] = {}
    for env in (None, *environments):
        for cluster in load_desired_state(path, env).clusters:
            for name in (cluster.security.password_secret, cluster.security.admin_password_secret):
                if name:
                    found[name] = None
    return tuple(found)


def example_workflow() -> str:
    """The template filled in for this checkout: the example spec, its stacks, its passwordSecrets."""
    return ci_workflow(EXAMPLE_SPEC, EXAMPLE_ENVIRONMENTS, spec_secrets(ROOT / EXAMPLE_SPEC, EXAMPLE_ENVIRONMENTS),
                       "mm2spec[pulumi]", versions()["PULUMI_VERSION"])


def init_workflow(**options) -> str:
    return init_files(RepositoryOptions(**{"name": "payments-dr", **options}), "{}", __version__)[WORKFLOW_FILE]


def test_the_example_is_the_template_filled_in(update_golden):
    example = ROOT / WORKFLOW_FILE
    if update_golden:
        example.write_text(example_workflow())
    assert example.read_text() == example_workflow(), \
        f"{WORKFLOW_FILE} is written from mm2spec/render/ci-workflow.yml: edit the template, then pytest --update-golden"


def test_the_template_ships_in_the_wheel():
    """setup.py's package data carries the template (an editable install would find it without)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    data = next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DATA_FILES")
    assert "ci-workflow.yml" in data["mm2spec.render"]
    assert workflow_template().startswith("# The CI of a DR-spec repository")


def _on(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True))  # PyYAML reads the key `on` as YAML 1.1's true


def _runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def _uses(job: dict) -> list[str]:
    return [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]


def _check_structure(text: str, spec: str, environments: tuple[str, ...], secrets: set[str]) -> None:
    assert not re.search(r"@[A-Z_]+@", text), "a placeholder left unfilled"
    workflow = yaml.safe_load(text)
    on, jobs, env = _on(workflow), workflow["jobs"], workflow["env"]
    assert set(on) == {"pull_request", "push", "schedule", "workflow_dispatch"}
    assert on["push"] == {"branches": ["main"]} and on["schedule"][0]["cron"]
    assert workflow["permissions"] == {"contents": "read"}  # only the comment job may write, to the PR
    assert env["SPEC"] == spec and env["ENVIRONMENTS"].split() == list(environments)
    assert env["MM2SPEC_PACKAGE"].startswith("mm2spec[pulumi]") and env["PLAN_MARKER"] == PLAN_MARKER

    # Installed as a user does: mm2spec from the package index, the Pulumi CLI by Pulumi's action.
    for name, job in jobs.items():
        assert "scripts/" not in _runs(job), name
        if name != "comment":
            assert 'pip install --quiet "$MM2SPEC_PACKAGE"' in _runs(job) and "pulumi/actions" in _uses(job), name
            assert set(job["env"]) == {"ENVIRONMENT"} | secrets, name

    review = jobs["review"]
    assert review["if"] == "github.event_name == 'pull_request'"
    assert review["strategy"]["matrix"]["environment"] == list(environments)
    assert review["strategy"]["fail-fast"] is False
    for command in ('mm2spec validate "$SPEC" --env "$ENVIRONMENT"', 'pulumi preview --stack "$ENVIRONMENT"',
                    'mm2spec plan "$SPEC" --env "$ENVIRONMENT" --format markdown --detailed-exitcode'):
        assert command in _runs(review), command

    # One comment, found by its marker and updated; created only when there is none.
    comment = jobs["comment"]
    assert comment["needs"] == "review" and "always()" in comment["if"]
    assert comment["permissions"]["pull-requests"] == "write"
    assert comment["concurrency"]["cancel-in-progress"] is True
    assert "actions/download-artifact" in _uses(comment)
    writer = _runs(comment)
    assert writer.index('echo "$PLAN_MARKER"') < writer.index("for environment in $ENVIRONMENTS")
    assert 'mm2spec promote "$SPEC" --from "$previous" --to "$environment"' in writer
    assert '--baseline "git:origin/$BASE_REF"' in writer
    script = next(s["with"]["script"] for s in comment["steps"] if s.get("uses", "").startswith("actions/github-script"))
    assert "process.env.PLAN_MARKER" in script and "c.body.includes(marker)" in script
    found = script.index("if (previous)")
    assert found < script.index("updateComment") < script.index("} else {") < script.index("createComment")

    # pulumi up per environment, in order, each in its protected GitHub environment.
    ups = [name for name in jobs if name.startswith("up-")]
    assert ups == [f"up-{e}" for e in environments]
    assert list(jobs).index(ups[0]) > list(jobs).index("comment")
    for previous, name, environment in zip([None, *ups], ups, environments):
        job = jobs[name]
        assert job.get("needs") == previous and job["if"] == "github.event_name == 'push'"
        assert job["environment"] == environment and job["env"]["ENVIRONMENT"] == environment
        assert job["concurrency"] == {"group": f"pulumi-up-{environment}", "cancel-in-progress": False}
        assert 'pulumi up --stack "$ENVIRONMENT" --yes --non-interactive' in _runs(job)
        assert 'mm2spec plan "$SPEC" --env "$ENVIRONMENT" --detailed-exitcode' in _runs(job)

    # The scheduled drift check fails on drift of either kind.
    drift = jobs["drift"]
    assert "schedule" in drift["if"] and drift["strategy"]["matrix"]["environment"] == list(environments)
    assert ('pulumi refresh --stack "$ENVIRONMENT" --preview-only --expect-no-changes --non-interactive'
            in _runs(drift))
    plan_step = next(s for s in drift["steps"] if "mm2spec plan" in s.get("run", ""))
    assert "--detailed-exitcode" in plan_step["run"] and plan_step["if"] == "${{ !cancelled() }}"

    _check_secrets(workflow, text, secrets)


def _check_secrets(workflow: dict, text: str, secrets: set[str]) -> None:
    """Secrets only as ``${{ secrets.NAME }}`` under the env name NAME; no value that is a secret."""
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    referenced = set(re.findall(r"secrets\.([A-Za-z0-9_]+)", code))
    assert referenced == secrets | PULUMI_SECRETS
    assert len(re.findall(r"secrets\.", code)) == len(re.findall(r"\$\{\{ secrets\.[A-Za-z0-9_]+ \}\}", code))
    envs = [workflow["env"]] + [job.get("env", {}) for job in workflow["jobs"].values()] + [
        step.get("env", {}) for job in workflow["jobs"].values() for step in job["steps"]]
    for env in envs:
        for key, value in env.items():
            if key in secrets or is_sensitive_key(key):
                assert value == f"${{{{ secrets.{key} }}}}", key

    def scalars(node):
        if isinstance(node, dict):
            for key, value in node.items():
                yield str(key)
                yield from scalars(value)
        elif isinstance(node, list):
            for item in node:
                yield from scalars(item)
        else:
            yield str(node)

    assert not [s for s in scalars(workflow) if holds_secret(s)]


def test_the_example_has_the_structure():
    secrets = spec_secrets(ROOT / EXAMPLE_SPEC, EXAMPLE_ENVIRONMENTS)
    assert secrets == ("PRIMARY_MM2_PASSWORD", "DR_MM2_PASSWORD")
    _check_structure(example_workflow(), EXAMPLE_SPEC, EXAMPLE_ENVIRONMENTS, set(secrets))


def test_init_writes_the_workflow_for_its_spec(tmp_path, capsys):
    repo = tmp_path / "repo"
    assert main(["init", str(repo), "--name", "payments-dr", "--source", "eu-main=k1:9092", "--target",
                 "1dr=k2:9092", "--environments", "qa,live"]) == 0
    capsys.readouterr()
    text = (repo / WORKFLOW_FILE).read_text()
    assert text == init_workflow(source=("eu-main", ("k1:9092",)), target=("1dr", ("k2:9092",)),
                                 environments=("qa", "live"))
    assert yaml.safe_load(text)["env"]["MM2SPEC_PACKAGE"] == f"mm2spec[pulumi]=={__version__}"
    _check_structure(text, "payments-dr.dr.yaml", ("qa", "live"), {"EU_MAIN_MM2_PASSWORD", "_1DR_MM2_PASSWORD"})
    assert ".github/workflows/dr-spec.yml" in (repo / "README.md").read_text()


def test_the_secrets_are_the_ones_the_spec_names_once_its_security_is_uncommented(tmp_path):
    """The skeleton's commented ``security`` blocks name the secrets the workflow passes on: a team
    that uncomments them changes nothing in the workflow (and the spec still validates)."""
    files = init_files(RepositoryOptions(name="payments-dr"), (ROOT / "schemas/dr-spec.schema.json").read_text(),
                       __version__)
    spec = re.sub(r"^    # (security:|  \w+:)", r"    \1", files["payments-dr.dr.yaml"], flags=re.MULTILINE)
    for name in ("payments-dr.dr.yaml", "dr-spec.schema.json"):
        (tmp_path / name).write_text(spec if name.endswith(".dr.yaml") else files[name])
    assert main(["validate", str(tmp_path / "payments-dr.dr.yaml")]) == 0
    names = spec_secrets(tmp_path / "payments-dr.dr.yaml", RepositoryOptions(name="payments-dr").environments)
    assert names == ("PRIMARY_MM2_PASSWORD", "DR_MM2_PASSWORD")
    referenced = {name for name in re.findall(r"secrets\.([A-Za-z0-9_]+)", files[WORKFLOW_FILE]) if name != "NAME"}
    assert referenced == set(names) | PULUMI_SECRETS


@pytest.mark.parametrize("environments", [("dev",), ("on", "1", "null"), ("Test_1", "prod-eu", "prod-us")])
def test_any_environment_names_give_a_workflow_of_those_names(environments):
    text = init_workflow(environments=environments)
    workflow = yaml.safe_load(text)
    _check_structure(text, "payments-dr.dr.yaml", environments, {"PRIMARY_MM2_PASSWORD", "DR_MM2_PASSWORD"})
    assert "needs" not in workflow["jobs"][f"up-{environments[0]}"]
    promote = _runs(workflow["jobs"]["comment"])
    assert "--from \"$previous\"" in promote  # a single environment promotes nowhere: the loop has no pair


def test_init_with_force_replaces_the_workflow_and_keeps_the_others(tmp_path, capsys):
    repo = tmp_path / "repo"
    (repo / ".github/workflows").mkdir(parents=True)
    (repo / ".github/workflows/build.yml").write_text("ours\n")
    (repo / WORKFLOW_FILE).write_text("old\n")
    assert main(["init", str(repo)]) == 1
    assert "it already has .github/workflows/dr-spec.yml, which init would replace" in capsys.readouterr().err
    assert main(["init", str(repo), "--force"]) == 0
    assert f"replaced {repo / WORKFLOW_FILE}" in capsys.readouterr().out
    assert (repo / ".github/workflows/build.yml").read_text() == "ours\n"
    assert (repo / WORKFLOW_FILE).read_text().startswith("# The CI of a DR-spec repository")
    assert not list(repo.rglob(".mm2spec-render-*"))


def test_a_secret_name_a_workflow_cannot_hold_is_refused():
    with pytest.raises(ValueError):
        ci_workflow("s.dr.yaml", ["dev"], ["NOT-A-NAME"], "mm2spec[pulumi]", "3.0.0")
    with pytest.raises(ValueError):
        ci_workflow("s.dr.yaml", [], [], "mm2spec[pulumi]", "3.0.0")

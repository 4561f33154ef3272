"""``pulumi package gen-sdk`` turns the ``mm2spec`` package schema into TypeScript and Go SDKs that compile.

The schema comes from ``python -m mm2spec.provision.plugin_package --schema FILE`` (what the plugin's
``get-schema`` serves); the real CLI (``scripts/pulumi``, its own ``PULUMI_HOME`` in tmp) generates
each SDK with the SDK-generation host ``scripts/install-pulumi.sh`` installs as
``pulumi-language-nodejs`` and ``pulumi-language-go``. A few lines of a user's program, using a
``Topic`` as the Python one declares it, are compiled with each SDK: ``npm install`` of its
``package.json`` (``@pulumi/pulumi``, TypeScript) and ``tsc``; the Go SDK and the user's Go file are
parsed with ``gofmt`` (building Go's would add ~2 minutes on a fresh machine). npm's downloads stay
in its usual cache, so a rerun downloads nothing.

No cluster is needed. A missing Pulumi CLI (or one installed before the Node.js and Go hosts were
added), Node.js/npm or Go fails the test when ``CI`` is set and skips it otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mm2spec.components import components
from mm2spec.errors import ComponentMissing
from required import missing_component

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
WRAPPER = PROJECT_ROOT / "scripts" / "pulumi"

TYPESCRIPT_USER = """\
import * as pulumi from "@pulumi/pulumi";
import * as mm2spec from "./index";

const orders = new mm2spec.Topic("dr/orders", {
    cluster: "dr",
    name: "orders",
    partitions: 3,
    configs: {"retention.ms": "3600000"},
    password: pulumi.secret("from-the-stack-config"),
});
export const ordersPartitions: pulumi.Output<number | undefined> = orders.partitions;
export const importId: pulumi.Output<string> = orders.id;
"""

GO_USER = """\
package main

import (
	"example.com/mm2spec/sdk/go/mm2spec"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		orders, err := mm2spec.NewTopic(ctx, "dr/orders", &mm2spec.TopicArgs{
			Cluster:    pulumi.String("dr"),
			Name:       pulumi.String("orders"),
			Partitions: pulumi.Int(3),
			Configs:    pulumi.StringMap{"retention.ms": pulumi.String("3600000")},
			Password:   pulumi.ToSecret(pulumi.String("from-the-stack-config")).(pulumi.StringOutput),
		})
		if err != nil {
			return err
		}
		ctx.Export("ordersPartitions", orders.Partitions)
		return nil
	})
}
"""


def tool(name: str, what: str) -> str:
    found = shutil.which(name)
    if not found:
        missing_component(f"{name} is not on PATH; {what}")
    return found


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=540)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args)} (in {cwd}) exited {done.returncode}:\n{done.stdout}\n{done.stderr}",
                    pytrace=False)
    return done


@pytest.fixture(scope="module")
def gen_sdk(tmp_path_factory):
    """Generates the SDK of one language from the package schema; returns its folder."""
    try:
        bin_dir = components().pulumi_bin
    except ComponentMissing as exc:
        missing_component(exc)
    for host in ("pulumi-language-nodejs", "pulumi-language-go"):
        if not (bin_dir / host).is_file():
            missing_component(f"{bin_dir} has no {host} (installed before SDK generation was added); "
                              "rerun scripts/install-pulumi.sh")
    root = tmp_path_factory.mktemp("sdk")
    schema = root / "schema.json"
    run([sys.executable, "-m", "mm2spec.provision.plugin_package", "--schema", str(schema)], PROJECT_ROOT,
        dict(os.environ))
    env = {**os.environ, "PULUMI_HOME": str(root / "pulumi-home"),
           "PULUMI_BACKEND_URL": f"file://{root / 'state'}"}

    def generate(language: str) -> Path:
        done = run([str(WRAPPER), "package", "gen-sdk", str(schema), "--language", language,
                    "--out", str(root / "out")], root, env)
        assert f"SDK has been written to {root / 'out' / language}" in done.stderr
        return root / "out" / language

    return generate


def test_typescript_sdk_compiles_with_a_users_program(gen_sdk):
    npm = tool("npm", "install Node.js 20+ with npm (Debian: apt-get install nodejs npm)")
    sdk = gen_sdk("nodejs")
    for resource in ("topic", "aclBinding", "connector", "workerConfig", "sparkDeployment"):
        assert (sdk / f"{resource}.ts").is_file(), sorted(p.name for p in sdk.iterdir())
    assert 'export const Topic: typeof import("./topic").Topic' in (sdk / "index.ts").read_text()
    (sdk / "user.ts").write_text(TYPESCRIPT_USER)
    tsconfig = (sdk / "tsconfig.json").read_text()
    (sdk / "tsconfig.json").write_text(tsconfig.replace('"files": [', '"files": [\n        "user.ts",', 1))

    env = dict(os.environ)
    run([npm, "install", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts"], sdk, env)
    run([str(sdk / "node_modules" / ".bin" / "tsc")], sdk, env)
    declared = (sdk / "bin" / "topic.d.ts").read_text()
    assert "readonly partitions: pulumi.Output<number | undefined>;" in declared
    assert (sdk / "bin" / "user.js").is_file()


def test_go_sdk_is_generated_as_valid_go(gen_sdk):
    """The Go SDK is generated and parses (gofmt): compiling it needs Pulumi's Go SDK built, about
    2 minutes more on a fresh machine, so the compile proof is the TypeScript test's (same schema,
    same generator framework). To compile it by hand: a go.mod requiring
    github.com/pulumi/pulumi/sdk/v3 at the pinned version, ``go mod tidy``, ``go build ./...``
    (pulumi/README.md)."""
    go = tool("go", "install Go 1.25 or newer (scripts/install-pulumi.sh needs it too)")
    sdk = gen_sdk("go")
    package = sdk / "mm2spec"
    for resource in ("topic", "aclBinding", "connector", "workerConfig", "sparkDeployment"):
        assert (package / f"{resource}.go").is_file(), sorted(p.name for p in package.iterdir())
    (sdk / "user").mkdir()
    (sdk / "user" / "main.go").write_text(GO_USER)
    gofmt = Path(go).resolve().parent / "gofmt"
    listed = run([str(gofmt), "-l", "-e", str(package), str(sdk / "user")], sdk, dict(os.environ))
    assert listed.stderr == "", listed.stderr
    assert 'func NewTopic(ctx *pulumi.Context' in (package / "topic.go").read_text()

"""``pulumi-resource-mm2spec`` installed without the pulumi extra: one line naming the extra, exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_plugin_without_the_pulumi_sdk_names_the_extra_to_install():
    # The installed console script's entry point, loaded as the script does, with the SDK's modules
    # made unimportable (None in sys.modules: what a core install without them raises).
    run = ("import sys\n"
           "for name in ('grpc', 'pulumi', 'google.protobuf'): sys.modules[name] = None\n"
           "from importlib.metadata import entry_points\n"
           "entry_points(group='console_scripts')['pulumi-resource-mm2spec'].load()()\n")
    done = subprocess.run([sys.executable, "-c", run], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "pulumi-resource-mm2spec: pulumi is not installed (provisions through Pulumi): pip install 'mm2spec[pulumi]' "
        "(or 'mm2spec[all]')"]

"""Where the real components (Kafka jars, Spark connector jars, the JMX exporter agent, Pulumi CLI, the
Kubernetes and editor test tools) live on this machine.

The install scripts in ``scripts/`` put them under ``$MM2SPEC_CACHE`` (default ``~/.cache/mm2spec``)
at versions pinned in ``scripts/versions.env`` (shipped with the package, found through
``mm2spec.resources``); this module is the one place Python code finds them. It also says which pip
extra of mm2spec installs each optional Python library (``EXTRAS``, ``module_missing``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mm2spec.errors import ComponentMissing
from mm2spec.resources import versions_file


def versions() -> dict[str, str]:
    """The pinned component versions from ``scripts/versions.env``."""
    pinned: dict[str, str] = {}
    for line in versions_file().read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            pinned[key.strip()] = value.strip()
    return pinned


def cache_dir() -> Path:
    return Path(os.environ.get("MM2SPEC_CACHE", Path.home() / ".cache" / "mm2spec"))


@dataclass(frozen=True)
class Components:
    """Paths of the installed components; each accessor raises ComponentMissing with the fix."""

    cache: Path
    pinned: dict

    @property
    def kafka_home(self) -> Path:
        return self.cache / f"kafka-{self.pinned['KAFKA_VERSION']}"

    @property
    def kafka_libs(self) -> Path:
        libs = self.kafka_home / "libs"
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise ComponentMissing(f"Kafka jars are not installed in {libs}; run scripts/setup")
        return libs

    @property
    def spark_kafka_jars(self) -> list[Path]:
        folder = self.cache / f"spark-kafka-{self.pinned['SPARK_VERSION']}" / "jars"
        jars = sorted(folder.glob("*.jar"))
        if not jars:
            raise ComponentMissing(f"Spark's Kafka connector jars are not installed in {folder}; run scripts/setup")
        return jars

    @property
    def pulumi_bin(self) -> Path:
        folder = self.cache / f"pulumi-{self.pinned['PULUMI_VERSION']}" / "bin"
        if not (folder / "pulumi").is_file():
            raise ComponentMissing(f"the Pulumi CLI is not installed in {folder}; run scripts/setup")
        return folder

    @property
    def toxiproxy_server(self) -> Path:
        """The fault-injection proxy of the fault tests and benchmarks."""
        binary = self.cache / f"toxiproxy-{self.pinned['TOXIPROXY_VERSION']}" / "bin" / "toxiproxy-server"
        if not binary.is_file():
            raise ComponentMissing(f"Toxiproxy is not installed at {binary}; run scripts/setup")
        return binary

    @property
    def jmx_exporter_agent(self) -> Path:
        """The Prometheus JMX exporter java agent a Connect worker loads (``-javaagent:``)."""
        jar = self.cache / "jmx-exporter" / "jmx_prometheus_javaagent.jar"
        if not jar.is_file():
            raise ComponentMissing(f"the Prometheus JMX exporter agent is not installed at {jar}; run scripts/setup "
                                   "(or just scripts/install-jmx-exporter.sh)")
        return jar

    def _installed(self, key: str, folder: str, relative: str, what: str) -> Path:
        """``$MM2SPEC_CACHE/<folder>-<pinned version of key>/<relative>``, or ComponentMissing naming the fix."""
        binary = self.cache / f"{folder}-{self.pinned[key]}" / relative
        if not binary.is_file():
            raise ComponentMissing(f"{what} is not installed at {binary}; run scripts/setup")
        return binary

    @property
    def kube_apiserver(self) -> Path:
        """The Kubernetes API server of the Kubernetes tests (scripts/install-kubernetes.sh)."""
        return self._installed("KUBERNETES_VERSION", "kubernetes", "bin/kube-apiserver", "kube-apiserver")

    @property
    def kubectl(self) -> Path:
        """kubectl at the API server's version if scripts/setup built it, else the one on PATH."""
        try:
            return self._installed("KUBERNETES_VERSION", "kubernetes", "bin/kubectl", "kubectl")
        except ComponentMissing:
            found = shutil.which("kubectl")
            if not found:
                raise ComponentMissing("kubectl is not installed: install it (it talks to the cluster "
                                       "the Spark job runs on), or run scripts/setup") from None
            return Path(found)

    @staticmethod
    def etcd() -> Path:
        """etcd, the API server's store in the Kubernetes tests (Debian's etcd-server)."""
        found = shutil.which("etcd")
        if not found:
            raise ComponentMissing("etcd is not installed (Debian: apt-get install etcd-server); run scripts/setup")
        return Path(found)

    @property
    def yaml_language_server(self) -> Path:
        """The YAML language server the editor tests drive over LSP (npm, scripts/setup)."""
        return self._installed("YAML_LANGUAGE_SERVER_VERSION", "yaml-language-server",
                               "node_modules/.bin/yaml-language-server", "yaml-language-server")

    @property
    def actionlint(self) -> Path:
        """The GitHub workflow linter of the CI-workflow tests (Go modules, scripts/setup)."""
        return self._installed("ACTIONLINT_VERSION", "actionlint", "bin/actionlint", "actionlint")

    @staticmethod
    def java() -> str:
        java_home = os.environ.get("JAVA_HOME")
        if java_home and (Path(java_home) / "bin" / "java").is_file():
            return str(Path(java_home) / "bin" / "java")
        found = shutil.which("java")
        if not found:
            raise ComponentMissing("no Java runtime found: install Java 17 or newer, or set JAVA_HOME")
        return found


def components() -> Components:
    return Components(cache=cache_dir(), pinned=versions())


EXTRAS = {
    "pyspark": ("spark", "runs the Spark mirroring job"),
    "pulumi": ("pulumi", "provisions through Pulumi"),
    "matplotlib": ("drill", "draws the drill report's plots"),
}
"""The optional Python libraries, by import name: the pip extra of mm2spec that installs each, and
what needs it. ``pip install mm2spec`` alone validates, renders, promotes and plans."""


def module_missing(module: str) -> ComponentMissing:
    """The error for a Python module that is not installed: which extra to install, or, for a module
    the core needs (``yaml``, ``confluent_kafka``), to reinstall mm2spec."""
    top = module.partition(".")[0]
    if top in EXTRAS:
        extra, purpose = EXTRAS[top]
        return ComponentMissing(f"{top} is not installed ({purpose}): pip install 'mm2spec[{extra}]' "
                                "(or 'mm2spec[all]')")
    return ComponentMissing(f"the Python module {top} is not installed, and mm2spec needs it: "
                            "reinstall mm2spec (pip install --force-reinstall mm2spec)")


def require_module(module: str) -> None:
    """Raise ``module_missing`` unless ``module`` can be imported; finds it without importing it."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a finder that refuses the name
        found = False
    if not found:
        raise module_missing(module)

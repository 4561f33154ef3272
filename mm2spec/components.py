"""Where the real components (Kafka jars, Spark connector jars, Pulumi CLI) live on this machine.

The install scripts in ``scripts/`` put them under ``$MM2SPEC_CACHE`` (default ``~/.cache/mm2spec``)
at versions pinned in ``scripts/versions.env``; this module is the one place Python code finds them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from mm2spec.errors import ComponentMissing

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def versions() -> dict[str, str]:
    """The pinned component versions from ``scripts/versions.env``."""
    pinned: dict[str, str] = {}
    for line in (PROJECT_ROOT / "scripts" / "versions.env").read_text().splitlines():
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
